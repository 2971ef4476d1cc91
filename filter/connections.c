/* SPDX-License-Identifier: BSD-3-Clause */
/* connections.c: what the filter does per connection and per request.
 *
 * A connection is to the disk (the export named by export=) or to the
 * backup view (the view's export name, see backup.c).  Every data
 * request of either is counted in flight for its whole life
 * (inflight.c), so that bitmap changes and the view's cut are exact
 * cuts through the writes.
 *
 * On the disk, a pwrite, zero or trim first keeps what the view still
 * needs of the data it overwrites (view.c), then sets its bits in every
 * recording bitmap (tracker.c), then goes down; extents come from the
 * connection's bitmap (extents.c).  While a restore runs (restore.h),
 * reads, changes, flushes and extents go through it.
 *
 * On the view, reads give the frozen disk, extents the frozen bitmap,
 * a trim releases what it covers, and writes are refused.  The layer
 * below is opened read-only for it.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>

#include <nbdkit-filter.h>

#include "backup.h"
#include "cmdline.h"
#include "connections.h"
#include "durability.h"
#include "extents.h"
#include "inflight.h"
#include "params.h"
#include "report.h"
#include "restore.h"
#include "selection.h"
#include "store.h"
#include "tracker.h"
#include "view.h"

struct handle {
  struct view *view;            /* a connection to the view, or NULL */
  char *bitmap;                 /* answers block status; NULL: below does */
  bool pinned;                  /* it has: the bitmap cannot be cleared */
};

const char *
conn_default_export (nbdkit_next_default_export *next,
                     nbdkit_backend *nxdata, int readonly, int is_tls)
{
  return params.export_name;
}

int
conn_list_exports (nbdkit_next_list_exports *next, nbdkit_backend *nxdata,
                   int readonly, int is_tls, struct nbdkit_exports *exports)
{
  struct backup_info b;
  int r = nbdkit_add_export (exports, params.export_name, NULL);

  backup_query (&b);
  if (r == 0 && b.active)
    r = nbdkit_add_export (exports, b.name, "backup view");
  backup_info_free (&b);
  return r;
}

/* One bitmap file describes one disk: the export named by export=
 * ("" asks for the default, which is the same), and the backup view.
 * Any other name is refused before anything is touched.
 */
void *
conn_open (nbdkit_next_open *next, nbdkit_context *nxdata,
           int readonly, const char *exportname, int is_tls)
{
  struct handle *h;

  if (cmdline_check_open (readonly) == -1)
    return NULL;
  h = calloc (1, sizeof *h);
  if (h == NULL) {
    filter_error ("calloc: %m");
    return NULL;
  }
  if (exportname[0] != '\0' && strcmp (exportname, params.export_name) != 0 &&
      (h->view = backup_open_view (exportname)) == NULL) {
    filter_error ("export \"%s\" refused: the bitmaps in %s "
                  "track export \"%s\" (export=)", exportname,
                  params.bitmap_file, params.export_name);
    goto err;
  }
  if (next (nxdata, readonly || h->view, params.export_name) == -1)
    goto err;
  if (h->view == NULL && selection_get (&h->bitmap) == -1) {
    filter_error ("%m");
    goto err;
  }
  return h;

 err:
  if (h->view)
    view_unref (h->view);
  free (h);
  return NULL;
}

void
conn_close (void *handle)
{
  struct handle *h = handle;

  if (h->view)
    view_unref (h->view);
  if (h->pinned)
    selection_unpin (h->bitmap);
  free (h->bitmap);
  free (h);
}

/* The disk size is known per connection: make the bitmaps cover it. */
int
conn_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct handle *h = handle;
  int64_t size = next->get_size (next);

  if (size == -1)
    return -1;
  if (h->view)
    return 0;
  if (restore_active () && restore_check_connection (next) == -1)
    return -1;
  return store_resize (size);
}

int64_t
conn_get_size (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;

  return h->view ? (int64_t) view_size (h->view) : next->get_size (next);
}

/* The view accepts trims (which release what it holds), so it cannot
 * be read-only for the protocol; its writes are refused one by one.
 */
int
conn_can_write (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;

  return h->view ? 1 : next->can_write (next);
}

int
conn_can_trim (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;

  return h->view ? 1 : next->can_trim (next);
}

int
conn_can_zero (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;

  return h->view ? NBDKIT_ZERO_NONE : next->can_zero (next);
}

int
conn_can_fua (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;

  return h->view ? NBDKIT_FUA_NONE : next->can_fua (next);
}

int
conn_can_flush (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;

  return h->view ? 1 : next->can_flush (next);
}

int
conn_can_cache (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;

  return h->view ? NBDKIT_CACHE_NONE : next->can_cache (next);
}

int
conn_can_multi_conn (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;

  return h->view ? 1 : next->can_multi_conn (next);
}

int
conn_can_extents (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;
  int r = next->can_extents (next);

  if (r == -1)
    return -1;
  return h->view || h->bitmap ? 1 : r;
}

/*----------------------------------------------------------------------
 * Requests.
 */

/* Enter, or fail the request: held by a pause, it had to give up. */
static bool
enter (unsigned *token, int *err)
{
  if (inflight_enter (token) == 0)
    return true;
  *err = ESHUTDOWN;
  return false;
}

/* Before a change to the disk goes down: the view keeps what it needs,
 * the bitmaps record it.
 */
static int
before_change (nbdkit_next *next, uint32_t count, uint64_t offset,
               uint32_t flags, int *err)
{
  struct view *v = backup_current ();

  if (v)
    view_before_write (v, next, count, offset);
  return tracker_track (offset, count, flags & NBDKIT_FLAG_FUA, err);
}

static int
view_refuses (struct handle *h, const char *what, int *err)
{
  filter_error ("backup view %s: %s refused: the view is "
                "read-only", view_name (h->view), what);
  *err = EPERM;
  return -1;
}

int
conn_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  unsigned token;
  int r;

  if (!enter (&token, err))
    return -1;
  if (h->view)
    r = view_read (h->view, next, buf, count, offset, err);
  else if (restore_active ())
    r = restore_read (next, buf, count, offset, flags, err);
  else
    r = next->pread (next, buf, count, offset, flags, err);
  inflight_exit (token);
  return r;
}

/* A change of the disk, as the restore calls it down (restore.h). */
struct change {
  enum { CHANGE_PWRITE, CHANGE_ZERO, CHANGE_TRIM } kind;
  nbdkit_next *next;
  const void *buf;
  uint32_t count;
  uint64_t offset;
  uint32_t flags;
};

static int
change_down (void *opaque, int *err)
{
  const struct change *c = opaque;
  nbdkit_next *next = c->next;

  if (before_change (next, c->count, c->offset, c->flags, err) == -1)
    return -1;
  switch (c->kind) {
  case CHANGE_PWRITE:
    return next->pwrite (next, c->buf, c->count, c->offset, c->flags, err);
  case CHANGE_ZERO:
    return next->zero (next, c->count, c->offset, c->flags, err);
  case CHANGE_TRIM:
    return next->trim (next, c->count, c->offset, c->flags, err);
  }
  abort ();
}

/* A pwrite, zero or trim of the disk, in flight. */
static int
change (const struct change *c, int *err)
{
  if (!restore_active ())
    return change_down ((void *) c, err);
  if (c->kind == CHANGE_TRIM)
    return restore_may_trim (c->count, c->offset) ?
      change_down ((void *) c, err) : 0;
  return restore_change (c->next, c->count, c->offset, c->flags,
                         change_down, (void *) c, err);
}

int
conn_pwrite (nbdkit_next *next, void *handle, const void *buf,
             uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  unsigned token;
  int r;

  if (h->view)
    return view_refuses (h, "a write", err);
  if (!enter (&token, err))
    return -1;
  r = change (&(struct change) { CHANGE_PWRITE, next, buf, count, offset,
                                 flags }, err);
  inflight_exit (token);
  return r;
}

int
conn_zero (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  struct handle *h = handle;
  unsigned token;
  int r;

  if (h->view)
    return view_refuses (h, "a write of zeroes", err);
  if (!enter (&token, err))
    return -1;
  r = change (&(struct change) { CHANGE_ZERO, next, NULL, count, offset,
                                 flags }, err);
  inflight_exit (token);
  return r;
}

int
conn_trim (nbdkit_next *next, void *handle, uint32_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  struct handle *h = handle;
  unsigned token;
  int r;

  if (!enter (&token, err))
    return -1;
  if (h->view)
    r = view_release (h->view, count, offset, err);
  else
    r = change (&(struct change) { CHANGE_TRIM, next, NULL, count, offset,
                                   flags }, err);
  inflight_exit (token);
  return r;
}

/* Bits first: after a flush, every completed write's bits are on
 * stable storage, whatever happens to the disk below.
 */
int
conn_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  struct handle *h = handle;
  unsigned token;
  int r = 0;

  if (h->view)
    return 0;
  if (!enter (&token, err))
    return -1;
  if (dur_sync_to (dur_requested ()) == -1) {
    filter_error ("the bitmaps cannot be made durable");
    *err = EIO;
    r = -1;
  }
  else if (restore_active () && restore_sync (err) == -1)
    r = -1;
  else
    r = next->flush (next, flags, err);
  inflight_exit (token);
  return r;
}

/* Block status, as the restore asks for it (restore_extents): from
 * the layer below, or from the connection's bitmap.
 */
struct answer {
  nbdkit_next *next;
  const struct bitmap_set *s;
  const struct live_bitmap *lb;         /* NULL: from below */
  uint32_t count;
  uint64_t offset;
  uint32_t flags;
};

static int
answer (void *opaque, struct nbdkit_extents *ex, int *err)
{
  const struct answer *a = opaque;

  if (a->lb)
    return bitmap_extents (a->next, a->s, a->lb, a->count, a->offset,
                           a->flags, ex, err);
  return a->next->extents (a->next, a->count, a->offset, a->flags, ex, err);
}

/* In flight: the extents of a, restored or not. */
static int
disk_extents (struct answer *a, struct nbdkit_extents *extents, int *err)
{
  if (!restore_active ())
    return answer (a, extents, err);
  return restore_extents (a->next, a->count, a->offset, a->flags, extents,
                          a->lb ? NBDKIT_EXTENT_HOLE : 0, answer, a, err);
}

/* The connection's bitmap, in flight.  From the first block status
 * on, the bitmap is this client's map: nobody may clear or remove it
 * until the client goes.  The pin waits for a transaction that has
 * checked the pins (store.c), so that the set read below is the one
 * after it.
 */
static int
bitmap_of (struct handle *h, struct answer *a, int *err)
{
  if (!h->pinned && store_pin (h->bitmap) == 0)
    h->pinned = true;
  a->s = tracker_current ();
  a->lb = set_find (a->s, h->bitmap);
  if (a->lb == NULL || !h->pinned) {
    filter_error ("bitmap %s %s", h->bitmap,
                  h->pinned ? "no longer exists" : ": out of memory");
    *err = EIO;
    return -1;
  }
  return 0;
}

int
conn_extents (nbdkit_next *next, void *handle, uint32_t count,
              uint64_t offset, uint32_t flags,
              struct nbdkit_extents *extents, int *err)
{
  struct handle *h = handle;
  struct answer a = { next, NULL, NULL, count, offset, flags };
  unsigned token;
  int r;

  if (h->view == NULL && h->bitmap == NULL && !restore_active ())
    return next->extents (next, count, offset, flags, extents, err);
  if (!enter (&token, err))
    return -1;
  if (h->view)
    r = view_extents (h->view, count, offset, flags, extents, err);
  else if (h->bitmap && bitmap_of (h, &a, err) == -1)
    r = -1;
  else
    r = disk_extents (&a, extents, err);
  inflight_exit (token);
  return r;
}

int
conn_cache (nbdkit_next *next, void *handle, uint32_t count,
            uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  unsigned token;
  int r;

  if (h->view)
    return 0;
  if (!enter (&token, err))
    return -1;
  r = next->cache (next, count, offset, flags, err);
  inflight_exit (token);
  return r;
}
