/* SPDX-License-Identifier: BSD-3-Clause */
/* sums.h: the checksums of a backup (dirtybitmap(1), CHECKSUMS): one
 * XXH3-128 per chunk of the image at the backup's point in time, in a
 * file of its own beside the target.
 *
 * The file: a header of SUMS_HEADER_SIZE bytes, little-endian:
 *
 *    0  8  magic "DBMSUMS\n"
 *    8  4  version (2; 1 lacks the image record below)
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
 * then the record of the image the set was made for (version 2):
 *
 * 3136  4  format: 0 unknown, 1 raw, 2 qcow2
 * 3140  4  flags: 1 = held: the file below held exactly this image
 *          when the set was written, with this identity
 * 3144  8  its device, 3152 8 its inode, 3160 8 its size,
 * 3168  8  its modification time (ns since the epoch, settled:
 *          mtime.h)
 * 3176  912  the target: a file's absolute path or an NBD URI, as the
 *          backup wrote it (NUL-terminated; empty: not known)
 *
 * then one digest per chunk, 16 bytes each (XXH3-128 in its canonical,
 * big-endian form, as xxhsum prints it); the last chunk may be short.
 * A file is written under a temporary name and renamed into place.
 *
 * What a set proves.  Its digests describe the disk at the checkpoint.
 * That a target holds that image is shown only by the record: a
 * regular file with the recorded device, inode, size and settled
 * modification time, and the held flag (sums_holds).  Everything else
 * (an NBD target, a block device, a file written since, a set of
 * version 1) holds what it holds: a resync reads it before trusting
 * it.
 */

#ifndef DIRTYBITMAP_SUMS_H
#define DIRTYBITMAP_SUMS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "error.h"

#define SUMS_HEADER_SIZE 4096
#define SUMS_DIGEST 16
#define SUMS_MIN_CHUNK (64 * 1024)
#define SUMS_MAX_CHUNK (1024 * 1024)
#define SUMS_MAX_CHECKPOINT 1023
#define SUMS_MAX_SOURCE 2047
#define SUMS_MAX_TARGET 911

enum sums_format {
  SUMS_FORMAT_UNKNOWN = 0,
  SUMS_FORMAT_RAW = 1,
  SUMS_FORMAT_QCOW2 = 2,
};

/* The image a set was made for. */
struct sums_target {
  char *name;                   /* absolute path or URI; "" unknown */
  uint32_t format;              /* enum sums_format */
  bool held;                    /* the identity below is the image's */
  uint64_t dev, ino, size;
  int64_t mtime_ns;
};

struct sums {
  uint64_t disk_size;
  uint64_t chunk;
  uint64_t n;                   /* chunks */
  char *checkpoint;
  char *source;
  struct sums_target target;
  uint8_t *digests;             /* [n][SUMS_DIGEST] */
};

/* An empty set for a disk (digests zeroed): NULL on ENOMEM. */
extern struct sums *sums_new (uint64_t disk_size, uint64_t chunk,
                              const char *checkpoint, const char *source);
/* A copy of the digests of from into to, where both describe the same
 * disk and chunk size.
 */
extern void sums_copy_digests (struct sums *to, const struct sums *from);

/* Read path: 0 and *out, or -1 with err saying what is wrong with it
 * (missing, not a regular file, torn, damaged, ...).
 * sums_load_header reads and checks the header only (out->digests is
 * NULL): enough to know what a set describes.
 */
extern int sums_load (const char *path, struct sums **out,
                      struct bmerr *err);
extern int sums_load_header (const char *path, struct sums **out,
                             struct bmerr *err);

/* Write s to path atomically (path.tmp, synced, renamed, the
 * directory synced): 0, or -1 with err.  The same in two steps:
 * sums_stage writes and syncs path.tmp, sums_publish renames it into
 * place and syncs the directory.
 */
extern int sums_write (const char *path, const struct sums *s,
                       struct bmerr *err);
extern int sums_stage (const char *path, const struct sums *s,
                       struct bmerr *err);
extern int sums_publish (const char *path, struct bmerr *err);

/* Record in s the target it was made for: a file's absolute path (or
 * an NBD URI) and format, and, when held (the target holds exactly
 * the image now, flushed), its identity once its time is settled.  A
 * target whose identity cannot be taken (not a regular file, a time
 * that does not settle) is recorded as not held.  -1 on ENOMEM.
 */
extern int sums_bind (struct sums *s, const char *target, bool held);

/* Whether target provably holds the image s describes (see above). */
extern bool sums_holds (const struct sums *s, const char *target);

/* Whether s was made for target (the same file, by device and inode
 * or by path; the same URI): a run about to write target must first
 * make s unusable.
 */
extern bool sums_made_for (const struct sums *s, const char *target);

extern void sums_free (struct sums *s);

/* The chunk size for a bitmap granularity: the granularity, at least
 * SUMS_MIN_CHUNK and at most SUMS_MAX_CHUNK.
 */
extern uint64_t sums_chunk_for (uint64_t granularity);

/* The digest of len bytes at buf, into out[SUMS_DIGEST]. */
extern void sums_hash (const void *buf, size_t len, uint8_t *out);

#endif /* DIRTYBITMAP_SUMS_H */
