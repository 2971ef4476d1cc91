/* SPDX-License-Identifier: BSD-3-Clause */
/* store.c: the bitmap file of a running filter (see store.h): its
 * lifecycle, and every change to it while the disk is served.
 *
 * Locks, always taken in this order: `meta_lock` (the file's
 * metadata: transactions, commits, what is reserved; the life of the
 * sets; pins against transactions), then the tracker's bits lock
 * (setting bits, publishing sets); the full order, with backup.c's
 * and selection.c's locks, is at meta_lock's declaration.  Neither is
 * held while waiting for requests in flight (inflight.h), since a
 * request may need them to finish: its first write records the open
 * (meta_lock), a failed sync marks the bitmaps (meta_lock), its first
 * block status pins a bitmap (meta_lock).
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
#include <unistd.h>
#include <sys/stat.h>

#include <nbdkit-filter.h>

#include "durability.h"
#include "identity.h"
#include "inflight.h"
#include "selection.h"
#include "shadow.h"
#include "store.h"
#include "testpause.h"
#include "tracker.h"
#include "txn.h"
#include "util.h"

static struct bmf *file;
static bool readonly;
static const char *disk_file;
/* meta_lock protects the file's metadata (transactions, commits, what
 * is reserved) and the life of the sets of bitmaps: a set is
 * published only under it (and the bits lock), and a retired set is
 * freed only under it, after a grace period.  A grace period waits
 * for requests in flight only: a thread that is not one (the control
 * thread, a connection's .prepare) may use a set only while it holds
 * meta_lock, from tracker_current () to its last access of the set
 * (store_freeze, store_query, store_select), since no set is retired
 * meanwhile.
 *
 * Lock order: backup.c's lock, then meta_lock, then selection.c's
 * lock or the tracker's bits lock (selection.c's lock is a leaf:
 * nothing is taken under it).  Never waited for with the bits lock
 * held; never held while waiting for requests in flight (the gate, a
 * grace period: inflight.h), since a request may wait for it (its
 * first write, a failed sync, the pin of its first block status).
 *
 * It also makes pins atomic with transactions: a transaction holds it
 * from its check of the pins (selection_check_discards) through its
 * publish, and a connection pins its bitmap only under it
 * (store_pin).
 *
 * Recursive: a sync that fails while a transaction holds it marks the
 * bitmaps from the same thread (sync_failed).
 */
static pthread_mutex_t meta_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static bool open_recorded;      /* meta_lock: the file says a run writes */
static bool failed;             /* meta_lock: a sync or commit failed */

/* Take meta_lock; if another thread holds it, a test can see this one
 * wait (test_pause_point: point is reached only then).
 */
static void
lock_meta_seen (const char *point)
{
  if (pthread_mutex_trylock (&meta_lock) == 0)
    return;
  test_pause_point (point);
  pthread_mutex_lock (&meta_lock);
}


/*----------------------------------------------------------------------
 * Failures.
 */

/* Nothing can be trusted any more: say so in the file, so that neither
 * a crash nor the next start can take the bitmaps for sound (the close
 * marks them again, in case this commit fails too on a failing disk).
 * Called with meta_lock held.
 */
static void
condemn_locked (const char *why)
{
  struct bmerr err;
  struct bmf_txn *t;

  if (failed)
    return;
  failed = true;
  nbdkit_error ("dirtybitmap: %s: %s: every enabled bitmap is now "
                "inconsistent: take a full backup", bmf_path (file), why);
  t = bmf_txn_begin (file, false, &err);
  if (t) {
    bmf_txn_mark_enabled_inconsistent (t);
    if (bmf_txn_commit (t, &err) == 0)
      return;
  }
  nbdkit_error ("dirtybitmap: %s", err.msg);
}

static void
sync_failed (void)
{
  pthread_mutex_lock (&meta_lock);
  condemn_locked ("a sync of the bitmaps failed");
  pthread_mutex_unlock (&meta_lock);
}

/* Renew the liveness record of a run that writes (identity.h): a
 * failure only makes a start after a crash see this run's writes as
 * made without the filter.  Called with meta_lock held.
 */
static void
alive_locked (void)
{
  struct bmerr err;

  if (open_recorded && !failed && bmf_alive (file, &err) == -1)
    nbdkit_debug ("dirtybitmap: %s", err.msg);
}

void
store_alive (void)
{
  pthread_mutex_lock (&meta_lock);
  if (file)
    alive_locked ();
  pthread_mutex_unlock (&meta_lock);
}

/* Before the first bit of this run is set: record in the file that
 * it is open, by which boot and in which mode (for reboot detection),
 * and until when this server is alive (identity.h): the disk's
 * identity no longer holds.
 */
static int
first_write (void)
{
  struct bmerr err;
  struct bmf_txn *t;
  int r = 0;

  pthread_mutex_lock (&meta_lock);
  if (!open_recorded) {
    t = bmf_txn_begin (file, false, &err);
    if (t) {
      bmf_txn_set_open (t, true, dur_mode ());
      bmf_txn_disk_open (t);
    }
    if (t == NULL || bmf_txn_commit (t, &err) == -1) {
      nbdkit_error ("dirtybitmap: %s", err.msg);
      condemn_locked ("recording that the file is in use failed");
      r = -1;
    }
    else {
      open_recorded = true;
      alive_locked ();
    }
  }
  pthread_mutex_unlock (&meta_lock);
  return r;
}

/*----------------------------------------------------------------------
 * Opening and closing.
 */

/* Which bitmap answers extents, NULL to pass them through; -1 refuses
 * what the contract forbids.
 */
static int
initial_selection (const struct store_config *cfg,
                   const struct bmf_state *st, const char **name)
{
  const struct bmf_bitmap *bm;

  *name = NULL;
  if (cfg->bitmap == NULL || cfg->extents == EXTENTS_PASSTHROUGH)
    return 0;
  bm = bmf_find (st, cfg->bitmap);
  if (bm == NULL) {
    if (cfg->extents == EXTENTS_DEFAULT && cfg->nr_actions > 0)
      return 0;                 /* e.g. action=remove */
    if (bmf_state (file)->seq == 1 && st->nr_bitmaps == 0)
      nbdkit_error ("dirtybitmap: bitmap %s not found: %s does not "
                    "exist (deleted?): every change since it was last "
                    "written is lost to the bitmaps: take a full backup, "
                    "and start recording with action=add", cfg->bitmap,
                    cfg->path);
    else
      nbdkit_error ("dirtybitmap: bitmap %s not found in %s%s",
                    cfg->bitmap, cfg->path,
                    cfg->nr_actions ? "" : " (use action=add to create it)");
    return -1;
  }
  if (bm->flags & BMF_INCONSISTENT) {
    nbdkit_error ("dirtybitmap: bitmap %s is inconsistent: %s; it cannot "
                  "answer extents: remove it (action=remove) and take a "
                  "full backup", cfg->bitmap,
                  bmf_inconsistent_reason (file));
    return -1;
  }
  *name = cfg->bitmap;
  return 0;
}

static int
open_file (const struct store_config *cfg, bool *created)
{
  struct bmerr err;

  *created = false;
  file = bmf_open (cfg->path, readonly ? BMF_LOCK_SHARED : BMF_LOCK_EXCLUSIVE,
                   &err);
  if (file == NULL && err.errnum == ENOENT && !readonly) {
    file = bmf_create (cfg->path, cfg->create_mode, false, 0, &err);
    *created = file != NULL;
  }
  if (file == NULL) {
    nbdkit_error ("dirtybitmap: %s", err.msg);
    if (err.errnum == ENOENT && readonly)
      nbdkit_error ("dirtybitmap: a read-only server (-r) does not create "
                    "the bitmap file");
    return -1;
  }
  return 0;
}

/* Open merge-file= (unless it is the bitmap file itself, whose bitmaps
 * the earlier actions have changed) and point the merges at it.
 */
static int
open_merge_source (const struct store_config *cfg, struct bmf **src)
{
  struct bmerr err;
  size_t i;

  *src = NULL;
  if (cfg->merge_file == NULL || bmf_same_file (file, cfg->merge_file))
    return 0;
  *src = bmf_open (cfg->merge_file, BMF_LOCK_SHARED, &err);
  if (*src == NULL) {
    nbdkit_error ("dirtybitmap: %s", err.msg);
    return -1;
  }
  for (i = 0; i < cfg->nr_actions; ++i)
    cfg->actions[i].src_file = *src;
  return 0;
}

/* Say, at normal verbosity, what a start throws away or leaves
 * untracked: a service that runs action=clear at every start loses
 * its checkpoint each time.
 */
static void
notices (const struct store_config *cfg, const struct bitmap_set *s)
{
  char buf[BMF_MAX_NAME + 16];
  size_t i;

  for (i = 0; i < cfg->nr_actions; ++i)
    if (act_discards (&cfg->actions[i]))
      fprintf (stderr, "nbdkit: dirtybitmap: action %s on bitmap %s: the "
               "changes it recorded are discarded\n",
               act_to_string (&cfg->actions[i], buf, sizeof buf),
               cfg->actions[i].bitmap);
  if (!readonly && s->nr_recording == 0)
    fprintf (stderr, "nbdkit: dirtybitmap: warning: %s has no recording "
             "bitmap: writes to this disk are not tracked\n", cfg->path);
}

/* Say what a power loss during a durability=coarse run cost: the
 * bytes that each bitmap now calls dirty because of it.
 */
static void
recovery_notices (void)
{
  const struct bmf_state *st = bmf_state (file);
  size_t i;

  for (i = 0; i < st->nr_bitmaps; ++i)
    if (st->bitmaps[i].recovery != BMF_NOT_RECOVERED)
      fprintf (stderr, "nbdkit: dirtybitmap: %s: the machine stopped while "
               "durability=coarse was recording: bitmap %s: %" PRIu64
               " bytes are dirty because of it (from its coarse shadow)\n",
               bmf_path (file), st->bitmaps[i].name,
               st->bitmaps[i].recovered);
}

int
store_open (const struct store_config *cfg)
{
  struct bmf *merge = NULL;
  struct bmf_txn *t = NULL;
  struct bitmap_set *s;
  enum bmf_disk_verdict verdict;
  const char *sel;
  struct bmerr err, why;
  bool created;

  readonly = cfg->readonly;
  disk_file = cfg->disk_file;
  bmf_remove_hint = "action=remove";
  if (open_file (cfg, &created) == -1)
    return -1;
  recovery_notices ();
  dur_init (file, cfg->durability, sync_failed);
  tracker_init (first_write);

  verdict = bmf_check_disk (file, disk_file, &why);
  if (verdict == BMF_DISK_WRITTEN || verdict == BMF_DISK_UNKNOWN) {
    if (readonly) {
      nbdkit_error ("dirtybitmap: %s: the bitmaps cannot be trusted, and a "
                    "read-only server cannot mark them: start it writable "
                    "once, then take a full backup", why.msg);
      goto err;
    }
    nbdkit_error ("dirtybitmap: %s: every enabled bitmap is now "
                  "inconsistent: take a full backup", why.msg);
    /* Recorded at once, whatever becomes of this start; the disk as it
     * is now is where bitmaps added from here on start.
     */
    t = bmf_txn_begin (file, false, &err);
    if (t)
      bmf_txn_disk_seen (t, disk_file);
    if (t == NULL || bmf_txn_commit (t, &err) == -1 ||
        (created && bmf_publish (file, &err) == -1)) {
      t = NULL;
      nbdkit_error ("dirtybitmap: %s", err.msg);
      goto err;
    }
    t = NULL;
  }
  if (open_merge_source (cfg, &merge) == -1)
    goto err;

  if (!readonly) {
    t = cfg->nr_actions ? act_begin (file, cfg->actions, cfg->nr_actions,
                                     &err)
      : bmf_txn_begin (file, false, &err);
    if (t == NULL) {
      nbdkit_error ("dirtybitmap: %s", err.msg);
      goto err;
    }
  }
  if (initial_selection (cfg, t ? bmf_txn_state (t) : bmf_state (file),
                         &sel) == -1)
    goto err;
  if (t) {
    /* The previous run's bits are made durable by this commit, so a
     * mark it left (a crash) can go.
     */
    bmf_txn_set_open (t, false, cfg->durability);
    /* The disk as it is now: judged above, and not yet written. */
    bmf_txn_disk_seen (t, disk_file);
    /* Shadows only while a coarse run keeps them exact. */
    if (bmf_txn_set_shadows (t, cfg->durability == BMF_COARSE ?
                             cfg->cgbits : 0, &err) == -1) {
      nbdkit_error ("dirtybitmap: %s: %s", cfg->path, err.msg);
      goto err;
    }
    if (bmf_txn_commit (t, &err) == -1 ||
        (created && bmf_publish (file, &err) == -1)) {
      t = NULL;
      nbdkit_error ("dirtybitmap: %s", err.msg);
      goto err;
    }
    t = NULL;
  }
  bmf_close (merge);
  merge = NULL;

  s = set_build (file, bmf_state (file), NULL, false,
                 readonly ? VIEWS_READONLY : VIEWS_LIVE, &err);
  if (s == NULL) {
    nbdkit_error ("dirtybitmap: %s", err.msg);
    goto err;
  }
  tracker_publish (s);
  if (selection_set (sel) == -1) {
    nbdkit_error ("dirtybitmap: strdup: %m");
    goto err;
  }
  notices (cfg, s);
  /* Serving: commits sync only what they change. */
  if (!readonly && bmf_set_live (file, true, &err) == -1) {
    nbdkit_error ("dirtybitmap: %s", err.msg);
    goto err;
  }
  nbdkit_debug ("dirtybitmap: %s: %zu bitmaps, %zu recording, "
                "durability=%s%s", cfg->path, s->nr_named, s->nr_recording,
                cfg->durability == BMF_STRICT ? "strict" :
                cfg->durability == BMF_COARSE ? "coarse" : "flush",
                readonly ? ", read-only" : "");
  return 0;

 err:
  bmf_txn_abort (t);
  bmf_close (merge);
  set_free (file, tracker_current ());
  tracker_publish (NULL);
  bmf_close (file);             /* a created file goes with it */
  file = NULL;
  return -1;
}

void
store_close (void)
{
  struct bitmap_set *s;
  struct bmerr err;
  struct bmf_txn *t;

  if (file == NULL)
    return;
  pthread_mutex_lock (&meta_lock);
  if (!readonly) {
    bmf_set_live (file, false, &err);
    if (!failed && !dur_failed () && bmf_sync (file) == -1) {
      nbdkit_error ("dirtybitmap: %s: fdatasync: %m", bmf_path (file));
      failed = true;
    }
    failed |= dur_failed ();
    /* Every clean stop of a writable server records the disk, whatever
     * the run did (identity.h).
     */
    t = bmf_txn_begin (file, false, &err);
    if (t) {
      /* Bits may be lost: say so rather than leave bitmaps that lie. */
      if (failed)
        bmf_txn_mark_enabled_inconsistent (t);
      bmf_txn_set_open (t, false, dur_mode ());
      bmf_txn_disk_seen (t, disk_file);
    }
    if (t && bmf_txn_commit (t, &err) == 0)
      nbdkit_debug ("dirtybitmap: %s: closed cleanly", bmf_path (file));
    else
      nbdkit_error ("dirtybitmap: %s", err.msg);
  }
  s = tracker_current ();
  tracker_publish (NULL);
  set_free (file, s);
  pthread_mutex_unlock (&meta_lock);
  bmf_close (file);
  file = NULL;
  selection_free ();
}

/*----------------------------------------------------------------------
 * Changing the bitmaps while serving.
 */

/* Steps 1 to 3 of a transaction (see the top of this file): returns
 * the sets to retire after a grace period, or -1 with err.  Called
 * with meta_lock held.  apply fills t; when it copies bits (a merge,
 * a resize) it runs under the bits lock too, so that none is set
 * meanwhile.  Otherwise it only allocates and describes new regions,
 * and writes may go on: until the transitional set is published they
 * are before the cut, in the old set.
 */
static int
commit_live_locked (int (*apply) (struct bmf_txn **t, void *opaque,
                                  struct bmerr *err),
                    void *opaque, bool copies_bits,
                    struct bitmap_set **retire, struct bmerr *err)
{
  struct bitmap_set *old, *trans, *final, *premap;
  struct bmf_txn *t = NULL;
  uint64_t ticket;

  retire[0] = retire[1] = NULL;
  if (copies_bits)
    tracker_lock ();
  if (apply (&t, opaque, err) == -1) {
    if (copies_bits)
      tracker_unlock ();
    bmf_txn_abort (t);
    return -1;
  }
  /* Unless under the bits lock, everything but the header is written
   * and synced before the cut, the new regions before any bit is set
   * in them (txn-sync.c: only what changes).  A sync that fails may
   * have lost the bits of any page of the file: nothing is trusted.
   */
  if (!copies_bits && bmf_txn_prepare (t, err) == -1) {
    bmf_txn_abort (t);
    condemn_locked ("a commit of the bitmap file failed");
    return -1;
  }
  /* The new regions mapped (and summarized) before the lock is taken:
   * under it, the sets only share mappings.
   */
  premap = copies_bits ? NULL : set_premap (file, bmf_txn_state (t));
  if (!copies_bits)
    tracker_lock ();
  /* Both sets are built before the cut, so that the transaction
   * fails whole if one cannot be.  The final set's views are of the
   * bits now; bits set later through the transitional set are missing
   * from them, which only sends those writes down the slow path.
   */
  old = tracker_current ();
  trans = set_build (file, bmf_txn_state (t), old, true, VIEWS_NONE, err);
  final = trans ? set_build (file, bmf_txn_state (t), trans, false,
                             VIEWS_LIVE, err) : NULL;
  if (final == NULL) {
    tracker_unlock ();
    set_free (file, trans);
    set_premap_release (file, premap);
    bmf_txn_abort (t);
    return -1;
  }
  ticket = dur_requested ();
  tracker_publish (trans);
  tracker_unlock ();
  set_premap_release (file, premap);

  /* In strict and coarse mode the final set's views must hold only
   * bits on stable storage.  Then the file: everything but the header,
   * writes going on.
   */
  if (dur_mode () != BMF_FLUSH && dur_sync_to (ticket) == -1) {
    bmerr_set (err, EIO, "%s: the bitmaps cannot be made durable",
               bmf_path (file));
    goto failed;
  }
  /* The header, writes going on: the bitmaps that stop recording get
   * their last bits from the transitional set, so the header says
   * they settle (txn-sync.c), and settle syncs them once no request
   * can set them.  The final set takes over only once the
   * header is durable: until then a crash may leave the old header
   * current, whose bitmaps need every bit.
   */
  if (copies_bits && bmf_txn_prepare (t, err) == -1)
    goto failed;
  if (bmf_txn_finish (t, err) == -1) {
    t = NULL;                   /* freed */
    goto failed;
  }
  tracker_lock ();
  tracker_publish (final);
  tracker_unlock ();
  retire[0] = old;
  retire[1] = trans;
  return 0;

 failed:
  /* trans stays: it records into the old and the new regions, so
   * whichever header a crash leaves current has every bit (abort keeps
   * the regions that are mapped).
   */
  bmf_txn_abort (t);
  set_free (file, final);
  retire[0] = old;
  condemn_locked ("a commit of the bitmap file failed");
  return -1;
}

/* Step 4: once no request can use them, free the retired sets. */
static void
retire_sets (struct bitmap_set **retire)
{
  if (retire[0] == NULL && retire[1] == NULL)
    return;
  inflight_grace ();
  pthread_mutex_lock (&meta_lock);
  set_free (file, retire[0]);
  set_free (file, retire[1]);
  pthread_mutex_unlock (&meta_lock);
}

/* Step 5, after step 4 for a transaction that stopped bitmaps: settle
 * them, since their bits are final now (txn-sync.c).  -1 with err if
 * they cannot be made durable, or if a failed sync made every bitmap
 * inconsistent meanwhile: the reply must not say they stopped sound.
 */
static int
settle (struct bmerr *err)
{
  struct bmf_txn *t;
  struct bmerr e;
  int r = 0;

  pthread_mutex_lock (&meta_lock);
  if (!failed && bmf_settling (file)) {
    t = bmf_txn_begin (file, false, &e);
    if (t)
      bmf_txn_settle (t);
    if (t == NULL || bmf_txn_commit (t, &e) == -1) {
      nbdkit_error ("dirtybitmap: %s", e.msg);
      condemn_locked ("the bits of the bitmaps that stopped recording "
                      "cannot be made durable");
    }
  }
  if (failed) {
    bmerr_set (err, EIO, "%s: the bits of the bitmaps that stopped "
               "recording cannot be made durable (a sync of the file "
               "failed): every enabled bitmap is now inconsistent: take "
               "a full backup", bmf_path (file));
    r = -1;
  }
  pthread_mutex_unlock (&meta_lock);
  return r;
}

static int
apply_resize (struct bmf_txn **t, void *opaque, struct bmerr *err)
{
  *t = bmf_txn_begin (file, false, err);
  return *t ? bmf_txn_resize (*t, *(uint64_t *) opaque, err) : -1;
}

/* Make the bitmaps cover a disk of this size, meta_lock held: the
 * sets to retire (after the lock is released: retire_sets) go to
 * retire.  A read-only server never writes the file: a file that has
 * never seen its disk is all clean, in memory, at whatever size the
 * disk has; one that has keeps its size, and a grown area reads as
 * changed (extents.c, view.c).
 */
static int
resize_locked (uint64_t disk_size, struct bitmap_set **retire,
               struct bmerr *err)
{
  struct bitmap_set *s = tracker_current ();

  if (s->sized && s->disk_size == disk_size)
    return 0;
  if (readonly) {
    struct bitmap_set *clean;

    if (s->sized) {
      nbdkit_debug ("dirtybitmap: disk size %" PRIu64 ", the file says %"
                    PRIu64 " (read-only: not recorded)", disk_size,
                    s->disk_size);
      return 0;
    }
    clean = set_build_clean (s, disk_size, err);
    if (clean == NULL)
      return -1;
    tracker_lock ();
    tracker_publish (clean);
    tracker_unlock ();
    retire[0] = s;
    return 0;
  }
  if (s->sized)
    nbdkit_debug ("dirtybitmap: %s: the disk %s from %" PRIu64 " to %"
                  PRIu64 " bytes: %s", bmf_path (file),
                  disk_size > s->disk_size ? "grew" : "shrank",
                  s->disk_size, disk_size,
                  disk_size > s->disk_size ?
                  "the new area is dirty in every bitmap" :
                  "bitmaps are cut to the new size");
  else
    nbdkit_debug ("dirtybitmap: %s: disk size is %" PRIu64,
                  bmf_path (file), disk_size);
  return commit_live_locked (apply_resize, &disk_size, true, retire, err);
}

int
store_resize (uint64_t disk_size)
{
  struct bitmap_set *retire[2] = { NULL };
  struct bmerr err;
  int r;

  /* Even to see that the size is unchanged: .prepare is no request in
   * flight, so only meta_lock keeps the current set alive.
   */
  lock_meta_seen ("resize-waits");
  r = resize_locked (disk_size, retire, &err);
  if (r == -1)
    nbdkit_error ("dirtybitmap: cannot resize the bitmaps to %" PRIu64
                  " bytes: %s", disk_size, err.msg);
  pthread_mutex_unlock (&meta_lock);
  retire_sets (retire);
  return r;
}

struct actions {
  struct action *acts;
  size_t n;
};

static int
apply_actions (struct bmf_txn **t, void *opaque, struct bmerr *err)
{
  const struct actions *a = opaque;

  *t = act_begin (file, a->acts, a->n, err);
  return *t ? 0 : -1;
}

/* Whether any action copies bits (a merge does). */
static bool
copies_bits (const struct action *acts, size_t n)
{
  size_t i;

  for (i = 0; i < n; ++i)
    if (acts[i].kind == ACT_MERGE)
      return true;
  return false;
}

/* Whether a bitmap of that name is in the current set. */
static bool
exists (const char *name)
{
  return set_find (tracker_current (), name) != NULL;
}

int
store_transaction (struct action *acts, size_t n, struct bmerr *err)
{
  struct actions a = { acts, n };
  struct bitmap_set *retire[2] = { NULL };
  bool stopped;
  size_t i;
  int r;

  if (readonly) {
    bmerr_set (err, EROFS, "the server is read-only (-r): the bitmaps "
               "cannot change");
    return -1;
  }
  pthread_mutex_lock (&meta_lock);
  r = selection_check_discards (acts, n, err);
  if (r == 0) {
    test_pause_point ("txn-checked");
    r = commit_live_locked (apply_actions, &a, copies_bits (acts, n), retire,
                            err);
  }
  if (r == 0) {
    /* A removed bitmap answers nothing any more. */
    selection_forget_unless (exists);
    for (i = 0; i < n; ++i) {
      char buf[BMF_MAX_NAME + 16];
      nbdkit_debug ("dirtybitmap: action %s on bitmap %s",
                    act_to_string (&acts[i], buf, sizeof buf),
                    acts[i].bitmap);
    }
  }
  stopped = r == 0 && bmf_settling (file);
  pthread_mutex_unlock (&meta_lock);
  retire_sets (retire);
  if (stopped)
    r = settle (err);
  return r;
}

bool
store_is_bitmap_file (const char *path)
{
  return bmf_same_file (file, path);
}

int
store_sync (struct bmerr *err)
{
  if (readonly)
    return 0;
  if (dur_sync_to (dur_requested ()) == -1) {
    bmerr_set (err, EIO, "%s: the bitmaps cannot be made durable",
               bmf_path (file));
    return -1;
  }
  return 0;
}

/*----------------------------------------------------------------------
 * The cut of a backup view.
 */

int
store_freeze (const char *bitmap, uint64_t disk_size, struct bits *frozen,
              unsigned *gbits, struct bmerr *err)
{
  struct bitmap_set *retire[2] = { NULL };
  const struct bitmap_set *s;
  const struct live_bitmap *lb;
  struct bmerr e;
  bool grown;
  size_t len;

  memset (frozen, 0, sizeof *frozen);
  /* The resize and the copy under one hold of meta_lock: no resize
   * from a connection's .prepare (which read its size earlier) comes
   * between them, so the bits are of this size; and the set stays
   * current, so alive, until the copy is done.
   */
  pthread_mutex_lock (&meta_lock);
  if (resize_locked (disk_size, retire, &e) == -1) {
    bmerr_set (err, e.errnum ? e.errnum : EIO, "cannot resize the bitmaps "
               "to the disk's size (%" PRIu64 " bytes): %s", disk_size,
               e.msg);
    goto err;
  }
  s = tracker_current ();
  if (bitmap == NULL)
    goto out;
  lb = set_find (s, bitmap);
  if (lb == NULL) {
    bmerr_set (err, ENOENT, "bitmap %s not found", bitmap);
    goto err;
  }
  if (lb->flags & BMF_INCONSISTENT) {
    bmerr_set (err, EINVAL, "bitmap %s is inconsistent: it may have missed "
               "changes, so an incremental backup from it would too: "
               "take a full backup", bitmap);
    goto err;
  }
  test_pause_point ("freeze");
  /* A read-only server keeps the file's size (resize_locked): then a
   * grown area, from the granule of the old end on, is changed, as
   * extents.c reads it.
   */
  grown = s->disk_size < disk_size;
  len = bits_nr_words (lb->bits.nr_bits) * sizeof (uint64_t);
  frozen->nr_bits = grown ? bmf_nr_bits (disk_size, lb->gbits)
    : lb->bits.nr_bits;
  frozen->words = calloc (MAX (bits_nr_words (frozen->nr_bits), 1),
                          sizeof (uint64_t));
  if (frozen->words == NULL) {
    bmerr_set (err, errno, "%s", strerror (errno));
    goto err;
  }
  tracker_lock ();
  if (len)
    memcpy (frozen->words, lb->bits.words, len);
  tracker_unlock ();
  if (grown)
    bits_set_range (frozen, s->disk_size >> lb->gbits, frozen->nr_bits - 1);
  *gbits = lb->gbits;
 out:
  pthread_mutex_unlock (&meta_lock);
  retire_sets (retire);
  return 0;

 err:
  pthread_mutex_unlock (&meta_lock);
  retire_sets (retire);
  free (frozen->words);
  memset (frozen, 0, sizeof *frozen);
  return -1;
}

/*----------------------------------------------------------------------
 * Selection.
 */

int
store_select (const char *name, struct bmerr *err)
{
  const struct live_bitmap *lb;

  pthread_mutex_lock (&meta_lock);
  if (name) {
    lb = set_find (tracker_current (), name);
    if (lb == NULL) {
      bmerr_set (err, ENOENT, "bitmap %s not found", name);
      goto err;
    }
    if (lb->flags & BMF_INCONSISTENT) {
      bmerr_set (err, EINVAL, "bitmap %s is inconsistent: %s; it cannot "
                 "answer block status", name, bmf_inconsistent_reason (file));
      goto err;
    }
  }
  if (selection_set (name) == -1) {
    bmerr_set (err, errno, "%s", strerror (errno));
    goto err;
  }
  pthread_mutex_unlock (&meta_lock);
  return 0;

 err:
  pthread_mutex_unlock (&meta_lock);
  return -1;
}

int
store_pin (const char *name)
{
  int r;

  /* Not between a transaction's check of the pins and its publish. */
  lock_meta_seen ("pin-waits");
  r = selection_pin (name);
  pthread_mutex_unlock (&meta_lock);
  return r;
}

/*----------------------------------------------------------------------
 * Query.
 */

int
store_query (struct store_info *info, struct bmerr *err)
{
  const struct bitmap_set *s;
  size_t i;

  memset (info, 0, sizeof *info);
  pthread_mutex_lock (&meta_lock);
  s = tracker_current ();
  info->path = strdup (bmf_path (file));
  info->bitmaps = calloc (MAX (s->nr_named, 1), sizeof *info->bitmaps);
  if (info->path == NULL || info->bitmaps == NULL)
    goto nomem;
  info->sized = s->sized;
  info->size = s->disk_size;
  info->durability = dur_mode ();
  info->readonly = readonly;
  info->state = failed || dur_failed () ? "failed" :
    open_recorded ? "open" : "closed";
  for (i = 0; i < s->nr_named; ++i) {
    const struct live_bitmap *lb = &s->bm[i];
    struct store_bitmap_info *bi = &info->bitmaps[i];

    bi->name = strdup (lb->name);
    if (bi->name == NULL)
      goto nomem;
    info->nr++;
    bi->granularity = UINT64_C (1) << lb->gbits;
    bi->consistent = !(lb->flags & BMF_INCONSISTENT);
    bi->recording = (lb->flags & BMF_ENABLED) && bi->consistent;
    bi->selected = selection_is (lb->name);
    bi->dirty_bytes = set_dirty_bytes (s, lb);
  }
  pthread_mutex_unlock (&meta_lock);
  return 0;

 nomem:
  pthread_mutex_unlock (&meta_lock);
  bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  store_info_free (info);
  return -1;
}

void
store_info_free (struct store_info *info)
{
  size_t i;

  for (i = 0; i < info->nr; ++i)
    free (info->bitmaps[i].name);
  free (info->bitmaps);
  free (info->path);
  memset (info, 0, sizeof *info);
}
