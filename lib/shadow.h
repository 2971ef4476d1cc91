/* SPDX-License-Identifier: BSD-3-Clause */
/* shadow.h: coarse shadows (nbdkit-dirtybitmap-filter(1), DURABILITY
 * and FILE FORMAT): for each bitmap, one bit per coarse granule, set
 * when any of its granules is dirty.  durability=coarse makes a
 * shadow bit durable before the first write to its coarse granule
 * goes down, so that after a power loss the bitmap is its bits OR
 * every granule of a coarse granule set in its shadow.
 *
 * The rules, in one place: the coarse granularity is a power of two
 * from 512 to 2G; a bitmap's shadow has granules of the coarse
 * granularity or of its own, whichever is larger.  A shadow's data is
 * encoded like a bitmap's (FILE FORMAT, Bitmap data).  The shadow
 * table has one 16 byte entry per directory entry, in the same order:
 * the offset and the length of that bitmap's shadow.
 *
 * Nothing here does I/O.
 */

#ifndef DIRTYBITMAP_SHADOW_H
#define DIRTYBITMAP_SHADOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* Why bytes cannot be a coarse granularity ("must be ..."), or NULL. */
extern const char *bmf_coarse_granularity_problem (uint64_t bytes);

/* The granularity (log2) of bm's shadow in st. */
static inline unsigned
bmf_shadow_gbits (const struct bmf_state *st, const struct bmf_bitmap *bm)
{
  return st->cgbits > bm->gbits ? st->cgbits : bm->gbits;
}

/* Bytes of shadow data for bm in st. */
extern uint64_t bmf_shadow_length (const struct bmf_state *st,
                                   const struct bmf_bitmap *bm);

/* The shadow table of st, encoded into a malloced buffer of *len
 * bytes (NULL with errno if out of memory; no bitmaps give a non-NULL
 * buffer and *len 0).
 */
extern unsigned char *bmf_encode_shadows (const struct bmf_state *st,
                                          size_t *len);

/* Decode the shadow table of st (whose directory is decoded) from its
 * len bytes with checksum crc into st->bitmaps[].shadow_*, and check
 * every entry.  Problems go to p as in bmf_decode_dir; returns 0 if
 * there was none.
 */
extern int bmf_decode_shadows (const unsigned char *buf, size_t len,
                               uint32_t crc, struct bmf_state *st,
                               struct bmf_problems *p);

#endif /* DIRTYBITMAP_SHADOW_H */
