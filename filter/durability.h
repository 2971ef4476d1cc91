/* SPDX-License-Identifier: BSD-3-Clause */
/* durability.h: when the bits reach stable storage: tickets and group
 * commit.
 */

#ifndef DIRTYBITMAP_DURABILITY_H
#define DIRTYBITMAP_DURABILITY_H

#include <stdbool.h>
#include <stdint.h>

#include "bmfile.h"

/* Sync this file.  covered returns the tickets a sync may cover:
 * the last ticket taken, read under the lock under which tickets are
 * taken and bits set, so that every ticket up to it has its bits set
 * (tracker_tickets_set).  on_failure runs once, on the thread that saw
 * the first failed sync, with no lock of durability.c held (and not on
 * a thread in dur_sync_to_owner).
 */
extern void dur_init (struct bmf *file, enum bmf_durability mode,
                      uint64_t (*covered) (void),
                      void (*on_failure) (int errnum));
extern enum bmf_durability dur_mode (void);

/* Take a ticket, then set bits, under the bits lock: once
 * dur_sync_to reaches it, those bits are on stable storage.
 */
extern uint64_t dur_take_ticket (void);
/* The last ticket taken. */
extern uint64_t dur_requested (void);

/* Wait until every ticket up to target is on stable storage, one
 * fdatasync for all waiters (group commit).  Not with the bits lock
 * held.  -1 once a sync has failed: bits may have been lost.
 */
extern int dur_sync_to (uint64_t target);

/* The same, for the owner of the file while it holds the store's
 * lock: a first failure is not told (on_failure would take that lock
 * again), the caller marks the bitmaps itself.
 */
extern int dur_sync_to_owner (uint64_t target);

/* A sync has failed. */
extern bool dur_failed (void);

/* The errno of the failed sync, 0 if none failed. */
extern int dur_error (void);

#endif /* DIRTYBITMAP_DURABILITY_H */
