/* SPDX-License-Identifier: BSD-3-Clause */
/* store.h: the filter's live bitmaps: the bitmap file opened and
 * mapped, the write-path tracking, group commit, and resizing.
 */

#ifndef DIRTYBITMAP_STORE_H
#define DIRTYBITMAP_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "actions.h"
#include "bits.h"
#include "bmfile.h"

struct live_bitmap {
  const char *name;             /* owned by the set */
  unsigned gbits;
  bool recording;               /* enabled and consistent */
  struct bits bits;             /* mapped shared from the file */
};

/* What the write path's fast test reads: for the recording bitmaps of
 * one granularity, bit i is set only if granule i is dirty in every
 * one of them (and, with durability=strict, known to be on stable
 * storage).  It only gains bits while its set lives.  A lone bitmap
 * in flush mode is its own view; otherwise the view is a copy.
 */
struct fast_view {
  unsigned gbits;
  struct bits bits;
  bool owned;                   /* bits.words allocated for the view */
};

/* A set never changes size once published; a resize publishes a new
 * one and keeps the old mapped until exit (late readers may hold it).
 */
struct bitmap_set {
  bool sized;                   /* false until a connection saw the disk */
  uint64_t disk_size;
  size_t nr;
  struct live_bitmap *bm;       /* in directory order */
  size_t nr_recording;
  struct live_bitmap **recording;
  size_t nr_views;
  struct fast_view *views;      /* one per granularity of recording */
  struct bitmap_set *older;     /* retired sets, freed at close */
};

enum extents_mode { EXTENTS_DEFAULT, EXTENTS_BITMAP, EXTENTS_PASSTHROUGH };

struct store_config {
  const char *path;             /* bitmap file */
  const char *bitmap;           /* bitmap= or NULL */
  const struct action *actions;
  size_t nr_actions;
  unsigned gbits;
  const char *merge_file;       /* or NULL */
  enum bmf_durability durability;
  enum extents_mode extents;
};

/* At .get_ready: open, lock, apply the actions, record the open.
 * Sets *selected to the index of bitmap= in the set, or -1 when the
 * extents pass through (explicitly, or by default because bitmap=
 * names no bitmap after the actions).
 */
extern int store_open (const struct store_config *cfg, int *selected);

/* The current set (lock-free). */
extern struct bitmap_set *store_current (void);

/* At .prepare: make the bitmaps cover a disk of this size. */
extern int store_resize (uint64_t disk_size);

/* Before passing a pwrite/zero/trim down: set the bits of every
 * recording bitmap for [offset, offset+count), durably as the mode
 * and fua demand.
 */
extern int store_track (uint64_t offset, uint32_t count, bool fua, int *err);

/* Make every bit set so far durable (.flush). */
extern int store_flush (int *err);

/* At .cleanup: sync, record the clean close, unmap, unlock. */
extern void store_close (void);

#endif /* DIRTYBITMAP_STORE_H */
