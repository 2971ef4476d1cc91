/* SPDX-License-Identifier: BSD-3-Clause */
/* store-resize.c: the bitmaps made to cover the disk's size, as a
 * connection (.prepare) or a backup's cut (store_cut_make) finds it: a
 * live transaction (store-commit.c) in which a grown area is dirty in
 * every bitmap and a shrink cuts them.
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

#include "identity.h"
#include "report.h"
#include "store.h"
#include "store-impl.h"

static int
apply_resize (struct bmf_txn **t, void *opaque, struct bmerr *err)
{
  *t = bmf_txn_begin (store.file, false, err);
  return *t ? bmf_txn_resize (*t, *(uint64_t *) opaque, err) : -1;
}

/* (store-impl.h) The sets to retire (after the lock is released:
 * retire_sets) go to retire.  A read-only server never writes the
 * file: a file that has never seen its disk is all clean, in memory,
 * at whatever size the disk has; one that has keeps its size, and a
 * grown area reads as changed (extents.c, view.c).
 */
int
resize_locked (uint64_t disk_size, struct bitmap_set **retire,
               struct bmerr *err)
{
  struct bitmap_set *s = tracker_current ();

  if (s->sized && s->disk_size == disk_size)
    return 0;
  if (store.readonly) {
    struct bitmap_set *clean;

    if (s->sized) {
      filter_debug ("disk size %" PRIu64 ", the file says %"
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
  if (s->sized) {
    /* What the start judged of the disk no longer holds (identity.h):
     * a clean stop records it as it is then.
     */
    bmf_disk_written (store.file);
    filter_debug ("%s: the disk %s from %" PRIu64 " to %"
                  PRIu64 " bytes: %s", bmf_path (store.file),
                  disk_size > s->disk_size ? "grew" : "shrank",
                  s->disk_size, disk_size,
                  disk_size > s->disk_size ?
                  "the new area is dirty in every bitmap" :
                  "bitmaps are cut to the new size");
  }
  else
    filter_debug ("%s: disk size is %" PRIu64,
                  bmf_path (store.file), disk_size);
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
    filter_error ("cannot resize the bitmaps to %" PRIu64
                  " bytes: %s", disk_size, err.msg);
  pthread_mutex_unlock (&meta_lock);
  retire_sets (retire);
  return r;
}
