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
 * only the regions it refers to that the committed header does not (a
 * new directory, new or copied bits, new shadows), and, after the
 * header, the header.
 *
 * The bits of a bitmap that stops recording were set in the page
 * cache, and from now on they must survive a power loss (a bitmap
 * that is not recording stays consistent).  But the writers go on
 * setting them until the server's transaction takes effect, and a
 * sync that waited for that would have to stop the writers during a
 * write-back and a cache flush.  So such a bitmap is committed
 * settling (BMF_SETTLING): its bits not synced, and after a power loss
 * it counts as recording did (inconsistent in a flush run, recovered
 * from its shadow in a coarse one, exact in a strict one, whose bits
 * are always durable).  Once no writer can set its bits any more, the
 * server settles it (bmf_txn_settle): a commit that syncs its bits,
 * then writes a header that no longer says so.  The server replies
 * only then, so a bitmap that a reply says is disabled survives a
 * power loss as before.  Any other commit carries the mark over, or
 * drops it where it has no meaning (the bitmap records again, is
 * inconsistent, or has new bits, synced as new); a commit that syncs
 * the whole file drops every mark.
 *
 * A server prepares a commit before the writers set bits in its new
 * regions, unless it copies bits into them (store.c): then only their
 * allocation is written.  The regions of one commit are written back
 * together and made durable by one ranged fdatasync (sync_all: one
 * cache flush).  The bits of the bitmaps that go on recording stay in
 * the page cache, as between flushes: the run's record already says
 * that they are lost with the machine.  And the regions of the
 * committed header that are neither recording nor settling are on
 * stable storage already, since every commit that stopped one of them
 * synced it, or settled it.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/mman.h>
#include <fcntl.h>

#include "txn-impl.h"
#include "util.h"

int
bmf_set_live (struct bmf *f, bool live, struct bmerr *err)
{
  char proc[64];

  if (live && f->sync_fd == -1) {
    /* Another open file of the same file, even if its name has gone.
     * For writing: msync syncs only the shared mappings of a file open
     * for writing (those of one open read-only are private).
     */
    snprintf (proc, sizeof proc, "/proc/self/fd/%d", f->fd);
    f->sync_fd = open (proc, O_RDWR | O_CLOEXEC);
    if (f->sync_fd == -1) {
      bmerr_set (err, errno, "%s: open %s: %s", f->path, proc,
                 strerror (errno));
      return -1;
    }
  }
  f->live = live;
  return 0;
}

/* The descriptor that commits sync through. */
static int
commit_fd (const struct bmf *f)
{
  return f->sync_fd >= 0 ? f->sync_fd : f->fd;
}

static bool
recording (const struct bmf_bitmap *b)
{
  return (b->flags & BMF_ENABLED) && !(b->flags & BMF_INCONSISTENT);
}

/* b stops recording with this commit (was: as committed), and it must
 * be consistent.  (One marked inconsistent is not trusted anyway, and
 * is marked when the disk may be failing.)
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
  struct bmf_region *r = calloc (bmf_max_regions (st), sizeof *r);
  bool found = false;
  size_t i, n;

  /* (Out of memory: synced again, which costs only time.) */
  if (r == NULL)
    return false;
  n = bmf_state_regions (st, r);
  for (i = 0; !found && i < n; ++i)
    found = r[i].offset == offset && r[i].length == length;
  free (r);
  return found;
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
  p = mmap (NULL, length, PROT_READ, MAP_SHARED, commit_fd (f), start);
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
  if (array_room (&ts->r, &ts->cap, ts->n, sizeof *ts->r, 8) == -1)
    return -1;
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

/* Make every region durable, and forget them.  One cache flush for
 * all: the write-back of every region but the last is started, then
 * waited for (sync_file_range, which reports its errors), and the
 * ranged fdatasync of the last one writes it, commits the file's
 * metadata (the blocks allocated for all of them) and flushes the
 * device's cache, which then holds the others too.
 */
static int
sync_all (struct bmf *f, struct to_sync *ts)
{
  const unsigned wait = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
    SYNC_FILE_RANGE_WAIT_AFTER;
  size_t i;
  int r = 0;

  for (i = 0; r == 0 && i + 1 < ts->n; ++i)
    r = sync_file_range (commit_fd (f), ts->r[i].offset, ts->r[i].length,
                         SYNC_FILE_RANGE_WRITE);
  for (i = 0; r == 0 && i + 1 < ts->n; ++i)
    r = sync_file_range (commit_fd (f), ts->r[i].offset, ts->r[i].length,
                         wait);
  if (r == 0 && ts->n)
    r = sync_range (f, ts->r[ts->n - 1].offset, ts->r[ts->n - 1].length);
  free (ts->r);
  ts->r = NULL;                 /* (callers free it on any error) */
  return r;
}

void
txn_marks (struct bmf_txn *t)
{
  struct bmf_state *st = &t->st;
  size_t i;

  for (i = 0; i < st->nr_bitmaps; ++i) {
    struct bmf_bitmap *b = &st->bitmaps[i];
    const struct bmf_bitmap *was = committed_at (&t->f->st, b->data_offset);

    if (!t->f->live || !was || was->data_length != b->data_length ||
        recording (b) || (b->flags & BMF_INCONSISTENT))
      b->flags &= ~BMF_SETTLING;
    else if (stops (was, b))
      b->flags |= BMF_SETTLING;
    else if (t->settle)
      b->flags &= ~BMF_SETTLING;
  }
}

/* The bitmaps' regions of t->st that are new, and the bits of those
 * that this commit settles.
 */
static int
add_bitmaps (struct bmf_txn *t, struct to_sync *ts)
{
  const struct bmf_state *st = &t->st;
  size_t i;

  for (i = 0; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *b = &st->bitmaps[i];
    const struct bmf_bitmap *was = committed_at (&t->f->st, b->data_offset);

    if (was && was->data_length == b->data_length) {
      if ((was->flags & BMF_SETTLING) &&
          !(b->flags & (BMF_SETTLING | BMF_INCONSISTENT)) && !recording (b) &&
          add (ts, b->data_offset, b->data_length) == -1)
        return -1;
    }
    else if (add (ts, b->data_offset, b->data_length) == -1)
      return -1;
    if (st->has_shadows &&
        add_new (t, ts, b->shadow_offset, b->shadow_length) == -1)
      return -1;
  }
  return 0;
}

int
txn_sync_before_header (struct bmf_txn *t, struct bmerr *err)
{
  const struct bmf_state *st = &t->st;
  struct to_sync ts = { 0 };

  if (!t->f->live) {
    if (fdatasync (commit_fd (t->f)) == 0)
      return 0;
    goto err;
  }
  if (add_new (t, &ts, st->dir_offset, st->dir_length) == -1 ||
      (st->has_shadows &&
       add_new (t, &ts, st->shadow_table_offset,
                st->shadow_table_length) == -1) ||
      (st->restore.state != BMF_RESTORE_NONE &&
       add_new (t, &ts, st->restore.region.offset,
                st->restore.region.length) == -1) ||
      add_bitmaps (t, &ts) == -1 ||
      sync_all (t->f, &ts) == -1) {
    free (ts.r);
    goto err;
  }
  return 0;

 err:
  bmerr_set (err, errno, "%s: fdatasync: %s", t->f->path, strerror (errno));
  return -1;
}

bool
bmf_settling (const struct bmf *f)
{
  size_t i;

  for (i = 0; i < f->st.nr_bitmaps; ++i)
    if (f->st.bitmaps[i].flags & BMF_SETTLING)
      return true;
  return false;
}

void
bmf_txn_settle (struct bmf_txn *t)
{
  t->settle = true;
}

int
txn_sync_header (struct bmf_txn *t, int slot)
{
  if (!t->f->live)
    return fdatasync (commit_fd (t->f));
  return sync_range (t->f, (uint64_t) slot * BMF_HEADER_SLOT,
                     BMF_HEADER_SLOT);
}
