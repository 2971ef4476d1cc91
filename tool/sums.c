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

#include "crc32c.h"
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
  s->digests = calloc (s->n ? s->n : 1, SUMS_DIGEST);
  if (s->checkpoint == NULL || s->source == NULL || s->digests == NULL) {
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
  free (s->digests);
  free (s);
}

static int
fail (char **error, const char *path, const char *what)
{
  if (asprintf (error, "%s: %s", path, what) == -1)
    *error = NULL;
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

int
sums_read (const char *path, struct sums **out, char **error)
{
  uint8_t h[SUMS_HEADER_SIZE];
  struct sums *s = NULL;
  struct stat st;
  uint64_t size, chunk, n;
  uint32_t stored;
  ssize_t got;
  size_t done;
  int fd, r = -1;

  *out = NULL;
  *error = NULL;
  /* O_NONBLOCK: a FIFO must not hang the command. */
  fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd == -1)
    return fail (error, path, strerror (errno));
  if (fstat (fd, &st) == -1) {
    fail (error, path, strerror (errno));
    goto out;
  }
  if (!S_ISREG (st.st_mode)) {
    fail (error, path, "not a regular file");
    goto out;
  }
  if (st.st_size < SUMS_HEADER_SIZE ||
      pread (fd, h, sizeof h, 0) != sizeof h) {
    fail (error, path, "too short for a checksum file (truncated?)");
    goto out;
  }
  if (memcmp (h, magic, sizeof magic) != 0) {
    fail (error, path, "not a dirtybitmap checksum file");
    goto out;
  }
  stored = get32 (h + 60);
  put32 (h + 60, 0);
  if (stored != crc32c (h, sizeof h)) {
    fail (error, path, "its header is damaged (bad checksum)");
    goto out;
  }
  size = get64 (h + 16);
  chunk = get64 (h + 24);
  n = get64 (h + 32);
  if (get32 (h + 8) != 1 || get32 (h + 12) != SUMS_HEADER_SIZE ||
      get32 (h + 40) != 1) {
    fail (error, path, "a version or hash this program does not know");
    goto out;
  }
  if (chunk < 512 || chunk > SUMS_MAX_CHUNK || (chunk & (chunk - 1)) ||
      n != (size + chunk - 1) / chunk ||
      (uint64_t) st.st_size != SUMS_HEADER_SIZE + n * SUMS_DIGEST) {
    fail (error, path, "its sizes do not agree (truncated or damaged)");
    goto out;
  }
  s = calloc (1, sizeof *s);
  if (s == NULL ||
      (s->digests = malloc (n ? n * SUMS_DIGEST : 1)) == NULL) {
    fail (error, path, strerror (ENOMEM));
    goto out;
  }
  s->disk_size = size;
  s->chunk = chunk;
  s->n = n;
  s->checkpoint = get_string (h + 64, SUMS_MAX_CHECKPOINT);
  s->source = get_string (h + 1088, SUMS_MAX_SOURCE);
  if (s->checkpoint == NULL || s->source == NULL) {
    fail (error, path, "its header is damaged (names)");
    goto out;
  }
  for (done = 0; done < n * SUMS_DIGEST; done += got) {
    got = pread (fd, s->digests + done, n * SUMS_DIGEST - done,
                 SUMS_HEADER_SIZE + done);
    if (got <= 0) {
      fail (error, path, got == 0 ? "truncated" : strerror (errno));
      goto out;
    }
  }
  if (crc32c (s->digests, n * SUMS_DIGEST) != get32 (h + 44)) {
    fail (error, path, "its checksums are damaged (bad CRC)");
    goto out;
  }
  *out = s;
  s = NULL;
  r = 0;

 out:
  sums_free (s);
  close (fd);
  return r;
}

static int
write_all (int fd, const void *buf, size_t len)
{
  const uint8_t *p = buf;

  while (len > 0) {
    ssize_t w = write (fd, p, len);
    if (w == -1 && errno == EINTR)
      continue;
    if (w == -1)
      return -1;
    p += w;
    len -= w;
  }
  return 0;
}

int
sums_write (const char *path, const struct sums *s, char **error)
{
  uint8_t h[SUMS_HEADER_SIZE] = { 0 };
  char *tmp = NULL, *dir = NULL;
  int fd = -1, dfd, r = -1;

  *error = NULL;
  if (strlen (s->checkpoint) > SUMS_MAX_CHECKPOINT ||
      strlen (s->source) > SUMS_MAX_SOURCE)
    return fail (error, path, "the checkpoint or source name is too long");
  memcpy (h, magic, sizeof magic);
  put32 (h + 8, 1);
  put32 (h + 12, SUMS_HEADER_SIZE);
  put64 (h + 16, s->disk_size);
  put64 (h + 24, s->chunk);
  put64 (h + 32, s->n);
  put32 (h + 40, 1);
  put32 (h + 44, crc32c (s->digests, s->n * SUMS_DIGEST));
  put64 (h + 48, time (NULL));
  memcpy (h + 64, s->checkpoint, strlen (s->checkpoint));
  memcpy (h + 1088, s->source, strlen (s->source));
  put32 (h + 60, crc32c (h, sizeof h));

  if (asprintf (&tmp, "%s.tmp", path) == -1) {
    tmp = NULL;
    fail (error, path, strerror (ENOMEM));
    goto out;
  }
  fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
             0644);
  if (fd == -1 || write_all (fd, h, sizeof h) == -1 ||
      write_all (fd, s->digests, s->n * SUMS_DIGEST) == -1 ||
      fdatasync (fd) == -1 || close (fd) == -1) {
    fd = -1;
    fail (error, tmp, strerror (errno));
    unlink (tmp);
    goto out;
  }
  fd = -1;
  if (rename (tmp, path) == -1) {
    fail (error, path, strerror (errno));
    unlink (tmp);
    goto out;
  }
  /* The rename itself made durable. */
  if ((dir = strdup (path)) != NULL &&
      (dfd = open (dirname (dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
    fsync (dfd);
    close (dfd);
  }
  r = 0;

 out:
  if (fd >= 0)
    close (fd);
  free (tmp);
  free (dir);
  return r;
}
