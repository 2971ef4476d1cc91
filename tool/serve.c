/* SPDX-License-Identifier: BSD-3-Clause */
/* serve.c: dirtybitmap serve: a point of a backup repository (repo.h)
 * served read-only over NBD on a Unix socket, in the foreground until
 * SIGTERM or SIGINT: to boot a copy of the machine, or to mount a disk
 * and take files from it.
 *
 * The image's chain is checked first (every link declares its format:
 * qemu.h).  The socket is made here and handed to qemu-nbd (socket
 * activation), so it listens as soon as it appears at PATH: it is
 * bound under a temporary name beside PATH and linked to PATH, which
 * must not exist.  Then this process waits for a signal, or for
 * qemu-nbd to end by itself (its stderr closes), and stops it, removes
 * PATH and exits.  The repository's shared lock is held all along: no
 * backup writes to DIR while it is served.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "copy/copy.h"
#include "dirtybitmap.h"
#include "msg.h"
#include "qemu.h"
#include "repo.h"

#define LISTEN_BACKLOG 16

static void __attribute__ ((noreturn))
serve_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s serve DIR[@POINT] [--disk NAME] --socket PATH\n"
"\n"
"Serve a point of the backup repository DIR (the newest by default)\n"
"read-only over NBD on the Unix socket PATH, through qemu-nbd, until\n"
"SIGTERM or SIGINT: to boot a copy of the machine, or mount a disk of\n"
"it and take files from it.  The repository is in use meanwhile.\n"
"\n"
"  --disk NAME           the disk to serve (a point of several disks)\n"
"  --socket PATH         the socket to make (it must not exist)\n"
"\n"
"Example:\n"
"  %s serve /backup/vm1@tue --disk os --socket /tmp/os-tue.sock\n",
           prog, prog);
  exit (status);
}

/* A socket listening at path, which did not exist.  -1 (said). */
static int
listen_at (const char *path)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  char tmp[sizeof sa.sun_path];
  struct stat st;
  int fd, n;

  n = snprintf (tmp, sizeof tmp, "%s.tmp-%ld", path, (long) getpid ());
  if (n < 0 || (size_t) n >= sizeof tmp) {
    bm_error ("serve: --socket %s: too long for a Unix socket", path);
    return -1;
  }
  if (lstat (path, &st) == 0) {
    bm_error ("serve: --socket %s: it exists (remove it if no server "
              "listens there)", path);
    return -1;
  }
  strcpy (sa.sun_path, tmp);
  unlink (tmp);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1 || bind (fd, (struct sockaddr *) &sa, sizeof sa) == -1 ||
      listen (fd, LISTEN_BACKLOG) == -1 || link (tmp, path) == -1) {
    bm_error ("serve: --socket %s: %s", path, strerror (errno));
    if (fd >= 0)
      close (fd);
    unlink (tmp);
    return -1;
  }
  unlink (tmp);
  return fd;
}

/* Until a signal (0) or qemu-nbd's end (-1): what it says on stderr
 * goes to *said.
 */
static int
wait_end (struct qemu_child *c, FILE *said)
{
  struct pollfd p[2] = { { .fd = copy_interrupt_fd (), .events = POLLIN },
                         { .fd = c->err, .events = POLLIN } };
  char buf[4096];
  ssize_t r;

  for (;;) {
    if (copy_interrupted ())
      return 0;
    if (poll (p, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      return 0;
    }
    if (p[1].revents == 0)
      continue;
    r = read (c->err, buf, sizeof buf);
    if (r > 0)
      fwrite (buf, 1, r, said);
    else if (r == 0 || (errno != EINTR && errno != EAGAIN))
      return -1;
  }
}

/* Serve image on fd (listening at path) until the end. */
static int
serve (const char *image, const char *path, int fd, const char *what)
{
  char *argv[] = { (char *) "qemu-nbd", QEMU_NBD_READ_ONLY_ARGS,
                   (char *) image, NULL };
  struct qemu_child c;
  struct bmerr err = { 0 };
  char *text = NULL, *rest = NULL;
  size_t len;
  FILE *said = open_memstream (&text, &len);
  int status, ended;

  if (said == NULL || qemu_spawn (argv, false, fd, &c, &err) == -1) {
    bm_error ("serve: %s", said ? err.msg : strerror (errno));
    if (said)
      fclose (said);
    free (text);
    return -1;
  }
  printf ("serving %s read-only at nbd+unix:///?socket=%s until SIGTERM "
          "or SIGINT\n", what, path);
  fflush (stdout);
  ended = wait_end (&c, said);
  if (ended == 0)
    status = qemu_stop (&c, &rest);
  else
    status = qemu_finish (&c, NULL, &rest);
  if (rest)
    fputs (rest, said);
  fclose (said);
  if (ended == -1 || status != 0) {
    qemu_error (&err, "qemu-nbd", text, status);
    bm_error ("serve: qemu-nbd %s: %s", ended == -1 ? "ended" : "failed",
              err.msg);
  }
  free (text);
  free (rest);
  return ended == 0 && status == 0 ? 0 : -1;
}

/* The disk of point p to serve: the one it has, or name. */
static const struct repo_disk *
choose_disk (const struct repo_point *p, const char *name)
{
  const struct repo_disk *d;

  if (name == NULL && p->n > 1) {
    bad_usage ("serve ", "point %s has %zu disks: choose one with --disk "
               "NAME", p->name, p->n);
    return NULL;
  }
  d = name ? repo_point_disk (p, name) : &p->disks[0];
  if (d == NULL)
    bm_error ("serve: point %s has no disk %s", p->name, name);
  return d;
}

/* DIR[@POINT], its disk, checked and served at path. */
static int
serve_point (const char *spec, const char *disk, const char *path)
{
  struct repo r = { .lock_fd = -1, .add_fd = -1 };
  struct repo_point p = { 0 };
  struct bmerr err = { 0 };
  const struct repo_disk *d;
  char *dir = NULL, *point = NULL, *image = NULL, *what = NULL;
  int fd = -1, ret = -1;

  if (repo_parse_spec (spec, &dir, &point) == -1) {
    bm_error ("%m");
    return -1;
  }
  if (repo_open (dir, false, &r, &err) == -1 ||
      repo_choose (&r, point, &p, &err) == -1)
    bm_error ("serve: %s", err.msg);
  else if ((d = choose_disk (&p, disk)) == NULL)
    ;
  else if ((image = repo_path (&r, d->image)) == NULL ||
           asprintf (&what, "point %s of disk %s (%s)", p.name, d->name,
                     image) == -1)
    bm_error ("%m");
  else if (access (image, F_OK) == -1)
    bm_error ("serve: point %s, disk %s: %s: %s", p.name, d->name, image,
              strerror (errno));
  else if (qemu_check_chain (image, &err) == -1)
    bm_error ("serve: point %s, disk %s: %s", p.name, d->name, err.msg);
  else if ((fd = listen_at (path)) >= 0) {
    ret = serve (image, path, fd, what);
    close (fd);
    unlink (path);
  }
  free (dir);
  free (point);
  free (image);
  free (what);
  repo_point_free (&p);
  repo_close (&r);
  return ret;
}

int
do_serve (int argc, char *argv[])
{
  enum { DISK = 256, SOCKET };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "disk", required_argument, NULL, DISK },
    { "socket", required_argument, NULL, SOCKET },
    { NULL }
  };
  const char *disk = NULL, *path = NULL;
  struct bmerr err = { 0 };
  int opt, r;

  while ((opt = getopt_long (argc, argv, "h", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': serve_usage (EXIT_SUCCESS);
    case DISK: disk = optarg; break;
    case SOCKET: path = optarg; break;
    default: return try_help ("serve ");
    }
  }
  if (optind != argc - 1)
    return bad_usage ("serve ", "expecting DIR[@POINT]");
  if (path == NULL)
    return bad_usage ("serve ", "--socket PATH is required");
  if (copy_signals_trap (&err) == -1) {
    bm_error ("serve: %s", err.msg);
    return EXIT_FAILURE;
  }
  r = serve_point (argv[optind], disk, path);
  copy_signals_release ();
  return r == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
