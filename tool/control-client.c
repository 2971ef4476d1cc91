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

#define REPLY_MAX (4 * 1024 * 1024)

static int
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for fd to be ready for events until deadline; -1 on timeout. */
static int
wait_for (int fd, short events, int deadline)
{
  struct pollfd p = { .fd = fd, .events = events };
  int r, left;

  for (;;) {
    left = deadline - now_ms ();
    if (left <= 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    r = poll (&p, 1, left);
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
  const int deadline = now_ms () + CONTROL_TIMEOUT_SECONDS * 1000;
  int fd;

  if (strlen (path) >= sizeof sun.sun_path) {
    fprintf (stderr, "%s: --control %s: path too long\n", prog, path);
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
    if (errno != EAGAIN || now_ms () >= deadline) {
      if (errno == EAGAIN)
        errno = ETIMEDOUT;
      goto err;
    }
    poll (NULL, 0, 10);
  }
  return fd;

 err:
  fprintf (stderr, "%s: --control %s: cannot connect: %s\n", prog, path,
           errno == ETIMEDOUT ? "no room in its queue within "
           CONTROL_TIMEOUT_TEXT : strerror (errno));
  if (fd >= 0)
    close (fd);
  return -1;
}

/* Send the request, then a newline, by deadline: -1 with errno. */
static int
send_line (int fd, const char *req, int deadline)
{
  size_t sent = 0, reqlen = strlen (req);

  while (sent <= reqlen) {
    const char *p = sent < reqlen ? req + sent : "\n";
    size_t n = sent < reqlen ? reqlen - sent : 1;
    ssize_t w;
    if (wait_for (fd, POLLOUT, deadline) == -1)
      return -1;
    w = send (fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w == -1 && errno != EAGAIN && errno != EINTR)
      return -1;
    if (w > 0)
      sent += w;
  }
  return 0;
}

/* One line back, by deadline, without its newline, into *line (read a
 * byte at a time past the line: the connection may carry more
 * requests).  -1 with errno; -2 when said here.
 */
static int
recv_line (int fd, const char *path, int deadline, char **line)
{
  char *buf = NULL;
  size_t len = 0, cap = 0;

  for (;;) {
    ssize_t got;
    if (len + 2 > cap) {
      char *b;
      if (cap + 65536 > REPLY_MAX) {
        fprintf (stderr, "%s: --control %s: the reply is too long\n",
                 prog, path);
        free (buf);
        return -2;
      }
      if ((b = realloc (buf, cap + 65536)) == NULL)
        break;
      buf = b;
      cap += 65536;
    }
    if (wait_for (fd, POLLIN, deadline) == -1)
      break;
    got = recv (fd, buf + len, 1, MSG_DONTWAIT);
    if (got == 0) {
      fprintf (stderr, "%s: --control %s: the server closed the connection "
               "without a reply\n", prog, path);
      free (buf);
      return -2;
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
  free (buf);
  return -1;
}

/* A reply line: 0 and *ret, 1 and *error (the server's), -1 said. */
static int
parse_reply (const char *path, const char *line, json_object **ret,
             char **error)
{
  json_object *reply = json_tokener_parse (line), *v, *e;
  int r = -1;

  if (reply && json_object_is_type (reply, json_type_object) &&
      json_object_object_get_ex (reply, "return", &v)) {
    *ret = json_object_get (v);
    r = 0;
  }
  else if (reply && json_object_is_type (reply, json_type_object) &&
           json_object_object_get_ex (reply, "error", &e) &&
           json_object_object_get_ex (e, "desc", &v)) {
    *error = strdup (json_object_get_string (v));
    if (*error)
      r = 1;
    else
      fprintf (stderr, "%s: --control %s: %s\n", prog, path,
               strerror (errno));
  }
  else
    fprintf (stderr, "%s: --control %s: not a control reply: %s\n",
             prog, path, line);
  json_object_put (reply);
  return r;
}

int
control_call_on (int fd, const char *path, json_object *request,
                 json_object **ret, char **error)
{
  const int deadline = now_ms () + CONTROL_TIMEOUT_SECONDS * 1000;
  const char *req = json_object_to_json_string_ext (request,
                                                    JSON_C_TO_STRING_PLAIN);
  char *line = NULL;
  int r;

  *ret = NULL;
  *error = NULL;
  r = send_line (fd, req, deadline);
  if (r == 0)
    r = recv_line (fd, path, deadline, &line);
  if (r == 0)
    r = parse_reply (path, line, ret, error);
  else if (r == -1)
    fprintf (stderr, "%s: --control %s: %s\n", prog, path,
             errno == ETIMEDOUT ? "no reply within " CONTROL_TIMEOUT_TEXT
             : strerror (errno));
  json_object_put (request);
  free (line);
  return r < 0 ? -1 : r;
}

int
control_call (const char *path, json_object *request, json_object **ret,
              char **error)
{
  int fd = control_connect (path), r;

  if (fd == -1) {
    json_object_put (request);
    *ret = NULL;
    *error = NULL;
    return -1;
  }
  r = control_call_on (fd, path, request, ret, error);
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
