/* SPDX-License-Identifier: BSD-3-Clause */
/* unit-bits.c: the granule bits of lib/bits.c against a naive model
 * (one byte per granule).
 *
 * Hand-picked edges first: bitmaps of 1 to 262214 granules (a short
 * last word; the word edges 63/64/65 and 127/128; the summary's blocks
 * of 4096 granules and its words of 262144), single bits and ranges
 * across each edge, queries whose start or limit sits on one or lies
 * past the end, garbage past the last granule, each with and without
 * the summary.  Then random operations from a fixed seed, checked
 * after every one.  Then bits_merge in both directions between
 * granularities of 512, 4K and 64K bytes on disks whose size is a
 * multiple of none of them.  Each failed check prints what was
 * expected and what came; the exit status is 1 if any failed.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>
#include <inttypes.h>

#include "bits.h"

static unsigned long checks, failures;
static const char *context = "";

#define FAIL(fmt, ...)                                                  \
  do {                                                                  \
    if (failures++ < 30)                                                \
      printf ("FAIL: %s: " fmt "\n", context, __VA_ARGS__);             \
  } while (0)

#define CHECK_EQ(what, want, got)                                       \
  do {                                                                  \
    uint64_t want_ = (want), got_ = (got);                              \
    checks++;                                                           \
    if (want_ != got_)                                                  \
      FAIL ("%s: expected %" PRIu64 ", got %" PRIu64, what, want_, got_); \
  } while (0)

/* The bits under test and the model beside them. */
struct pair {
  struct bits b;
  uint8_t *ref;                 /* one byte per granule */
};

static void
pair_init (struct pair *p, uint64_t nr_bits, bool summary)
{
  memset (&p->b, 0, sizeof p->b);
  p->b.nr_bits = nr_bits;
  p->b.words = calloc (bits_nr_words (nr_bits) + 1, 8);
  p->ref = calloc (nr_bits + 1, 1);
  if (p->b.words == NULL || p->ref == NULL ||
      (summary && bits_build_summary (&p->b) == -1)) {
    perror ("calloc");
    exit (EXIT_FAILURE);
  }
}

static void
pair_free (struct pair *p)
{
  bits_free_summary (&p->b);
  free (p->b.words);
  free (p->ref);
}

/* The model's answers. */
static uint64_t
ref_next (const struct pair *p, uint64_t from, uint64_t limit, uint8_t v)
{
  if (limit > p->b.nr_bits)
    limit = p->b.nr_bits;
  for (; from < limit; ++from)
    if (p->ref[from] == v)
      return from;
  return limit;
}

static bool
ref_all_set (const struct pair *p, uint64_t first, uint64_t last)
{
  for (; first <= last; ++first)
    if (!p->ref[first])
      return false;
  return true;
}

static uint64_t
ref_count (const struct pair *p)
{
  uint64_t i, n = 0;

  for (i = 0; i < p->b.nr_bits; ++i)
    n += p->ref[i];
  return n;
}

/* Operations on both. */
static void
set_range (struct pair *p, uint64_t first, uint64_t last)
{
  bool want = !ref_all_set (p, first, last);
  char what[96];

  memset (p->ref + first, 1, last - first + 1);
  snprintf (what, sizeof what, "bits_set_range (%" PRIu64 ", %" PRIu64
            ") changed", first, last);
  CHECK_EQ (what, want, bits_set_range (&p->b, first, last));
}

static void
check_next (const struct pair *p, uint64_t from, uint64_t limit)
{
  char what[96];

  snprintf (what, sizeof what, "bits_next_set (%" PRIu64 ", %" PRIu64 ")",
            from, limit);
  CHECK_EQ (what, ref_next (p, from, limit, 1),
            bits_next_set (&p->b, from, limit));
  snprintf (what, sizeof what, "bits_next_clear (%" PRIu64 ", %" PRIu64 ")",
            from, limit);
  CHECK_EQ (what, ref_next (p, from, limit, 0),
            bits_next_clear (&p->b, from, limit));
}

static void
check_all_set (const struct pair *p, uint64_t first, uint64_t last)
{
  char what[96];

  snprintf (what, sizeof what, "bits_all_set (%" PRIu64 ", %" PRIu64 ")",
            first, last);
  CHECK_EQ (what, ref_all_set (p, first, last),
            bits_all_set (&p->b, first, last));
}

/* The granules where something can go wrong: word and summary edges,
 * the start and the end.
 */
static size_t
edges (uint64_t nr, uint64_t *e)
{
  static const uint64_t fixed[] = {
    0, 1, 62, 63, 64, 65, 126, 127, 128, 129, 191, 192,
    4031, 4032, 4095, 4096, 4097, 8191, 8192, 8193,
    262143, 262144, 262145,
  };
  size_t i, n = 0;

  for (i = 0; i < sizeof fixed / sizeof fixed[0]; ++i)
    if (fixed[i] < nr)
      e[n++] = fixed[i];
  for (i = nr >= 2 ? nr - 2 : 0; i < nr; ++i) {
    size_t k = n;
    /* Keep e sorted and without repeats. */
    while (k > 0 && e[k - 1] > i)
      k--;
    if (k > 0 && e[k - 1] == i)
      continue;
    memmove (e + k + 1, e + k, (n - k) * sizeof *e);
    e[k] = i;
    n++;
  }
  return n;
}

/* Everything that can be asked of a bitmap, against the model:
 * every granule (or the edges alone for big ones), the count, and the
 * scans and all_set from and to every edge.
 */
static void
check_state (const struct pair *p)
{
  uint64_t nr = p->b.nr_bits, e[32], i, j;
  size_t ne = edges (nr, e);
  char what[64];

  CHECK_EQ ("bits_count", ref_count (p), bits_count (&p->b));
  for (i = 0; i < nr; i += nr <= 20000 ? 1 : 97) {
    snprintf (what, sizeof what, "bits_test (%" PRIu64 ")", i);
    CHECK_EQ (what, p->ref[i], bits_test (&p->b, i));
  }
  for (i = 0; i < ne; ++i) {
    check_next (p, e[i], nr);
    check_next (p, e[i], nr + 100);
    check_next (p, e[i], e[i]);
    check_next (p, e[i] + 1, e[i]);
    for (j = 0; j < ne; ++j) {
      check_next (p, e[i], e[j]);
      check_next (p, e[i], e[j] + 1);
      if (e[i] <= e[j])
        check_all_set (p, e[i], e[j]);
    }
  }
  check_next (p, nr, nr);
  check_next (p, nr + 5, nr + 10);
}

static const uint64_t sizes[] = {
  1, 2, 63, 64, 65, 127, 128, 129, 200, 4095, 4096, 4097, 8193, 12345,
  262144, 262214,
};
#define NR_SIZES (sizeof sizes / sizeof sizes[0])

static void
test_edges (void)
{
  char ctx[96];
  size_t s;
  int summary;

  for (s = 0; s < NR_SIZES; ++s)
    for (summary = 0; summary <= 1; ++summary) {
      uint64_t nr = sizes[s], e[32];
      size_t ne = edges (nr, e), i;
      struct pair p;

      snprintf (ctx, sizeof ctx, "%" PRIu64 " granules%s", nr,
                summary ? ", summary" : "");
      context = ctx;

      /* Empty. */
      pair_init (&p, nr, summary);
      check_state (&p);
      /* One bit at each edge, alone. */
      for (i = 0; i < ne; ++i) {
        pair_free (&p);
        pair_init (&p, nr, summary);
        set_range (&p, e[i], e[i]);
        check_state (&p);
        set_range (&p, e[i], e[i]);     /* again: no change */
      }
      /* Ranges from each edge to each later one, accumulating. */
      pair_free (&p);
      pair_init (&p, nr, summary);
      for (i = 0; i + 1 < ne; i += 2) {
        set_range (&p, e[i], e[i + 1]);
        check_state (&p);
      }
      /* Everything. */
      set_range (&p, 0, nr - 1);
      check_state (&p);
      pair_free (&p);

      /* A range across a summary block, then one across a word, in a
       * bitmap otherwise clean.
       */
      if (nr > 8200) {
        pair_init (&p, nr, summary);
        set_range (&p, 4090, 4100);
        set_range (&p, 8191, 8192);
        set_range (&p, nr - 70, nr - 60);
        check_state (&p);
        pair_free (&p);
      }
    }
}

/* Bits past the last granule (the loader ignores them, as should every
 * scan and the count); and bits written to the words directly, then
 * a summary built from them.
 */
static void
test_garbage_and_rebuild (void)
{
  static const uint64_t nrs[] = { 1, 65, 127, 4097, 262214 };
  size_t k;

  for (k = 0; k < sizeof nrs / sizeof nrs[0]; ++k) {
    uint64_t nr = nrs[k], lw = bits_nr_words (nr) - 1;
    char ctx[96];
    struct pair p;

    snprintf (ctx, sizeof ctx, "%" PRIu64 " granules, bits past the end", nr);
    context = ctx;
    pair_init (&p, nr, false);
    if (nr & 63)
      p.b.words[lw] = ~UINT64_C (0) << (nr & 63);
    check_state (&p);
    bits_build_summary (&p.b);
    check_state (&p);
    pair_free (&p);

    snprintf (ctx, sizeof ctx, "%" PRIu64 " granules, summary rebuilt", nr);
    pair_init (&p, nr, false);
    p.b.words[lw] |= UINT64_C (1) << ((nr - 1) & 63);
    p.ref[nr - 1] = 1;
    if (nr > 4097) {
      p.b.words[4096 / 64] |= 1;
      p.ref[4096] = 1;
    }
    bits_build_summary (&p.b);
    check_state (&p);
    pair_free (&p);
  }
}

/* xorshift64*: the same sequence everywhere. */
static uint64_t rng = 0x9E3779B97F4A7C15;

static uint64_t
rnd (uint64_t n)
{
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return n ? (rng * UINT64_C (2685821657736338717)) % n : 0;
}

static void
test_random (void)
{
  char ctx[96];
  size_t s;
  int summary;

  for (s = 0; s < NR_SIZES; ++s)
    for (summary = 0; summary <= 1; ++summary) {
      uint64_t nr = sizes[s];
      struct pair p;
      unsigned op;

      snprintf (ctx, sizeof ctx, "%" PRIu64 " granules%s, random", nr,
                summary ? ", summary" : "");
      context = ctx;
      pair_init (&p, nr, summary);
      for (op = 0; op < 150; ++op) {
        uint64_t first = rnd (nr), len, from, limit;

        /* Mostly short ranges, so that the bitmap stays mixed. */
        switch (rnd (4)) {
        case 0: len = 1; break;
        case 1: len = 1 + rnd (70); break;
        case 2: len = 1 + rnd (300); break;
        default: len = 1 + rnd (nr / 8 + 1); break;
        }
        if (len > nr - first)
          len = nr - first;
        set_range (&p, first, first + len - 1);

        from = rnd (nr + 2);
        limit = rnd (4) ? from + rnd (nr + 2) : rnd (nr + 70);
        check_next (&p, from, limit);
        first = rnd (nr);
        check_all_set (&p, first, first + rnd (nr - first));
        CHECK_EQ ("bits_count", ref_count (&p), bits_count (&p.b));
        if (op % 25 == 24 && nr <= 20000)
          check_state (&p);
      }
      check_state (&p);
      pair_free (&p);
    }
}

/* The model of bits_merge: every dirty source granule dirties each
 * destination granule it overlaps, within the disk.
 */
static void
ref_merge (struct pair *dst, unsigned dg, const struct pair *src,
           unsigned sg, uint64_t disk_size)
{
  uint64_t j, k;

  for (j = 0; j < src->b.nr_bits; ++j) {
    uint64_t start = j << sg, end = (j + 1) << sg;

    if (!src->ref[j])
      continue;
    if (end > disk_size)
      end = disk_size;
    for (k = start >> dg; start < end && k <= (end - 1) >> dg; ++k)
      if (k < dst->b.nr_bits)
        dst->ref[k] = 1;
  }
}

static void
random_fill (struct pair *p, unsigned runs)
{
  unsigned i;

  for (i = 0; i < runs && p->b.nr_bits; ++i) {
    uint64_t first = rnd (p->b.nr_bits);
    uint64_t len = 1 + rnd (rnd (3) ? 3 : 40);
    if (len > p->b.nr_bits - first)
      len = p->b.nr_bits - first;
    set_range (p, first, first + len - 1);
  }
}

static void
test_merge (void)
{
  static const unsigned gbits[] = { 9, 12, 16 };
  /* Multiples of none of the granularities, and 0. */
  static const uint64_t disks[] = {
    0, 100, 5 * 65536 + 3 * 4096 + 100, 1000000, 4097 * 512 + 1,
    64 * 65536 - 1, 64 * 65536 + 1, 300 * 65536 + 511,
  };
  char ctx[128];
  size_t a, b, d;
  int sums;

  for (d = 0; d < sizeof disks / sizeof disks[0]; ++d)
    for (a = 0; a < 3; ++a)
      for (b = 0; b < 3; ++b)
        for (sums = 0; sums < 4; ++sums) {
          uint64_t disk = disks[d];
          unsigned sg = gbits[a], dg = gbits[b];
          uint64_t snr = (disk + (UINT64_C (1) << sg) - 1) >> sg;
          uint64_t dnr = (disk + (UINT64_C (1) << dg) - 1) >> dg;
          struct pair src, dst;
          int round;

          snprintf (ctx, sizeof ctx, "merge of 2^%u into 2^%u, disk %"
                    PRIu64 "%s%s", sg, dg, disk,
                    sums & 1 ? ", source summary" : "",
                    sums & 2 ? ", destination summary" : "");
          context = ctx;
          pair_init (&src, snr, sums & 1);
          pair_init (&dst, dnr, sums & 2);
          /* The first and the last granule of the source, always. */
          if (snr) {
            set_range (&src, 0, 0);
            set_range (&src, snr - 1, snr - 1);
          }
          for (round = 0; round < 3; ++round) {
            random_fill (&src, 12);
            random_fill (&dst, 3);    /* dst keeps its own bits: OR */
            ref_merge (&dst, dg, &src, sg, disk);
            bits_merge (&dst.b, dg, &src.b, sg, disk);
            check_state (&dst);
            check_state (&src);       /* the source is only read */
          }
          pair_free (&src);
          pair_free (&dst);
        }
}

int
main (void)
{
  test_edges ();
  test_garbage_and_rebuild ();
  test_random ();
  test_merge ();
  printf ("unit-bits: %lu checks, %lu failed\n", checks, failures);
  return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
