/* SPDX-License-Identifier: BSD-3-Clause */
/* sums.h: the checksums of a backup (dirtybitmap(1), CHECKSUMS): one
 * XXH3-128 per chunk of the image at the backup's point in time, in a
 * file of its own beside the target.
 *
 * The file: a header of SUMS_HEADER_SIZE bytes, little-endian:
 *
 *    0  8  magic "DBMSUMS\n"
 *    8  4  version (1)
 *   12  4  header size (4096)
 *   16  8  disk size (bytes)
 *   24  8  chunk size (bytes, a power of 2)
 *   32  8  chunks: the disk size divided by the chunk size, rounded up
 *   40  4  hash: 1 = XXH3-128
 *   44  4  CRC-32C of the digests
 *   48  8  when it was written (seconds since the epoch)
 *   56  4  0
 *   60  4  CRC-32C of the header, with this field 0
 *   64  1024  the checkpoint the image is at (NUL-terminated)
 * 1088  2048  the source disk's NBD URI (NUL-terminated)
 *
 * then one digest per chunk, 16 bytes each (XXH3-128 in its canonical,
 * big-endian form, as xxhsum prints it); the last chunk may be short.
 * A file is written under a temporary name and renamed into place.
 */

#ifndef DIRTYBITMAP_SUMS_H
#define DIRTYBITMAP_SUMS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#define SUMS_HEADER_SIZE 4096
#define SUMS_DIGEST 16
#define SUMS_MIN_CHUNK (64 * 1024)
#define SUMS_MAX_CHUNK (1024 * 1024)
#define SUMS_MAX_CHECKPOINT 1023
#define SUMS_MAX_SOURCE 2047

struct sums {
  uint64_t disk_size;
  uint64_t chunk;
  uint64_t n;                   /* chunks */
  char *checkpoint;
  char *source;
  uint8_t *digests;             /* [n][SUMS_DIGEST] */
};

/* An empty set for a disk (digests zeroed): NULL on ENOMEM. */
extern struct sums *sums_new (uint64_t disk_size, uint64_t chunk,
                              const char *checkpoint, const char *source);
/* A copy of the digests of from into to, where both describe the same
 * disk and chunk size.
 */
extern void sums_copy_digests (struct sums *to, const struct sums *from);

/* Read path: 0 and *out, or -1 with *error (malloced) saying what is
 * wrong with it (missing, not a regular file, torn, damaged, ...).
 */
extern int sums_read (const char *path, struct sums **out, char **error);

/* Write s to path atomically (path.tmp, synced, renamed, the
 * directory synced): 0, or -1 with *error.
 */
extern int sums_write (const char *path, const struct sums *s,
                       char **error);

extern void sums_free (struct sums *s);

/* The chunk size for a bitmap granularity: the granularity, at least
 * SUMS_MIN_CHUNK and at most SUMS_MAX_CHUNK.
 */
extern uint64_t sums_chunk_for (uint64_t granularity);

/* The digest of len bytes at buf, into out[SUMS_DIGEST]. */
extern void sums_hash (const void *buf, size_t len, uint8_t *out);

#endif /* DIRTYBITMAP_SUMS_H */
