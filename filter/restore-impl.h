/* SPDX-License-Identifier: BSD-3-Clause */
/* restore-impl.h: what restore.c (the requests) and restore-fill.c
 * (the fill in the background) share.  Never included elsewhere.
 */

#ifndef DIRTYBITMAP_RESTORE_IMPL_H
#define DIRTYBITMAP_RESTORE_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>

#include <nbdkit-filter.h>

#include "bits.h"
#include "source.h"

/* The running restore.  source, size, gbits and nr are set by
 * restore_init and never change; restored and filled are set under
 * `lock` and read lock-free; they are unmapped only once `active` is
 * false and a grace period has passed (restore_complete), or at
 * .cleanup.
 */
struct restore {
  bool active;                  /* atomic */
  char *source;
  uint64_t size;
  unsigned gbits;
  uint64_t nr;                  /* granules */
  /* The granules whose data is on stable storage in the disk: the
   * file's restored bitmap, mapped shared.
   */
  struct bits restored;
  /* The granules whose data below is the source's (or newer), not
   * yet marked restored: in memory only.
   */
  struct bits filled;
  struct source *src;
  bool (*give_up) (void);
  uint64_t marked;              /* atomic: generations of marks */
  int64_t last_request_ns;      /* atomic: the clients' last request */
};

extern struct restore rs;

static inline uint64_t
granule_start (uint64_t i)
{
  return i << rs.gbits;
}

static inline uint64_t
granule_end (uint64_t i)
{
  uint64_t e = (i + 1) << rs.gbits;
  return e < rs.size ? e : rs.size;
}

/* Its data is below: restored, or filled. */
static inline bool
ready (uint64_t i)
{
  return bits_test (&rs.restored, i) || bits_test (&rs.filled, i);
}

/* Claims: a request (or the fill) that may fill or change granules
 * [first, last] not restored yet holds them, and another that needs
 * any of them waits (the view's busy ranges, view.c, in the same
 * way).  Only for the time of the I/O: a claim is never held while
 * waiting for another.
 */
extern void claim (uint64_t first, uint64_t last);
extern void unclaim (uint64_t first, uint64_t last);

/* Granules [a, b], claimed and none ready, whose data is in buf (read
 * from the source), or, with buf NULL, where the source reads as
 * zeroes: written below through next, then they are filled.
 * background says who fills, for the pause points of the tests.
 */
extern int fill_write (nbdkit_next *next, uint64_t a, uint64_t b,
                       const char *buf, bool background, int *err);

/* Granules [a, b] are restored (their data durable below). */
extern void mark_restored (uint64_t a, uint64_t b);

/* The fill (restore-fill.c; restore.h starts and stops it), and the
 * end of the restore once every granule is restored (restore.c),
 * called by the fill with no request of its own in flight.
 */
/* The fill is told to stop (at .cleanup). */
extern bool fill_stopping (void);
extern void restore_complete (nbdkit_next *next);

#endif /* DIRTYBITMAP_RESTORE_IMPL_H */
