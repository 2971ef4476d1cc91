/* SPDX-License-Identifier: BSD-3-Clause */
/* tracker.h: the live bitmaps, as sets of mapped bitmaps with fast
 * views, and the write path that records into the current set.
 */

#ifndef DIRTYBITMAP_TRACKER_H
#define DIRTYBITMAP_TRACKER_H

#include <stdbool.h>
#include <stdint.h>

#include "bits.h"
#include "bmfile.h"
#include "error.h"

struct live_bitmap {
  const char *name;             /* NULL for a ghost (see tracker.c) */
  unsigned gbits;
  uint32_t flags;               /* BMF_ENABLED | BMF_INCONSISTENT */
  bool recording;               /* enabled and consistent */
  uint64_t data_offset;         /* its region of the file */
  uint64_t data_length;
  struct bits bits;             /* mapped shared from the file */
  /* Its coarse shadow (durability=coarse, coarse.h), if the file has
   * shadows: mapped shared, its region reserved like the data's.
   */
  unsigned sgbits;
  uint64_t shadow_offset;
  uint64_t shadow_length;
  struct bits shadow;
  /* While a copy of its bits is being taken (tracker_copy_begin): one
   * bit per page of its words (TRACKER_COPY_PAGE_WORDS) in which a bit
   * was set since.  Under bits_lock.
   */
  struct bits *copy_pages;
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

/* A set never changes once published, except that bits are set in
 * it; it is replaced by publishing another and freed after a grace
 * period (inflight.h).
 */
struct bitmap_set {
  bool sized;                   /* false until a connection saw the disk */
  uint64_t disk_size;
  size_t nr;                    /* bitmaps: the named ones, then ghosts */
  size_t nr_named;
  struct live_bitmap *bm;       /* the named ones in directory order */
  size_t nr_recording;
  struct live_bitmap **recording;
  bool fast;                    /* the views may be used */
  size_t nr_views;
  struct fast_view *views;      /* one per granularity of recording */
  /* durability=coarse (coarse.h): one per shadow granularity, only
   * durable bits; coarse_fast is false if a recording bitmap has no
   * shadow.
   */
  bool coarse_fast;
  size_t nr_cviews;
  struct fast_view *cviews;
};

enum set_views {
  VIEWS_NONE,                   /* every write takes the slow path */
  VIEWS_LIVE,                   /* views are (copies of) the bits now */
  VIEWS_READONLY,               /* mapped read-only: nothing records */
};

/* Build a set for state st of file f: every bitmap mapped writable,
 * sharing the mappings (and summaries) of regions that other sets map
 * already (mappings.h), so the cost of a build does not grow with the
 * size of the bitmaps that stay as they are.  With ghosts, each region
 * that records in cur but not in st is kept recording too, as a ghost:
 * a transitional set, which records both what was and what will be
 * while a transaction commits.  In strict and coarse mode, VIEWS_LIVE
 * views hold the bits as they are: the caller makes them durable
 * before publishing the set.  VIEWS_READONLY maps the bitmaps
 * read-only, for a server that never writes (-r), and records nothing.
 * The bits lock must be held when cur is current and records.
 */
extern struct bitmap_set *set_build (struct bmf *f,
                                     const struct bmf_state *st,
                                     const struct bitmap_set *cur,
                                     bool ghosts, enum set_views views,
                                     struct bmerr *err);

/* Map, ahead of set_build and outside the bits lock, every region of
 * st that no set maps yet: the transaction's new regions, which no
 * write can touch before a set that holds them is published.  Returns
 * a holder for set_premap_release (its references), NULL if there was
 * nothing to map or it failed (set_build then maps what is missing).
 */
extern struct bitmap_set *set_premap (struct bmf *f,
                                      const struct bmf_state *st);
extern void set_premap_release (struct bmf *f, struct bitmap_set *p);

/* A set of clean bitmaps in memory, named and flagged as in like, for
 * a disk of disk_size bytes: what a read-only server makes of a file
 * that has never seen its disk (no write was recorded, so nothing is
 * dirty, whatever the size).
 */
extern struct bitmap_set *set_build_clean (const struct bitmap_set *like,
                                           uint64_t disk_size,
                                           struct bmerr *err);

/* Unmap and free a set, and give its regions back (the caller holds
 * the file's metadata lock).
 */
extern void set_free (struct bmf *f, struct bitmap_set *s);
extern const struct live_bitmap *set_find (const struct bitmap_set *s,
                                           const char *name);
/* Bytes of the disk that are dirty in lb. */
extern uint64_t set_dirty_bytes (const struct bitmap_set *s,
                                 const struct live_bitmap *lb);

/* Called before the first bit of this run is set (the file records
 * that it is open); -1 fails the write.
 */
extern void tracker_init (int (*first_write) (void));

/* The current set (lock-free; valid while the request is in flight). */
extern struct bitmap_set *tracker_current (void);

/* Publish s, which must not be used for writing before (bits lock
 * held by the caller).
 */
extern void tracker_publish (struct bitmap_set *s);
/* How many sets have been published: a set built on the current one
 * may be published later only if none was meanwhile (a freed set's
 * address may be reused).  Stable under the bits lock or the store's
 * meta_lock, which every publisher holds.
 */
extern uint64_t tracker_generation (void);
extern void tracker_lock (void);
extern void tracker_unlock (void);

/* A copy of a recording bitmap's bits taken while writes set them,
 * then brought up to date at an instant when none does (a backup's
 * cut, store-cut.c: B's bits copied before the pause, writes going
 * on, then inside it only the pages changed since).
 *
 * tracker_copy_begin: from now on, each page of the bits of the
 * bitmap named name in the current set in which a bit is set is
 * noted; then its words are copied into dst (which holds at least
 * its words).  tracker_copy_finish, no write setting bits and the
 * current set the same (tracker_generation, checked by the caller):
 * the pages noted are copied again, and the noting stops.
 * tracker_copy_end stops it (a copy not finished).  All three under
 * the store's meta_lock; a copy that is begun must be ended or
 * finished.
 */
#define TRACKER_COPY_PAGE_WORDS 512     /* 4096 bytes */
struct tracker_copy {
  struct live_bitmap *lb;       /* NULL: no copy under way */
  uint64_t generation;          /* of the set it was begun in */
  struct bits pages;
};
extern int tracker_copy_begin (struct tracker_copy *tc, const char *name,
                               uint64_t *dst, struct bmerr *err);
extern void tracker_copy_finish (struct tracker_copy *tc, uint64_t *dst);
extern void tracker_copy_end (struct tracker_copy *tc);

/* The tickets a sync may cover (dur_init's covered): the last ticket
 * taken, read under the bits lock, so that each has its bits set.
 */
extern uint64_t tracker_tickets_set (void);

/* Before the disk is first written in this run (by a request, or by
 * the filter itself: a restore's fill): the file records that it is
 * open.  On error sets *err and returns -1.
 */
extern int tracker_first_write (int *err);

/* Before passing a pwrite/zero/trim down: set the bits of every
 * recording bitmap for [offset, offset+count), durably as the mode
 * and fua demand.  On error sets *err and returns -1.
 */
extern int tracker_track (uint64_t offset, uint32_t count, bool fua,
                          int *err);

#endif /* DIRTYBITMAP_TRACKER_H */
