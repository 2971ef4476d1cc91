/* SPDX-License-Identifier: BSD-3-Clause */
/* store.c: the bitmap file of a running filter (see store.h), opened
 * and closed: the actions of a start, the identity of the disk judged
 * and recorded (identity.h), the first write of a run, the liveness
 * record, and what a failed sync means.  The store's state and its
 * locks are described in store-impl.h; live changes are in
 * store-commit.c, store-txn.c and store-resize.c.
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
#include "identity.h"
#include "report.h"
#include "selection.h"
#include "shadow.h"
#include "store.h"
#include "store-impl.h"
#include "testpause.h"
#include "util.h"

struct store store;
pthread_mutex_t meta_lock = PTHREAD_MUTEX_INITIALIZER;

void
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
void
condemn_locked (const char *why)
{
  struct bmerr err;
  struct bmf_txn *t;

  if (store.failed)
    return;
  store.failed = true;
  filter_error ("%s: %s: every enabled bitmap is now "
                "inconsistent: take a full backup", bmf_path (store.file),
                why);
  t = bmf_txn_begin (store.file, false, &err);
  if (t) {
    bmf_txn_mark_enabled_inconsistent (t);
    if (bmf_txn_commit (t, &err) == 0)
      return;
  }
  filter_error ("%s", err.msg);
}

static void
sync_failed (int errnum)
{
  char why[128];

  snprintf (why, sizeof why, "a sync of the bitmaps failed (fdatasync: %s)",
            strerror (errnum));
  pthread_mutex_lock (&meta_lock);
  condemn_locked (why);
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

  if (store.open_recorded && !store.failed &&
      bmf_alive (store.file, &err) == -1)
    filter_debug ("%s", err.msg);
}

void
store_alive (void)
{
  pthread_mutex_lock (&meta_lock);
  if (store.file)
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
  if (!store.open_recorded) {
    t = bmf_txn_begin (store.file, false, &err);
    if (t) {
      bmf_txn_set_open (t, true, dur_mode ());
      bmf_txn_disk_open (t);
    }
    if (t == NULL || bmf_txn_commit (t, &err) == -1) {
      filter_error ("%s", err.msg);
      condemn_locked ("recording that the file is in use failed");
      r = -1;
    }
    else {
      store.open_recorded = true;
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
    if (bmf_state (store.file)->seq == 1 && st->nr_bitmaps == 0)
      filter_error ("bitmap %s not found: %s does not "
                    "exist (deleted?): every change since it was last "
                    "written is lost to the bitmaps: take a full backup, "
                    "and start recording with action=add", cfg->bitmap,
                    cfg->path);
    else
      filter_error ("bitmap %s not found in %s%s",
                    cfg->bitmap, cfg->path,
                    cfg->nr_actions ? "" : " (use action=add to create it)");
    return -1;
  }
  if (bm->flags & BMF_INCONSISTENT) {
    filter_error ("bitmap %s is inconsistent: %s; it cannot "
                  "answer extents: remove it (action=remove) and take a "
                  "full backup", cfg->bitmap,
                  bmf_inconsistent_reason (store.file));
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
  store.file = bmf_open (cfg->path, store.readonly ? BMF_LOCK_SHARED
                         : BMF_LOCK_EXCLUSIVE, &err);
  if (store.file == NULL && err.errnum == ENOENT && !store.readonly) {
    store.file = bmf_create (cfg->path, cfg->create_mode, false, 0, &err);
    *created = store.file != NULL;
  }
  if (store.file == NULL) {
    filter_error ("%s", err.msg);
    if (err.errnum == ENOENT && store.readonly)
      filter_error ("a read-only server (-r) does not create "
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
  if (cfg->merge_file == NULL || bmf_same_file (store.file, cfg->merge_file))
    return 0;
  *src = bmf_open (cfg->merge_file, BMF_LOCK_SHARED, &err);
  if (*src == NULL) {
    filter_error ("%s", err.msg);
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
  if (!store.readonly && s->nr_recording == 0)
    fprintf (stderr, "nbdkit: dirtybitmap: warning: %s has no recording "
             "bitmap: writes to this disk are not tracked\n", cfg->path);
}

/* Say what a power loss during a durability=coarse run cost: the
 * bytes that each bitmap now calls dirty because of it.
 */
static void
recovery_notices (void)
{
  const struct bmf_state *st = bmf_state (store.file);
  size_t i;

  for (i = 0; i < st->nr_bitmaps; ++i)
    if (st->bitmaps[i].recovery != BMF_NOT_RECOVERED)
      fprintf (stderr, "nbdkit: dirtybitmap: %s: the machine stopped while "
               "durability=coarse was recording: bitmap %s: %" PRIu64
               " bytes are dirty because of it (from its coarse shadow)\n",
               bmf_path (store.file), st->bitmaps[i].name,
               st->bitmaps[i].recovered);
}

/* Record the disk in t (identity.h), or say why it cannot be. */
static void
disk_seen (struct bmf_txn *t)
{
  struct bmerr why;

  if (bmf_txn_disk_seen (t, store.disk_file, &why) == -1)
    filter_error ("%s", why.msg);
}

/* Judge the disk (identity.h): if it was written without the filter,
 * mark every enabled bitmap inconsistent and record it at once,
 * whatever becomes of this start; the disk as judged is where bitmaps
 * added from here on start.  A read-only server cannot mark
 * them: it refuses to start.
 */
static int
judge_disk_at_start (bool created)
{
  enum bmf_disk_verdict verdict;
  struct bmerr err, why;
  struct bmf_txn *t;

  verdict = bmf_check_disk (store.file, store.disk_file, &why);
  if (verdict != BMF_DISK_WRITTEN && verdict != BMF_DISK_UNKNOWN)
    return 0;
  if (store.readonly) {
    filter_error ("%s: the bitmaps cannot be trusted, and a "
                  "read-only server cannot mark them: start it writable "
                  "once, then take a full backup", why.msg);
    return -1;
  }
  filter_error ("%s: every enabled bitmap is now "
                "inconsistent: take a full backup", why.msg);
  t = bmf_txn_begin (store.file, false, &err);
  /* A disk that cannot be recorded is said by the start's commit. */
  if (t)
    (void) bmf_txn_disk_seen (t, store.disk_file, &why);
  if (t == NULL || bmf_txn_commit (t, &err) == -1 ||
      (created && bmf_publish (store.file, &err) == -1)) {
    filter_error ("%s", err.msg);
    return -1;
  }
  return 0;
}

/* The start's transaction: the actions, a restore begun or resumed
 * (store-restore.c), and what a writable start records (the run that
 * left a mark is over, the disk as it is now, the shadows of its
 * mode), all in one commit.  A read-only start only chooses the
 * selection (and refuses a disk half restored).
 */
static int
start_txn (const struct store_config *cfg, bool created, const char **sel)
{
  struct bmf *merge = NULL;
  struct bmf_txn *t = NULL;
  struct bmerr err;
  int r = -1;

  if (open_merge_source (cfg, &merge) == -1)
    return -1;
  if (!store.readonly) {
    t = cfg->nr_actions ? act_begin (store.file, cfg->actions,
                                     cfg->nr_actions, &err)
      : bmf_txn_begin (store.file, false, &err);
    if (t == NULL) {
      /* The start's actions name the parameter; a control client's
       * refusals, later, do not.
       */
      bmerr_append_hint (&err, "action=remove");
      filter_error ("%s", err.msg);
      goto out;
    }
  }
  if (restore_start_txn (cfg, t) == -1 ||
      initial_selection (cfg, t ? bmf_txn_state (t) : bmf_state (store.file),
                         sel) == -1)
    goto out;
  if (t == NULL) {
    r = 0;
    goto out;
  }
  /* The previous run's bits are made durable by this commit, so a
   * mark it left (a crash) can go.
   */
  bmf_txn_set_open (t, false, dur_mode ());
  /* The disk as judged above, and not yet written. */
  disk_seen (t);
  /* Shadows only while a coarse run keeps them exact. */
  if (bmf_txn_set_shadows (t, dur_mode () == BMF_COARSE ?
                           cfg->cgbits : 0, &err) == -1) {
    filter_error ("%s: %s", cfg->path, err.msg);
    goto out;
  }
  r = bmf_txn_commit (t, &err);
  t = NULL;                     /* freed by commit */
  if (r == 0 && created)
    r = bmf_publish (store.file, &err);
  if (r == -1)
    filter_error ("%s", err.msg);
 out:
  bmf_txn_abort (t);
  bmf_close (merge);
  return r;
}

/* Serve: the first set published, the selection, what the start says. */
static int
serve (const struct store_config *cfg, const char *sel)
{
  struct bitmap_set *s;
  struct bmerr err;

  s = set_build (store.file, bmf_state (store.file), NULL, false,
                 store.readonly ? VIEWS_READONLY : VIEWS_LIVE, &err);
  if (s == NULL) {
    filter_error ("%s", err.msg);
    return -1;
  }
  tracker_publish (s);
  if (selection_set (sel) == -1) {
    filter_error ("strdup: %m");
    return -1;
  }
  notices (cfg, s);
  /* Serving: commits sync only what they change. */
  if (!store.readonly && bmf_set_live (store.file, true, &err) == -1) {
    filter_error ("%s", err.msg);
    return -1;
  }
  filter_debug ("%s: %zu bitmaps, %zu recording, "
                "durability=%s%s", cfg->path, s->nr_named, s->nr_recording,
                cfg->durability == BMF_STRICT ? "strict" :
                cfg->durability == BMF_COARSE ? "coarse" : "flush",
                store.readonly ? ", read-only" : "");
  return 0;
}

int
store_open (const struct store_config *cfg)
{
  const char *sel;
  bool created;

  store.readonly = cfg->readonly;
  store.disk_file = cfg->disk_file;
  if (open_file (cfg, &created) == -1)
    return -1;
  recovery_notices ();
  dur_init (store.file, cfg->durability, tracker_tickets_set, sync_failed);
  tracker_init (first_write);
  if (judge_disk_at_start (created) == -1 ||
      start_txn (cfg, created, &sel) == -1)
    goto err;
  if (serve (cfg, sel) == -1)
    goto err;
  return 0;

 err:
  set_free (store.file, tracker_current ());
  tracker_publish (NULL);
  bmf_close (store.file);               /* a created file goes with it */
  store.file = NULL;
  return -1;
}

void
store_close (void)
{
  struct bitmap_set *s;
  struct bmerr err;
  struct bmf_txn *t;

  if (store.file == NULL)
    return;
  pthread_mutex_lock (&meta_lock);
  if (!store.readonly) {
    bmf_set_live (store.file, false, &err);
    if (!store.failed && !dur_failed () && bmf_sync (store.file) == -1) {
      filter_error ("%s: fdatasync: %m", bmf_path (store.file));
      store.failed = true;
    }
    store.failed |= dur_failed ();
    /* Every clean stop of a writable server records the disk, whatever
     * the run did (identity.h).
     */
    t = bmf_txn_begin (store.file, false, &err);
    if (t) {
      /* Bits may be lost: say so rather than leave bitmaps that lie. */
      if (store.failed)
        bmf_txn_mark_enabled_inconsistent (t);
      bmf_txn_set_open (t, false, dur_mode ());
      disk_seen (t);
    }
    if (t && bmf_txn_commit (t, &err) == 0)
      filter_debug ("%s: closed cleanly",
                    bmf_path (store.file));
    else
      filter_error ("%s", err.msg);
  }
  s = tracker_current ();
  tracker_publish (NULL);
  set_free (store.file, s);
  pthread_mutex_unlock (&meta_lock);
  bmf_close (store.file);
  store.file = NULL;
  selection_free ();
}

bool
store_is_bitmap_file (const char *path)
{
  return bmf_same_file (store.file, path);
}

int
store_sync (struct bmerr *err)
{
  if (store.readonly)
    return 0;
  if (dur_sync_to (dur_requested ()) == -1) {
    bmerr_set (err, EIO, "%s: the bitmaps cannot be made durable",
               bmf_path (store.file));
    return -1;
  }
  return 0;
}
