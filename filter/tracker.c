/* SPDX-License-Identifier: BSD-3-Clause */
/* tracker.c: the live bitmaps and the write path (see tracker.h).
 *
 * Write path.  A request dirties granules [offset >> g, (offset +
 * count - 1) >> g] of every recording bitmap.  If all those bits are
 * already set (the common case once a disk has been written), the
 * test is a few atomic loads: no lock, no system call.  The test reads
 * one view per granularity (struct fast_view), whose bits are set only
 * where every recording bitmap of that granularity is dirty, so its
 * cost does not grow with the number of bitmaps.  Otherwise, under
 * `bits_lock`: take a ticket, set the bits in the shared mapping; they
 * are then in the page cache and survive kill -9.  Only then does the
 * request go down.  With durability=strict the views hold only bits
 * known to be synced: a first touch sets its bits, waits for the group
 * commit covering its ticket (durability.c), then sets them in the
 * views of the same set.  With durability=coarse the bits stay as in
 * flush mode and the shadows carry the durability (coarse.c).
 *
 * Sets.  Bits are only ever set under `bits_lock`, in the set that is
 * current then, and a set is replaced under `bits_lock` too: so a
 * transaction that copies bits and publishes under it loses none.  A
 * request holds the set it loaded for as long as it is in flight;
 * the owner frees a replaced set after a grace period.
 *
 * Ghosts.  While a transaction commits, the file still says what it
 * said before, and a crash then must find every write in the old
 * state's recording bitmaps; after the commit, in the new state's.
 * So the set published for that time (transitional) records into
 * both: the new state's bitmaps, and as nameless ghosts, the old
 * regions that the new state stops recording into (a cleared
 * bitmap's old data, a disabled or removed bitmap).  It has no fast
 * path: its views would have to cover ghosts and fresh regions alike,
 * and it lives for one commit.
 */

#include <config.h>

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>

#include <nbdkit-filter.h>

#include "coarse.h"
#include "durability.h"
#include "mappings.h"
#include "report.h"
#include "shadow.h"
#include "testpause.h"
#include "tracker.h"
#include "util.h"

extern int dirtybitmap_debug_verbose;

static struct bitmap_set *current;
static uint64_t generation;     /* publishes so far (tracker.h) */
/* bits_lock: see the top of this file (a first touch's ticket and
 * bits, the publication of sets, the tickets a sync covers).  Taken
 * under the store's meta_lock, never the other way; no sync and no
 * wait for requests under it.
 */
static pthread_mutex_t bits_lock = PTHREAD_MUTEX_INITIALIZER;
static int (*first_write) (void);
static bool first_write_done;   /* atomic */

void
tracker_init (int (*fn) (void))
{
  first_write = fn;
}

struct bitmap_set *
tracker_current (void)
{
  return __atomic_load_n (&current, __ATOMIC_ACQUIRE);
}

void
tracker_publish (struct bitmap_set *s)
{
  __atomic_store_n (&current, s, __ATOMIC_RELEASE);
  __atomic_add_fetch (&generation, 1, __ATOMIC_RELEASE);
}

uint64_t
tracker_generation (void)
{
  return __atomic_load_n (&generation, __ATOMIC_ACQUIRE);
}

void
tracker_lock (void)
{
  pthread_mutex_lock (&bits_lock);
}

void
tracker_unlock (void)
{
  pthread_mutex_unlock (&bits_lock);
}

uint64_t
tracker_tickets_set (void)
{
  uint64_t taken;

  pthread_mutex_lock (&bits_lock);
  taken = dur_requested ();
  pthread_mutex_unlock (&bits_lock);
  return taken;
}

/*----------------------------------------------------------------------
 * Sets.
 */

/* Let a member's bits go: a shared mapping, or bits of its own. */
static void
release (struct bmf *f, struct bits *b)
{
  if (b->map_base)
    mapping_put (f, b);
  else
    bmf_unmap (b);
}

void
set_free (struct bmf *f, struct bitmap_set *s)
{
  size_t i;

  if (s == NULL)
    return;
  for (i = 0; i < s->nr; ++i) {
    release (f, &s->bm[i].bits);
    release (f, &s->bm[i].shadow);
    free ((char *) s->bm[i].name);
  }
  coarse_free_views (s);
  for (i = 0; i < s->nr_views; ++i)
    if (s->views[i].owned)
      free (s->views[i].bits.words);
  free (s->views);
  free (s->bm);
  free (s->recording);
  free (s);
}

const struct live_bitmap *
set_find (const struct bitmap_set *s, const char *name)
{
  size_t i;

  for (i = 0; i < s->nr_named; ++i)
    if (strcmp (s->bm[i].name, name) == 0)
      return &s->bm[i];
  return NULL;
}

static void
add_dirty (uint64_t offset, uint64_t length, bool dirty, void *opaque)
{
  if (dirty)
    *(uint64_t *) opaque += length;
}

uint64_t
set_dirty_bytes (const struct bitmap_set *s, const struct live_bitmap *lb)
{
  uint64_t bytes = 0;

  if (lb->bits.words)
    bits_for_each_run (&lb->bits, lb->gbits, s->disk_size, add_dirty,
                       &bytes);
  return bytes;
}

/* Whether lb is a member of view v. */
static bool
view_of (const struct fast_view *v, const struct live_bitmap *lb)
{
  return v->gbits == lb->gbits && v->bits.nr_bits == lb->bits.nr_bits;
}

/* Whether words [BITS_SUMMARY_WORDS b, ...) may have bits in every
 * member of v.
 */
static bool
all_may_be_set (const struct bitmap_set *s, const struct fast_view *v,
                uint64_t b)
{
  size_t i;

  for (i = 0; i < s->nr_recording; ++i)
    if (view_of (v, s->recording[i]) &&
        !bits_block_may_be_set (&s->recording[i]->bits, b))
      return false;
  return true;
}

/* Build the views of the recording bitmaps: one per granularity (and
 * size), the AND of its members.  A lone member is its own view
 * (unless strict mode needs a copy).  Several: their AND, computed only
 * where the summaries say that every member may have bits; elsewhere
 * the view stays as calloc left it, pages never touched.  So a view
 * of a fresh bitmap (a checkpoint just added) and an old one costs
 * its summaries, not a pass over the bits of both: a backup's
 * preparation builds one under bits_lock, the writers' lock.
 */
static int
build_views (struct bitmap_set *s)
{
  const bool copy = dur_mode () == BMF_STRICT;
  size_t i, j, nr;

  s->views = calloc (MAX (s->nr_recording, 1), sizeof *s->views);
  if (s->views == NULL)
    return -1;
  for (i = 0; i < s->nr_recording; ++i) {
    const struct live_bitmap *lb = s->recording[i];

    for (j = 0; j < s->nr_views; ++j)
      if (view_of (&s->views[j], lb))
        break;
    if (j == s->nr_views) {
      s->nr_views++;
      s->views[j].gbits = lb->gbits;
      s->views[j].bits.nr_bits = lb->bits.nr_bits;
      s->views[j].bits.words = lb->bits.words;
    }
  }
  for (j = 0; j < s->nr_views; ++j) {
    struct fast_view *v = &s->views[j];
    uint64_t n = bits_nr_words (v->bits.nr_bits), b, w;

    for (i = nr = 0; i < s->nr_recording; ++i)
      nr += view_of (v, s->recording[i]);
    if (n == 0 || (nr == 1 && !copy))
      continue;                 /* its own bits */
    if ((v->bits.words = calloc (n, sizeof (uint64_t))) == NULL)
      return -1;
    v->owned = true;
    for (b = 0; b * BITS_SUMMARY_WORDS < n; ++b) {
      const uint64_t w0 = b * BITS_SUMMARY_WORDS;
      const uint64_t w1 = MIN (n, w0 + BITS_SUMMARY_WORDS);
      bool first = true;
      if (!all_may_be_set (s, v, b))
        continue;
      for (i = 0; i < s->nr_recording; ++i) {
        const struct live_bitmap *lb = s->recording[i];
        if (!view_of (v, lb))
          continue;
        for (w = w0; w < w1; ++w)
          v->bits.words[w] = first ? lb->bits.words[w]
            : v->bits.words[w] & lb->bits.words[w];
        first = false;
      }
    }
  }
  return 0;
}

/* Whether old's member lb keeps recording into its region in st. */
static bool
kept (const struct bmf_state *st, const struct live_bitmap *lb)
{
  size_t i;

  for (i = 0; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *b = &st->bitmaps[i];
    if (b->data_offset == lb->data_offset && b->gbits == lb->gbits &&
        b->data_length == lb->data_length &&
        (st->has_shadows ? b->shadow_offset : 0) == lb->shadow_offset &&
        (b->flags & BMF_ENABLED) && !(b->flags & BMF_INCONSISTENT))
      return true;
  }
  return false;
}

/* Map a region of the file into bits, sharing the mapping with the
 * sets that map it already: map it (with map) only if none does, and
 * then build its summary and reserve its space.
 */
static int
share (struct bmf *f, uint64_t offset, uint64_t length, bool writable,
       bool summary, struct bits *out, int (*map) (void *), void *opaque,
       struct bmerr *err)
{
  uint64_t nr_bits = out->nr_bits;

  if (length == 0 || mapping_find (offset, length, writable, out))
    return 0;
  if (map (opaque) == -1)
    return -1;
  out->nr_bits = nr_bits ? nr_bits : out->nr_bits;
  if (summary && out->words && bits_build_summary (out) == -1)
    goto nomem;
  /* Bits of its own (a read-only server's copy, rebuilt from a coarse
   * shadow) are not the file's pages: not shared.
   */
  if (out->map_base == NULL)
    return 0;
  if (bmf_reserve (f, offset, length) == -1)
    goto nomem;
  if (mapping_add (offset, length, writable, out) == -1) {
    bmf_unreserve (f, offset, length);
    goto nomem;
  }
  return 0;

 nomem:
  bmerr_set (err, errno, "%s: %s", bmf_path (f), strerror (errno));
  bmf_unmap (out);
  return -1;
}

struct map_args {
  struct bmf *f;
  const struct bmf_state *st;
  const struct bmf_bitmap *b;
  bool writable;
  struct bits *out;
  struct bmerr *err;
};

static int
map_data (void *opaque)
{
  struct map_args *a = opaque;
  return bmf_map (a->f, a->st, a->b, a->writable, a->out, a->err);
}

static int
map_shadow_region (void *opaque)
{
  struct map_args *a = opaque;
  return bmf_map_shadow (a->f, a->st, a->b, a->out, a->err);
}

/* Map one bitmap into lb (and, if it records, its shadow): shared
 * mappings, their regions reserved.
 */
static int
map_member (struct bmf *f, const struct bmf_state *st,
            const struct bmf_bitmap *b, bool writable,
            struct live_bitmap *lb, struct bmerr *err)
{
  struct map_args a = { f, st, b, writable, &lb->bits, err };

  lb->gbits = b->gbits;
  lb->flags = b->flags;
  lb->recording = (b->flags & BMF_ENABLED) && !(b->flags & BMF_INCONSISTENT);
  lb->data_offset = b->data_offset;
  lb->data_length = b->data_length;
  memset (&lb->bits, 0, sizeof lb->bits);
  lb->bits.nr_bits = st->sized ? bmf_nr_bits (st->disk_size, b->gbits) : 0;
  if (share (f, b->data_offset, b->data_length, writable, true, &lb->bits,
             map_data, &a, err) == -1)
    return -1;
  if (writable && lb->recording && st->has_shadows) {
    lb->sgbits = bmf_shadow_gbits (st, b);
    lb->shadow_offset = b->shadow_offset;
    lb->shadow_length = b->shadow_length;
    memset (&lb->shadow, 0, sizeof lb->shadow);
    lb->shadow.nr_bits = st->sized ?
      bmf_nr_bits (st->disk_size, lb->sgbits) : 0;
    a.out = &lb->shadow;
    if (share (f, b->shadow_offset, b->shadow_length, true, false,
               &lb->shadow, map_shadow_region, &a, err) == -1) {
      release (f, &lb->bits);
      return -1;
    }
  }
  return 0;
}

struct bitmap_set *
set_build (struct bmf *f, const struct bmf_state *st,
           const struct bitmap_set *cur, bool ghosts, enum set_views views,
           struct bmerr *err)
{
  const struct bitmap_set *old = ghosts ? cur : NULL;
  size_t i, max = st->nr_bitmaps + (old ? old->nr_recording : 0);
  struct bitmap_set *s = calloc (1, sizeof *s);

  if (s == NULL ||
      (s->bm = calloc (MAX (max, 1), sizeof *s->bm)) == NULL ||
      (s->recording = calloc (MAX (max, 1), sizeof *s->recording)) == NULL)
    goto nomem;
  s->sized = st->sized;
  s->disk_size = st->disk_size;
  for (i = 0; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *b = &st->bitmaps[i];
    struct live_bitmap *lb = &s->bm[s->nr];

    if ((lb->name = strdup (b->name)) == NULL)
      goto nomem;
    s->nr++;
    s->nr_named++;
    if (map_member (f, st, b, views != VIEWS_READONLY, lb, err) == -1)
      goto err;
    if (lb->recording && views != VIEWS_READONLY)
      s->recording[s->nr_recording++] = lb;
  }
  for (i = 0; old && i < old->nr_recording; ++i) {
    const struct live_bitmap *o = old->recording[i];
    const struct bmf_bitmap ghost = {
      .name = (char *) "(old data)", .gbits = o->gbits,
      .flags = BMF_ENABLED, .data_offset = o->data_offset,
      .data_length = o->data_length, .shadow_offset = o->shadow_offset,
      .shadow_length = o->shadow_length,
    };
    /* The shadow granularity of the ghost is its old one. */
    const struct bmf_state ost = {
      .sized = old->sized, .disk_size = old->disk_size,
      .has_shadows = o->shadow.words != NULL, .cgbits = o->sgbits,
    };
    struct live_bitmap *lb = &s->bm[s->nr];

    if (kept (st, o))
      continue;
    s->nr++;
    if (map_member (f, &ost, &ghost, true, lb, err) == -1)
      goto err;
    s->recording[s->nr_recording++] = lb;
  }
  s->fast = views == VIEWS_LIVE;
  if (s->fast && build_views (s) == -1)
    goto nomem;
  if (s->fast && dur_mode () == BMF_COARSE && coarse_build_views (s) == -1)
    goto nomem;
  return s;

 nomem:
  bmerr_set (err, errno, "%s: cannot build the live bitmaps: %s",
             bmf_path (f), strerror (errno));
 err:
  set_free (f, s);
  return NULL;
}

struct bitmap_set *
set_premap (struct bmf *f, const struct bmf_state *st)
{
  struct bmerr err;

  /* A set that maps them all is a holder of one reference each: the
   * regions mapped already just gain one.
   */
  return set_build (f, st, NULL, false, VIEWS_NONE, &err);
}

void
set_premap_release (struct bmf *f, struct bitmap_set *p)
{
  set_free (f, p);
}

struct bitmap_set *
set_build_clean (const struct bitmap_set *like, uint64_t disk_size,
                 struct bmerr *err)
{
  struct bitmap_set *s = calloc (1, sizeof *s);
  size_t i;

  if (s == NULL ||
      (s->bm = calloc (MAX (like->nr_named, 1), sizeof *s->bm)) == NULL ||
      (s->recording = calloc (1, sizeof *s->recording)) == NULL)
    goto nomem;
  s->sized = true;
  s->disk_size = disk_size;
  for (i = 0; i < like->nr_named; ++i) {
    struct live_bitmap *lb = &s->bm[i];

    if ((lb->name = strdup (like->bm[i].name)) == NULL)
      goto nomem;
    s->nr = ++s->nr_named;
    lb->gbits = like->bm[i].gbits;
    lb->flags = like->bm[i].flags;
    lb->bits.nr_bits = bmf_nr_bits (disk_size, lb->gbits);
    lb->bits.words = calloc (MAX (bits_nr_words (lb->bits.nr_bits), 1), 8);
    if (lb->bits.words == NULL || bits_build_summary (&lb->bits) == -1)
      goto nomem;
  }
  return s;

 nomem:
  bmerr_set (err, errno, "cannot build the bitmaps: %s", strerror (errno));
  set_free (NULL, s);
  return NULL;
}

/*----------------------------------------------------------------------
 * The write path.
 */

/* The granules of 2^gbits bytes that [offset, offset+count) touches,
 * clipped to b (a request past its end can only come from a
 * connection that saw the disk bigger before another saw it shrink).
 */
static inline bool
range_of (const struct bits *b, unsigned gbits,
          uint64_t offset, uint32_t count, uint64_t *first, uint64_t *last)
{
  *first = offset >> gbits;
  *last = (offset + count - 1) >> gbits;
  if (*first >= b->nr_bits)
    return false;
  *last = MIN (*last, b->nr_bits - 1);
  return true;
}

/* The fast test: are the granules dirty in every recording bitmap
 * (and, in strict mode, durably so)?
 */
static inline bool
all_dirty (const struct bitmap_set *s, uint64_t offset, uint32_t count)
{
  uint64_t first, last;
  size_t i;

  if (!s->fast)
    return false;
  for (i = 0; i < s->nr_views; ++i) {
    const struct fast_view *v = &s->views[i];
    if (range_of (&v->bits, v->gbits, offset, count, &first, &last) &&
        !bits_all_set (&v->bits, first, last))
      return false;
  }
  return true;
}

/* Take, before bits_lock, the page faults that setting the bits may
 * cause: the pages of a region just added, or written back by a sync.
 * (The set may be replaced meanwhile: the new one shares most
 * regions, and a fault missed costs only time.)
 */
static void
prefault (struct bitmap_set *s, uint64_t offset, uint32_t count)
{
  uint64_t first, last;
  size_t i;

  for (i = 0; i < s->nr_recording; ++i) {
    struct live_bitmap *lb = s->recording[i];
    if (range_of (&lb->bits, lb->gbits, offset, count, &first, &last))
      bits_prefault (&lb->bits, first, last);
  }
}

/* Set the bits in every recording bitmap of s (bits_lock held), and
 * note the pages changed of one being copied (tracker_copy_begin).
 */
static void
set_bits_locked (struct bitmap_set *s, uint64_t offset, uint32_t count)
{
  const uint64_t page_bits = TRACKER_COPY_PAGE_WORDS * 64;
  uint64_t first, last;
  size_t i;

  for (i = 0; i < s->nr_recording; ++i) {
    struct live_bitmap *lb = s->recording[i];
    coarse_set_shadow_locked (lb, offset, count);
    if (!range_of (&lb->bits, lb->gbits, offset, count, &first, &last) ||
        !bits_set_range (&lb->bits, first, last))
      continue;
    if (lb->copy_pages)
      bits_set_range (lb->copy_pages, first / page_bits, last / page_bits);
    if (dirtybitmap_debug_verbose)
      filter_debug ("%s: dirtied granules %" PRIu64
                    "-%" PRIu64, lb->name ? lb->name : "(old data)",
                    first, last);
  }
}

int
tracker_copy_begin (struct tracker_copy *tc, const char *name, uint64_t *dst,
                    struct bmerr *err)
{
  struct live_bitmap *lb = (struct live_bitmap *) set_find (current, name);
  uint64_t w, nr_words, nr_pages;

  memset (tc, 0, sizeof *tc);
  if (lb == NULL) {
    bmerr_set (err, ENOENT, "bitmap %s not found", name);
    return -1;
  }
  nr_words = bits_nr_words (lb->bits.nr_bits);
  nr_pages = (nr_words + TRACKER_COPY_PAGE_WORDS - 1) / TRACKER_COPY_PAGE_WORDS;
  tc->pages.nr_bits = nr_pages;
  tc->pages.words = calloc (MAX (bits_nr_words (nr_pages), 1),
                            sizeof (uint64_t));
  if (tc->pages.words == NULL) {
    bmerr_set (err, errno, "%s", strerror (errno));
    return -1;
  }
  pthread_mutex_lock (&bits_lock);
  lb->copy_pages = &tc->pages;
  tc->lb = lb;
  tc->generation = generation;
  pthread_mutex_unlock (&bits_lock);
  /* Writes set bits meanwhile: each word is read whole, and a page
   * whose bits change after this read is noted, for the finish.
   */
  for (w = 0; w < nr_words; ++w)
    dst[w] = __atomic_load_n (&lb->bits.words[w], __ATOMIC_RELAXED);
  test_pause_point ("base-copied");
  return 0;
}

/* Stop noting (bits_lock held).  The set it was begun in may have been
 * replaced since, and freed: then no writer reaches lb any more (a
 * writer sets bits in the set current under bits_lock), and it is not
 * touched.
 */
static void
copy_stop_locked (struct tracker_copy *tc)
{
  if (tc->lb && tc->generation == generation)
    tc->lb->copy_pages = NULL;
  tc->lb = NULL;
}

void
tracker_copy_finish (struct tracker_copy *tc, uint64_t *dst)
{
  const struct live_bitmap *lb = tc->lb;
  uint64_t p, nr_words;

  assert (lb && tc->generation == tracker_generation ());
  nr_words = bits_nr_words (lb->bits.nr_bits);
  pthread_mutex_lock (&bits_lock);
  for (p = bits_next_set (&tc->pages, 0, tc->pages.nr_bits);
       p < tc->pages.nr_bits;
       p = bits_next_set (&tc->pages, p + 1, tc->pages.nr_bits)) {
    uint64_t w = p * TRACKER_COPY_PAGE_WORDS;
    memcpy (&dst[w], &lb->bits.words[w],
            MIN (TRACKER_COPY_PAGE_WORDS, nr_words - w) * sizeof (uint64_t));
  }
  copy_stop_locked (tc);
  pthread_mutex_unlock (&bits_lock);
  free (tc->pages.words);
  tc->pages.words = NULL;
}

void
tracker_copy_end (struct tracker_copy *tc)
{
  pthread_mutex_lock (&bits_lock);
  copy_stop_locked (tc);
  pthread_mutex_unlock (&bits_lock);
  free (tc->pages.words);
  tc->pages.words = NULL;
}

/* Set the bits in the views of s (bits_lock held).  The views are set
 * after the bitmaps: a lock-free reader that finds a bit in a view
 * relies on the bitmaps having it.
 */
static void
set_views_locked (struct bitmap_set *s, uint64_t offset, uint32_t count)
{
  uint64_t first, last;
  size_t i;

  for (i = 0; s->fast && i < s->nr_views; ++i) {
    struct fast_view *v = &s->views[i];
    if (v->owned &&
        range_of (&v->bits, v->gbits, offset, count, &first, &last))
      bits_set_range (&v->bits, first, last);
  }
}

int
tracker_first_write (int *err)
{
  if (!__atomic_load_n (&first_write_done, __ATOMIC_ACQUIRE)) {
    if (first_write () == -1) {
      *err = EIO;
      return -1;
    }
    __atomic_store_n (&first_write_done, true, __ATOMIC_RELEASE);
  }
  return 0;
}

int
tracker_track (uint64_t offset, uint32_t count, bool fua, int *err)
{
  struct bitmap_set *s = tracker_current ();
  const enum bmf_durability mode = dur_mode ();
  const bool strict = mode == BMF_STRICT, coarse = mode == BMF_COARSE;
  uint64_t ticket;
  bool sync;

  if (count == 0)
    return 0;
  /* Recording or not, the disk changes from here on. */
  if (tracker_first_write (err) == -1)
    return -1;
  if (s->nr_recording == 0)
    return 0;

  /* Fast path: no lock, no system call. */
  if (all_dirty (s, offset, count) &&
      (!coarse || coarse_all_durable (s, offset, count))) {
    if (strict || !fua)
      return 0;
    /* The bits it found were set after their writer took its ticket:
     * the last ticket covers them.
     */
    if (dur_sync_to (dur_requested ()) == 0)
      return 0;
    goto fail;
  }

  prefault (s, offset, count);
  pthread_mutex_lock (&bits_lock);
  s = current;
  /* The ticket before the bits: a lock-free reader that finds them
   * (in a view, or in the bitmap itself when it is its own view) is
   * covered by the last ticket.  A sync covers the tickets taken
   * before it reads them under this lock (durability.c), so their
   * bits are set by then.
   */
  ticket = dur_take_ticket ();
  set_bits_locked (s, offset, count);
  if (!strict)
    set_views_locked (s, offset, count);
  sync = strict || fua || (coarse && !coarse_all_durable (s, offset, count));
  pthread_mutex_unlock (&bits_lock);

  if (!sync)
    return 0;
  if (dur_sync_to (ticket) == -1)
    goto fail;
  if (strict || coarse) {
    pthread_mutex_lock (&bits_lock);
    if (strict)
      set_views_locked (s, offset, count);
    else
      coarse_set_views_locked (s, offset, count);
    pthread_mutex_unlock (&bits_lock);
  }
  return 0;

 fail:
  filter_error ("the bitmaps cannot be made durable");
  *err = EIO;
  return -1;
}
