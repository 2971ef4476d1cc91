/* SPDX-License-Identifier: BSD-3-Clause */
/* txn-sync.c: what a commit makes durable before and after it writes
 * the header (see txn.c for the order).
 *
 * By default the whole file: fdatasync.  A server that commits while
 * clients write (bmf_set_live) asks for less, because a
 * whole-file sync also writes back every page of every bitmap being
 * recorded, which the writers dirty again at once: a checkpoint would
 * cost a write-back of all the bitmaps, and the writers would wait.
 * What the new header needs that may not be on stable storage yet is
 * only:
 *
 *   - the regions it refers to that the committed header does not (a
 *     new directory, new or copied bits, new shadows);
 *   - the bits of each bitmap that stops recording: until now they
 *     were set in the page cache, and from now on they must survive a
 *     power loss (a bitmap that is not recording stays consistent);
 *
 * and, after the header, the header.  Writers go on setting bits,
 * and the bitmaps that stop recording go on receiving them until the
 * transaction takes effect, so their regions are synced twice: first
 * with the rest (bmf_txn_prepare, most of the write-back), then just
 * before the header (bmf_txn_finish), while the caller lets no bit be
 * set, so that the header can never be on stable storage before a bit
 * of theirs.  New regions can be synced early
 * (bmf_txn_sync_new), before the writers set bits in them: then only
 * their allocation is written.  Each region is synced with msync
 * (a ranged fdatasync: its pages, the file's metadata, and a cache
 * flush).  The bits of the bitmaps that go on recording stay in
 * the page cache, as between flushes: the run's record already says
 * that they are lost with the machine.  And the regions of the
 * committed header that are not recording are on stable storage
 * already, since every commit that stopped one of them synced it.
 */

#include <config.h>

#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/mman.h>

#include "txn-impl.h"
#include "util.h"

void
bmf_set_live (struct bmf *f, bool live)
{
  f->live = live;
}

static bool
recording (const struct bmf_bitmap *b)
{
  return (b->flags & BMF_ENABLED) && !(b->flags & BMF_INCONSISTENT);
}

/* b stops recording with this commit (was: as committed), and it must
 * be consistent: its bits must be durable before the header.  (One
 * marked inconsistent is not trusted anyway, and is marked when the
 * disk may be failing: syncing it first would only put the mark at
 * risk.)
 */
static bool
stops (const struct bmf_bitmap *was, const struct bmf_bitmap *b)
{
  return recording (was) && !recording (b) &&
    !(b->flags & BMF_INCONSISTENT);
}

/* The committed bitmap whose data is the region at offset, or NULL. */
static const struct bmf_bitmap *
committed_at (const struct bmf_state *st, uint64_t offset)
{
  size_t i;

  for (i = 0; i < st->nr_bitmaps; ++i)
    if (st->bitmaps[i].data_length && st->bitmaps[i].data_offset == offset)
      return &st->bitmaps[i];
  return NULL;
}

/* True if the committed state refers to exactly this region. */
static bool
committed_region (const struct bmf_state *st, uint64_t offset,
                  uint64_t length)
{
  size_t i;

  if (st->dir_length && st->dir_offset == offset && st->dir_length == length)
    return true;
  if (st->has_shadows && st->shadow_table_offset == offset &&
      st->shadow_table_length == length)
    return true;
  for (i = 0; i < st->nr_bitmaps; ++i)
    if ((st->bitmaps[i].data_offset == offset &&
         st->bitmaps[i].data_length == length) ||
        (st->has_shadows && st->bitmaps[i].shadow_offset == offset &&
         st->bitmaps[i].shadow_length == length))
      return true;
  return false;
}

/* A ranged fdatasync of [offset, offset + length): msync. */
static int
sync_range (struct bmf *f, uint64_t offset, uint64_t length)
{
  const uint64_t page = sysconf (_SC_PAGESIZE);
  const uint64_t start = offset & ~(page - 1);
  void *p;
  int r;

  length += offset - start;
  p = mmap (NULL, length, PROT_READ, MAP_SHARED, f->fd, start);
  if (p == MAP_FAILED)
    return -1;
  r = msync (p, length, MS_SYNC);
  munmap (p, length);
  return r;
}

/* The regions to sync at one point, synced together. */
struct to_sync {
  struct bmf_region *r;
  size_t n, cap;
};

static int
add (struct to_sync *ts, uint64_t offset, uint64_t length)
{
  if (length == 0)
    return 0;
  if (ts->n == ts->cap) {
    size_t cap = ts->cap ? ts->cap * 2 : 8;
    struct bmf_region *r = realloc (ts->r, cap * sizeof *r);
    if (r == NULL)
      return -1;
    ts->r = r;
    ts->cap = cap;
  }
  ts->r[ts->n++] = (struct bmf_region) { offset, length };
  return 0;
}

static int
add_new (struct bmf_txn *t, struct to_sync *ts, uint64_t offset,
         uint64_t length)
{
  if (committed_region (&t->f->st, offset, length))
    return 0;
  return add (ts, offset, length);
}

/* Make every region durable, and forget them. */
static int
sync_all (struct bmf *f, struct to_sync *ts)
{
  size_t i;
  int r = 0;

  for (i = 0; r == 0 && i < ts->n; ++i)
    r = sync_range (f, ts->r[i].offset, ts->r[i].length);
  free (ts->r);
  ts->r = NULL;                 /* (callers free it on any error) */
  return r;
}

/* The bitmaps' regions of t->st that are new (or, with new_only
 * false, also those that stop recording).
 */
static int
add_bitmaps (struct bmf_txn *t, struct to_sync *ts, bool new_only)
{
  const struct bmf_state *st = &t->st;
  size_t i;

  for (i = 0; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *b = &st->bitmaps[i];
    const struct bmf_bitmap *was = committed_at (&t->f->st, b->data_offset);

    if (was && was->data_length == b->data_length) {
      if (!new_only && stops (was, b) &&
          add (ts, b->data_offset, b->data_length) == -1)
        return -1;
    }
    else if (!t->new_synced && add (ts, b->data_offset, b->data_length) == -1)
      return -1;
    if (st->has_shadows && !t->new_synced &&
        add_new (t, ts, b->shadow_offset, b->shadow_length) == -1)
      return -1;
  }
  return 0;
}

int
bmf_txn_sync_new (struct bmf_txn *t, struct bmerr *err)
{
  struct to_sync ts = { 0 };

  if (!t->f->live || t->dry_run)
    return 0;
  if (add_bitmaps (t, &ts, true) == -1 || sync_all (t->f, &ts) == -1) {
    free (ts.r);
    bmerr_set (err, errno, "%s: fdatasync: %s", t->f->path, strerror (errno));
    return -1;
  }
  t->new_synced = true;
  return 0;
}

int
txn_sync_before_header (struct bmf_txn *t, struct bmerr *err)
{
  const struct bmf_state *st = &t->st;
  struct to_sync ts = { 0 };

  if (!t->f->live) {
    if (fdatasync (t->f->fd) == 0)
      return 0;
    goto err;
  }
  if (add_new (t, &ts, st->dir_offset, st->dir_length) == -1 ||
      (st->has_shadows &&
       add_new (t, &ts, st->shadow_table_offset,
                st->shadow_table_length) == -1) ||
      add_bitmaps (t, &ts, false) == -1 ||
      sync_all (t->f, &ts) == -1) {
    free (ts.r);
    goto err;
  }
  return 0;

 err:
  bmerr_set (err, errno, "%s: fdatasync: %s", t->f->path, strerror (errno));
  return -1;
}

int
txn_sync_stopped (struct bmf_txn *t, struct bmerr *err)
{
  const struct bmf_state *st = &t->st;
  struct to_sync ts = { 0 };
  size_t i;

  if (!t->f->live)
    return 0;
  for (i = 0; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *b = &st->bitmaps[i];
    const struct bmf_bitmap *was = committed_at (&t->f->st, b->data_offset);

    if (was && was->data_length == b->data_length && stops (was, b) &&
        add (&ts, b->data_offset, b->data_length) == -1)
      goto err;
  }
  if (sync_all (t->f, &ts) == 0)
    return 0;
 err:
  free (ts.r);
  bmerr_set (err, errno, "%s: fdatasync: %s", t->f->path, strerror (errno));
  return -1;
}

int
txn_sync_header (struct bmf_txn *t, int slot)
{
  if (!t->f->live)
    return fdatasync (t->f->fd);
  return sync_range (t->f, (uint64_t) slot * BMF_HEADER_SLOT,
                     BMF_HEADER_SLOT);
}
