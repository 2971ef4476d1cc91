/* SPDX-License-Identifier: BSD-3-Clause */
/* store.c: the filter's live bitmaps: the write path, group commit,
 * resizing, and the lifecycle of the bitmap file.
 *
 * Write path.  A request dirties granules [offset >> g, (offset +
 * count - 1) >> g] of every recording bitmap.  If all those bits are
 * already set (the common case once a disk has been written), the
 * test is a few atomic loads: no lock, no system call.  The test reads
 * one view per granularity (struct fast_view), whose bits are set only
 * where every recording bitmap of that granularity is dirty, so its
 * cost does not grow with the number of bitmaps.  Otherwise,
 * under `lock`: take a ticket (++requested), set the bits in the
 * shared mapping; the bits are then in the page cache and survive
 * kill -9.  Only then does the request go down.
 *
 * Durability.  `synced` is the highest ticket known to be on stable
 * storage.  A flush or a FUA write waits until synced reaches
 * `requested`: because a ticket is taken before its bits are set, a
 * request that found its bits set lock-free is covered.  One waiter
 * runs fdatasync for all the tickets taken so far while the others
 * wait on `cond` (group commit).
 *
 * With durability=strict the views hold only bits known to be synced,
 * so a request whose granules are durably dirty never waits; any
 * other takes a ticket, sets its bits, waits for the group commit
 * covering its ticket, then sets them in the views.
 *
 * The file records "open by this boot, in this mode" at the first
 * bit this run sets, not at startup: a run that writes nothing (a
 * backup reading through -r) leaves nothing to distrust if the machine
 * then dies.
 *
 * Resizing.  When a connection finds the disk size changed, the
 * bitmaps are copied into new regions of the new size under `lock`,
 * so no bit can be set meanwhile, committed, and the new set
 * published.  The old set stays mapped (late lock-free readers) and
 * its regions reserved until exit.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "store.h"
#include "util.h"

extern int dirtybitmap_debug_verbose;

static struct bmf *file;
static enum bmf_durability durability;
static struct bitmap_set *current;

/* Protects setting bits, `syncing`, resizing and the file's
 * metadata.  Never taken for a request whose granules are all dirty
 * (and, in strict mode, synced).
 */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static uint64_t requested;      /* tickets taken (atomic) */
static uint64_t synced;         /* tickets on stable storage (atomic) */
static bool syncing;            /* a thread is in fdatasync */
static bool failed;             /* fdatasync failed: bits may be lost */
static bool open_recorded;      /* the file says a run is writing it */

struct bitmap_set *
store_current (void)
{
  return __atomic_load_n (&current, __ATOMIC_ACQUIRE);
}

static void
free_set (struct bitmap_set *s)
{
  size_t i;

  while (s) {
    struct bitmap_set *older = s->older;
    for (i = 0; i < s->nr; ++i) {
      bmf_unmap (&s->bm[i].bits);
      free ((char *) s->bm[i].name);
    }
    for (i = 0; i < s->nr_views; ++i)
      if (s->views[i].owned)
        free (s->views[i].bits.words);
    free (s->views);
    free (s->bm);
    free (s->recording);
    free (s);
    s = older;
  }
}

/* Build the views of the recording bitmaps: one per granularity (and
 * size), the AND of its members.  In strict mode they start as the
 * mapped bits too: build_set runs just before a commit, whose
 * fdatasync makes them durable, and the set is used only after it.
 */
static int
build_views (struct bitmap_set *s)
{
  size_t i, j;

  s->views = calloc (MAX (s->nr_recording, 1), sizeof *s->views);
  if (s->views == NULL)
    goto fail;
  for (i = 0; i < s->nr_recording; ++i) {
    const struct live_bitmap *lb = s->recording[i];
    struct fast_view *v;
    uint64_t w, n = bits_nr_words (lb->bits.nr_bits);

    for (j = 0; j < s->nr_views; ++j)
      if (s->views[j].gbits == lb->gbits &&
          s->views[j].bits.nr_bits == lb->bits.nr_bits)
        break;
    v = &s->views[j];
    if (j == s->nr_views) {
      /* The first member: its own bits, until a second one comes or
       * strict mode needs a copy.
       */
      s->nr_views++;
      v->gbits = lb->gbits;
      v->bits.nr_bits = lb->bits.nr_bits;
      v->bits.words = lb->bits.words;
      v->owned = false;
      if (durability != BMF_STRICT || n == 0)
        continue;
    }
    if (n == 0)
      continue;
    if (!v->owned) {
      uint64_t *copy = malloc (n * sizeof *copy);
      if (copy == NULL)
        goto fail;
      memcpy (copy, v->bits.words, n * sizeof *copy);
      v->bits.words = copy;
      v->owned = true;
    }
    for (w = 0; w < n; ++w)
      v->bits.words[w] &= lb->bits.words[w];
  }
  return 0;

 fail:
  nbdkit_error ("dirtybitmap: cannot allocate the bitmap views: %m");
  return -1;
}

/* Map every bitmap of st writable and build its summary. */
static struct bitmap_set *
build_set (const struct bmf_state *st)
{
  struct bitmap_set *s = calloc (1, sizeof *s);
  size_t i;

  if (s == NULL ||
      (s->bm = calloc (MAX (st->nr_bitmaps, 1), sizeof *s->bm)) == NULL ||
      (s->recording = calloc (MAX (st->nr_bitmaps, 1),
                              sizeof *s->recording)) == NULL) {
    nbdkit_error ("dirtybitmap: calloc: %m");
    free_set (s);
    return NULL;
  }
  s->sized = st->sized;
  s->disk_size = st->disk_size;
  for (i = 0; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *b = &st->bitmaps[i];
    struct live_bitmap *lb = &s->bm[i];

    s->nr++;
    lb->gbits = b->gbits;
    lb->recording = (b->flags & BMF_ENABLED) &&
      !(b->flags & BMF_INCONSISTENT);
    lb->name = strdup (b->name);
    if (lb->name == NULL ||
        bmf_map (file, st, b, true, &lb->bits) == -1 ||
        (lb->bits.words && bits_build_summary (&lb->bits) == -1)) {
      if (lb->name == NULL || errno == ENOMEM)
        nbdkit_error ("dirtybitmap: bitmap %s: %m", b->name);
      free_set (s);
      return NULL;
    }
    if (lb->recording)
      s->recording[s->nr_recording++] = lb;
  }
  if (build_views (s) == -1) {
    free_set (s);
    return NULL;
  }
  return s;
}

/* Which bitmap answers extents, or -1 to pass them through; refuses
 * what the contract forbids.
 */
static int
select_bitmap (const struct store_config *cfg, const struct bmf_state *st)
{
  const struct bmf_bitmap *bm;

  if (cfg->bitmap == NULL || cfg->extents == EXTENTS_PASSTHROUGH)
    return -1;
  bm = bmf_find (st, cfg->bitmap);
  if (bm == NULL) {
    if (cfg->extents == EXTENTS_DEFAULT && cfg->nr_actions > 0)
      return -1;                /* e.g. action=remove */
    nbdkit_error ("dirtybitmap: bitmap %s not found in %s%s",
                  cfg->bitmap, cfg->path,
                  cfg->nr_actions ? "" : " (use action=add to create it)");
    return -2;
  }
  if (bm->flags & BMF_INCONSISTENT) {
    nbdkit_error ("dirtybitmap: bitmap %s is inconsistent: %s; it cannot "
                  "answer extents: remove it (action=remove) and take a "
                  "full backup", cfg->bitmap,
                  bmf_inconsistent_reason (file));
    return -2;
  }
  return bm - st->bitmaps;
}

int
store_open (const struct store_config *cfg, int *selected)
{
  struct bmf *merge = NULL;
  struct bmf_txn *t;
  struct bitmap_set *s;
  struct act_params p = {
    .bitmap = cfg->bitmap, .gbits = cfg->gbits,
  };
  /* A start that fails leaves no file it created. */
  const bool existed = access (cfg->path, F_OK) == 0;

  durability = cfg->durability;
  bmf_remove_hint = "action=remove";
  file = bmf_open (cfg->path, BMF_LOCK_EXCLUSIVE, true);
  if (file == NULL)
    return -1;
  if (cfg->merge_file) {
    merge = bmf_open (cfg->merge_file, BMF_LOCK_SHARED, false);
    if (merge == NULL)
      goto err;
    p.merge_file = merge;
  }
  t = cfg->nr_actions ?
    act_begin (file, cfg->actions, cfg->nr_actions, &p) :
    bmf_txn_begin (file, false);
  bmf_close (merge);
  if (t == NULL)
    goto err;

  *selected = select_bitmap (cfg, &t->st);
  if (*selected == -2) {
    bmf_txn_abort (t);
    goto err;
  }
  /* The previous run's bits are made durable by this commit, so a
   * mark it left (a crash) can go.
   */
  bmf_txn_set_open (t, false, durability);
  s = build_set (&t->st);
  if (s == NULL) {
    bmf_txn_abort (t);
    goto err;
  }
  if (bmf_txn_commit (t) == -1) {
    free_set (s);
    goto err;
  }
  current = s;
  nbdkit_debug ("dirtybitmap: %s: %zu bitmaps, %zu recording, "
                "durability=%s", cfg->path, s->nr, s->nr_recording,
                durability == BMF_STRICT ? "strict" : "flush");
  return 0;

 err:
  if (!existed && file->st.seq == 1)
    unlink (cfg->path);           /* still locked: nobody else has it */
  bmf_close (file);
  file = NULL;
  return -1;
}

/*----------------------------------------------------------------------
 * Group commit.
 */

/* After a failed sync the kernel may have dropped bits it could not
 * write: every bitmap that was recording may lie.
 */
static void
mark_enabled_inconsistent (struct bmf_txn *t)
{
  size_t i;

  for (i = 0; i < t->st.nr_bitmaps; ++i)
    if (t->st.bitmaps[i].flags & BMF_ENABLED)
      t->st.bitmaps[i].flags |= BMF_INCONSISTENT;
}

/* The first sync failed: say so in the file at once, so that a crash
 * before the clean close cannot leave bitmaps that look sound (the
 * close marks them again, in case this commit fails too on a failing
 * disk).  Called with lock held.
 */
static void
record_failure_locked (void)
{
  struct bmf_txn *t = bmf_txn_begin (file, false);

  if (t == NULL)
    return;
  mark_enabled_inconsistent (t);
  if (bmf_txn_commit (t) == 0)
    nbdkit_error ("dirtybitmap: %s: the enabled bitmaps are marked "
                  "inconsistent", file->path);
}

/* Wait until every ticket up to target is on stable storage.  Called
 * and returns with lock held.
 */
static int
sync_to_locked (uint64_t target)
{
  while (!failed && __atomic_load_n (&synced, __ATOMIC_ACQUIRE) < target) {
    uint64_t upto;
    int r;

    if (syncing) {
      pthread_cond_wait (&cond, &lock);
      continue;
    }
    syncing = true;
    upto = __atomic_load_n (&requested, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock (&lock);
    r = bmf_sync (file);
    if (r == -1)
      nbdkit_error ("dirtybitmap: %s: fdatasync: %m", file->path);
    else if (dirtybitmap_debug_verbose)
      nbdkit_debug ("dirtybitmap: synced tickets up to %" PRIu64, upto);
    pthread_mutex_lock (&lock);
    syncing = false;
    if (r == -1) {
      failed = true;
      record_failure_locked ();
    }
    else if (upto > synced)
      __atomic_store_n (&synced, upto, __ATOMIC_RELEASE);
    pthread_cond_broadcast (&cond);
  }
  if (failed) {
    errno = EIO;
    return -1;
  }
  return 0;
}

static int
sync_to (uint64_t target, int *err)
{
  if (__atomic_load_n (&synced, __ATOMIC_ACQUIRE) >= target && !failed)
    return 0;
  {
    SCOPED_LOCK (&lock);
    if (sync_to_locked (target) == 0)
      return 0;
  }
  nbdkit_error ("dirtybitmap: %s: the bitmaps cannot be made durable",
                file->path);
  *err = EIO;
  return -1;
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

  for (i = 0; i < s->nr_views; ++i) {
    const struct fast_view *v = &s->views[i];
    if (range_of (&v->bits, v->gbits, offset, count, &first, &last) &&
        !bits_all_set (&v->bits, first, last))
      return false;
  }
  return true;
}

/* Commit a change made while serving.  A failed commit may have left
 * its header in the page cache, current for the next open, while the
 * bits go on into the old regions: from then on nothing is trusted
 * (record_failure_locked rewrites that header slot with the marks).
 * Called with lock held.
 */
static int
commit_locked (struct bmf_txn *t)
{
  if (bmf_txn_commit (t) == 0)
    return 0;
  if (!failed) {
    failed = true;
    record_failure_locked ();
  }
  return -1;
}

/* Before the first bit of this run is set: record in the file that
 * it is open, by which boot and in which mode (for reboot detection).
 * Called with lock held.
 */
static int
record_open_locked (void)
{
  struct bmf_txn *t;

  if (open_recorded)
    return 0;
  t = bmf_txn_begin (file, false);
  if (t == NULL)
    return -1;
  bmf_txn_set_open (t, true, durability);
  if (commit_locked (t) == -1)
    return -1;
  open_recorded = true;
  return 0;
}

/* First touch, with lock held: take a ticket and set the bits in every
 * recording bitmap (durable == false); in flush mode that also makes
 * them set in the views.  In strict mode the caller then waits for the
 * sync and calls again with durable == true to set them in the views.
 * The views are set last: a lock-free reader that finds a bit there
 * relies on the bitmaps having it.
 */
static uint64_t
set_bits_locked (uint64_t offset, uint32_t count, bool durable)
{
  struct bitmap_set *s = current;
  uint64_t ticket = requested, first, last;
  size_t i;

  if (!durable) {
    __atomic_store_n (&requested, ++ticket, __ATOMIC_SEQ_CST);
    for (i = 0; i < s->nr_recording; ++i) {
      struct live_bitmap *lb = s->recording[i];
      if (range_of (&lb->bits, lb->gbits, offset, count, &first, &last) &&
          bits_set_range (&lb->bits, first, last) &&
          dirtybitmap_debug_verbose)
        nbdkit_debug ("dirtybitmap: %s: dirtied granules %" PRIu64
                      "-%" PRIu64 " (ticket %" PRIu64 ")",
                      lb->name, first, last, ticket);
    }
  }
  if (durable || durability != BMF_STRICT)
    for (i = 0; i < s->nr_views; ++i) {
      struct fast_view *v = &s->views[i];
      if (v->owned &&
          range_of (&v->bits, v->gbits, offset, count, &first, &last))
        bits_set_range (&v->bits, first, last);
    }
  return ticket;
}

int
store_track (uint64_t offset, uint32_t count, bool fua, int *err)
{
  const struct bitmap_set *s = store_current ();
  const bool strict = durability == BMF_STRICT;
  uint64_t ticket;

  if (count == 0 || s->nr_recording == 0)
    return 0;

  /* Fast path: no lock, no system call. */
  if (all_dirty (s, offset, count)) {
    if (strict || !fua)
      return 0;
    return sync_to (__atomic_load_n (&requested, __ATOMIC_SEQ_CST), err);
  }

  {
    SCOPED_LOCK (&lock);
    if (record_open_locked () == -1) {
      *err = EIO;
      return -1;
    }
    ticket = set_bits_locked (offset, count, false);
    if (!strict && !fua)
      return 0;
    if (sync_to_locked (ticket) == 0) {
      if (strict)
        set_bits_locked (offset, count, true);
      return 0;
    }
  }
  nbdkit_error ("dirtybitmap: %s: the bitmaps cannot be made durable",
                file->path);
  *err = EIO;
  return -1;
}

int
store_flush (int *err)
{
  return sync_to (__atomic_load_n (&requested, __ATOMIC_SEQ_CST), err);
}

/*----------------------------------------------------------------------
 * Resizing.
 */

int
store_resize (uint64_t disk_size)
{
  struct bitmap_set *old = store_current (), *s;
  struct bmf_txn *t;
  size_t i;

  if (old->sized && old->disk_size == disk_size)
    return 0;

  SCOPED_LOCK (&lock);
  old = current;
  if (old->sized && old->disk_size == disk_size)
    return 0;
  if (old->sized)
    nbdkit_debug ("dirtybitmap: %s: the disk %s from %" PRIu64 " to %"
                  PRIu64 " bytes: %s", file->path,
                  disk_size > old->disk_size ? "grew" : "shrank",
                  old->disk_size, disk_size,
                  disk_size > old->disk_size ?
                  "the new area is dirty in every bitmap" :
                  "bitmaps are cut to the new size");
  else
    nbdkit_debug ("dirtybitmap: %s: disk size is %" PRIu64,
                  file->path, disk_size);

  t = bmf_txn_begin (file, false);
  if (t == NULL)
    return -1;
  if (bmf_txn_resize (t, disk_size) == -1) {
    nbdkit_error ("dirtybitmap: cannot resize the bitmaps to %" PRIu64
                  " bytes: %s", disk_size, t->err);
    bmf_txn_abort (t);
    return -1;
  }
  s = build_set (&t->st);
  if (s == NULL) {
    bmf_txn_abort (t);
    return -1;
  }
  /* The old regions stay mapped in `old`: never reuse them here. */
  for (i = 0; i < file->st.nr_bitmaps; ++i)
    if (bmf_reserve (file, file->st.bitmaps[i].data_offset,
                     file->st.bitmaps[i].data_length) == -1) {
      nbdkit_error ("dirtybitmap: %m");
      bmf_txn_abort (t);
      free_set (s);
      return -1;
    }
  if (commit_locked (t) == -1) {
    free_set (s);
    return -1;
  }
  s->older = old;
  __atomic_store_n (&current, s, __ATOMIC_RELEASE);
  return 0;
}

/*----------------------------------------------------------------------
 * Closing.
 */

void
store_close (void)
{
  struct bmf_txn *t;

  if (file == NULL)
    return;
  {
    SCOPED_LOCK (&lock);
    if (!failed && bmf_sync (file) == -1) {
      nbdkit_error ("dirtybitmap: %s: fdatasync: %m", file->path);
      failed = true;
    }
    t = (open_recorded || failed) ? bmf_txn_begin (file, false) : NULL;
    if (t) {
      /* Bits may be lost: say so rather than leave bitmaps that lie. */
      if (failed)
        mark_enabled_inconsistent (t);
      bmf_txn_set_open (t, false, durability);
      if (bmf_txn_commit (t) == 0)
        nbdkit_debug ("dirtybitmap: %s: closed cleanly", file->path);
    }
    free_set (current);
    current = NULL;
  }
  bmf_close (file);
  file = NULL;
}
