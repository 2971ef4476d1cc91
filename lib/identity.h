/* SPDX-License-Identifier: BSD-3-Clause */
/* identity.h: writes made without the filter.  The one place that
 * keeps, and judges, what a bitmap file knows of its disk
 * (nbdkit-dirtybitmap-filter(1), WRITES MADE WITHOUT THE FILTER).
 *
 * The rule: every bitmap that is enabled and consistent holds every
 * granule of the disk that changed since it was made or last cleared.
 * Writes through the filter keep it by setting bits.  Everything else
 * is judged here, from one of two records in the file's header, kept
 * so that one of them is true at every instant:
 *
 *   - the disk's identity (size and modification time), recorded when
 *     the bitmaps hold every change of the disk as it is: at a start
 *     (the disk as judged), at a clean stop, and by the tool when it
 *     sees the disk.  The disk is unchanged while both are the same:
 *     an identity is taken only once the clock has passed the granule
 *     of the file system's times (a whole second, or two, on some),
 *     so that any later write gets another time.
 *   - a time, "seen": every write made to the disk before it is in the
 *     bitmaps.  A server that writes records the time until which it
 *     is surely alive (its first write commits one, then a liveness
 *     record outside the header pushes it on, without a commit), so a
 *     disk modified after that time was written by something else,
 *     after the server stopped.  After a reboot, the boot time bounds
 *     it too: the server died before.  The tool records the time of
 *     its change when it cannot see the disk and no bitmap relied on
 *     the record before.
 *
 * Where neither record is there and a bitmap records, whether the disk
 * changed cannot be told: the bitmap is inconsistent.  Without a disk
 * file (other plugins) nothing can be compared, and nothing is judged.
 *
 * What stays unseen, and its bound: a write made by another program
 * within BMF_ALIVE_LEASE of a crash of the server (and, after a
 * reboot, before the machine stopped), a write racing a record (made
 * as the stat that takes the identity runs), and a write whose program
 * sets the modification time back.
 */

#ifndef DIRTYBITMAP_IDENTITY_H
#define DIRTYBITMAP_IDENTITY_H

#include <stdbool.h>
#include <stdint.h>

#include "bmfile.h"
#include "error.h"
#include "txn.h"

/* How long a liveness record vouches for a server, and how often the
 * server renews it (nanoseconds).
 */
#define BMF_ALIVE_LEASE     INT64_C (1000000000)
#define BMF_ALIVE_PERIOD    (BMF_ALIVE_LEASE / 4)

enum bmf_disk_verdict {
  BMF_DISK_SAME,                /* unchanged, or nothing relies on it */
  BMF_DISK_WRITTEN,             /* written without the filter */
  BMF_DISK_UNKNOWN,             /* cannot be told */
  BMF_DISK_UNCHECKED,           /* no disk file to look at */
};

/* What a judge weighs: the records of a bitmap file (struct
 * bmf_state), whether a bitmap relies on them (one enabled and
 * consistent), and the disk's stat.
 */
struct bmf_disk_facts {
  bool relies;
  bool has_disk_id;
  struct bmf_disk_id disk_id;
  bool has_seen;
  int64_t seen_ns;
  bool seen_disk;               /* the disk could be stat'ed: now */
  struct bmf_disk_id now;
};

/* The verdict on facts, with no clock and no system call: BMF_DISK_SAME
 * if nothing relies on the records, or they show that nothing wrote
 * the disk since; else why says why, naming the disk and the bitmap
 * file.
 */
extern enum bmf_disk_verdict bmf_disk_verdict
  (const struct bmf_disk_facts *facts, const char *disk, const char *file,
   struct bmerr *why);

/* Judge the disk file disk (NULL: none) against what f recorded.  When
 * it was written, or that cannot be told, every enabled bitmap of f is
 * marked inconsistent in memory (the next commit records it) and why
 * says so, naming the disk.  A file opened to be written keeps the
 * identity judged, for bmf_txn_disk_seen; its stat waits, if the disk
 * was written within the granule of its time, for the clock to pass
 * it (at most BM_STAMP_WAIT_MAX).
 */
extern enum bmf_disk_verdict bmf_check_disk (struct bmf *f,
                                             const char *disk,
                                             struct bmerr *why);

/* In t: the bitmaps hold every change of the disk as it is now.  With
 * a disk file, its identity: the one judged (bmf_check_disk), unless
 * this process wrote the disk since, else a stat taken once the clock
 * has passed the granule of the disk's time.  Without one, the time
 * now, and only if no bitmap relied on the record before (a new file,
 * or none recording): otherwise the record stays, and what t adds is
 * judged by it.  Returns -1 with why when the identity cannot be taken
 * (its time stays ahead of the clock): t then records neither, so that
 * the next judge finds the bitmaps inconsistent.  t commits either way.
 */
extern int bmf_txn_disk_seen (struct bmf_txn *t, const char *disk,
                              struct bmerr *why);

/* In t: a server opens the file to write the disk; it is alive for
 * BMF_ALIVE_LEASE from now.  Clears the identity: the disk changes.
 */
extern void bmf_txn_disk_open (struct bmf_txn *t);

/* This process changes the disk outside a server's run (a resize): the
 * identity that f judged no longer holds.
 */
extern void bmf_disk_written (struct bmf *f);

/* After a crash: the time (of the clock that stamps writes) before
 * which every write to the disk was the server's, from the record of
 * its first write and its liveness record (instants, each 0 if none)
 * and, after a reboot, the boot time (0 if not rebooted, or unknown):
 * 0 if none.
 */
extern int64_t bmf_crash_bound (int64_t seen_ns, int64_t alive_until_ns,
                                int64_t boot_ns);

/* Renew the liveness record of a server that t opened: -1 with err. */
extern int bmf_alive (struct bmf *f, struct bmerr *err);

/* At load (bmfile.c), a file a server did not close: the time that
 * bounds its writes, from the header, the liveness record at alive
 * (NULL if there is none) and, after a reboot, the boot time.  Clears
 * the identity, which the server's writes made stale.
 */
extern void bmf_disk_after_crash (struct bmf_state *st, bool rebooted,
                                  const unsigned char *alive);

#endif /* DIRTYBITMAP_IDENTITY_H */
