/* SPDX-License-Identifier: BSD-3-Clause */
/* coarse.c: the coarse views of durability=coarse (see coarse.h and
 * nbdkit-dirtybitmap-filter(1), DURABILITY).
 *
 * Order.  A write goes down only when the shadow bit of each coarse
 * granule it touches, in every recording bitmap, is on stable
 * storage: (1) under the bits lock, take a ticket and set the bits
 * and the shadow bits in the shared mapping; (2) unless the coarse
 * views already hold those coarse granules, wait for the group commit
 * covering the ticket (durability.c); (3) set them in the views; (4)
 * pass the write down.  The bits themselves are left to the page
 * cache, as in flush mode: after a power loss they are rebuilt from
 * the shadows (lib/recover.c).
 *
 * The views.  For the recording bitmaps of one shadow granularity, a
 * view's bit is set only if that coarse granule is set, durably, in
 * every one of their shadows: a copy, made when the set is built
 * (from shadows that the caller then syncs), which only gains bits.
 * The fast path of a write to a granule already dirty is then the
 * fine test of tracker.c plus one atomic load per view (usually one):
 * no lock, no system call.  A set without views (transitional, see
 * tracker.c) makes every write wait for a sync: it lives for one
 * commit.
 *
 * A recording bitmap without a shadow (which a coarse run never
 * makes) leaves the set without its coarse fast path: every write
 * then waits for a sync, which is slow but never wrong.
 */

#include <config.h>

#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "coarse.h"
#include "util.h"

void
coarse_free_views (struct bitmap_set *s)
{
  size_t i;

  for (i = 0; i < s->nr_cviews; ++i)
    free (s->cviews[i].bits.words);
  free (s->cviews);
  s->cviews = NULL;
  s->nr_cviews = 0;
}

int
coarse_build_views (struct bitmap_set *s)
{
  size_t i, j;

  s->coarse_fast = true;
  s->cviews = calloc (MAX (s->nr_recording, 1), sizeof *s->cviews);
  if (s->cviews == NULL)
    return -1;
  for (i = 0; i < s->nr_recording; ++i) {
    const struct live_bitmap *lb = s->recording[i];
    struct fast_view *v;
    uint64_t w, n = bits_nr_words (lb->shadow.nr_bits);

    if (lb->shadow.words == NULL && lb->bits.nr_bits > 0) {
      s->coarse_fast = false;
      continue;
    }
    for (j = 0; j < s->nr_cviews; ++j)
      if (s->cviews[j].gbits == lb->sgbits &&
          s->cviews[j].bits.nr_bits == lb->shadow.nr_bits)
        break;
    v = &s->cviews[j];
    if (j == s->nr_cviews) {
      s->nr_cviews++;
      v->gbits = lb->sgbits;
      v->bits.nr_bits = lb->shadow.nr_bits;
      v->owned = true;
      v->bits.words = malloc (MAX (n, 1) * sizeof *v->bits.words);
      if (v->bits.words == NULL)
        return -1;
      if (n)
        memcpy (v->bits.words, lb->shadow.words, n * sizeof *v->bits.words);
      continue;
    }
    for (w = 0; w < n; ++w)
      v->bits.words[w] &= lb->shadow.words[w];
  }
  return 0;
}

void
coarse_set_views_locked (struct bitmap_set *s, uint64_t offset,
                         uint32_t count)
{
  uint64_t first, last;
  size_t i;

  for (i = 0; s->fast && i < s->nr_cviews; ++i) {
    struct fast_view *v = &s->cviews[i];
    if (coarse_range (&v->bits, v->gbits, offset, count, &first, &last))
      bits_set_range (&v->bits, first, last);
  }
}

void
coarse_set_shadow_locked (struct live_bitmap *lb, uint64_t offset,
                          uint32_t count)
{
  uint64_t first, last;

  if (lb->shadow.words &&
      coarse_range (&lb->shadow, lb->sgbits, offset, count, &first, &last))
    bits_set_range (&lb->shadow, first, last);
}
