/* SPDX-License-Identifier: BSD-3-Clause */
/* mtime.h: modification times that a later write cannot repeat.
 *
 * The kernel stamps a write with a time between the coarse clock
 * (CLOCK_REALTIME_COARSE, which lags by up to BM_STAMP_LAG) and the
 * instant, cut to the file system's granule: a nanosecond on most, a
 * whole second on ext4 with 128-byte inodes and ext3, two on vfat,
 * whatever the server says on NFS.  So two writes within one granule
 * can leave the same time, and a record of a file's time tells later
 * writes apart only when it was taken with a stat that follows a
 * reading of the coarse clock already past the granule of the time
 * the stat shows.  The granule is inferred from the time itself: the
 * largest power of ten (in ns) up to a second that divides it, and a
 * whole second is taken as two (vfat).  A time that happens to end in
 * zeroes on a fine file system costs a longer wait, never a missed
 * write.  The bitmap file's record of its disk (identity.c) and a
 * backup's record of its target (the tool's sums.c) are taken so.
 */

#ifndef DIRTYBITMAP_MTIME_H
#define DIRTYBITMAP_MTIME_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

/* The longest that taking a time waits for the clock to pass its
 * granule (nanoseconds): the coarsest granule (2 s, vfat) and a
 * margin.  A file whose time stays ahead of the clock longer (a time
 * in the future, a clock that stands still) is not recorded.
 */
#define BM_STAMP_WAIT_MAX  INT64_C (3000000000)

/* How far the clock with which the kernel stamps a write may lag the
 * instant of the write (nanoseconds): a few clock ticks.
 */
#define BM_STAMP_LAG       INT64_C (20000000)

/* The granule of a file system's times, in nanoseconds, inferred from
 * one of them.
 */
extern int64_t bm_stamp_granule (int64_t mtime_ns);

/* Whether a stat showing mtime_ns, taken after the coarse clock read
 * clock_ns, may be recorded: every later write gets another time.
 */
extern bool bm_stamp_passed (int64_t clock_ns, int64_t mtime_ns);

/* sb's modification time in nanoseconds. */
extern int64_t bm_mtime_ns (const struct stat *sb);

/* stat path into *sb once a write made after the stat must get another
 * time than the one it shows: 0; 1 if the clock did not pass the
 * granule of that time within BM_STAMP_WAIT_MAX (*sb is the last
 * stat, which a later write may repeat); -1 with errno if stat fails.
 * Bounded in time and in steps, whatever the clocks do.
 */
extern int bm_stat_stable (const char *path, struct stat *sb);

#endif /* DIRTYBITMAP_MTIME_H */
