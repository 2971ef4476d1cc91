/* SPDX-License-Identifier: BSD-3-Clause */
/* control-client.c: talking to a running filter through its control
 * socket (nbdkit-dirtybitmap-filter(1), CONTROL): one request, one
 * reply, each a line of JSON.  Every wait is bounded, so a server that
 * does not answer cannot hang the command.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "control-client.h"
#include "dirtybitmap.h"
#include "util.h"

#define REPLY_MAX (4 * 1024 * 1024)

/* Wait for fd to be ready for events until deadline, or until wake_fd
 * (if >= 0) is readable: 0, or -1 with errno (ETIMEDOUT, EINTR for
 * the wake).
 */
static int
wait_for (int fd, short events, double deadline, int wake_fd)
{
  struct pollfd p[2] = {
    { .fd = fd, .events = events },
    { .fd = wake_fd, .events = POLLIN },
  };
  double left;
  int r;

  for (;;) {
    left = deadline - clock_seconds (CLOCK_MONOTONIC);
    if (left <= 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    /* Milliseconds, rounded up: poll returns before the deadline. */
    r = poll (p, wake_fd >= 0 ? 2 : 1, (int) (left * 1000) + 1);
    if (r > 0 && wake_fd >= 0 && (p[1].revents & POLLIN)) {
      errno = EINTR;
      return -1;
    }
    if (r > 0)
      return 0;
    if (r == -1 && errno != EINTR)
      return -1;
  }
}

int
control_connect (const char *path)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  const double deadline =
    clock_seconds (CLOCK_MONOTONIC) + CONTROL_TIMEOUT_SECONDS;
  int fd;

  if (strlen (path) >= sizeof sun.sun_path) {
    bm_error ("--control %s: path too long", path);
    return -1;
  }
  memcpy (sun.sun_path, path, strlen (path));
  /* Non-blocking, so that a server whose queue of connections is full
   * cannot hold us: retry until the deadline.
   */
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd == -1)
    goto err;
  while (connect (fd, (struct sockaddr *) &sun, sizeof sun) == -1) {
    if (errno != EAGAIN || clock_seconds (CLOCK_MONOTONIC) >= deadline) {
      if (errno == EAGAIN)
        errno = ETIMEDOUT;
      goto err;
    }
    poll (NULL, 0, 10);
  }
  return fd;

 err:
  bm_error ("--control %s: cannot connect: %s", path,
            errno == ETIMEDOUT ? "no room in its queue within "
            CONTROL_TIMEOUT_TEXT : strerror (errno));
  if (fd >= 0)
    close (fd);
  return -1;
}

/* What a failed wait or call means, in err: errnum ETIMEDOUT "no
 * reply in time", EINTR "interrupted", or another.
 */
static void
why (struct bmerr *err, int errnum)
{
  bmerr_set (err, errnum, "%s", errnum == ETIMEDOUT ? "no reply in time"
             : errnum == EINTR ? "interrupted" : strerror (errnum));
}

int
control_send (int fd, json_object *request, double deadline,
              struct bmerr *err)
{
  const char *req = json_object_to_json_string_ext (request,
                                                    JSON_C_TO_STRING_PLAIN);
  size_t sent = 0, reqlen = strlen (req);
  int r = 0;

  while (sent <= reqlen) {
    const char *p = sent < reqlen ? req + sent : "\n";
    size_t n = sent < reqlen ? reqlen - sent : 1;
    ssize_t w;
    if (wait_for (fd, POLLOUT, deadline, -1) == -1) {
      r = -1;
      break;
    }
    w = send (fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w == -1 && errno != EAGAIN && errno != EINTR) {
      r = -1;
      break;
    }
    if (w > 0)
      sent += w;
  }
  if (r == -1)
    why (err, errno);
  json_object_put (request);
  return r;
}

/* One line back, by deadline, without its newline, into *line (read a
 * byte at a time past the line: the connection may carry more
 * requests).  -1 with *error.
 */
static int
recv_line (int fd, double deadline, int wake_fd, char **line,
           struct bmerr *err)
{
  char *buf = NULL;
  size_t len = 0, cap = 0;

  for (;;) {
    ssize_t got;
    if (len + 2 > cap) {
      char *b;
      if (cap + 65536 > REPLY_MAX) {
        bmerr_set (err, EMSGSIZE, "the reply is too long");
        free (buf);
        return -1;
      }
      if ((b = realloc (buf, cap + 65536)) == NULL)
        break;
      buf = b;
      cap += 65536;
    }
    if (wait_for (fd, POLLIN, deadline, wake_fd) == -1)
      break;
    got = recv (fd, buf + len, 1, MSG_DONTWAIT);
    if (got == 0) {
      bmerr_set (err, ECONNRESET, "the server closed the connection "
                 "without a reply");
      free (buf);
      return -1;
    }
    if (got == -1) {
      if (errno == EAGAIN || errno == EINTR)
        continue;
      break;
    }
    len += got;
    buf[len] = '\0';
    if (buf[len - 1] == '\n') {
      buf[len - 1] = '\0';
      *line = buf;
      return 0;
    }
  }
  why (err, errno);
  free (buf);
  return -1;
}

int
control_receive (int fd, double deadline, int wake_fd, json_object **ret,
                 struct bmerr *err)
{
  json_object *reply, *v, *e;
  char *line = NULL;
  int r = -1;

  *ret = NULL;
  if (recv_line (fd, deadline, wake_fd, &line, err) == -1)
    return -1;
  reply = json_tokener_parse (line);
  if (reply && json_object_is_type (reply, json_type_object) &&
      json_object_object_get_ex (reply, "return", &v)) {
    *ret = json_object_get (v);
    r = 0;
  }
  else if (reply && json_object_is_type (reply, json_type_object) &&
           json_object_object_get_ex (reply, "error", &e) &&
           json_object_object_get_ex (e, "desc", &v)) {
    bmerr_set (err, EINVAL, "%s", json_object_get_string (v));
    r = 1;
  }
  else
    bmerr_set (err, EPROTO, "not a control reply: %s", line);
  json_object_put (reply);
  free (line);
  return r;
}

int
control_call_on (int fd, const char *path, json_object *request,
                 json_object **ret, struct bmerr *err)
{
  const double deadline =
    clock_seconds (CLOCK_MONOTONIC) + CONTROL_TIMEOUT_SECONDS;
  struct bmerr e = { 0 };
  int r;

  *ret = NULL;
  r = control_send (fd, request, deadline, &e);
  if (r == 0)
    r = control_receive (fd, deadline, -1, ret, &e);
  if (r == 1)
    *err = e;
  else if (r == -1)
    bm_error ("--control %s: %s", path, e.errnum == ETIMEDOUT
              ? "no reply within " CONTROL_TIMEOUT_TEXT : e.msg);
  return r;
}

int
control_call (const char *path, json_object *request, json_object **ret,
              struct bmerr *err)
{
  int fd = control_connect (path), r;

  *ret = NULL;
  if (fd == -1) {
    json_object_put (request);
    return -1;
  }
  r = control_call_on (fd, path, request, ret, err);
  close (fd);
  return r;
}

json_object *
control_request (const char *command, json_object *arguments)
{
  json_object *req = json_object_new_object ();

  if (req == NULL) {
    json_object_put (arguments);
    return NULL;
  }
  json_object_object_add (req, "execute", json_object_new_string (command));
  if (arguments)
    json_object_object_add (req, "arguments", arguments);
  return req;
}
