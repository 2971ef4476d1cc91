/* SPDX-License-Identifier: BSD-3-Clause */
/* backup.c: the backup view's lifecycle (see backup.h).
 *
 * backup-begin makes its cut with the gate (inflight.h): new requests
 * wait, and once none is in flight it asks the layer below for the
 * disk's size (now, through a context of its own: the bitmaps know
 * only the size the last connection saw, and the disk may have changed
 * size since, e.g. while nbdkit was stopped), brings the bitmaps to
 * that size and copies the chosen bitmap's bits (store_freeze: the
 * gate holds requests, not a resize from a new connection's .prepare,
 * so both are done under the store's lock), adds the checkpoint (a
 * transaction, store.c), and publishes the view before the gate
 * opens.  So a write completed before the reply is in
 * the view's data and in the old bitmap, and one started after it is
 * kept out of the view by copy-before-write and recorded in the
 * checkpoint: the same rule as a transaction.
 *
 * backup-end unpublishes the view, waits for a grace period (no write
 * still preserving into it), then ends it: its store goes, and reads
 * on connections still open fail.
 *
 * One view at a time.  Begin and end run on the control thread (and
 * backup_owner_gone when a control client goes); connection threads
 * look the view up (backup_current, atomically, on the data path;
 * backup_open_view and backup_query, under backup_lock, from .open and
 * .list_exports); backup_init runs at .get_ready, backup_unload at
 * .unload.
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
} begun;

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
  memset (&begun, 0, sizeof begun);
}

int
backup_begin (const struct backup_params *p, const void *owner,
              bool end_with_owner, struct bmerr *err)
{
  struct bits frozen = { .words = NULL }, *fp = NULL;
  struct scratch *scratch;
  struct view *v = NULL;
  unsigned gbits = BMF_DEFAULT_GBITS;
  uint64_t size;

  pthread_mutex_lock (&backup_lock);
  if (backup_current ()) {
    bmerr_set (err, EBUSY, "a backup is already running (view %s): end it "
               "first (backup-end)", begun.name);
    goto err;
  }
  if (restore_refuses (err))
    goto err;
  if (strcmp (p->name, disk_export) == 0) {
    bmerr_set (err, EINVAL, "the view cannot be named %s: that is the "
               "disk's export name", p->name);
    goto err;
  }
  if (p->checkpoint && p->bitmap && strcmp (p->checkpoint, p->bitmap) == 0) {
    bmerr_set (err, EINVAL, "the checkpoint must be a new bitmap, not %s",
               p->bitmap);
    goto err;
  }
  scratch = scratch_create (p->scratch ? p->scratch : default_dir, err);
  if (scratch == NULL)
    goto err;

  /* The cut.  The size is read once no request is in flight, so it is
   * the disk's at the cut; the bitmaps are brought to it and the bits
   * copied from one set (store_freeze).
   */
  inflight_close ();
  if (read_disk_size (&size, err) == -1 ||
      store_freeze (p->bitmap, size, &frozen, &gbits, err) == -1)
    goto err_open;
  if (p->bitmap)
    fp = &frozen;
  if (p->checkpoint) {
    struct action add = { .kind = ACT_ADD, .bitmap = p->checkpoint,
                          .gbits = gbits };
    if (store_transaction (&add, 1, err) == -1)
      goto err_open;
  }
  v = view_create (p->name, size, fp, gbits, scratch, err);
  scratch = NULL;
  fp = NULL;
  if (v == NULL)
    goto err_open;              /* the checkpoint stays: it loses nothing */
  __atomic_store_n (&current, v, __ATOMIC_RELEASE);
  inflight_open ();

  begun.name = strdup (p->name);
  begun.bitmap = p->bitmap ? strdup (p->bitmap) : NULL;
  begun.checkpoint = p->checkpoint ? strdup (p->checkpoint) : NULL;
  begun.owner = owner;
  begun.end_with_owner = end_with_owner;
  pthread_mutex_unlock (&backup_lock);
  filter_debug ("backup view %s begun (%s%s%s%s)", p->name,
                p->bitmap ? "incremental from " : "full",
                p->bitmap ? p->bitmap : "",
                p->checkpoint ? ", checkpoint " : "",
                p->checkpoint ? p->checkpoint : "");
  return 0;

 err_open:
  inflight_open ();
  scratch_free (scratch);
  free (frozen.words);
 err:
  pthread_mutex_unlock (&backup_lock);
  return -1;
}

int
backup_end (const char *name, struct bmerr *err)
{
  struct view *v;

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

  pthread_mutex_lock (&backup_lock);
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
  memset (info, 0, sizeof *info);
}
