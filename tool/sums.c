/* SPDX-License-Identifier: BSD-3-Clause */
/* sums.c: the checksum file of a backup (see sums.h): read, checked,
 * written atomically.  The digests are XXH3-128 from libxxhash.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include <xxhash.h>

#include "copy/copy.h"
#include "crc32c.h"
#include "fullio.h"
#include "mtime.h"
#include "sums.h"

static const char magic[8] = "DBMSUMS\n";

static void
put32 (uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; ++i)
    p[i] = v >> (8 * i);
}

static void
put64 (uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; ++i)
    p[i] = v >> (8 * i);
}

static uint32_t
get32 (const uint8_t *p)
{
  uint32_t v = 0;

  for (int i = 0; i < 4; ++i)
    v |= (uint32_t) p[i] << (8 * i);
  return v;
}

static uint64_t
get64 (const uint8_t *p)
{
  uint64_t v = 0;

  for (int i = 0; i < 8; ++i)
    v |= (uint64_t) p[i] << (8 * i);
  return v;
}

uint64_t
sums_chunk_for (uint64_t granularity)
{
  if (granularity < SUMS_MIN_CHUNK)
    return SUMS_MIN_CHUNK;
  if (granularity > SUMS_MAX_CHUNK)
    return SUMS_MAX_CHUNK;
  return granularity;
}

void
sums_hash (const void *buf, size_t len, uint8_t *out)
{
  XXH128_canonical_t c;

  XXH128_canonicalFromHash (&c, XXH3_128bits (buf, len));
  memcpy (out, c.digest, SUMS_DIGEST);
}

struct sums *
sums_new (uint64_t disk_size, uint64_t chunk, const char *checkpoint,
          const char *source)
{
  struct sums *s = calloc (1, sizeof *s);

  if (s == NULL)
    return NULL;
  s->disk_size = disk_size;
  s->chunk = chunk;
  s->n = (disk_size + chunk - 1) / chunk;
  s->checkpoint = strdup (checkpoint ? checkpoint : "");
  s->source = strdup (source ? source : "");
  s->target.name = strdup ("");
  s->digests = calloc (s->n ? s->n : 1, SUMS_DIGEST);
  if (s->checkpoint == NULL || s->source == NULL || s->target.name == NULL ||
      s->digests == NULL) {
    sums_free (s);
    return NULL;
  }
  return s;
}

void
sums_copy_digests (struct sums *to, const struct sums *from)
{
  memcpy (to->digests, from->digests, to->n * SUMS_DIGEST);
}

void
sums_free (struct sums *s)
{
  if (s == NULL)
    return;
  free (s->checkpoint);
  free (s->source);
  free (s->target.name);
  free (s->digests);
  free (s);
}

/* "PATH: WHAT" in err (errnum, or EINVAL where no errno says it). */
static int
fail (struct bmerr *err, int errnum, const char *path, const char *what)
{
  bmerr_set (err, errnum, "%s: %s", path, what);
  return -1;
}

/* A NUL-terminated string of at most max bytes at p. */
static char *
get_string (const uint8_t *p, size_t max)
{
  size_t len = strnlen ((const char *) p, max + 1);

  if (len > max)
    return NULL;
  return strndup ((const char *) p, len);
}

/* The image record of a version 2 header (sums.h). */
#define REC 3136

static int
decode_target (const uint8_t *h, struct sums_target *t)
{
  t->format = get32 (h + REC);
  t->held = get32 (h + REC + 4) & 1;
  t->dev = get64 (h + REC + 8);
  t->ino = get64 (h + REC + 16);
  t->size = get64 (h + REC + 24);
  t->mtime_ns = (int64_t) get64 (h + REC + 32);
  t->name = get_string (h + REC + 40, SUMS_MAX_TARGET);
  return t->name ? 0 : -1;
}

/* Check and decode the header at h into a new set without digests. */
static int
decode_header (const char *path, uint8_t *h, uint64_t file_size,
               struct sums **out, struct bmerr *err)
{
  struct sums *s;
  uint64_t size, chunk, n;
  uint32_t stored, version;

  if (memcmp (h, magic, sizeof magic) != 0)
    return fail (err, EINVAL, path, "not a dirtybitmap checksum file");
  stored = get32 (h + 60);
  put32 (h + 60, 0);
  if (stored != crc32c (h, SUMS_HEADER_SIZE))
    return fail (err, EINVAL, path, "its header is damaged (bad checksum)");
  size = get64 (h + 16);
  chunk = get64 (h + 24);
  n = get64 (h + 32);
  version = get32 (h + 8);
  if ((version != 1 && version != 2) ||
      get32 (h + 12) != SUMS_HEADER_SIZE || get32 (h + 40) != 1)
    return fail (err, EINVAL, path,
                 "a version or hash this program does not know");
  if (chunk < 512 || chunk > SUMS_MAX_CHUNK || (chunk & (chunk - 1)) ||
      n != (size + chunk - 1) / chunk ||
      file_size != SUMS_HEADER_SIZE + n * SUMS_DIGEST)
    return fail (err, EINVAL, path,
                 "its sizes do not agree (truncated or damaged)");
  if ((s = calloc (1, sizeof *s)) == NULL)
    return fail (err, ENOMEM, path, strerror (ENOMEM));
  s->disk_size = size;
  s->chunk = chunk;
  s->n = n;
  s->checkpoint = get_string (h + 64, SUMS_MAX_CHECKPOINT);
  s->source = get_string (h + 1088, SUMS_MAX_SOURCE);
  if (s->checkpoint == NULL || s->source == NULL ||
      (version == 2 && decode_target (h, &s->target) == -1) ||
      (version == 1 && (s->target.name = strdup ("")) == NULL)) {
    sums_free (s);
    return fail (err, EINVAL, path, "its header is damaged (names)");
  }
  *out = s;
  return 0;
}

static int
read_digests (int fd, const char *path, const uint8_t *h, struct sums *s,
              struct bmerr *err)
{
  size_t len = s->n * SUMS_DIGEST;
  ssize_t got;

  if ((s->digests = malloc (len ? len : 1)) == NULL)
    return fail (err, ENOMEM, path, strerror (ENOMEM));
  got = full_pread (fd, s->digests, len, SUMS_HEADER_SIZE);
  if (got == -1)
    return fail (err, errno, path, strerror (errno));
  if ((size_t) got < len)
    return fail (err, EIO, path, "truncated");
  if (crc32c (s->digests, len) != get32 (h + 44))
    return fail (err, EINVAL, path, "its checksums are damaged (bad CRC)");
  return 0;
}

static int
read_set (const char *path, bool header_only, struct sums **out,
          struct bmerr *err)
{
  uint8_t h[SUMS_HEADER_SIZE];
  struct sums *s = NULL;
  struct stat st;
  int fd, r = -1;

  *out = NULL;
  bmerr_clear (err);
  /* O_NONBLOCK: a FIFO must not hang the command. */
  fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd == -1)
    return fail (err, errno, path, strerror (errno));
  if (fstat (fd, &st) == -1)
    fail (err, errno, path, strerror (errno));
  else if (!S_ISREG (st.st_mode))
    fail (err, EINVAL, path, "not a regular file");
  else if (st.st_size < SUMS_HEADER_SIZE ||
           pread (fd, h, sizeof h, 0) != sizeof h)
    fail (err, EINVAL, path, "too short for a checksum file (truncated?)");
  else if (decode_header (path, h, st.st_size, &s, err) == 0 &&
           (header_only || read_digests (fd, path, h, s, err) == 0)) {
    *out = s;
    s = NULL;
    r = 0;
  }
  sums_free (s);
  close (fd);
  return r;
}

int
sums_load (const char *path, struct sums **out, struct bmerr *err)
{
  return read_set (path, false, out, err);
}

int
sums_load_header (const char *path, struct sums **out, struct bmerr *err)
{
  return read_set (path, true, out, err);
}

static void
encode_header (const struct sums *s, uint8_t *h)
{
  const struct sums_target *t = &s->target;

  memset (h, 0, SUMS_HEADER_SIZE);
  memcpy (h, magic, sizeof magic);
  put32 (h + 8, 2);
  put32 (h + 12, SUMS_HEADER_SIZE);
  put64 (h + 16, s->disk_size);
  put64 (h + 24, s->chunk);
  put64 (h + 32, s->n);
  put32 (h + 40, 1);
  put32 (h + 44, crc32c (s->digests, s->n * SUMS_DIGEST));
  put64 (h + 48, time (NULL));
  memcpy (h + 64, s->checkpoint, strlen (s->checkpoint));
  memcpy (h + 1088, s->source, strlen (s->source));
  put32 (h + REC, t->format);
  put32 (h + REC + 4, t->held);
  put64 (h + REC + 8, t->dev);
  put64 (h + REC + 16, t->ino);
  put64 (h + REC + 24, t->size);
  put64 (h + REC + 32, t->mtime_ns);
  memcpy (h + REC + 40, t->name, strlen (t->name));
  put32 (h + 60, crc32c (h, SUMS_HEADER_SIZE));
}

/* Sync the directory of path (a rename or an unlink in it). */
static void
sync_dir_of (const char *path)
{
  char *dir = strdup (path);
  int dfd;

  if (dir &&
      (dfd = open (dirname (dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
    fsync (dfd);
    close (dfd);
  }
  free (dir);
}

int
sums_stage (const char *path, const struct sums *s, struct bmerr *err)
{
  uint8_t h[SUMS_HEADER_SIZE];
  char *tmp = NULL;
  int fd, r = -1;

  bmerr_clear (err);
  if (strlen (s->checkpoint) > SUMS_MAX_CHECKPOINT ||
      strlen (s->source) > SUMS_MAX_SOURCE ||
      strlen (s->target.name) > SUMS_MAX_TARGET)
    return fail (err, EINVAL, path, "the checkpoint, source or target name "
                 "is too long");
  encode_header (s, h);
  if (asprintf (&tmp, "%s.tmp", path) == -1)
    return fail (err, ENOMEM, path, strerror (ENOMEM));
  fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
             0644);
  if (fd == -1 || full_pwrite (fd, h, sizeof h, 0) == -1 ||
      full_pwrite (fd, s->digests, s->n * SUMS_DIGEST, sizeof h) == -1 ||
      fdatasync (fd) == -1 || close (fd) == -1) {
    fail (err, errno, tmp, strerror (errno));
    if (fd >= 0)
      unlink (tmp);
  }
  else
    r = 0;
  free (tmp);
  return r;
}

int
sums_publish (const char *path, struct bmerr *err)
{
  char *tmp = NULL;
  int r = 0;

  bmerr_clear (err);
  if (asprintf (&tmp, "%s.tmp", path) == -1)
    return fail (err, ENOMEM, path, strerror (ENOMEM));
  if (rename (tmp, path) == -1) {
    r = fail (err, errno, path, strerror (errno));
    unlink (tmp);
  }
  else
    sync_dir_of (path);
  free (tmp);
  return r;
}

int
sums_write (const char *path, const struct sums *s, struct bmerr *err)
{
  if (sums_stage (path, s, err) == -1)
    return -1;
  return sums_publish (path, err);
}

/* How a set records its target: a file's canonical path (copy/
 * endpoint.h), or the URI as given.  NULL on ENOMEM.
 */
static char *
target_name (const char *target)
{
  struct endpoint e;
  char *name = NULL;

  if (is_nbd_uri (target))
    return strdup (target);
  if (endpoint_of (target, &e) == 0)
    name = e.where;
  e.where = NULL;
  endpoint_free (&e);
  return name;
}

int
sums_bind (struct sums *s, const char *target, bool held)
{
  struct sums_target *t = &s->target;
  struct stat sb;
  char *name = target_name (target);

  if (name == NULL)
    return -1;
  free (t->name);
  *t = (struct sums_target) { .name = name };
  if (strlen (name) > SUMS_MAX_TARGET)
    name[0] = '\0';             /* not recorded: nothing will match it */
  if (is_nbd_uri (target))
    return 0;
  t->format = SUMS_FORMAT_RAW;
  if (held && bm_stat_stable (target, &sb) == 0 && S_ISREG (sb.st_mode) &&
      name[0]) {
    t->held = true;
    t->dev = sb.st_dev;
    t->ino = sb.st_ino;
    t->size = sb.st_size;
    t->mtime_ns = bm_mtime_ns (&sb);
  }
  return 0;
}

bool
sums_holds (const struct sums *s, const char *target)
{
  const struct sums_target *t = &s->target;
  struct stat sb;

  return t->held && !is_nbd_uri (target) && stat (target, &sb) == 0 &&
    S_ISREG (sb.st_mode) && sb.st_dev == t->dev && sb.st_ino == t->ino &&
    (uint64_t) sb.st_size == t->size && bm_mtime_ns (&sb) == t->mtime_ns &&
    t->size == s->disk_size;
}

bool
sums_made_for (const struct sums *s, const char *target)
{
  const struct sums_target *t = &s->target;
  struct endpoint now = { .nbd = false }, then = { .nbd = false };
  bool same;

  if (t->name[0] == '\0')
    return false;
  if (endpoint_of (target, &now) == -1 ||
      endpoint_of (t->name, &then) == -1)
    same = true;                /* out of memory: the safe answer */
  else
    same = endpoint_same (&now, &then) ||
      (t->held && !now.nbd && now.exists && now.dev == t->dev &&
       now.ino == t->ino);
  endpoint_free (&now);
  endpoint_free (&then);
  return same;
}
