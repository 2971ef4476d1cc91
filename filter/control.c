/* SPDX-License-Identifier: BSD-3-Clause */
/* control.c: the control socket: a Unix socket served by one thread
 * (nbdkit-dirtybitmap-filter(1), CONTROL).
 *
 * One thread polls the listening socket and every client.  Clients are
 * non-blocking both ways: a line is run only once it is whole, replies
 * are queued and written as the client reads them, so a client that
 * sends nothing, sends half a line, sends garbage or does not read its
 * replies holds up neither the disk nor the other clients.  Commands
 * run one at a time, on this thread (commands.c).
 *
 * A line longer than PROTO_MAX_LINE gets an error reply and is skipped
 * up to its newline.  A client whose unread replies pass MAX_OUT is
 * dropped.  A client beyond MAX_CLIENTS takes the place of the one
 * that has been idle the longest (unless that one holds a pause), so
 * that idle clients cannot lock the others out.  Only peers with this
 * process's user id or root are served (SO_PEERCRED); the socket is
 * also made 0600.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <nbdkit-filter.h>

#include "commands.h"
#include "control.h"
#include "protocol.h"
#include "report.h"

#define MAX_CLIENTS 64
#define MAX_OUT     (1024 * 1024)

struct client {
  int fd;
  char *in;                     /* PROTO_MAX_LINE + 1 bytes */
  size_t in_len;
  bool skipping;                /* the rest of an overlong line */
  char *out;                    /* replies not yet written */
  size_t out_len, out_cap;
  struct session session;
  uint64_t last_heard;          /* activity when it last sent something */
};

static char *path;
static int listen_fd = -1;
static dev_t sock_dev;
static ino_t sock_ino;
static int wake[2] = { -1, -1 };
static pthread_t thread;
static bool running;
static struct client *clients[MAX_CLIENTS];
static size_t nr_clients;
static uint64_t activity;       /* a count of client activity */

/*----------------------------------------------------------------------
 * The socket.
 */

/* What is at path may be replaced only if it is a socket nobody
 * listens on (left by a server that died).
 */
static int
clear_path (const char *p, struct bmerr *err)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  struct stat sb;
  int fd, r;

  if (lstat (p, &sb) == -1) {
    if (errno == ENOENT)
      return 0;
    bmerr_set (err, errno, "control=%s: %s", p, strerror (errno));
    return -1;
  }
  if (S_ISLNK (sb.st_mode)) {
    bmerr_set (err, ELOOP, "control=%s: is a symbolic link: refused", p);
    return -1;
  }
  if (!S_ISSOCK (sb.st_mode)) {
    bmerr_set (err, EEXIST, "control=%s: exists and is not a socket: "
               "refused (it is left as it is)", p);
    return -1;
  }
  memcpy (sun.sun_path, p, strlen (p));
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1) {
    bmerr_set (err, errno, "socket: %s", strerror (errno));
    return -1;
  }
  r = connect (fd, (struct sockaddr *) &sun, sizeof sun);
  close (fd);
  if (r == 0) {
    bmerr_set (err, EBUSY, "control=%s: in use by a running server", p);
    return -1;
  }
  if (errno != ECONNREFUSED) {
    bmerr_set (err, errno, "control=%s: %s", p, strerror (errno));
    return -1;
  }
  filter_debug ("control=%s: replacing a stale socket", p);
  if (unlink (p) == -1) {
    bmerr_set (err, errno, "control=%s: %s", p, strerror (errno));
    return -1;
  }
  return 0;
}

int
control_open (const char *p, struct bmerr *err)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  struct stat sb;
  mode_t mask;
  int r;

  if (strlen (p) >= sizeof sun.sun_path) {
    bmerr_set (err, ENAMETOOLONG, "control=%s: longer than %zu bytes", p,
               sizeof sun.sun_path - 1);
    return -1;
  }
  if (clear_path (p, err) == -1)
    return -1;
  memcpy (sun.sun_path, p, strlen (p));
  listen_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd == -1) {
    bmerr_set (err, errno, "socket: %s", strerror (errno));
    return -1;
  }
  /* Created 0600: no other user can even connect. */
  mask = umask (0177);
  r = bind (listen_fd, (struct sockaddr *) &sun, sizeof sun);
  umask (mask);
  if (r == -1 || chmod (p, 0600) == -1 || listen (listen_fd, 16) == -1 ||
      lstat (p, &sb) == -1) {
    bmerr_set (err, errno, "control=%s: %s", p, strerror (errno));
    close (listen_fd);
    listen_fd = -1;
    return -1;
  }
  sock_dev = sb.st_dev;
  sock_ino = sb.st_ino;
  path = strdup (p);
  if (path == NULL) {
    bmerr_set (err, errno, "strdup: %s", strerror (errno));
    return -1;
  }
  return 0;
}

/*----------------------------------------------------------------------
 * Clients.
 */

static void
drop (size_t i)
{
  struct client *c = clients[i];

  commands_end (&c->session);
  close (c->fd);
  free (c->in);
  free (c->out);
  free (c);
  clients[i] = clients[--nr_clients];
}

/* Queue a line; false if the client must be dropped. */
static bool
queue (struct client *c, const char *line)
{
  size_t n = strlen (line) + 1;

  if (c->out_len + n > MAX_OUT)
    return false;
  if (c->out_len + n > c->out_cap) {
    size_t cap = c->out_cap ? c->out_cap : 4096;
    char *p;
    while (cap < c->out_len + n)
      cap *= 2;
    if ((p = realloc (c->out, cap)) == NULL)
      return false;
    c->out = p;
    c->out_cap = cap;
  }
  memcpy (c->out + c->out_len, line, n - 1);
  c->out[c->out_len + n - 1] = '\n';
  c->out_len += n;
  return true;
}

static bool
flush_out (struct client *c)
{
  while (c->out_len > 0) {
    ssize_t r = send (c->fd, c->out, c->out_len, MSG_NOSIGNAL);
    if (r == -1)
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    memmove (c->out, c->out + r, c->out_len - r);
    c->out_len -= r;
  }
  return true;
}

static bool
reply (struct client *c, char *line)
{
  bool ok = line && queue (c, line);

  free (line);
  return ok;
}

/* Run every whole line in the buffer; false to drop the client. */
static bool
run_lines (struct client *c)
{
  char *nl;
  size_t start = 0;

  while ((nl = memchr (c->in + start, '\n', c->in_len - start)) != NULL) {
    size_t len = nl - (c->in + start);
    if (c->skipping)
      c->skipping = false;
    else if (!reply (c, commands_execute (&c->session, c->in + start, len)))
      return false;
    start += len + 1;
  }
  memmove (c->in, c->in + start, c->in_len - start);
  c->in_len -= start;
  if (c->in_len > PROTO_MAX_LINE) {
    /* No newline in more than a line's worth: refuse it, skip it. */
    char desc[64];
    snprintf (desc, sizeof desc, "request longer than %d bytes",
              PROTO_MAX_LINE);
    c->in_len = 0;
    if (!c->skipping &&
        !reply (c, proto_error_reply (NULL, "GenericError", desc)))
      return false;
    c->skipping = true;
  }
  return true;
}

/* false when the client has gone or must be dropped. */
static bool
read_client (struct client *c)
{
  ssize_t r = recv (c->fd, c->in + c->in_len,
                    PROTO_MAX_LINE + 1 - c->in_len, 0);

  if (r == 0)
    return false;
  if (r == -1)
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  c->last_heard = ++activity;
  c->in_len += r;
  return run_lines (c) && flush_out (c);
}

/* At MAX_CLIENTS: drop the client idle the longest that holds no
 * pause, telling it why.  false if every one holds a pause.
 */
static bool
evict_idlest (void)
{
  size_t i, victim = nr_clients;
  char *line;

  for (i = 0; i < nr_clients; ++i)
    if (!clients[i]->session.paused &&
        (victim == nr_clients ||
         clients[i]->last_heard < clients[victim]->last_heard))
      victim = i;
  if (victim == nr_clients)
    return false;
  line = proto_error_reply (NULL, "GenericError", "dropped: the server has "
                            "too many control clients and this one was "
                            "idle the longest");
  if (line && send (clients[victim]->fd, line, strlen (line),
                    MSG_NOSIGNAL) > 0)
    send (clients[victim]->fd, "\n", 1, MSG_NOSIGNAL);
  free (line);
  filter_debug ("control: %d clients: the one idle the longest "
                "was dropped", MAX_CLIENTS);
  drop (victim);
  return true;
}

static void
accept_client (void)
{
  struct client *c;
  struct ucred cred;
  socklen_t len = sizeof cred;
  char *refusal = NULL;
  int fd;

  fd = accept4 (listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd == -1)
    return;
  if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
    /* cred is not filled in: there is no uid to name. */
    filter_error ("control: a client refused: its user is "
                  "unknown (SO_PEERCRED: %m)");
    refusal = proto_error_reply (NULL, "GenericError", "permission denied: "
                                 "only this server's user or root may "
                                 "control it");
  }
  else if (cred.uid != geteuid () && cred.uid != 0) {
    filter_error ("control: a client with uid %ld refused",
                  (long) cred.uid);
    refusal = proto_error_reply (NULL, "GenericError", "permission denied: "
                                 "only this server's user or root may "
                                 "control it");
  }
  else if (nr_clients == MAX_CLIENTS && !evict_idlest ())
    refusal = proto_error_reply (NULL, "GenericError",
                                 "too many control clients");
  if (refusal) {
    if (send (fd, refusal, strlen (refusal), MSG_NOSIGNAL) > 0)
      send (fd, "\n", 1, MSG_NOSIGNAL);
    free (refusal);
    close (fd);
    return;
  }
  c = calloc (1, sizeof *c);
  if (c == NULL || (c->in = malloc (PROTO_MAX_LINE + 1)) == NULL) {
    free (c);
    close (fd);
    return;
  }
  c->fd = fd;
  c->last_heard = ++activity;
  clients[nr_clients++] = c;
}

static void *
serve (void *arg)
{
  struct pollfd fds[2 + MAX_CLIENTS];
  size_t i;

  for (;;) {
    size_t n = nr_clients;

    fds[0] = (struct pollfd) { .fd = wake[0], .events = POLLIN };
    fds[1] = (struct pollfd) { .fd = listen_fd, .events = POLLIN };
    for (i = 0; i < n; ++i)
      fds[2 + i] = (struct pollfd) {
        .fd = clients[i]->fd,
        .events = POLLIN | (clients[i]->out_len ? POLLOUT : 0),
      };
    if (poll (fds, 2 + n, -1) == -1) {
      if (errno == EINTR)
        continue;
      filter_error ("control: poll: %m");
      break;
    }
    if (fds[0].revents)
      break;
    /* Backwards: drop moves the last client into the hole. */
    for (i = n; i-- > 0; ) {
      struct client *c = clients[i];
      short rev = fds[2 + i].revents;
      bool ok = true;

      if (rev & (POLLIN | POLLHUP | POLLERR))
        ok = read_client (c);
      if (ok && (rev & POLLOUT))
        ok = flush_out (c);
      if (!ok)
        drop (i);
    }
    if (fds[1].revents & POLLIN)
      accept_client ();
    commands_after ();
  }
  while (nr_clients > 0)
    drop (nr_clients - 1);
  commands_after ();
  return NULL;
}

int
control_start (struct bmerr *err)
{
  int e;

  if (listen_fd == -1)
    return 0;
  if (pipe2 (wake, O_CLOEXEC) == -1) {
    bmerr_set (err, errno, "pipe: %s", strerror (errno));
    return -1;
  }
  e = pthread_create (&thread, NULL, serve, NULL);
  if (e) {
    bmerr_set (err, e, "pthread_create: %s", strerror (e));
    return -1;
  }
  running = true;
  return 0;
}

void
control_close (void)
{
  struct stat sb;

  if (running) {
    if (write (wake[1], "x", 1) != 1)
      filter_error ("control: cannot stop its thread: %m");
    else
      pthread_join (thread, NULL);
    running = false;
  }
  if (wake[0] >= 0) {
    close (wake[0]);
    close (wake[1]);
    wake[0] = wake[1] = -1;
  }
  if (listen_fd >= 0) {
    close (listen_fd);
    listen_fd = -1;
    /* Only our own socket: another server may have taken the path. */
    if (lstat (path, &sb) == 0 && sb.st_dev == sock_dev &&
        sb.st_ino == sock_ino)
      unlink (path);
  }
  free (path);
  path = NULL;
}
