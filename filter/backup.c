/* SPDX-License-Identifier: BSD-3-Clause */
/* backup.c: the backup view's lifecycle (see backup.h).
 *
 * backup-begin makes its cut with the gate (inflight.h): new requests
 * wait, and once none is in flight it asks the layer below for the
 * disk's size (now, through a context of its own: the bitmaps know
 * only the size the last connection saw, and the disk may have changed
 * size since, e.g. while nbdkit was stopped), brings the bitmaps to
 * that size, copies the chosen bitmap's bits and publishes the
 * checkpoint recording (store_cut_make), and publishes the view before
 * the gate opens.  So a write completed before the reply is in the
 * view's data and in the old bitmap, and one started after it is kept
 * out of the view by copy-before-write and recorded in the checkpoint:
 * the same rule as a transaction.
 *
 * With backup-prepare first, what does not depend on the instant is
 * done before, the writes going on (the disk's size then, the scratch
 * store, the buffer of the frozen bits faulted in, the checkpoint's
 * transaction written and synced but for its header, its sets built:
 * store-cut.c); without it the begin does that too, with the gate
 * closed.  The checkpoint's commit (its
 * header made durable) comes before the gate opens too, unless the
 * begin is inside its own client's pause (a machine's cut): then it
 * comes once that pause ends (backup_finish_pending, called by
 * commands.c before any other command and after the resume), so that
 * the writers of the other disks the pause holds do not wait for this
 * one's sync.  Should that late commit fail, the view is failed and
 * the query says why.
 *
 * backup-end unpublishes the view, waits for a grace period (no write
 * still preserving into it), then ends it: its store goes, and reads
 * on connections still open fail.
 *
 * One view at a time.  Prepare, begin and end run on the control
 * thread (and backup_owner_gone when a control client goes);
 * connection threads look the view up (backup_current, atomically, on
 * the data path; backup_open_view and backup_query, under backup_lock,
 * from .open and .list_exports); backup_init runs at .get_ready,
 * backup_unload at .unload.
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

#include "backup.h"
#include "inflight.h"
#include "report.h"
#include "restore.h"
#include "store.h"

static const char *disk_export;
static char *default_dir;
static int (*read_disk_size) (uint64_t *size, struct bmerr *err);
static struct view *current;            /* atomic */
/* Protects `begun` (the backup begun) and the begin and end of the
 * one view: `current` changes only under it (readers load it
 * atomically and take a reference under it).  Taken before the
 * store's meta_lock (store-impl.h), never under it.
 */
static pthread_mutex_t backup_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  char *name, *bitmap, *checkpoint;
  const void *owner;
  bool end_with_owner;
  char *failure;                /* why it failed after its reply */
} begun;

/* A begin's work that does not depend on the instant (backup-prepare,
 * or a begin before it closes the gate): the disk's size then, the
 * scratch store, the buffer of B's frozen bits and the checkpoint's
 * transaction.  Used by the next begin of the same owner with the same
 * arguments, else freed.
 */
struct prepared {
  const void *owner;
  char *name, *bitmap, *checkpoint, *scratch_dir;
  uint64_t size;
  unsigned gbits;
  struct bits frozen;
  struct scratch *scratch;
  struct store_cut *cut;
};
static struct prepared *prepared;       /* under backup_lock */
/* A begin inside its own client's pause whose checkpoint is committed
 * later (backup_finish_pending); under backup_lock.
 */
static struct prepared *pending;

static void prepared_free (struct prepared *pr);

void
backup_init (const char *export_name, const char *dir,
             int (*disk_size) (uint64_t *size, struct bmerr *err))
{
  disk_export = export_name;
  read_disk_size = disk_size;
  free (default_dir);
  default_dir = strdup (dir);
}

void
backup_unload (void)
{
  prepared_free (prepared);
  prepared = NULL;
  free (default_dir);
  default_dir = NULL;
}

/* A backup view reads the disk below, which holds the restore's
 * source only where it is restored: none begins while a restore runs.
 */
static bool
restore_refuses (struct bmerr *err)
{
  struct restore_info ri;

  if (!restore_active () || restore_query (&ri, err) == -1)
    return restore_active ();
  bmerr_set (err, EBUSY, "the disk is being restored from %s (%" PRIu64
             " of %" PRIu64 " bytes restored): a backup can begin once the "
             "restore is complete", ri.source, ri.done_bytes, ri.size);
  restore_info_free (&ri);
  return true;
}

struct view *
backup_current (void)
{
  return __atomic_load_n (&current, __ATOMIC_ACQUIRE);
}

static void
forget_active_locked (void)
{
  free (begun.name);
  free (begun.bitmap);
  free (begun.checkpoint);
  free (begun.failure);
  memset (&begun, 0, sizeof begun);
}

/* The checks of a begin (and of a prepare), backup_lock held. */
static int
check_begin_locked (const struct backup_params *p, struct bmerr *err)
{
  if (backup_current ()) {
    bmerr_set (err, EBUSY, "a backup is already running (view %s): end it "
               "first (backup-end)", begun.name);
    return -1;
  }
  if (restore_refuses (err))
    return -1;
  if (strcmp (p->name, disk_export) == 0) {
    bmerr_set (err, EINVAL, "the view cannot be named %s: that is the "
               "disk's export name", p->name);
    return -1;
  }
  if (p->checkpoint && p->bitmap && strcmp (p->checkpoint, p->bitmap) == 0) {
    bmerr_set (err, EINVAL, "the checkpoint must be a new bitmap, not %s",
               p->bitmap);
    return -1;
  }
  return 0;
}

static void
prepared_free (struct prepared *pr)
{
  if (pr == NULL)
    return;
  store_cut_free (pr->cut);
  scratch_free (pr->scratch);
  free (pr->frozen.words);
  free (pr->name);
  free (pr->bitmap);
  free (pr->checkpoint);
  free (pr->scratch_dir);
  free (pr);
}

static bool
same (const char *a, const char *b)
{
  return a == b || (a && b && strcmp (a, b) == 0);
}

/* Whether pr was prepared by owner for a begin with these
 * arguments.
 */
static bool
prepared_for (const struct prepared *pr, const struct backup_params *p,
              const void *owner)
{
  return pr && pr->owner == owner && same (pr->name, p->name) &&
    same (pr->bitmap, p->bitmap) && same (pr->checkpoint, p->checkpoint) &&
    same (pr->scratch_dir, p->scratch);
}

/* What a begin needs that does not depend on the instant, the writes
 * going on (see the top).  backup_lock held.
 */
static struct prepared *
prepare_locked (const struct backup_params *p, const void *owner,
                struct bmerr *err)
{
  struct prepared *pr = calloc (1, sizeof *pr);

  if (pr == NULL ||
      (pr->name = strdup (p->name)) == NULL ||
      (p->bitmap && (pr->bitmap = strdup (p->bitmap)) == NULL) ||
      (p->checkpoint && (pr->checkpoint = strdup (p->checkpoint)) == NULL) ||
      (p->scratch && (pr->scratch_dir = strdup (p->scratch)) == NULL)) {
    bmerr_set (err, errno, "%s", strerror (errno));
    prepared_free (pr);
    return NULL;
  }
  pr->owner = owner;
  pr->gbits = BMF_DEFAULT_GBITS;
  if (read_disk_size (&pr->size, err) == -1 ||
      (pr->scratch = scratch_create (p->scratch ? p->scratch : default_dir,
                                     err)) == NULL ||
      (pr->cut = store_cut_prepare (p->bitmap, p->checkpoint, pr->size,
                                    &pr->frozen, &pr->gbits,
                                    err)) == NULL) {
    prepared_free (pr);
    return NULL;
  }
  return pr;
}

int
backup_prepare (const struct backup_params *p, const void *owner,
                struct bmerr *err)
{
  int r = -1;

  pthread_mutex_lock (&backup_lock);
  prepared_free (prepared);
  prepared = NULL;
  if (check_begin_locked (p, err) == 0 &&
      (prepared = prepare_locked (p, owner, err)) != NULL)
    r = 0;
  pthread_mutex_unlock (&backup_lock);
  return r;
}

/* The cut itself, the gate closed: the size read once no request is in
 * flight, so it is the disk's at the cut; B's bits and the checkpoint
 * (store_cut_make), and the view published.  Returns the view, or
 * NULL with err.  backup_lock held.
 */
static struct view *
cut_locked (struct prepared *pr, struct bmerr *err)
{
  uint64_t size;
  unsigned gbits = pr->gbits;
  struct view *v;

  if (read_disk_size (&size, err) == -1 ||
      store_cut_make (pr->cut, size, &pr->frozen, &gbits, err) == -1)
    return NULL;
  v = view_create (pr->name, size, pr->bitmap ? &pr->frozen : NULL, gbits,
                   pr->scratch, err);
  pr->scratch = NULL;
  if (v == NULL) {
    /* The checkpoint stays: it loses nothing. */
    struct bmerr e;
    if (store_cut_finish (pr->cut, &e) == -1)
      filter_error ("%s", e.msg);
    return NULL;
  }
  __atomic_store_n (&current, v, __ATOMIC_RELEASE);
  return v;
}

static int
remember_begun_locked (const struct backup_params *p, const void *owner,
                       bool end_with_owner, struct bmerr *err)
{
  begun.name = strdup (p->name);
  begun.bitmap = p->bitmap ? strdup (p->bitmap) : NULL;
  begun.checkpoint = p->checkpoint ? strdup (p->checkpoint) : NULL;
  begun.owner = owner;
  begun.end_with_owner = end_with_owner;
  if (begun.name == NULL || (p->bitmap && begun.bitmap == NULL) ||
      (p->checkpoint && begun.checkpoint == NULL)) {
    bmerr_set (err, ENOMEM, "out of memory");
    return -1;
  }
  return 0;
}

int
backup_begin (const struct backup_params *p, const void *owner,
              bool end_with_owner, bool defer, struct bmerr *err)
{
  struct prepared *pr;
  struct view *v;
  struct bmerr e;
  bool ok;

  pthread_mutex_lock (&backup_lock);
  pr = prepared_for (prepared, p, owner) ? prepared : NULL;
  if (pr == NULL)
    prepared_free (prepared);
  prepared = NULL;
  if (check_begin_locked (p, err) == -1)
    goto err;

  /* Without a preparation, the begin does it all with the gate
   * closed, as it always did: its client did not ask for less.  So is
   * the checkpoint committed, unless the client holds the pause: then
   * that waits until the pause ends (backup_finish_pending), so that
   * the writers of the other disks it holds do not wait for this one's
   * sync.
   */
  inflight_close ();
  if (pr == NULL)
    pr = prepare_locked (p, owner, err);
  v = pr ? cut_locked (pr, err) : NULL;
  ok = v && remember_begun_locked (p, owner, end_with_owner, err) == 0;
  if (v && !(ok && defer) && store_cut_finish (pr->cut, ok ? err : &e) == -1)
    ok = false;
  if (v && !ok) {
    /* No request has seen it: the gate was closed all along. */
    __atomic_store_n (&current, NULL, __ATOMIC_RELEASE);
    forget_active_locked ();
    view_end (v);
    view_unref (v);
  }
  inflight_open ();
  if (!ok)
    goto err;
  if (defer) {
    pending = pr;
    pr = NULL;
  }
  prepared_free (pr);
  pthread_mutex_unlock (&backup_lock);
  filter_debug ("backup view %s begun (%s%s%s%s)", p->name,
                p->bitmap ? "incremental from " : "full",
                p->bitmap ? p->bitmap : "",
                p->checkpoint ? ", checkpoint " : "",
                p->checkpoint ? p->checkpoint : "");
  return 0;

 err:
  prepared_free (pr);
  pthread_mutex_unlock (&backup_lock);
  return -1;
}

void
backup_finish_pending (void)
{
  struct prepared *pr;
  struct view *v;
  struct bmerr err;

  pthread_mutex_lock (&backup_lock);
  pr = pending;
  pending = NULL;
  v = backup_current ();
  if (v)
    view_ref (v);
  pthread_mutex_unlock (&backup_lock);
  /* Not under backup_lock: the commit waits for a grace period, the
   * gate open.
   */
  if (pr && store_cut_finish (pr->cut, &err) == -1) {
    pthread_mutex_lock (&backup_lock);
    if (v && v == backup_current ()) {
      free (begun.failure);
      begun.failure = strdup (err.msg);
    }
    pthread_mutex_unlock (&backup_lock);
    if (v)
      view_fail (v, err.msg);
  }
  if (v)
    view_unref (v);
  prepared_free (pr);
}

int
backup_end (const char *name, struct bmerr *err)
{
  struct view *v;

  backup_finish_pending ();
  pthread_mutex_lock (&backup_lock);
  v = backup_current ();
  if (v == NULL || strcmp (view_name (v), name) != 0) {
    bmerr_set (err, ENOENT, "no backup view named %s", name);
    pthread_mutex_unlock (&backup_lock);
    return -1;
  }
  __atomic_store_n (&current, NULL, __ATOMIC_RELEASE);
  forget_active_locked ();
  pthread_mutex_unlock (&backup_lock);

  inflight_grace ();            /* no write preserves into it any more */
  view_end (v);
  view_unref (v);
  filter_debug ("backup view %s ended", name);
  return 0;
}

void
backup_owner_gone (const void *owner)
{
  char *name, *checkpoint;
  struct bmerr err;

  backup_finish_pending ();
  pthread_mutex_lock (&backup_lock);
  if (prepared && prepared->owner == owner) {
    prepared_free (prepared);
    prepared = NULL;
  }
  if (backup_current () == NULL || begun.owner != owner ||
      !begun.end_with_owner) {
    pthread_mutex_unlock (&backup_lock);
    return;
  }
  name = strdup (begun.name);
  checkpoint = begun.checkpoint ? strdup (begun.checkpoint) : NULL;
  pthread_mutex_unlock (&backup_lock);
  if (name == NULL)
    return;

  filter_error ("backup view %s: the control client that began "
                "it has gone: the backup is ended%s%s", name,
                checkpoint ? " and its checkpoint removed: " : "",
                checkpoint ? checkpoint : "");
  if (backup_end (name, &err) == -1)
    filter_error ("%s", err.msg);
  if (checkpoint) {
    struct action remove = { .kind = ACT_REMOVE, .bitmap = checkpoint };
    if (store_transaction (&remove, 1, &err) == -1)
      filter_error ("%s", err.msg);
  }
  free (name);
  free (checkpoint);
}

struct view *
backup_open_view (const char *name)
{
  struct view *v;

  pthread_mutex_lock (&backup_lock);
  v = backup_current ();
  if (v && strcmp (view_name (v), name) == 0)
    view_ref (v);
  else
    v = NULL;
  pthread_mutex_unlock (&backup_lock);
  return v;
}

void
backup_query (struct backup_info *info)
{
  struct view *v;

  memset (info, 0, sizeof *info);
  pthread_mutex_lock (&backup_lock);
  v = backup_current ();
  if (v) {
    info->active = true;
    info->name = strdup (begun.name);
    info->bitmap = begun.bitmap ? strdup (begun.bitmap) : NULL;
    info->checkpoint =
      begun.checkpoint ? strdup (begun.checkpoint) : NULL;
    info->failure = begun.failure ? strdup (begun.failure) : NULL;
    view_info (v, &info->view);
  }
  pthread_mutex_unlock (&backup_lock);
}

void
backup_info_free (struct backup_info *info)
{
  free (info->name);
  free (info->bitmap);
  free (info->checkpoint);
  free (info->failure);
  memset (info, 0, sizeof *info);
}
