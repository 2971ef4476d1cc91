/* SPDX-License-Identifier: BSD-3-Clause */
/* store-query.c: what the rest of the filter reads of the store: the
 * selected bitmap and its pins, and the query.  Each reads the current
 * set under meta_lock (store-impl.h), so that no set is retired under
 * it.
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
#include "selection.h"
#include "store.h"
#include "store-impl.h"
#include "testpause.h"
#include "util.h"

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
                 "answer block status", name,
                 bmf_inconsistent_reason (store.file));
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
  bool failed;
  size_t i;

  memset (info, 0, sizeof *info);
  pthread_mutex_lock (&meta_lock);
  s = tracker_current ();
  info->path = strdup (bmf_path (store.file));
  info->bitmaps = calloc (MAX (s->nr_named, 1), sizeof *info->bitmaps);
  if (info->path == NULL || info->bitmaps == NULL)
    goto nomem;
  info->sized = s->sized;
  info->size = s->disk_size;
  info->durability = dur_mode ();
  info->readonly = store.readonly;
  failed = store.failed || dur_failed ();
  info->state = failed ? "failed" : store.open_recorded ? "open" : "closed";
  for (i = 0; i < s->nr_named; ++i) {
    const struct live_bitmap *lb = &s->bm[i];
    struct store_bitmap_info *bi = &info->bitmaps[info->nr];

    /* The bitmaps the file has: after a commit that failed, the set of
     * its transaction stays (it records into the old and the new
     * regions), but a bitmap that the transaction added is not there.
     */
    if (bmf_find (bmf_state (store.file), lb->name) == NULL)
      continue;
    bi->name = strdup (lb->name);
    if (bi->name == NULL)
      goto nomem;
    info->nr++;
    bi->granularity = UINT64_C (1) << lb->gbits;
    /* After a failed sync or commit the file marks (or is being made
     * to mark) every unsettled bitmap inconsistent: say what it says,
     * not what the set said when it was published.
     */
    bi->consistent = !(lb->flags & BMF_INCONSISTENT) &&
      !(failed && bmf_flags_unsettled (lb->flags));
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
