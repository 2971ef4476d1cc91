/* SPDX-License-Identifier: BSD-3-Clause */
/* bits.h: granule bits.  A bitmap is an array of little-endian 64 bit
 * words (bit i of the bitmap is bit i%64 of word i/64), usually mapped
 * from the bitmap file, plus an optional in-memory summary with one
 * bit per 64 words (set when any of those words may be non-zero) so
 * that scans skip clean areas 4096 granules at a time.
 *
 * Readers (the hot-path test, scans) use atomic loads and never lock.
 * Writers (bits_set_range) must be serialized by the caller.
 */

#ifndef DIRTYBITMAP_BITS_H
#define DIRTYBITMAP_BITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bits {
  uint64_t *words;              /* nr_words words, mapped or malloced */
  uint64_t nr_bits;             /* granules covered */
  uint64_t *summary;            /* NULL, or one bit per 64 words */
  void *map_base;               /* the mapping holding words, if mapped */
  size_t map_length;
};

/* Words and bytes needed for nr_bits. */
static inline uint64_t
bits_nr_words (uint64_t nr_bits)
{
  return (nr_bits + 63) / 64;
}

/* Words per summary bit. */
#define BITS_SUMMARY_WORDS 64

/* Whether words [BITS_SUMMARY_WORDS k, BITS_SUMMARY_WORDS (k + 1)) may
 * hold a set bit: summary bit k, or true without a summary.
 */
static inline bool
bits_block_may_be_set (const struct bits *b, uint64_t k)
{
  return b->summary == NULL ||
    (__atomic_load_n (&b->summary[k / 64], __ATOMIC_ACQUIRE) >> (k & 63)) & 1;
}

/* Build (or rebuild) the summary by scanning every word. */
extern int bits_build_summary (struct bits *b);
extern void bits_free_summary (struct bits *b);

/* True if every bit in [first, last] is set.  Lock-free. */
static inline bool
bits_all_set (const struct bits *b, uint64_t first, uint64_t last)
{
  uint64_t w, lw = last / 64;

  for (w = first / 64; w <= lw; ++w) {
    uint64_t mask = ~UINT64_C (0);
    if (w == first / 64)
      mask &= ~UINT64_C (0) << (first & 63);
    if (w == lw)
      mask &= ~UINT64_C (0) >> (63 - (last & 63));
    if ((__atomic_load_n (&b->words[w], __ATOMIC_ACQUIRE) & mask) != mask)
      return false;
  }
  return true;
}

static inline bool
bits_test (const struct bits *b, uint64_t i)
{
  return (__atomic_load_n (&b->words[i / 64], __ATOMIC_ACQUIRE)
          >> (i & 63)) & 1;
}

/* Set bits [first, last]; returns true if any was clear before.  The
 * caller serializes writers.  Also sets the summary bits.
 */
extern bool bits_set_range (struct bits *b, uint64_t first, uint64_t last);

/* Touch, for writing, each page of words that holds a bit of [first,
 * last], changing nothing: the page faults (a page not yet in memory,
 * or write-protected while being written back) are taken here, so
 * that the caller does not take them later while holding a lock.
 * Safe without the writers' lock.
 */
static inline void
bits_prefault (struct bits *b, uint64_t first, uint64_t last)
{
  uint64_t w, end = last / 64;

  for (w = first / 64; w < end; w += 4096 / sizeof *b->words)
    __atomic_fetch_or (&b->words[w], 0, __ATOMIC_RELAXED);
  __atomic_fetch_or (&b->words[end], 0, __ATOMIC_RELAXED);
}

/* The first set (clear) bit in [from, limit), or limit if none. */
extern uint64_t bits_next_set (const struct bits *b,
                               uint64_t from, uint64_t limit);
extern uint64_t bits_next_clear (const struct bits *b,
                                 uint64_t from, uint64_t limit);

/* The run of equal granules that starts at from (< limit): returns
 * where it ends (at most limit) and whether it is dirty.  Every walk
 * over the runs of a bitmap (extents, map, info, merge) is this.
 */
static inline uint64_t
bits_run (const struct bits *b, uint64_t from, uint64_t limit, bool *dirty)
{
  *dirty = bits_test (b, from);
  return *dirty ? bits_next_clear (b, from, limit)
    : bits_next_set (b, from, limit);
}

/* Call fn for each maximal run of clean or dirty bytes of a disk of
 * disk_size bytes with granules of 2^gbits bytes, in order.
 */
extern void bits_for_each_run (const struct bits *b, unsigned gbits,
                               uint64_t disk_size,
                               void (*fn) (uint64_t offset, uint64_t length,
                                           bool dirty, void *opaque),
                               void *opaque);

/* Number of set bits among the first nr_bits. */
extern uint64_t bits_count (const struct bits *b);

/* dst |= src, where both describe a disk of disk_size bytes with
 * granules of 2^dst_gbits and 2^src_gbits bytes: every dirty source
 * granule dirties each destination granule it overlaps.
 */
extern void bits_merge (struct bits *dst, unsigned dst_gbits,
                        const struct bits *src, unsigned src_gbits,
                        uint64_t disk_size);

#endif /* DIRTYBITMAP_BITS_H */
