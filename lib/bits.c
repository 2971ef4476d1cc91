/* SPDX-License-Identifier: BSD-3-Clause */
/* bits.c: scanning, setting and merging granule bits (see bits.h).
 *
 * The summary has one bit per 64 data words (4096 granules), so one
 * summary word stands for 262144 granules: a scan for the next dirty
 * granule over a clean 16 TiB disk at 64K granularity reads 1024
 * summary words instead of 4 million data words.
 */

#include <config.h>

#include <stdlib.h>
#include <stdint.h>
#include <errno.h>

#include "bits.h"
#include "util.h"

#define WORDS_PER_SUMMARY_BIT BITS_SUMMARY_WORDS
#define BITS_PER_SUMMARY_BIT (64 * WORDS_PER_SUMMARY_BIT)

static uint64_t
summary_words (uint64_t nr_bits)
{
  return DIV_ROUND_UP (bits_nr_words (nr_bits),
                       (uint64_t) 64 * WORDS_PER_SUMMARY_BIT);
}

static inline void
summary_mark (struct bits *b, uint64_t w)
{
  uint64_t sbit = w / WORDS_PER_SUMMARY_BIT;
  uint64_t *sw = &b->summary[sbit / 64];
  uint64_t mask = UINT64_C (1) << (sbit & 63);

  if ((__atomic_load_n (sw, __ATOMIC_RELAXED) & mask) == 0)
    __atomic_fetch_or (sw, mask, __ATOMIC_RELEASE);
}

int
bits_build_summary (struct bits *b)
{
  uint64_t w, n = bits_nr_words (b->nr_bits);

  free (b->summary);
  b->summary = calloc (MAX (summary_words (b->nr_bits), 1),
                       sizeof (uint64_t));
  if (b->summary == NULL)
    return -1;
  for (w = 0; w < n; ++w)
    if (b->words[w])
      summary_mark (b, w);
  return 0;
}

void
bits_free_summary (struct bits *b)
{
  free (b->summary);
  b->summary = NULL;
}

bool
bits_set_range (struct bits *b, uint64_t first, uint64_t last)
{
  uint64_t w, lw = last / 64;
  bool changed = false;

  for (w = first / 64; w <= lw; ++w) {
    uint64_t mask = ~UINT64_C (0), old;
    if (w == first / 64)
      mask &= ~UINT64_C (0) << (first & 63);
    if (w == lw)
      mask &= ~UINT64_C (0) >> (63 - (last & 63));
    old = __atomic_load_n (&b->words[w], __ATOMIC_RELAXED);
    if ((old & mask) != mask) {
      /* Writers are serialized, so a plain atomic store suffices;
       * release pairs with the acquire loads of lock-free readers.
       */
      __atomic_store_n (&b->words[w], old | mask, __ATOMIC_SEQ_CST);
      if (b->summary)
        summary_mark (b, w);
      changed = true;
    }
  }
  return changed;
}

/* The first set summary bit in [s, nr), or nr. */
static inline uint64_t
summary_next (const struct bits *b, uint64_t s, uint64_t nr)
{
  while (s < nr) {
    uint64_t sw = __atomic_load_n (&b->summary[s / 64],
                                   __ATOMIC_ACQUIRE) >> (s & 63);
    if (sw)
      return MIN (s + __builtin_ctzll (sw), nr);
    s = (s / 64 + 1) * 64;
  }
  return nr;
}

/* The summary is consulted once per block of WORDS_PER_SUMMARY_BIT
 * words, not once per word: inside a block that may hold dirty bits
 * the scan is a plain loop over the words.
 */
uint64_t
bits_next_set (const struct bits *b, uint64_t from, uint64_t limit)
{
  uint64_t w, lw, mask;

  limit = MIN (limit, b->nr_bits);
  if (from >= limit)
    return limit;
  w = from / 64;
  lw = (limit - 1) / 64;
  mask = ~UINT64_C (0) << (from & 63);

  while (w <= lw) {
    uint64_t block_end = lw;

    if (b->summary) {
      const uint64_t sb = w / WORDS_PER_SUMMARY_BIT;
      const uint64_t lsb = lw / WORDS_PER_SUMMARY_BIT;
      const uint64_t s = summary_next (b, sb, lsb + 1);

      if (s > lsb)
        return limit;           /* nothing dirty before limit */
      if (s > sb) {
        w = s * WORDS_PER_SUMMARY_BIT;
        mask = ~UINT64_C (0);
      }
      block_end = MIN (lw, (s + 1) * WORDS_PER_SUMMARY_BIT - 1);
    }
    for (; w <= block_end; ++w) {
      uint64_t word = __atomic_load_n (&b->words[w], __ATOMIC_ACQUIRE) & mask;
      mask = ~UINT64_C (0);
      if (word)
        return MIN (w * 64 + __builtin_ctzll (word), limit);
    }
  }
  return limit;
}

uint64_t
bits_next_clear (const struct bits *b, uint64_t from, uint64_t limit)
{
  limit = MIN (limit, b->nr_bits);

  while (from < limit) {
    uint64_t w = from / 64, word;

    word = ~__atomic_load_n (&b->words[w], __ATOMIC_ACQUIRE);
    word &= ~UINT64_C (0) << (from & 63);
    if (word)
      return MIN (w * 64 + __builtin_ctzll (word), limit);
    from = (w + 1) * 64;
  }
  return limit;
}

uint64_t
bits_count (const struct bits *b)
{
  uint64_t w, n = bits_nr_words (b->nr_bits), count = 0;

  for (w = 0; w < n; ++w) {
    uint64_t word = __atomic_load_n (&b->words[w], __ATOMIC_ACQUIRE);
    if (w == n - 1 && (b->nr_bits & 63))
      word &= (UINT64_C (1) << (b->nr_bits & 63)) - 1;
    count += __builtin_popcountll (word);
  }
  return count;
}

void
bits_for_each_run (const struct bits *b, unsigned gbits, uint64_t disk_size,
                   void (*fn) (uint64_t, uint64_t, bool, void *),
                   void *opaque)
{
  uint64_t g = 0, e;
  bool dirty;

  for (; g < b->nr_bits; g = e) {
    uint64_t start = g << gbits, end;
    e = bits_run (b, g, b->nr_bits, &dirty);
    end = MIN (e << gbits, disk_size);
    if (start < end)
      fn (start, end - start, dirty, opaque);
  }
}

/* Each dirty run of the source is a byte range of the disk, which
 * dirties every destination granule it touches.
 */
static void
merge_run (uint64_t offset, uint64_t length, bool dirty, void *opaque)
{
  const struct { struct bits *dst; unsigned gbits; } *m = opaque;
  uint64_t first, last;

  if (!dirty || m->dst->nr_bits == 0)
    return;
  first = offset >> m->gbits;
  last = MIN ((offset + length - 1) >> m->gbits, m->dst->nr_bits - 1);
  if (first <= last)
    bits_set_range (m->dst, first, last);
}

void
bits_merge (struct bits *dst, unsigned dst_gbits,
            const struct bits *src, unsigned src_gbits,
            uint64_t disk_size)
{
  struct { struct bits *dst; unsigned gbits; } m = { dst, dst_gbits };

  bits_for_each_run (src, src_gbits, disk_size, merge_run, &m);
}
