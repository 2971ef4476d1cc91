/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/image.h: the digests of an image, chunk by chunk, as a
 * backup's checksums hold them (sums.h): what dirtybitmap verify
 * compares, and what a backup must know of a target before trusting
 * what it holds.
 *
 *   uint8_t *d = malloc (s->n * SUMS_DIGEST);
 *   struct image_result r;
 *   image_hash ("backup.img", IMAGE_RAW, s, s->chunk, s->disk_size, d,
 *               false, &r);    (0: d holds every digest; else r.error)
 *
 * An image's format is what the caller says, never what its content
 * looks like: a raw image holds a guest's disk, and a guest may write
 * a qcow2 header there that names any file of the host as its backing
 * file.
 */

#ifndef DIRTYBITMAP_COPY_IMAGE_H
#define DIRTYBITMAP_COPY_IMAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "sums.h"

enum image_format {
  IMAGE_RAW,                    /* a file's bytes, read directly; or an
                                 * NBD export as it is */
  IMAGE_QCOW2,                  /* a qcow2 file with its backing chain,
                                 * read through qemu-nbd */
};

/* "raw" or "qcow2" (as qemu-img -f spells them): 0 with *out, or -1
 * for any other name.
 */
extern int image_format_parse (const char *name, enum image_format *out);
extern const char *image_format_name (enum image_format fmt);

struct image_result {
  uint64_t size;                /* the image's size, once known */
  bool wrong_size;              /* it is not the size asked for: nothing
                                 * was read */
  bool interrupted;             /* stopped by SIGINT or SIGTERM */
  uint64_t read;                /* bytes read (not those known to read
                                 * as zeroes: holes) */
  uint64_t differing;           /* with expect: chunks whose digest is
                                 * not the expected one */
  struct bmerr error;           /* why it failed, if it did */
};

/* Hash image, of format fmt: a file (raw: read directly, with a few
 * threads; qcow2: served by qemu-nbd with its backing chain, see
 * qemu_nbd_serve_qcow2) or an NBD URI (raw only), which must be size
 * bytes; digests[i] (SUMS_DIGEST bytes each) gets the digest of chunk
 * i, for every chunk (chunk a power of 2; the last one may be short).
 * With expect (of the same size and chunk), r->differing counts the
 * chunks whose digest is not expect's.  progress: the copy engine's
 * progress display on stderr.  SIGINT and SIGTERM stop it (see
 * copy_signals_trap).  Returns 0 when every digest is filled, -1
 * otherwise: r->wrong_size, r->interrupted, or r->error says why.
 */
extern int image_hash (const char *image, enum image_format fmt,
                       const struct sums *expect, uint64_t chunk,
                       uint64_t size, uint8_t *digests, bool progress,
                       struct image_result *r);

#endif /* DIRTYBITMAP_COPY_IMAGE_H */
