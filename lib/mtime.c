/* SPDX-License-Identifier: BSD-3-Clause */
/* mtime.c: modification times that a later write cannot repeat (see
 * mtime.h).
 */

#include <config.h>

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <sys/stat.h>

#include "mtime.h"
#include "util.h"

#define NS INT64_C (1000000000)
#define MS INT64_C (1000000)

static int64_t
now_ns (clockid_t clock)
{
  struct timespec ts;

  clock_gettime (clock, &ts);
  return ts.tv_sec * NS + ts.tv_nsec;
}

int64_t
bm_stamp_granule (int64_t mtime_ns)
{
  int64_t g = 1;

  if (mtime_ns % NS == 0)
    return 2 * NS;
  while (g < NS / 10 && mtime_ns % (g * 10) == 0)
    g *= 10;
  return g;
}

bool
bm_stamp_passed (int64_t clock_ns, int64_t mtime_ns)
{
  return clock_ns >= mtime_ns + bm_stamp_granule (mtime_ns);
}

int64_t
bm_mtime_ns (const struct stat *sb)
{
  return sb->st_mtim.tv_sec * NS + sb->st_mtim.tv_nsec;
}

int
bm_stat_stable (const char *path, struct stat *sb)
{
  const int64_t start = now_ns (CLOCK_MONOTONIC);
  int64_t before, ready;
  int i;

  for (i = 0; i <= BM_STAMP_WAIT_MAX / MS; ++i) {
    before = now_ns (CLOCK_REALTIME_COARSE);
    if (stat (path, sb) == -1)
      return -1;
    if (bm_stamp_passed (before, bm_mtime_ns (sb)))
      return 0;
    ready = bm_mtime_ns (sb) + bm_stamp_granule (bm_mtime_ns (sb));
    if (ready - before > BM_STAMP_WAIT_MAX ||
        now_ns (CLOCK_MONOTONIC) - start > BM_STAMP_WAIT_MAX)
      break;
    nanosleep (&(struct timespec) {
        .tv_nsec = MAX (MS, MIN (ready - before, 100 * MS)) }, NULL);
  }
  return 1;
}
