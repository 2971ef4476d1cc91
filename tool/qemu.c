/* SPDX-License-Identifier: BSD-3-Clause */
/* qemu.c: qemu's programs as children of the tool (see qemu.h).
 *
 * A child's stderr is read to its end into the error, so that qemu's
 * own message reaches the user.  qemu-nbd is socket-activated
 * (LISTEN_FDS=1): this process creates the listening socket, in a new
 * private directory, before qemu-nbd starts, so a client connects
 * without waiting for a socket to appear, and a qemu-nbd that fails
 * leaves the connection refused and its message on stderr.
 *
 * A qcow2 image is opened with its backing chain only after every
 * link has been read alone (qemu-img info, which does not open a
 * backing file) and found to declare its backing file's format: qemu
 * probes a backing file whose format is not declared, and a raw image
 * is a guest's disk, whose first bytes the guest chooses.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <json-c/json.h>

#include "dirtybitmap.h"
#include "msg.h"
#include "qemu.h"

/* The most links of a backing chain followed (a loop ends there). */
#define MAX_CHAIN 256

/* The backlog of qemu-nbd's socket: the copy engine's connections
 * arrive one after the other, a few in all.
 */
#define LISTEN_BACKLOG 16

extern char **environ;

/*----------------------------------------------------------------------
 * Running qemu programs.
 */

/* Write n in decimal at p, ending it (async-signal-safe). */
static void
put_uint (char *p, unsigned long n)
{
  char tmp[24];
  size_t i = 0;

  do
    tmp[i++] = '0' + n % 10;
  while ((n /= 10) != 0);
  while (i)
    *p++ = tmp[--i];
  *p = '\0';
}

/* The environment of a socket-activated child: ours less any LISTEN_*
 * variable, plus LISTEN_FDS=1 and pidvar (LISTEN_PID=, which the
 * child completes with its pid).  Free the array only.
 */
static char **
activation_env (char *pidvar)
{
  size_t n = 0, i, j = 0;
  char **env;

  while (environ[n])
    n++;
  env = malloc ((n + 3) * sizeof *env);
  if (env == NULL)
    return NULL;
  for (i = 0; i < n; ++i)
    if (strncmp (environ[i], "LISTEN_", 7) != 0)
      env[j++] = environ[i];
  env[j++] = (char *) "LISTEN_FDS=1";
  env[j++] = pidvar;
  env[j] = NULL;
  return env;
}

static void
close_fds (int *fds, size_t n)
{
  size_t i;

  for (i = 0; i < n; ++i)
    if (fds[i] >= 0) {
      close (fds[i]);
      fds[i] = -1;
    }
}

int
qemu_spawn (char *const argv[], bool want_out, int listen_fd,
            struct qemu_child *c, struct bmerr *err)
{
  char pidvar[32] = "LISTEN_PID=";
  const size_t pidpos = strlen (pidvar);
  char **env = NULL;
  /* null, stdout, stderr and exec failure pipes: read end, write end */
  int fds[7] = { -1, -1, -1, -1, -1, -1, -1 };
  int *null = &fds[0], *outp = &fds[1], *errp = &fds[3], *execp = &fds[5];
  int e = 0, ret = -1;
  ssize_t r;

  *c = (struct qemu_child) { .name = argv[0], .pid = -1, .out = -1, .err = -1 };
  if ((listen_fd >= 0 && (env = activation_env (pidvar)) == NULL) ||
      (*null = open ("/dev/null", O_RDWR | O_CLOEXEC)) == -1 ||
      (want_out && pipe2 (outp, O_CLOEXEC) == -1) ||
      pipe2 (errp, O_CLOEXEC) == -1 || pipe2 (execp, O_CLOEXEC) == -1) {
    bmerr_set (err, errno, "cannot run %s: %s", argv[0], strerror (errno));
    goto out;
  }
  c->pid = fork ();
  if (c->pid == -1) {
    bmerr_set (err, errno, "cannot run %s: fork: %s", argv[0],
               strerror (errno));
    goto out;
  }
  if (c->pid == 0) {
    /* (Every descriptor above is 3 or more: 0, 1 and 2 are open.) */
    if (dup2 (*null, 0) == -1 ||
        dup2 (want_out ? outp[1] : *null, 1) == -1 ||
        dup2 (errp[1], 2) == -1)
      goto fail;
    if (listen_fd >= 0) {
      if (listen_fd == 3) {
        if (fcntl (3, F_SETFD, 0) == -1)
          goto fail;
      }
      else if (dup2 (listen_fd, 3) == -1)
        goto fail;
      put_uint (pidvar + pidpos, getpid ());
      execvpe (argv[0], argv, env);
    }
    else
      execvp (argv[0], argv);
  fail:
    e = errno;
    if (write (execp[1], &e, sizeof e) == -1)
      _exit (126);
    _exit (127);
  }

  close (execp[1]);
  execp[1] = -1;
  do
    r = read (execp[0], &e, sizeof e);
  while (r == -1 && errno == EINTR);
  if (r == sizeof e) {
    waitpid (c->pid, NULL, 0);
    c->pid = -1;
    bmerr_set (err, e, "cannot run %s: %s%s", argv[0], strerror (e),
               e == ENOENT ? " (it comes with qemu: qemu-utils on Debian)"
               : "");
    goto out;
  }
  c->err = errp[0];
  errp[0] = -1;
  if (want_out) {
    c->out = outp[0];
    outp[0] = -1;
  }
  ret = 0;
 out:
  close_fds (fds, sizeof fds / sizeof fds[0]);
  free (env);
  return ret;
}

int
qemu_finish (struct qemu_child *c, char **out, char **text)
{
  struct pollfd p[2] = { { .fd = c->err, .events = POLLIN },
                         { .fd = c->out, .events = POLLIN } };
  char *buf[2] = { NULL, NULL };
  size_t len[2];
  FILE *fp[2];
  int i, status = -1;

  fp[0] = open_memstream (&buf[0], &len[0]);
  fp[1] = open_memstream (&buf[1], &len[1]);
  while (p[0].fd >= 0 || p[1].fd >= 0) {
    if (poll (p, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      break;
    }
    for (i = 0; i < 2; ++i) {
      char chunk[4096];
      ssize_t r;

      if (p[i].fd < 0 || p[i].revents == 0)
        continue;
      r = read (p[i].fd, chunk, sizeof chunk);
      if (r > 0 && fp[i])
        fwrite (chunk, 1, r, fp[i]);
      else if (r == 0 || (r == -1 && errno != EINTR && errno != EAGAIN)) {
        close (p[i].fd);
        p[i].fd = -1;
      }
    }
  }
  for (i = 0; i < 2; ++i)
    if (p[i].fd >= 0)
      close (p[i].fd);
  c->err = c->out = -1;
  while (c->pid > 0 && waitpid (c->pid, &status, 0) == -1) {
    if (errno != EINTR) {
      status = -1;
      break;
    }
  }
  c->pid = -1;
  for (i = 0; i < 2; ++i)
    if (fp[i])
      fclose (fp[i]);
  *text = buf[0];
  if (out)
    *out = buf[1];
  else
    free (buf[1]);
  return status;
}

void
qemu_error (struct bmerr *err, const char *name, const char *text,
            int status)
{
  const size_t n = strlen (name);
  char msg[sizeof err->msg] = "", *p = msg;
  const char *line, *end;

  for (line = text ? text : ""; *line; line = *end ? end + 1 : end) {
    const size_t room = msg + sizeof msg - p;
    int k;

    end = strchrnul (line, '\n');
    if (strncmp (line, name, n) == 0 && strncmp (line + n, ": ", 2) == 0)
      line += n + 2;
    if (end == line)
      continue;
    k = snprintf (p, room, "%s%.*s", p > msg ? "\n" : "",
                  (int) (end - line), line);
    if (k < 0 || (size_t) k >= room)
      break;                    /* (cut short) */
    p += k;
  }
  if (msg[0])
    bmerr_set (err, EIO, "%s", msg);
  else if (status != -1 && WIFSIGNALED (status))
    bmerr_set (err, EIO, "%s was killed by signal %d", name,
               WTERMSIG (status));
  else
    bmerr_set (err, EIO, "%s failed (exit status %d)", name,
               status != -1 && WIFEXITED (status) ? WEXITSTATUS (status)
               : -1);
}


json_object *
qemu_img_info (const char *image, const char *fmt, struct bmerr *err)
{
  char *argv[] = { (char *) "qemu-img", (char *) "info", (char *) "-f",
                   (char *) fmt, (char *) "--output=json", (char *) "--",
                   (char *) image, NULL };
  char *json = NULL, *text = NULL;
  json_object *info = NULL;
  struct qemu_child c;
  int status;

  if (qemu_spawn (argv, true, -1, &c, err) == -1)
    return NULL;
  status = qemu_finish (&c, &json, &text);
  if (status != 0)
    qemu_error (err, "qemu-img", text, status);
  else if ((info = json_tokener_parse (json ? json : "")) == NULL)
    bmerr_set (err, EINVAL, "%s: qemu-img info gave no JSON", image);
  free (json);
  free (text);
  return info;
}

/*----------------------------------------------------------------------
 * qemu-nbd.
 */

/* A listening socket at q->sock, in a new private directory q->dir. */
static int
listen_private (struct qemu_nbd *q, struct bmerr *err)
{
  const char *tmp = getenv ("TMPDIR");
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  int fd;

  if (asprintf (&q->dir, "%s/dirtybitmap-XXXXXX", tmp && *tmp ? tmp : "/tmp")
      == -1) {
    q->dir = NULL;
    bmerr_set (err, errno, "%s", strerror (errno));
    return -1;
  }
  if (mkdtemp (q->dir) == NULL) {
    bmerr_set (err, errno, "%s: %s", q->dir, strerror (errno));
    free (q->dir);
    q->dir = NULL;
    return -1;
  }
  if (asprintf (&q->sock, "%s/sock", q->dir) == -1) {
    q->sock = NULL;
    bmerr_set (err, errno, "%s", strerror (errno));
    return -1;
  }
  if (strlen (q->sock) >= sizeof sa.sun_path) {
    bmerr_set (err, ENAMETOOLONG, "%s: too long for a socket (set TMPDIR "
               "to a shorter directory)", q->sock);
    return -1;
  }
  strcpy (sa.sun_path, q->sock);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1 || bind (fd, (struct sockaddr *) &sa, sizeof sa) == -1 ||
      listen (fd, LISTEN_BACKLOG) == -1) {
    bmerr_set (err, errno, "%s: %s", q->sock, strerror (errno));
    if (fd >= 0)
      close (fd);
    return -1;
  }
  return fd;
}

int
qemu_nbd_start (const char *const args[], struct qemu_nbd *q,
                struct bmerr *err)
{
  const char **argv;
  size_t n = 0;
  int fd, r = -1;

  *q = (struct qemu_nbd) { .c = { .pid = -1, .out = -1, .err = -1 } };
  while (args[n])
    n++;
  argv = calloc (n + 2, sizeof *argv);
  if (argv == NULL) {
    bmerr_set (err, errno, "%s", strerror (errno));
    return -1;
  }
  argv[0] = "qemu-nbd";
  memcpy (argv + 1, args, n * sizeof *argv);
  fd = listen_private (q, err);
  if (fd >= 0) {
    r = qemu_spawn ((char *const *) argv, false, fd, &q->c, err);
    close (fd);
  }
  if (r == 0 && asprintf (&q->uri, "nbd+unix:///?socket=%s", q->sock) == -1) {
    q->uri = NULL;
    bmerr_set (err, errno, "%s", strerror (errno));
    r = -1;
  }
  free (argv);
  if (r == -1)
    qemu_nbd_stop (q, NULL);
  return r;
}

int
qemu_nbd_stop (struct qemu_nbd *q, char **text)
{
  char *said = NULL;
  int status = -1;

  if (q->c.pid > 0) {
    /* It ends with its last client unless it is persistent (-t); a
     * signal makes sure.
     */
    kill (q->c.pid, SIGTERM);
    status = qemu_finish (&q->c, NULL, &said);
  }
  if (text)
    *text = said;
  else {
    if (said && *said)
      bm_debug ("qemu-nbd said: %s", said);
    free (said);
  }
  if (q->sock)
    unlink (q->sock);
  if (q->dir)
    rmdir (q->dir);
  free (q->sock);
  free (q->dir);
  free (q->uri);
  q->sock = q->dir = q->uri = NULL;
  return status;
}

/*----------------------------------------------------------------------
 * A qcow2 image and its backing chain.
 */

static const char *
get_string (json_object *o, const char *key)
{
  json_object *v;

  if (json_object_object_get_ex (o, key, &v) &&
      json_object_is_type (v, json_type_string))
    return json_object_get_string (v);
  return NULL;
}

/* Check the link of the chain at *link (a qcow2 image): its backing
 * file's format is declared, raw or qcow2.  Then *link is its backing
 * file if that is qcow2 (to be checked in turn), or NULL at the end of
 * the chain.  -1 with err.
 */
static int
check_link (char **link, struct bmerr *err)
{
  json_object *info = qemu_img_info (*link, "qcow2", err);
  const char *backing, *full, *fmt;
  char *next = NULL;
  int r = -1;

  if (info == NULL) {
    free (*link);
    *link = NULL;
    return -1;
  }
  backing = get_string (info, "backing-filename");
  full = get_string (info, "full-backing-filename");
  fmt = get_string (info, "backing-filename-format");
  if (backing == NULL)
    r = 0;                      /* the end of the chain */
  else if (fmt == NULL)
    bmerr_set (err, EINVAL, "%s: the format of its backing file %s is not "
               "recorded, and it is never guessed from the file's content "
               "(a guest chooses what a raw image holds): record it with "
               "qemu-img rebase -u -b %s -F raw|qcow2 %s",
               *link, backing, backing, *link);
  else if (strcmp (fmt, "raw") == 0)
    r = 0;
  else if (strcmp (fmt, "qcow2") != 0)
    bmerr_set (err, EINVAL, "%s: its backing file %s is %s: only raw and "
               "qcow2 images are read", *link, backing, fmt);
  else if ((next = strdup (full ? full : backing)) == NULL)
    bmerr_set (err, errno, "%s", strerror (errno));
  else
    r = 0;
  json_object_put (info);
  free (*link);
  *link = next;
  return r;
}

int
qemu_nbd_serve_qcow2 (const char *image, struct qemu_nbd *q,
                      struct bmerr *err)
{
  static const char *const opts[] = { "-r", "-f", "qcow2", "-t", "-e",
                                      "16", "--" };
  const size_t nopts = sizeof opts / sizeof opts[0];
  const char *args[sizeof opts / sizeof opts[0] + 2];
  char *link = strdup (image);
  unsigned depth;

  *q = (struct qemu_nbd) { .c = { .pid = -1, .out = -1, .err = -1 } };
  for (depth = 0; link && depth < MAX_CHAIN; ++depth)
    if (check_link (&link, err) == -1)
      return -1;
  if (link) {
    bmerr_set (err, ELOOP, "%s: its backing chain has more than %d images "
               "(a loop?)", image, MAX_CHAIN);
    free (link);
    return -1;
  }
  if (depth == 0) {
    bmerr_set (err, errno, "%s", strerror (errno));
    return -1;
  }
  memcpy (args, opts, sizeof opts);
  args[nopts] = image;
  args[nopts + 1] = NULL;
  return qemu_nbd_start (args, q, err);
}
