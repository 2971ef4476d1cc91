/* SPDX-License-Identifier: BSD-3-Clause */
/* coarse.h: the write path of durability=coarse: per set, the coarse
 * views that say which coarse granules are durably set in the shadow
 * of every recording bitmap.
 */

#ifndef DIRTYBITMAP_COARSE_H
#define DIRTYBITMAP_COARSE_H

#include <stdbool.h>
#include <stdint.h>

#include "tracker.h"

/* Build the coarse views of s from its members' shadows as they are
 * now: the caller makes them durable before publishing s.
 */
extern int coarse_build_views (struct bitmap_set *s);
extern void coarse_free_views (struct bitmap_set *s);

/* The coarse granules of 2^sgbits bytes that the request touches,
 * clipped to b.
 */
static inline bool
coarse_range (const struct bits *b, unsigned sgbits, uint64_t offset,
              uint32_t count, uint64_t *first, uint64_t *last)
{
  *first = offset >> sgbits;
  *last = (offset + count - 1) >> sgbits;
  if (*first >= b->nr_bits)
    return false;
  *last = *last < b->nr_bits - 1 ? *last : b->nr_bits - 1;
  return true;
}

/* Whether the coarse granules of [offset, offset+count) are durably
 * set in every recording bitmap's shadow (lock-free; inline: it is on
 * the fast path of every write).
 */
static inline bool
coarse_all_durable (const struct bitmap_set *s, uint64_t offset,
                    uint32_t count)
{
  uint64_t first, last;
  size_t i;

  if (!s->fast || !s->coarse_fast)
    return false;
  for (i = 0; i < s->nr_cviews; ++i) {
    const struct fast_view *v = &s->cviews[i];
    if (coarse_range (&v->bits, v->gbits, offset, count, &first, &last) &&
        !bits_all_set (&v->bits, first, last))
      return false;
  }
  return true;
}

/* They are now durable: set them in the views (bits lock held). */
extern void coarse_set_views_locked (struct bitmap_set *s,
                                     uint64_t offset, uint32_t count);

/* Set the shadow bits of lb for [offset, offset+count) (bits lock
 * held).
 */
extern void coarse_set_shadow_locked (struct live_bitmap *lb,
                                      uint64_t offset, uint32_t count);

#endif /* DIRTYBITMAP_COARSE_H */
