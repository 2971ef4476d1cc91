/* SPDX-License-Identifier: BSD-3-Clause */
/* qcow2.c: a persistent bitmap of a qcow2 image, read through qemu
 * rather than by parsing qcow2 here (see qcow2.h).
 *
 * Two qemu programs, each a child of this process, whose stderr is
 * read into the error, so that qemu's own message reaches the user:
 *
 *   1. qemu-img info --output=json: what qemu-img bitmap checks of a
 *      merge source.  The image opens (it exists, it is qcow2, no
 *      other process writes it), the bitmap exists and is not
 *      "in-use" (qemu loads such a bitmap, left by a qemu that did not
 *      close the image, as inconsistent); and its granularity and the
 *      disk size.
 *   2. qemu-nbd -r -B NAME: the image served read-only, with the
 *      bitmap as the meta context qemu:dirty-bitmap:NAME.  It is
 *      started by socket activation, on a socket in a private
 *      directory, and read by block status over the whole disk:
 *      extents with NBD_STATE_DIRTY are dirty granules.
 *
 * qemu's extents of a bitmap fall on its granules (but at the end of
 * the disk); one that did not would be rounded outward, never a
 * granule fewer.  The bits are kept at the source's granularity, so
 * that a merge maps them to its target as it maps another bitmap
 * file's (bits_merge).  Memory: one bit per source granule (2 MiB for
 * a 1 TiB disk at 64K).  Neither program writes the image.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
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
#include <libnbd.h>

#include "dirtybitmap.h"
#include "msg.h"
#include "qcow2.h"
#include "util.h"

/* The one flag of qemu:dirty-bitmap:NAME (qemu docs/interop/nbd.txt). */
#define NBD_STATE_DIRTY 1

/* The most bytes one block status request asks about. */
#define STATUS_CHUNK (UINT64_C (1) << 30)

extern char **environ;

/* A qemu program running as a child of this process. */
struct child {
  const char *name;             /* argv[0] */
  pid_t pid;
  int out;                      /* its stdout, or -1 */
  int err;                      /* its stderr */
};

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

/* Start argv (argv[0] found in PATH), its stdin /dev/null, its stderr
 * into c->err, its stdout into c->out if want_out (else /dev/null),
 * and, when listen_fd >= 0, socket-activated: listen_fd is its
 * descriptor 3.  Returns -1 with err if it could not be run.
 */
static int
spawn (char *const argv[], bool want_out, int listen_fd, struct child *c,
       struct bmerr *err)
{
  char pidvar[32] = "LISTEN_PID=";
  const size_t pidpos = strlen (pidvar);
  char **env = NULL;
  /* null, stdout, stderr and exec failure pipes: read end, write end */
  int fds[7] = { -1, -1, -1, -1, -1, -1, -1 };
  int *null = &fds[0], *outp = &fds[1], *errp = &fds[3], *execp = &fds[5];
  int e = 0, ret = -1;
  ssize_t r;

  *c = (struct child) { .name = argv[0], .pid = -1, .out = -1, .err = -1 };
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

/* Read the child's stdout (into *out, if it was wanted) and stderr
 * (into *text) to their ends, and reap it.  Returns its wait status,
 * or -1 if it could not be reaped.  Free *out and *text.
 */
static int
finish (struct child *c, char **out, char **text)
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

/* What a qemu program said on stderr, as the error: each line without
 * its "PROGRAM: " prefix, the lines kept apart as qemu prints them;
 * or, if it said nothing, how it ended.
 */
static void
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

/*----------------------------------------------------------------------
 * 1. qemu-img info.
 */

static json_object *
get (json_object *o, const char *key, json_type type)
{
  json_object *v;

  if (o && json_object_object_get_ex (o, key, &v) &&
      json_object_is_type (v, type))
    return v;
  return NULL;
}

/* The entry of bitmap name in the info, or NULL. */
static json_object *
find_bitmap (json_object *info, const char *name)
{
  json_object *bitmaps =
    get (get (get (info, "format-specific", json_type_object),
              "data", json_type_object),
         "bitmaps", json_type_array);
  size_t i;

  for (i = 0; bitmaps && i < json_object_array_length (bitmaps); ++i) {
    json_object *b = json_object_array_get_idx (bitmaps, i);
    json_object *n = get (b, "name", json_type_string);
    if (n && strcmp (json_object_get_string (n), name) == 0)
      return b;
  }
  return NULL;
}

static bool
has_flag (json_object *bitmap, const char *flag)
{
  json_object *flags = get (bitmap, "flags", json_type_array);
  size_t i;

  for (i = 0; flags && i < json_object_array_length (flags); ++i) {
    json_object *f = json_object_array_get_idx (flags, i);
    if (json_object_is_type (f, json_type_string) &&
        strcmp (json_object_get_string (f), flag) == 0)
      return true;
  }
  return false;
}

/* The disk size, and the bitmap's granularity or its problem. */
static int
judge_info (json_object *info, struct bmf_foreign *out, struct bmerr *err)
{
  json_object *size = get (info, "virtual-size", json_type_int), *b, *g;
  int64_t gran;

  b = find_bitmap (info, out->name);
  g = get (b, "granularity", json_type_int);
  if (size == NULL || json_object_get_int64 (size) < 0 || (b && g == NULL)) {
    bmerr_set (err, EINVAL, "%s: qemu-img info gave no %s", out->origin,
               size == NULL ? "virtual-size" : "granularity");
    return -1;
  }
  out->disk_size = json_object_get_int64 (size);
  /* qemu-img bitmap's words (block_dirty_bitmap_lookup,
   * bdrv_dirty_bitmap_check).
   */
  if (b == NULL) {
    bmerr_set (&out->problem, ENOENT, "%s: Dirty bitmap '%s' not found",
               out->origin, out->name);
    return 0;
  }
  if (has_flag (b, "in-use")) {
    bmerr_set (&out->problem, EINVAL, "%s: Bitmap '%s' is inconsistent and "
               "cannot be used (remove it with qemu-img bitmap --remove, "
               "and take a full backup)", out->origin, out->name);
    return 0;
  }
  gran = json_object_get_int64 (g);
  if (gran <= 0 || bmf_granularity_problem (gran)) {
    bmerr_set (&out->problem, EINVAL, "%s: bitmap '%s': granularity %"
               PRIi64 " %s", out->origin, out->name, gran,
               gran <= 0 ? "is not valid" : bmf_granularity_problem (gran));
    return 0;
  }
  out->gbits = log_2 (gran);
  return 0;
}

static int
read_info (const char *image, struct bmf_foreign *out, struct bmerr *err)
{
  char *argv[] = { (char *) "qemu-img", (char *) "info", (char *) "-f",
                   (char *) "qcow2", (char *) "--output=json", (char *) "--",
                   (char *) image, NULL };
  char *json = NULL, *text = NULL;
  json_object *info = NULL;
  struct child c;
  int status, r = -1;

  if (spawn (argv, true, -1, &c, err) == -1)
    return -1;
  status = finish (&c, &json, &text);
  if (status != 0) {
    qemu_error (err, "qemu-img", text, status);
    goto out;
  }
  info = json_tokener_parse (json ? json : "");
  if (info == NULL) {
    bmerr_set (err, EINVAL, "%s: qemu-img info gave no JSON", image);
    goto out;
  }
  r = judge_info (info, out, err);
 out:
  json_object_put (info);
  free (json);
  free (text);
  return r;
}

/*----------------------------------------------------------------------
 * 2. qemu-nbd -B.
 */

struct walk {
  const char *context;
  struct bmf_foreign *out;
  uint64_t end;                 /* where the extents seen so far end */
};

static int
extent (void *opaque, const char *context, uint64_t offset,
        uint32_t *entries, size_t nr_entries, int *error)
{
  struct walk *w = opaque;
  const uint64_t size = w->out->disk_size;
  const unsigned g = w->out->gbits;
  size_t i;

  if (strcmp (context, w->context) != 0)
    return 0;
  for (i = 0; i + 1 < nr_entries && offset < size; i += 2) {
    uint64_t len = MIN ((uint64_t) entries[i], size - offset);

    if (len == 0)
      break;
    if (entries[i + 1] & NBD_STATE_DIRTY)
      bits_set_range (&w->out->bits, offset >> g, (offset + len - 1) >> g);
    offset += len;
  }
  w->end = MAX (w->end, offset);
  return 0;
}

/* Every extent of the bitmap, from h; -1 with err. */
static int
walk_bitmap (struct nbd_handle *h, const char *context,
             struct bmf_foreign *out, struct bmerr *err)
{
  struct walk w = { .context = context, .out = out };
  uint64_t offset = 0;
  int64_t size;

  if (nbd_can_meta_context (h, context) != 1) {
    bmerr_set (err, EINVAL, "%s: qemu-nbd does not serve %s", out->origin,
               context);
    return -1;
  }
  size = nbd_get_size (h);
  if (size == -1) {
    bmerr_set (err, EIO, "%s: %s", out->origin, nbd_get_error ());
    return -1;
  }
  if ((uint64_t) size != out->disk_size) {
    bmerr_set (err, EAGAIN, "%s: its size changed while it was read (%"
               PRIu64 " bytes, then %" PRIi64 "): try again", out->origin,
               out->disk_size, size);
    return -1;
  }
  while (offset < out->disk_size) {
    w.end = offset;
    if (nbd_block_status (h, MIN (out->disk_size - offset, STATUS_CHUNK),
                          offset,
                          (nbd_extent_callback) { .callback = extent,
                                                  .user_data = &w },
                          0) == -1) {
      bmerr_set (err, EIO, "%s: block status of %s: %s", out->origin,
                 context, nbd_get_error ());
      return -1;
    }
    if (w.end <= offset) {
      bmerr_set (err, EIO, "%s: qemu-nbd gave no extent of %s at offset %"
                 PRIu64, out->origin, context, offset);
      return -1;
    }
    offset = w.end;
  }
  return 0;
}

/* A listening socket at dir/sock, in a new private directory. */
static int
listen_private (char **dir, char **sock, struct bmerr *err)
{
  const char *tmp = getenv ("TMPDIR");
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  int fd;

  *sock = NULL;
  if (asprintf (dir, "%s/dirtybitmap-XXXXXX", tmp && *tmp ? tmp : "/tmp")
      == -1) {
    *dir = NULL;
    bmerr_set (err, errno, "%s", strerror (errno));
    return -1;
  }
  if (mkdtemp (*dir) == NULL) {
    bmerr_set (err, errno, "%s: %s", *dir, strerror (errno));
    free (*dir);
    *dir = NULL;
    return -1;
  }
  if (asprintf (sock, "%s/sock", *dir) == -1) {
    *sock = NULL;
    bmerr_set (err, errno, "%s", strerror (errno));
    return -1;
  }
  if (strlen (*sock) >= sizeof sa.sun_path) {
    bmerr_set (err, ENAMETOOLONG, "%s: too long for a socket (set TMPDIR "
               "to a shorter directory)", *sock);
    return -1;
  }
  strcpy (sa.sun_path, *sock);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1 || bind (fd, (struct sockaddr *) &sa, sizeof sa) == -1 ||
      listen (fd, 1) == -1) {
    bmerr_set (err, errno, "%s: %s", *sock, strerror (errno));
    if (fd >= 0)
      close (fd);
    return -1;
  }
  return fd;
}

static int
read_bits (const char *image, struct bmf_foreign *out, struct bmerr *err)
{
  char *argv[] = { (char *) "qemu-nbd", (char *) "-r", (char *) "-f",
                   (char *) "qcow2", (char *) "-B", (char *) out->name,
                   (char *) "--", (char *) image, NULL };
  char *dir = NULL, *sock = NULL, *context = NULL, *text = NULL;
  struct nbd_handle *h = NULL;
  struct child c = { .pid = -1 };
  int fd, status, r = -1;

  out->bits.nr_bits = bmf_nr_bits (out->disk_size, out->gbits);
  out->bits.words = calloc (MAX (bits_nr_words (out->bits.nr_bits), 1), 8);
  if (out->bits.words == NULL ||
      asprintf (&context, "qemu:dirty-bitmap:%s", out->name) == -1) {
    context = NULL;
    bmerr_set (err, errno, "%s", strerror (errno));
    goto out;
  }
  fd = listen_private (&dir, &sock, err);
  if (fd == -1)
    goto out;
  r = spawn (argv, false, fd, &c, err);
  close (fd);
  if (r == -1)
    goto out;
  r = -1;
  h = nbd_create ();
  if (h == NULL || nbd_add_meta_context (h, context) == -1) {
    bmerr_set (err, EIO, "%s", nbd_get_error ());
    goto out;
  }
  if (nbd_connect_unix (h, sock) == -1) {
    /* qemu-nbd refused: its message, once it has gone. */
    nbd_close (h);
    h = NULL;
    kill (c.pid, SIGTERM);
    status = finish (&c, NULL, &text);
    qemu_error (err, "qemu-nbd", text, status);
    goto out;
  }
  r = walk_bitmap (h, context, out, err);
  nbd_shutdown (h, 0);
 out:
  nbd_close (h);
  if (c.pid > 0) {
    /* It ends with its one client; a signal makes sure. */
    kill (c.pid, SIGTERM);
    finish (&c, NULL, &text);
    if (text && *text)
      bm_debug ("qemu-nbd said: %s", text);
  }
  free (text);
  free (context);
  if (sock) {
    unlink (sock);
    free (sock);
  }
  if (dir) {
    rmdir (dir);
    free (dir);
  }
  return r;
}

/*----------------------------------------------------------------------
 * The bitmap.
 */

int
qcow2_read_bitmap (const char *image, const char *name,
                   struct bmf_foreign *out, struct bmerr *err)
{
  *out = (struct bmf_foreign) { .name = name, .origin = image };
  if (read_info (image, out, err) == -1)
    return -1;
  if (out->problem.errnum)
    return 0;
  if (read_bits (image, out, err) == -1)
    return -1;
  bm_debug ("%s: bitmap %s: %" PRIu64 " granules of %" PRIu64 " bytes, %"
            PRIu64 " dirty", image, name, out->bits.nr_bits,
            UINT64_C (1) << out->gbits, bits_count (&out->bits));
  return 0;
}

void
qcow2_free_bitmap (struct bmf_foreign *b)
{
  free (b->bits.words);
  memset (&b->bits, 0, sizeof b->bits);
}
