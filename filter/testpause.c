/* SPDX-License-Identifier: BSD-3-Clause */
/* testpause.c: pause points for the tests (see testpause.h). */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "report.h"
#include "testpause.h"

#define MAX_PAUSED 16

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *points;      /* DIRTYBITMAP_TEST_PAUSE, or NULL */
static const char *dir;         /* DIRTYBITMAP_TEST_PAUSE_DIR */
/* Protects paused: the points used up.  A leaf. */
static pthread_mutex_t paused_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *paused[MAX_PAUSED];  /* under paused_lock */
static size_t nr_paused;

static void
read_env (void)
{
  const char *p = getenv ("DIRTYBITMAP_TEST_PAUSE");
  const char *d = getenv ("DIRTYBITMAP_TEST_PAUSE_DIR");

  if (p && *p && d && *d) {
    points = p;
    dir = d;
  }
}

/* Whether point is one of the names in points. */
static bool
listed (const char *point)
{
  const size_t len = strlen (point);
  const char *p = points;

  while ((p = strstr (p, point)) != NULL) {
    if ((p == points || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0'))
      return true;
    p += len;
  }
  return false;
}

/* Whether this thread is the first at point (then it is used up). */
static bool
first_at (const char *point)
{
  bool r;
  size_t i;

  pthread_mutex_lock (&paused_lock);
  r = nr_paused < MAX_PAUSED;
  for (i = 0; r && i < nr_paused; ++i)
    if (strcmp (paused[i], point) == 0)
      r = false;
  if (r)
    paused[nr_paused++] = point;
  pthread_mutex_unlock (&paused_lock);
  return r;
}

static int
open_fifo (const char *point, const char *suffix, int flags)
{
  char path[4096];
  int fd;

  snprintf (path, sizeof path, "%s/%s.%s", dir, point, suffix);
  fd = open (path, flags | O_CLOEXEC);
  if (fd == -1)
    filter_error ("test pause point %s: %s: %m", point, path);
  return fd;
}

void
test_pause_point (const char *point)
{
  char buf[64];
  ssize_t n;
  int fd;

  pthread_once (&once, read_env);
  if (points == NULL || !listed (point) || !first_at (point))
    return;
  filter_debug ("test pause point %s: reached", point);
  if ((fd = open_fifo (point, "reached", O_WRONLY)) == -1)
    return;
  close (fd);
  if ((fd = open_fifo (point, "release", O_RDONLY)) == -1)
    return;
  do
    n = read (fd, buf, sizeof buf);
  while (n > 0 || (n == -1 && errno == EINTR));
  close (fd);
  filter_debug ("test pause point %s: released", point);
}
