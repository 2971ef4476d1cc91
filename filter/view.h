/* SPDX-License-Identifier: BSD-3-Clause */
/* view.h: a backup view: the disk frozen at a cut, kept by
 * copy-before-write while the disk goes on being written.
 */

#ifndef DIRTYBITMAP_VIEW_H
#define DIRTYBITMAP_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include <nbdkit-filter.h>

#include "bits.h"
#include "error.h"
#include "scratch.h"

struct view;

/* What the view holds: the whole disk (frozen NULL), or the granules
 * that frozen (a copy of a bitmap's bits at the cut, granules of
 * 2^frozen_gbits bytes) says changed.  The view takes frozen and
 * scratch over.  One reference, for the caller.
 */
extern struct view *view_create (const char *name, uint64_t size,
                                 struct bits *frozen, unsigned frozen_gbits,
                                 struct scratch *scratch,
                                 struct bmerr *err);
extern void view_ref (struct view *v);
extern void view_unref (struct view *v);
/* No more requests: its reads fail from now on, its store goes. */
extern void view_end (struct view *v);

/* The view is not the disk at its cut any more, or its backup cannot
 * complete: why, logged once; the query says failed.
 */
extern void view_fail (struct view *v, const char *why);

extern const char *view_name (const struct view *v);
extern uint64_t view_size (const struct view *v);

struct view_info {
  uint64_t size, granularity;
  bool full, failed;
  uint64_t preserved_bytes;     /* kept in the store, released or not */
  uint64_t lost_bytes;          /* overwritten before they could be kept */
  uint64_t scratch_bytes;       /* storage the store uses */
};
extern void view_info (struct view *v, struct view_info *info);

/* The disk's side: before a write, zero or trim of [offset,
 * offset+count) goes down through next, keep the old data of every
 * granule the view still needs.  Never fails: a store that fails
 * breaks the view, not the write.
 */
extern void view_before_write (struct view *v, nbdkit_next *next,
                               uint32_t count, uint64_t offset);

/* The view's side: its connections read through next (the layer below,
 * opened read-only for them).
 */
extern int view_read (struct view *v, nbdkit_next *next, void *buf,
                      uint32_t count, uint64_t offset, int *err);
/* The client is done with [offset, offset+count): stop holding it. */
extern int view_release (struct view *v, uint32_t count, uint64_t offset,
                         int *err);
extern int view_extents (struct view *v, uint32_t count, uint64_t offset,
                         uint32_t flags, struct nbdkit_extents *extents,
                         int *err);

#endif /* DIRTYBITMAP_VIEW_H */
