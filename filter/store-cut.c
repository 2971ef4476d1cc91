/* SPDX-License-Identifier: BSD-3-Clause */
/* store-cut.c: a backup's cut in three steps (store.h, backup.c), so
 * that the writers wait only for the middle one.
 *
 * Prepare, the writes going on: the checkpoint's transaction (an add)
 * is written and synced but for its header, its new region mapped,
 * and its transitional and final sets built from the current set, as
 * the first step of a transaction does (store-commit.c); the buffer
 * for the frozen copy of B is allocated at B's size, and B's bits are
 * copied into it while writes set them, the tracker noting the pages
 * of them that change from then on (tracker_copy_begin).
 * The bitmaps are brought to the disk's size first, as a connection
 * would.  meta_lock is released at the end: the preparation holds
 * only what it owns (its new regions are mapped, so reserved: no other
 * transaction reuses them), and it is valid only while the file's
 * committed state (its sequence number), the current set and the
 * disk's size are those it was built on.
 *
 * Make, the gate closed and nothing in flight: under meta_lock, the
 * bitmaps brought to the disk's size (nothing to do unless it
 * changed), the preparation done again if it no longer holds (the
 * slow path: what a begin without preparation costs), the pages of
 * B's bits noted since the copy copied again (tracker_copy_finish: a
 * few, against 32 MiB for the whole of a 16 TiB disk at 64K) and the
 * transitional set published: the cut.  From
 * here on writes record into the old bitmaps and the checkpoint both,
 * as during any transaction.  meta_lock stays held until the finish,
 * so that nothing else changes the file in between.
 *
 * Finish, the writes going on: the header (the checkpoint committed
 * and durable), the final set, the grace period and the settling:
 * steps 2 to 5 of store-commit.c.  A crash before the header leaves
 * the file without the checkpoint, as if the backup never began; a
 * commit that fails condemns the bitmaps, as any failed commit does.
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

#include "durability.h"
#include "report.h"
#include "store.h"
#include "store-impl.h"
#include "testpause.h"
#include "util.h"

struct store_cut {
  char *bitmap;                 /* B, or NULL */
  char *checkpoint;             /* NEW, or NULL */
  unsigned gbits;               /* B's, or the default: NEW's and the
                                   frozen bits' */
  /* What the preparation was built on. */
  bool prepared;
  uint64_t seq;
  uint64_t generation;          /* of the current set (tracker.h) */
  uint64_t disk_size;
  /* B's bits, copied into the frozen buffer before the cut. */
  struct tracker_copy base;
  /* The checkpoint's transaction and its sets. */
  struct bmf_txn *t;
  struct bitmap_set *premap, *trans, *final;
  /* After the cut, until the finish (meta_lock held). */
  bool locked;
  struct bitmap_set *old;
  uint64_t ticket;
};

/* Release what a preparation holds.  meta_lock held. */
static void
discard_locked (struct store_cut *c)
{
  tracker_copy_end (&c->base);
  set_free (store.file, c->trans);
  set_free (store.file, c->final);
  set_premap_release (store.file, c->premap);
  bmf_txn_abort (c->t);
  c->trans = c->final = c->premap = NULL;
  c->t = NULL;
  c->prepared = false;
}

/* B in the current set, checked as a begin needs it.  meta_lock
 * held.
 */
static const struct live_bitmap *
find_base_locked (const char *bitmap, struct bmerr *err)
{
  const struct live_bitmap *lb = set_find (tracker_current (), bitmap);

  if (lb == NULL) {
    bmerr_set (err, ENOENT, "bitmap %s not found", bitmap);
    return NULL;
  }
  if (lb->flags & BMF_INCONSISTENT) {
    bmerr_set (err, EINVAL, "bitmap %s is inconsistent: it may have missed "
               "changes, so an incremental backup from it would too: "
               "take a full backup", bitmap);
    return NULL;
  }
  return lb;
}

/* The frozen bits' length for B at disk_size: a read-only server
 * keeps the file's size (resize_locked), and then a grown area, from
 * the granule of the old end on, is changed, as extents.c reads it.
 */
static uint64_t
frozen_bits (const struct bitmap_set *s, const struct live_bitmap *lb,
             uint64_t disk_size)
{
  return s->disk_size < disk_size ? bmf_nr_bits (disk_size, lb->gbits)
    : lb->bits.nr_bits;
}

/* A buffer of nr bits, its pages faulted in (so the copy at the cut
 * takes no fault), unless frozen is one of that length already.
 */
static int
size_frozen (struct bits *frozen, uint64_t nr, struct bmerr *err)
{
  size_t len = MAX (bits_nr_words (nr), 1) * sizeof (uint64_t);

  if (frozen->words && frozen->nr_bits == nr)
    return 0;
  free (frozen->words);
  memset (frozen, 0, sizeof *frozen);
  if ((frozen->words = malloc (len)) == NULL) {
    bmerr_set (err, errno, "%s", strerror (errno));
    return -1;
  }
  memset (frozen->words, 0, len);
  frozen->nr_bits = nr;
  return 0;
}

/* The checkpoint's transaction, prepared, and its sets, built on the
 * current set.  meta_lock held.
 */
static int
build_locked (struct store_cut *c, struct bmerr *err)
{
  struct action add = { .kind = ACT_ADD, .bitmap = c->checkpoint,
                        .gbits = c->gbits };
  const struct bitmap_set *cur;

  c->t = act_begin (store.file, &add, 1, err);
  if (c->t == NULL)
    return -1;
  /* A sync that fails may have lost the bits of any page of the file:
   * nothing is trusted (store-commit.c, step 1).
   */
  if (bmf_txn_prepare (c->t, err) == -1) {
    discard_locked (c);
    condemn_locked ("a commit of the bitmap file failed");
    return -1;
  }
  c->premap = set_premap (store.file, bmf_txn_state (c->t));
  tracker_lock ();
  cur = tracker_current ();
  c->trans = set_build (store.file, bmf_txn_state (c->t), cur, true,
                        VIEWS_NONE, err);
  c->final = c->trans ? set_build (store.file, bmf_txn_state (c->t),
                                   c->trans, false, VIEWS_LIVE, err) : NULL;
  tracker_unlock ();
  if (c->final == NULL) {
    discard_locked (c);
    return -1;
  }
  c->prepared = true;
  return 0;
}

/* Prepare under meta_lock: B checked, the buffer sized, the
 * checkpoint's sets built.
 */
static int
prepare_locked (struct store_cut *c, uint64_t disk_size, struct bits *frozen,
                struct bmerr *err)
{
  const struct bitmap_set *s = tracker_current ();
  const struct live_bitmap *lb = NULL;

  c->gbits = BMF_DEFAULT_GBITS;
  if (c->bitmap) {
    if ((lb = find_base_locked (c->bitmap, err)) == NULL)
      return -1;
    c->gbits = lb->gbits;
    if (size_frozen (frozen, frozen_bits (s, lb, disk_size), err) == -1 ||
        tracker_copy_begin (&c->base, c->bitmap, frozen->words, err) == -1)
      return -1;
  }
  c->seq = bmf_state (store.file)->seq;
  c->generation = tracker_generation ();
  c->disk_size = disk_size;
  if (c->checkpoint)
    return build_locked (c, err);
  c->prepared = true;
  return 0;
}

/* The bitmaps brought to disk_size, under meta_lock (taken, and kept
 * on success).
 */
static int
lock_at_size (uint64_t disk_size, struct bmerr *err)
{
  struct bitmap_set *retire[2] = { NULL };
  struct bmerr e;
  int r;

  pthread_mutex_lock (&meta_lock);
  r = resize_locked (disk_size, retire, &e);
  if (retire[0] || retire[1] || r == -1) {
    pthread_mutex_unlock (&meta_lock);
    retire_sets (retire);
    if (r == -1) {
      bmerr_set (err, e.errnum ? e.errnum : EIO, "cannot resize the bitmaps "
                 "to the disk's size (%" PRIu64 " bytes): %s", disk_size,
                 e.msg);
      return -1;
    }
    pthread_mutex_lock (&meta_lock);
  }
  return 0;
}

struct store_cut *
store_cut_prepare (const char *bitmap, const char *checkpoint,
                   uint64_t disk_size, struct bits *frozen, unsigned *gbits,
                   struct bmerr *err)
{
  struct store_cut *c = calloc (1, sizeof *c);
  int r;

  if (c == NULL ||
      (bitmap && (c->bitmap = strdup (bitmap)) == NULL) ||
      (checkpoint && (c->checkpoint = strdup (checkpoint)) == NULL)) {
    bmerr_set (err, errno, "%s", strerror (errno));
    store_cut_free (c);
    return NULL;
  }
  if (checkpoint && store.readonly) {
    bmerr_set (err, EROFS, "the server is read-only (-r): the bitmaps "
               "cannot change");
    store_cut_free (c);
    return NULL;
  }
  /* The bitmaps brought to the size now, as a connection would: a cut
   * at the same size then has nothing to resize.
   */
  if (lock_at_size (disk_size, err) == -1) {
    store_cut_free (c);
    return NULL;
  }
  r = prepare_locked (c, disk_size, frozen, err);
  pthread_mutex_unlock (&meta_lock);
  if (r == -1) {
    store_cut_free (c);
    return NULL;
  }
  *gbits = c->gbits;
  test_pause_point ("cut-prepared");
  return c;
}

/* Whether the preparation still holds.  meta_lock held. */
static bool
valid_locked (const struct store_cut *c, uint64_t disk_size)
{
  return c->prepared && c->seq == bmf_state (store.file)->seq &&
    c->generation == tracker_generation () && c->disk_size == disk_size;
}

/* B's bits now, into frozen: the copy begun by the preparation
 * (valid: the set is the one it was begun in) brought up to date, the
 * pages changed since copied again.  meta_lock held, the gate closed.
 */
static int
copy_base_locked (struct store_cut *c, uint64_t disk_size,
                  struct bits *frozen, unsigned *gbits, struct bmerr *err)
{
  const struct bitmap_set *s = tracker_current ();
  const struct live_bitmap *lb = find_base_locked (c->bitmap, err);

  if (lb == NULL)
    return -1;
  test_pause_point ("freeze");
  assert (c->base.lb == lb &&
          frozen->nr_bits == frozen_bits (s, lb, disk_size));
  tracker_copy_finish (&c->base, frozen->words);
  if (s->disk_size < disk_size)
    bits_set_range (frozen, s->disk_size >> lb->gbits, frozen->nr_bits - 1);
  *gbits = lb->gbits;
  return 0;
}

int
store_cut_make (struct store_cut *c, uint64_t disk_size, struct bits *frozen,
                unsigned *gbits, struct bmerr *err)
{
  if (lock_at_size (disk_size, err) == -1)
    return -1;
  if (!valid_locked (c, disk_size)) {
    filter_debug ("the backup's preparation no longer holds (the bitmaps "
                  "or the disk changed since): made again at the cut");
    discard_locked (c);
    if (prepare_locked (c, disk_size, frozen, err) == -1)
      goto err;
  }
  if (c->bitmap && copy_base_locked (c, disk_size, frozen, gbits, err) == -1)
    goto err;
  if (c->bitmap == NULL)
    *gbits = c->gbits;
  if (c->checkpoint == NULL) {
    pthread_mutex_unlock (&meta_lock);
    return 0;
  }
  c->ticket = dur_requested ();
  tracker_lock ();
  c->old = tracker_current ();
  tracker_publish (c->trans);
  tracker_unlock ();
  set_premap_release (store.file, c->premap);
  c->premap = NULL;
  c->locked = true;
  filter_debug ("action add on bitmap %s (at the backup's cut)",
                c->checkpoint);
  return 0;

 err:
  discard_locked (c);
  pthread_mutex_unlock (&meta_lock);
  return -1;
}

int
store_cut_finish (struct store_cut *c, struct bmerr *err)
{
  struct bitmap_set *retire[2] = { NULL };
  bool stopped;
  int r;

  if (!c->locked)
    return 0;
  test_pause_point ("cut-commit");
  r = commit_and_publish_locked (c->t, false, c->final, c->ticket, err);
  c->t = NULL;
  retire[0] = c->old;
  if (r == 0)
    retire[1] = c->trans;
  else {
    /* trans stays, recording into both (store-commit.c). */
    set_free (store.file, c->final);
    condemn_locked ("a commit of the bitmap file failed");
  }
  c->final = c->trans = c->old = NULL;
  c->prepared = c->locked = false;
  stopped = r == 0 && bmf_settling (store.file);
  pthread_mutex_unlock (&meta_lock);
  retire_sets (retire);
  if (stopped && settle (err) == -1)
    r = -1;
  if (r == 0)
    test_pause_point ("cut-committed");
  return r;
}

void
store_cut_free (struct store_cut *c)
{
  if (c == NULL)
    return;
  assert (!c->locked);
  /* (After store_close the file and its sets are gone already, and
   * no writer notes pages for the copy of B.)
   */
  if (store.file && (c->base.lb || (c->prepared && c->checkpoint))) {
    pthread_mutex_lock (&meta_lock);
    discard_locked (c);
    pthread_mutex_unlock (&meta_lock);
  }
  free (c->base.pages.words);
  free (c->bitmap);
  free (c->checkpoint);
  free (c);
}
