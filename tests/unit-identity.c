/* SPDX-License-Identifier: BSD-3-Clause */
/* unit-identity.c: the verdict on a disk written without the filter
 * (lib/identity.c), against a naive model of file systems and of what
 * happens to the disk.
 *
 * Hand-picked cases first: the granule inferred from a time, the bound
 * after a crash, and a table of verdicts, a row per rule of identity.h.
 * Then histories from a fixed seed, on file systems whose kernel
 * stamps a write with a clock that lags by up to BM_STAMP_LAG, cut to
 * a granule of 1 ns, 1 us, 10 ms, 1 s or 2 s:
 *
 *   identity: the disk is written at L; a recorder reads the clock
 *     from some time after L on, until bm_stamp_passed lets it take
 *     the disk's time (which must be within 2 s of L), and records
 *     it; then another program may write the disk at or after that
 *     instant, with or without changing its size.  The verdict must
 *     find every such write, and nothing when there was none.
 *   crash: a server alive until A wrote last at L < A; another program
 *     may write at or after A.  No such write may be trusted, and a
 *     server that had not written in the last 2 s (and the lag) before
 *     A raises nothing.
 *   unseen: the tool records the time of its change, R, once the
 *     coarse clock has reached it; another program may write after
 *     that, or only before R.  No write after may be trusted, and on a
 *     file system of nanoseconds none before raises anything.
 *
 * Each failed check prints what was expected and what came; the exit
 * status is 1 if any failed.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdarg.h>
#include <string.h>
#include <inttypes.h>

#include "identity.h"
#include "mtime.h"
#include "msg.h"

#define NS INT64_C (1000000000)
#define MS INT64_C (1000000)
/* A time in 2026, whole seconds, even: a granule of 2 s. */
#define T0 INT64_C (1796533680000000000)

static unsigned long checks, failures;
static char context[160];

#define FAIL(fmt, ...)                                                  \
  do {                                                                  \
    if (failures++ < 30)                                                \
      printf ("FAIL: %s: " fmt "\n", context, __VA_ARGS__);             \
  } while (0)

#define CHECK_EQ(what, want, got)                                       \
  do {                                                                  \
    int64_t want_ = (want), got_ = (got);                               \
    checks++;                                                           \
    if (want_ != got_)                                                  \
      FAIL ("%s: expected %" PRIi64 ", got %" PRIi64, what, want_, got_); \
  } while (0)

/* lib/ speaks through these (msg.h); nothing here needs them. */
void
bm_error (const char *fs, ...)
{
}

void
bm_debug (const char *fs, ...)
{
}

static const char *const verdicts[] = {
  [BMF_DISK_SAME] = "same", [BMF_DISK_WRITTEN] = "written",
  [BMF_DISK_UNKNOWN] = "unknown", [BMF_DISK_UNCHECKED] = "unchecked",
};

static enum bmf_disk_verdict
verdict (const struct bmf_disk_facts *x, struct bmerr *why)
{
  why->msg[0] = '\0';
  return bmf_disk_verdict (x, "/d/disk.img", "/d/disk.img.bitmaps", why);
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

/* The model of a file system: a write at t (by the clock) is stamped
 * with the clock as the kernel reads it, lag behind, cut to granule.
 */
static int64_t
stamp (int64_t t, int64_t lag, int64_t granule)
{
  t -= lag;
  return t - t % granule;
}

static const int64_t granules[] = { 1, 1000, 10 * MS, NS, 2 * NS };
#define NR_GRANULES (sizeof granules / sizeof granules[0])

/*----------------------------------------------------------------------
 * Hand-picked cases.
 */

static void
test_granule (void)
{
  static const struct { int64_t t, g; } cases[] = {
    { T0, 2 * NS },                     /* whole second: vfat's 2 s */
    { T0 + NS, 2 * NS },                /* an odd one counts as 2 s too */
    { T0 + 123456789, 1 },              /* nanoseconds */
    { T0 + 123456780, 10 },
    { T0 + 123456000, 1000 },           /* microseconds (some NFS) */
    { T0 + 120000000, 10 * MS },        /* exFAT's 10 ms */
    { T0 + 500000000, 100 * MS },       /* the largest below a second */
    { 0, 2 * NS },
    { -1, 1 },                          /* before 1970 */
    { -NS, 2 * NS },
  };
  size_t i;

  snprintf (context, sizeof context, "granule");
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char what[64];

    snprintf (what, sizeof what, "bm_stamp_granule (%" PRIi64 ")",
              cases[i].t);
    CHECK_EQ (what, cases[i].g, bm_stamp_granule (cases[i].t));
  }
  /* The wait for a time of whole seconds ends 2 s after it, for one of
   * nanoseconds once the clock has moved.
   */
  CHECK_EQ ("passed, 2 s - 1 ns", false,
            bm_stamp_passed (T0 + 2 * NS - 1, T0));
  CHECK_EQ ("passed, 2 s", true, bm_stamp_passed (T0 + 2 * NS, T0));
  CHECK_EQ ("passed, same ns", false,
            bm_stamp_passed (T0 + 123456789, T0 + 123456789));
  CHECK_EQ ("passed, next ns", true,
            bm_stamp_passed (T0 + 123456790, T0 + 123456789));
}

static void
test_crash_bound (void)
{
  /* Instants, less the lag of the clock that stamps writes. */
  const int64_t lag = BM_STAMP_LAG;

  snprintf (context, sizeof context, "crash bound");
  CHECK_EQ ("nothing", 0, bmf_crash_bound (0, 0, 0));
  CHECK_EQ ("first write only", T0 - lag, bmf_crash_bound (T0, 0, 0));
  CHECK_EQ ("liveness later", T0 + NS - lag,
            bmf_crash_bound (T0, T0 + NS, 0));
  CHECK_EQ ("liveness older", T0 - lag, bmf_crash_bound (T0, T0 - NS, 0));
  CHECK_EQ ("boot, a second before", T0 + 9 * NS - lag,
            bmf_crash_bound (T0, T0 + NS, T0 + 10 * NS));
  CHECK_EQ ("boot before the lease", T0 + NS - lag,
            bmf_crash_bound (T0, T0 + NS, T0 + NS));
  CHECK_EQ ("boot alone", T0 - NS - lag, bmf_crash_bound (0, 0, T0));
}

/* A row: the facts, the verdict, and a part of what it says. */
struct row {
  const char *name;
  struct bmf_disk_facts x;
  enum bmf_disk_verdict want;
  const char *says;
};

#define ID(sz, t) { .dev = 1, .ino = 2, .size = (sz), .mtime_ns = (t) }
#define MOVED(sz, t) { .dev = 7, .ino = 9, .size = (sz), .mtime_ns = (t) }

static const struct row rows[] = {
  { "nothing relies",
    { .relies = false, .seen_disk = true, .has_disk_id = true,
      .disk_id = ID (8, T0), .now = ID (9, T0 + NS) },
    BMF_DISK_SAME, "" },
  { "no disk",
    { .relies = true, .seen_disk = false, .has_disk_id = true,
      .disk_id = ID (8, T0) },
    BMF_DISK_UNCHECKED, "" },
  { "identity, unchanged",
    { .relies = true, .seen_disk = true, .has_disk_id = true,
      .disk_id = ID (8, T0 + 5), .now = ID (8, T0 + 5) },
    BMF_DISK_SAME, "" },
  { "identity, moved with its file (cp -p)",
    { .relies = true, .seen_disk = true, .has_disk_id = true,
      .disk_id = ID (8, T0 + 5), .now = MOVED (8, T0 + 5) },
    BMF_DISK_SAME, "" },
  { "identity, size changed",
    { .relies = true, .seen_disk = true, .has_disk_id = true,
      .disk_id = ID (8, T0), .now = ID (9, T0) },
    BMF_DISK_WRITTEN, "(its size or modification time changed)" },
  { "identity, time changed",
    { .relies = true, .seen_disk = true, .has_disk_id = true,
      .disk_id = ID (8, T0), .now = ID (8, T0 + 1) },
    BMF_DISK_WRITTEN, "(its size or modification time changed)" },
  { "identity, time set back",
    { .relies = true, .seen_disk = true, .has_disk_id = true,
      .disk_id = ID (8, T0), .now = ID (8, T0 - NS) },
    BMF_DISK_WRITTEN, "(its size or modification time changed)" },
  { "identity wins over a time",
    { .relies = true, .seen_disk = true, .has_disk_id = true,
      .disk_id = ID (8, T0), .has_seen = true, .seen_ns = T0 + 100 * NS,
      .now = ID (8, T0 + 7) },
    BMF_DISK_WRITTEN, "(its size or modification time changed)" },
  { "seen, modified long before",
    { .relies = true, .seen_disk = true, .has_seen = true,
      .seen_ns = T0 + 10 * NS, .now = ID (8, T0 + 123456789) },
    BMF_DISK_SAME, "" },
  { "seen, size changed long before",
    { .relies = true, .seen_disk = true, .has_seen = true,
      .seen_ns = T0 + 10 * NS, .has_disk_id = false,
      .disk_id = ID (3, T0), .now = ID (8, T0 + 123456789) },
    BMF_DISK_SAME, "" },
  { "seen, modified at it",
    { .relies = true, .seen_disk = true, .has_seen = true,
      .seen_ns = T0 + 123456789, .now = ID (8, T0 + 123456789) },
    BMF_DISK_WRITTEN, "UTC, after 2026-" },
  { "seen, modified just before it",
    { .relies = true, .seen_disk = true, .has_seen = true,
      .seen_ns = T0 + 123456789, .now = ID (8, T0 + 123456788) },
    BMF_DISK_SAME, "" },
  { "seen, whole milliseconds, in its millisecond",
    { .relies = true, .seen_disk = true, .has_seen = true,
      .seen_ns = T0 + 123456789, .now = ID (8, T0 + 123000000) },
    BMF_DISK_WRITTEN, "to 1 ms, cannot tell from a time after" },
  { "seen, whole seconds, in its second",
    { .relies = true, .seen_disk = true, .has_seen = true,
      .seen_ns = T0 + 300 * MS, .now = ID (8, T0) },
    BMF_DISK_WRITTEN, "to 2 s, cannot tell from a time after" },
  { "seen, whole seconds, two before",
    { .relies = true, .seen_disk = true, .has_seen = true,
      .seen_ns = T0 + 2 * NS + 300 * MS, .now = ID (8, T0) },
    BMF_DISK_SAME, "" },
  { "no record",
    { .relies = true, .seen_disk = true, .now = ID (8, T0) },
    BMF_DISK_UNKNOWN, "has no record of the disk" },
};

static void
test_table (void)
{
  size_t i;

  for (i = 0; i < sizeof rows / sizeof rows[0]; ++i) {
    struct bmerr why;
    enum bmf_disk_verdict v;

    snprintf (context, sizeof context, "table: %s", rows[i].name);
    v = verdict (&rows[i].x, &why);
    checks++;
    if (v != rows[i].want)
      FAIL ("expected %s, got %s (%s)", verdicts[rows[i].want], verdicts[v],
            why.msg);
    else if (v != BMF_DISK_SAME && v != BMF_DISK_UNCHECKED &&
             (strstr (why.msg, rows[i].says) == NULL ||
              strstr (why.msg, "/d/disk.img") == NULL))
      FAIL ("expected a message naming /d/disk.img with \"%s\", got: %s",
            rows[i].says, why.msg);
  }
}

/*----------------------------------------------------------------------
 * Histories.
 */

/* One history of an identity: see the top of this file. */
static void
identity_history (int64_t granule, unsigned n)
{
  const int64_t lag = rnd (BM_STAMP_LAG + 1);
  const int64_t l = T0 + rnd (10 * NS);               /* the disk's write */
  const int64_t m = stamp (l, lag, granule);
  const uint64_t size = 1 + rnd (4);
  const int64_t start = l + rnd (3 * NS);
  int64_t clock = start, w;
  struct bmf_disk_facts x = { .relies = true, .seen_disk = true };
  struct bmerr why;
  enum bmf_disk_verdict v;
  bool foreign;

  snprintf (context, sizeof context, "identity: granule %" PRIi64 " ns, "
            "history %u (write at %" PRIi64 ", lag %" PRIi64 ")", granule,
            n, l, lag);
  /* The recorder waits, reading the clock as the kernel does. */
  while (!bm_stamp_passed (clock - lag, m) &&
         clock - lag - m <= BM_STAMP_WAIT_MAX)
    clock += 1 + rnd (5 * MS);
  /* It waits 2 s after the write at most. */
  checks++;
  if (!bm_stamp_passed (clock - lag, m) ||
      clock > (start > l + 2 * NS ? start : l + 2 * NS) + 5 * MS)
    FAIL ("the time %" PRIi64 " was not recorded within 2 s (the clock "
          "at %" PRIi64 ")", m, clock);
  x.has_disk_id = true;
  x.disk_id = (struct bmf_disk_id) { .size = size, .mtime_ns = m };
  x.now = x.disk_id;
  /* Then, perhaps, another program writes: at the very instant after
   * the stat, or later.
   */
  foreign = rnd (3) != 0;
  if (foreign) {
    w = clock + (rnd (4) ? (int64_t) rnd (3 * NS) : 0);
    x.now.mtime_ns = stamp (w, rnd (lag + 1), granule);
    if (rnd (4) == 0)
      x.now.size = size + 1;
  }
  v = verdict (&x, &why);
  checks++;
  if (v != (foreign ? BMF_DISK_WRITTEN : BMF_DISK_SAME))
    FAIL ("%s: expected %s, got %s (recorded %" PRIi64 ", now %" PRIi64 ")",
          foreign ? "a write after the record" : "no write",
          foreign ? "written" : "same", verdicts[v], m, x.now.mtime_ns);
}

/* One history of a crash: see the top of this file. */
static void
crash_history (int64_t granule, unsigned n)
{
  const int64_t a = T0 + rnd (10 * NS);               /* the lease's end */
  const int64_t l = a - 1 - (int64_t) rnd (4 * NS);   /* its last write */
  struct bmf_disk_facts x = {
    .relies = true, .seen_disk = true, .has_seen = true,
    .seen_ns = bmf_crash_bound (0, a, 0),
    .now = { .size = 8, .mtime_ns = stamp (l, rnd (BM_STAMP_LAG + 1),
                                           granule) },
  };
  struct bmerr why;
  enum bmf_disk_verdict v;
  bool foreign = rnd (2);

  snprintf (context, sizeof context, "crash: granule %" PRIi64 " ns, "
            "history %u (lease to %" PRIi64 ", last write at %" PRIi64 ")",
            granule, n, a, l);
  if (foreign)
    x.now.mtime_ns = stamp (a + (rnd (3) ? (int64_t) rnd (3 * NS) : 0),
                            rnd (BM_STAMP_LAG + 1), granule);
  v = verdict (&x, &why);
  checks++;
  if (foreign && v != BMF_DISK_WRITTEN)
    FAIL ("a write at or after the lease's end was trusted (now %" PRIi64
          "): %s", x.now.mtime_ns, verdicts[v]);
  else if (!foreign && l <= a - 2 * NS - BM_STAMP_LAG - granule &&
           v != BMF_DISK_SAME)
    FAIL ("a server idle before its lease's end raised: %s", why.msg);
}

/* One history of a time the tool recorded: see the top of this file. */
static void
unseen_history (int64_t granule, unsigned n)
{
  const int64_t r = T0 + rnd (10 * NS);         /* the time recorded */
  const int64_t lag = rnd (BM_STAMP_LAG + 1);  /* of the clock at r */
  struct bmf_disk_facts x = {
    .relies = true, .seen_disk = true, .has_seen = true, .seen_ns = r,
  };
  struct bmerr why;
  enum bmf_disk_verdict v;
  bool foreign = rnd (2);

  /* Before r, by the instant; after, once the clock reached r. */
  if (foreign)
    x.now.mtime_ns = stamp (r + lag + rnd (3 * NS), rnd (lag + 1), granule);
  else
    x.now.mtime_ns = stamp (r - 1 - rnd (3 * NS), rnd (BM_STAMP_LAG + 1),
                            granule);
  snprintf (context, sizeof context, "unseen: granule %" PRIi64 " ns, "
            "history %u (recorded %" PRIi64 ", modified %" PRIi64 ")",
            granule, n, r, x.now.mtime_ns);
  v = verdict (&x, &why);
  checks++;
  if (foreign && v != BMF_DISK_WRITTEN)
    FAIL ("a write after the record was trusted: %s", verdicts[v]);
  else if (!foreign && granule == 1 && v != BMF_DISK_SAME)
    FAIL ("a write before the record raised: %s", why.msg);
}

static void
test_histories (void)
{
  size_t g;
  unsigned n;

  for (g = 0; g < NR_GRANULES; ++g)
    for (n = 0; n < 2000; ++n) {
      identity_history (granules[g], n);
      crash_history (granules[g], n);
      unseen_history (granules[g], n);
    }
}

int
main (void)
{
  test_granule ();
  test_crash_bound ();
  test_table ();
  test_histories ();
  printf ("unit-identity: %lu checks, %lu failed\n", checks, failures);
  return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
