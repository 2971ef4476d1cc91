/* SPDX-License-Identifier: BSD-3-Clause */
/* recover.h: what a power loss in durability=coarse leaves, and how a
 * bitmap is made whole again from its coarse shadow (shadow.h).
 */

#ifndef DIRTYBITMAP_RECOVER_H
#define DIRTYBITMAP_RECOVER_H

#include <stdint.h>

#include "bits.h"
#include "bmfile.h"
#include "error.h"
#include "format.h"

/* fine |= every granule (of 2^gbits bytes) of each coarse granule (of
 * 2^sgbits bytes) set in shadow, on a disk of disk_size bytes.
 * Returns the bytes of the disk that were clean and are now dirty.
 */
extern uint64_t bmf_expand_shadow (struct bits *fine, unsigned gbits,
                                   const struct bits *shadow,
                                   unsigned sgbits, uint64_t disk_size);

/* The recovery of every bitmap of f that was recording when a
 * durability=coarse run lost its machine (called when the file is
 * opened).  With the write lock it is done in place (bits are only
 * ever set in place; the next commit makes them durable) and the
 * shadow takes the bits that reached the disk without it; otherwise
 * it is only counted, and applied whenever the bits are read.  A
 * bitmap that cannot be recovered (no shadow, an I/O error) is marked
 * inconsistent, as after a flush run.
 */
extern void bmf_recover_coarse (struct bmf *f);

/* Apply bm's recovery to its bits b, just read (bm->recovery == BMF_RECOVER_ON_READ). */
extern int bmf_recover_read (struct bmf *f, const struct bmf_state *st,
                             const struct bmf_bitmap *bm, struct bits *b,
                             struct bmerr *err);

#endif /* DIRTYBITMAP_RECOVER_H */
