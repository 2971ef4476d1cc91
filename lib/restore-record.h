/* SPDX-License-Identifier: BSD-3-Clause */
/* restore-record.h: the restore record of a bitmap file
 * (nbdkit-dirtybitmap-filter(1), INSTANT RESTORE and FILE FORMAT): a
 * disk being restored from a source while it is served keeps, in its
 * bitmap file, the source's URI and one bit per granule restored.
 *
 * The record is in one region: the source (at most BMF_MAX_SOURCE
 * bytes, no NUL) zero padded to BMF_SOURCE_PAGE bytes, then, while the
 * restore runs, the restored bitmap, encoded like bitmap data for the
 * disk's size at the record's granularity.  A running restore is an
 * incompatible feature (a reader that does not know it must not serve
 * a disk that is half restored); a complete one, which keeps only the
 * source's page, is a compatible one.  Bits are only ever set in the
 * restored bitmap, in place, as in a bitmap's data.
 */

#ifndef DIRTYBITMAP_RESTORE_RECORD_H
#define DIRTYBITMAP_RESTORE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bits.h"
#include "bmfile.h"
#include "error.h"
#include "format.h"

/* Why a source cannot be recorded ("must be ..."), or NULL. */
extern const char *bmf_source_problem (const char *source);

/* The restored bitmap of a running restore: where it is in the file,
 * and how many granules it has.
 */
extern struct bmf_region bmf_restored_region (const struct bmf_state *st);
extern uint64_t bmf_restored_nr_bits (const struct bmf_state *st);

/* Map the restored bitmap of f's running restore: writable for the
 * owner of the file (the server that restores), else read-only (or a
 * copy, for a file opened without a lock).  Free with bmf_unmap.
 */
extern int bmf_map_restored (struct bmf *f, bool writable, struct bits *out,
                             struct bmerr *err);

/* Bytes of a disk of disk_size bytes in the granules of 2^gbits bytes
 * set in b.
 */
extern uint64_t bmf_restored_bytes (const struct bits *b, unsigned gbits,
                                    uint64_t disk_size);

#endif /* DIRTYBITMAP_RESTORE_RECORD_H */
