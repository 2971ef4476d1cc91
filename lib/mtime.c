/* SPDX-License-Identifier: BSD-3-Clause */
/* mtime.c: modification times that a later write cannot repeat (see
 * mtime.h).
 */

#include <config.h>

#include <stdint.h>
#include <time.h>
#include <sys/stat.h>

#include "mtime.h"

#define NS INT64_C (1000000000)

int64_t
bm_mtime_granule (int64_t mtime_ns)
{
  int64_t g = 1;

  while (g < NS && mtime_ns % (g * 10) == 0)
    g *= 10;
  return g == NS ? 2 * NS : g;
}

int64_t
bm_mtime_ns (const struct stat *sb)
{
  return sb->st_mtim.tv_sec * NS + sb->st_mtim.tv_nsec;
}

static int64_t
coarse_now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_REALTIME_COARSE, &ts);
  return ts.tv_sec * NS + ts.tv_nsec;
}

int
bm_stat_settled (const char *path, struct stat *sb)
{
  const int64_t give_up = coarse_now () + BM_SETTLE_MAX_NS;
  int64_t t, until, now;

  if (stat (path, sb) == -1)
    return -1;
  for (;;) {
    t = bm_mtime_ns (sb);
    until = t + bm_mtime_granule (t);
    while ((now = coarse_now ()) < until) {
      if (now >= give_up || until > give_up)
        return 1;
      nanosleep (&(struct timespec) {
          .tv_sec = (until - now) / NS,
          .tv_nsec = (until - now) % NS }, NULL);
    }
    if (stat (path, sb) == -1)
      return -1;
    if (bm_mtime_ns (sb) == t)
      return 0;
  }
}
