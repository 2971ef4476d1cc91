/* SPDX-License-Identifier: BSD-3-Clause */
/* mtime.h: modification times that a later write cannot repeat.
 *
 * A file system stamps a write with the (coarse) clock of that
 * instant, truncated to its timestamp granularity: a nanosecond on
 * most, a second on ext4 with 128-byte inodes and ext3, two seconds
 * on vfat, whatever the server says on NFS.  So two writes within one
 * granule can leave the same modification time, and a record of a
 * file's time only tells later writes apart once the clock has passed
 * the time plus the granule.  The granule is inferred from the time
 * itself: the largest power of ten (in ns) up to a second that divides
 * it, and a whole second is taken as two (vfat).  A time that happens
 * to end in zeroes on a fine file system costs a longer wait, never a
 * missed write.
 */

#ifndef DIRTYBITMAP_MTIME_H
#define DIRTYBITMAP_MTIME_H

#include <stdint.h>
#include <sys/stat.h>

/* The longest wait for a time to settle (nanoseconds). */
#define BM_SETTLE_MAX_NS INT64_C (3000000000)

/* The granule of a modification time (nanoseconds since the epoch). */
extern int64_t bm_mtime_granule (int64_t mtime_ns);

/* sb's modification time in nanoseconds. */
extern int64_t bm_mtime_ns (const struct stat *sb);

/* stat path once its time is settled: wait until the clock has passed
 * its modification time plus the granule, then stat it again (and
 * again while it changes).  0 with *sb; 1 when it did not settle
 * within BM_SETTLE_MAX_NS (a file being written all the while, or a
 * time ahead of the clock), with *sb the last stat, which a later
 * write may then repeat; -1 with errno when stat fails.
 */
extern int bm_stat_settled (const char *path, struct stat *sb);

#endif /* DIRTYBITMAP_MTIME_H */
