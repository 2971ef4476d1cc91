/* SPDX-License-Identifier: BSD-3-Clause */
/* store-commit.c: changing the bitmap file while the disk is served,
 * for transactions (store-txn.c) and resizes (store-resize.c).
 *
 * A transaction while serving (store_transaction, store_resize) is a
 * cut through the writes:
 *
 *   1. check and apply the actions to a transaction (under the bits
 *      lock too if bits are copied: merges, resizes; otherwise all of
 *      the commit but the header is written and synced first, outside
 *      the locks, and its new regions mapped), then under both locks
 *      build the transitional set, which records into both the old
 *      and the new regions (tracker.c, ghosts), and publish it: the
 *      cut;
 *   2. commit the file, writes going on: (if bits were copied, the
 *      new regions are synced, then) the header, which says that the
 *      bitmaps that stop recording settle (txn-sync.c: neither their
 *      bits nor those of the bitmaps that go on recording are
 *      synced);
 *   3. publish the final set, built in step 1 (in strict mode, once
 *      the bits in its views are durable);
 *   4. wait for a grace period: every request that may still use the
 *      old or the transitional set has finished, in particular every
 *      write that saw the old set;
 *   5. settle the bitmaps that stopped recording: their bits are final,
 *      so they are synced, then a header that no longer says they
 *      settle.  Only then does the caller reply.
 *
 * No step syncs under the bits lock, so no writer waits for a disk.
 *
 * So a write completed before the reply is in the bitmaps as they
 * were before (it used the old set, or the transitional one, which
 * records both); one started after the reply is in them as they are
 * after; a crash of the process at any point finds every write in the
 * state the file then holds; and a power loss finds a bitmap that
 * stopped recording either settled, with every bit, or counted as
 * recording (inconsistent in a flush run).
 *
 * A commit that fails while serving leaves the file in doubt (its
 * header may be current after a crash): the transitional set stays,
 * recording into both, and every enabled bitmap is marked
 * inconsistent (best effort): nothing is trusted after it.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>

#include <nbdkit-filter.h>

#include "durability.h"
#include "inflight.h"
#include "report.h"
#include "store-impl.h"

/* Step 1: apply the transaction and publish the transitional set:
 * the cut.  apply fills *t; when it copies bits (a merge, a resize) it
 * runs under the bits lock too, so that none is set meanwhile.
 * Otherwise it only allocates and describes new regions, and writes
 * may go on: until the transitional set is published they are before
 * the cut, in the old set.  Returns the sets, or -1 with err (and *t
 * freed).  meta_lock held.
 */
static int
cut_locked (int (*apply) (struct bmf_txn **t, void *opaque,
                          struct bmerr *err),
            void *opaque, bool copies_bits, struct bmf_txn **t,
            struct bitmap_set **old, struct bitmap_set **trans,
            struct bitmap_set **final, uint64_t *ticket,
            struct bmerr *err)
{
  struct bitmap_set *premap;

  *t = NULL;
  if (copies_bits)
    tracker_lock ();
  if (apply (t, opaque, err) == -1) {
    if (copies_bits)
      tracker_unlock ();
    bmf_txn_abort (*t);
    return -1;
  }
  /* Unless under the bits lock, everything but the header is written
   * and synced before the cut, the new regions before any bit is set
   * in them (txn-sync.c: only what changes).  A sync that fails may
   * have lost the bits of any page of the file: nothing is trusted.
   */
  if (!copies_bits && bmf_txn_prepare (*t, err) == -1) {
    bmf_txn_abort (*t);
    condemn_locked ("a commit of the bitmap file failed");
    return -1;
  }
  /* The new regions mapped (and summarized) before the lock is taken:
   * under it, the sets only share mappings.
   */
  premap = copies_bits ? NULL : set_premap (store.file, bmf_txn_state (*t));
  if (!copies_bits)
    tracker_lock ();
  /* Both sets are built before the cut, so that the transaction
   * fails whole if one cannot be.  The final set's views are of the
   * bits now; bits set later through the transitional set are missing
   * from them, which only sends those writes down the slow path.
   */
  *old = tracker_current ();
  *trans = set_build (store.file, bmf_txn_state (*t), *old, true,
                      VIEWS_NONE, err);
  *final = *trans ? set_build (store.file, bmf_txn_state (*t), *trans,
                               false, VIEWS_LIVE, err) : NULL;
  if (*final == NULL) {
    tracker_unlock ();
    set_free (store.file, *trans);
    set_premap_release (store.file, premap);
    bmf_txn_abort (*t);
    return -1;
  }
  *ticket = dur_requested ();
  tracker_publish (*trans);
  tracker_unlock ();
  set_premap_release (store.file, premap);
  return 0;
}

/* Steps 2 and 3 (store-impl.h). */
int
commit_and_publish_locked (struct bmf_txn *t, bool copies_bits,
                           struct bitmap_set *final, uint64_t ticket,
                           struct bmerr *err)
{
  /* In strict and coarse mode the final set's views must hold only
   * bits on stable storage.  Then the file: everything but the header,
   * writes going on.  A failure is ours to mark (store-impl.h).
   */
  if (dur_mode () != BMF_FLUSH && dur_sync_to_owner (ticket) == -1) {
    bmerr_set (err, EIO, "%s: the bitmaps cannot be made durable "
               "(fdatasync: %s)", bmf_path (store.file),
               strerror (dur_error ()));
    bmf_txn_abort (t);
    return -1;
  }
  /* The header, writes going on: the bitmaps that stop recording get
   * their last bits from the transitional set, so the header says
   * they settle (txn-sync.c), and settle syncs them once no request
   * can set them.  The final set takes over only once the
   * header is durable: until then a crash may leave the old header
   * current, whose bitmaps need every bit.
   */
  if (copies_bits && bmf_txn_prepare (t, err) == -1) {
    bmf_txn_abort (t);
    return -1;
  }
  if (bmf_txn_finish (t, err) == -1)
    return -1;                  /* t freed */
  tracker_lock ();
  tracker_publish (final);
  tracker_unlock ();
  return 0;
}

/* Steps 1 to 3 of a transaction (see the top of this file): returns
 * the sets to retire after a grace period, or -1 with err.  Called
 * with meta_lock held.
 */
int
commit_live_locked (int (*apply) (struct bmf_txn **t, void *opaque,
                                  struct bmerr *err),
                    void *opaque, bool copies_bits,
                    struct bitmap_set **retire, struct bmerr *err)
{
  struct bitmap_set *old, *trans, *final;
  struct bmf_txn *t;
  uint64_t ticket;

  retire[0] = retire[1] = NULL;
  if (cut_locked (apply, opaque, copies_bits, &t, &old, &trans, &final,
                  &ticket, err) == -1)
    return -1;
  if (commit_and_publish_locked (t, copies_bits, final, ticket, err) == -1) {
    /* trans stays: it records into the old and the new regions, so
     * whichever header a crash leaves current has every bit (abort
     * keeps the regions that are mapped).
     */
    set_free (store.file, final);
    retire[0] = old;
    condemn_locked ("a commit of the bitmap file failed");
    return -1;
  }
  retire[0] = old;
  retire[1] = trans;
  return 0;
}

/* Step 4: once no request can use them, free the retired sets. */
void
retire_sets (struct bitmap_set **retire)
{
  if (retire[0] == NULL && retire[1] == NULL)
    return;
  inflight_grace ();
  pthread_mutex_lock (&meta_lock);
  set_free (store.file, retire[0]);
  set_free (store.file, retire[1]);
  pthread_mutex_unlock (&meta_lock);
}

/* Step 5, after step 4 for a transaction that stopped bitmaps: settle
 * them, since their bits are final now (txn-sync.c).  -1 with err if
 * they cannot be made durable, or if a failed sync made every bitmap
 * inconsistent meanwhile: the reply must not say they stopped sound.
 */
int
settle (struct bmerr *err)
{
  struct bmf_txn *t;
  struct bmerr e;
  int r = 0;

  pthread_mutex_lock (&meta_lock);
  if (!store.failed && bmf_settling (store.file)) {
    t = bmf_txn_begin (store.file, false, &e);
    if (t)
      bmf_txn_settle (t);
    if (t == NULL || bmf_txn_commit (t, &e) == -1) {
      filter_error ("%s", e.msg);
      condemn_locked ("the bits of the bitmaps that stopped recording "
                      "cannot be made durable");
    }
  }
  if (store.failed) {
    bmerr_set (err, EIO, "%s: the bits of the bitmaps that stopped "
               "recording cannot be made durable (a sync of the file "
               "failed): every enabled bitmap is now inconsistent: take "
               "a full backup", bmf_path (store.file));
    r = -1;
  }
  pthread_mutex_unlock (&meta_lock);
  return r;
}
