/* SPDX-License-Identifier: BSD-3-Clause */
/* store-impl.h: what the files of the store share (store.c opens and
 * closes the file; store-commit.c commits live changes, retires and
 * settles sets; store-txn.c runs transactions; store-resize.c resizes;
 * store-cut.c makes a backup's cut;
 * store-query.c answers what others read; store-restore.c keeps the
 * restore record).  Never included outside
 * them: the rest of the filter sees the store through store.h.
 *
 * The store and its locks.  `store` is one per process, from
 * store_open to store_close.  meta_lock protects the file's metadata
 * (transactions, commits, what is reserved), the fields of `store`
 * marked so, and the life of the sets of bitmaps: a set is published
 * only under it (and the bits lock), and a retired set is freed only
 * under it, after a grace period.  A grace period waits for requests
 * in flight only: a thread that is not one (the control thread, a
 * connection's .prepare, the liveness thread) may use a set only
 * while it holds meta_lock, from tracker_current () to its last
 * access of the set (store_cut_make, store_query, store_select), since
 * no set is retired meanwhile.  One holder keeps meta_lock across
 * calls: a backup's cut (store-cut.c), from the cut to the commit of
 * its checkpoint, on the control thread, which runs nothing else that
 * takes meta_lock in between (backup_finish_pending).
 *
 * The locks of the filter, all of them, in the order in which they
 * are taken: a thread holding one takes only those below it.  What
 * each protects is written in full where it is declared.
 *
 *   backup_lock      backup.c         the backup begun; its view's
 *                                     begin and end
 *   grace_lock       inflight.c       one grace period at a time
 *   claims_lock      restore.c        the restore's claims, and the
 *                                     writers of its bits
 *   meta_lock        store.c          the file's metadata, the life
 *                                     of the sets (here)
 *   bits_lock        tracker.c        a first touch's ticket and bits,
 *                                     the publication of sets
 *   maps_lock        mappings.c       the mappings and their references
 *   Leaves: nothing is taken under them.
 *   pins_lock        selection.c      the selection and its pins
 *   group_lock       durability.c     the group commit (under
 *                                     meta_lock for a commit's sync)
 *   granules_lock    view.c, a view   its busy granules and arrays
 *   sync_lock        restore.c        one sync of the restored bits
 *   stop_lock        restore-fill.c   the fill's stop
 *   lock             source.c, the    its connection slots
 *                    source
 *   renew_stop_lock  liveness.c       the liveness thread's stop
 *   paused_lock      testpause.c      the pause points used up
 *   gate_lock        inflight.c       the gate and its waiters
 *
 * Requests in flight are waited for (the gate, a grace period:
 * inflight.h) under grace_lock or gate_lock only: never with
 * claims_lock, meta_lock or bits_lock held, since a request may wait
 * for those (a claim, its first write, a failed sync, the pin of its
 * first block status).  meta_lock is not recursive: a sync that fails
 * under it is not told to the store (dur_sync_to_owner); the holder
 * marks the bitmaps itself.
 *
 * meta_lock also makes pins atomic with transactions: a transaction holds it
 * from its check of the pins (selection_check_discards) through its
 * publish, and a connection pins its bitmap only under it
 * (store_pin).
 */

#ifndef DIRTYBITMAP_STORE_IMPL_H
#define DIRTYBITMAP_STORE_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>

#include "bmfile.h"
#include "error.h"
#include "store.h"
#include "tracker.h"
#include "txn.h"

struct store {
  struct bmf *file;             /* set by store_open, before any other
                                   thread runs; NULL after store_close */
  bool readonly;                /* set once by store_open */
  const char *disk_file;        /* set once by store_open, or NULL */
  bool open_recorded;           /* meta_lock: the file says a run writes */
  bool failed;                  /* meta_lock: a sync or commit failed */
};

extern struct store store;
extern pthread_mutex_t meta_lock;

/* Take meta_lock; if another thread holds it, a test can see this one
 * wait (test_pause_point: point is reached only then).
 */
extern void lock_meta_seen (const char *point);

/* Nothing can be trusted any more: say so, and in the file.  Called
 * with meta_lock held.
 */
extern void condemn_locked (const char *why);

/* A live change, steps 1 to 3 (store-commit.c): apply fills the
 * transaction; the sets to retire go to retire.  meta_lock held.
 */
extern int commit_live_locked (int (*apply) (struct bmf_txn **t,
                                             void *opaque,
                                             struct bmerr *err),
                               void *opaque, bool copies_bits,
                               struct bitmap_set **retire,
                               struct bmerr *err);

/* Steps 2 and 3 alone: commit the file, writes going on, then publish
 * the final set.  -1 with err (t freed) if the file could not be made
 * to say it.  meta_lock held.
 */
extern int commit_and_publish_locked (struct bmf_txn *t, bool copies_bits,
                                      struct bitmap_set *final,
                                      uint64_t ticket, struct bmerr *err);

/* Step 4: once no request can use them, free the retired sets.
 * Without meta_lock.
 */
extern void retire_sets (struct bitmap_set **retire);

/* Step 5: settle the bitmaps that stopped recording.  Without
 * meta_lock.
 */
extern int settle (struct bmerr *err);

/* At the start (store-restore.c), in the start's transaction t (NULL
 * for a read-only server): begin a restore, resume the one the file
 * records, or refuse the start (reported), as restore-from= and the
 * file say.
 */
extern int restore_start_txn (const struct store_config *cfg,
                              struct bmf_txn *t);

/* Make the bitmaps cover a disk of this size (store-resize.c).
 * meta_lock held; retire the sets after releasing it.
 */
extern int resize_locked (uint64_t disk_size, struct bitmap_set **retire,
                          struct bmerr *err);

#endif /* DIRTYBITMAP_STORE_IMPL_H */
