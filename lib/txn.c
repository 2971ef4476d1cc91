/* SPDX-License-Identifier: BSD-3-Clause */
/* txn.c: transactions on a bitmap file (see txn.h): the operations,
 * and the atomic commit (space is found by txn-space.c).
 *
 * Every change is copy-on-write: a transaction writes new data
 * regions and a new directory into space that the current header does
 * not refer to, syncs (txn-sync.c), then writes the header into the
 * other slot and syncs again.  A crash before the second sync leaves
 * the old header current (a torn slot fails its CRC), after it the
 * new one: never a mix.  Data bits themselves are set in place,
 * through a shared mapping, by the filter.
 *
 * New space is allocated at once (txn-space.c), so that setting a bit
 * through a mapping can never hit ENOSPC (SIGBUS).
 *
 * Coarse shadows (shadow.h) are regions like bitmap data; each
 * operation keeps them in step with the bits through txn-shadow.c.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

#include "crc32c.h"
#include "msg.h"
#include "txn-impl.h"
#include "util.h"

struct bmf_txn *
bmf_txn_begin (struct bmf *f, bool dry_run, struct bmerr *err)
{
  struct bmf_txn *t = calloc (1, sizeof *t);
  struct stat sb;

  if (t == NULL || bmf_state_copy (&t->st, &f->st) == -1 ||
      fstat (f->fd, &sb) == -1) {
    bmerr_set (err, errno, "%s: %s", f->path, strerror (errno));
    free (t);
    return NULL;
  }
  if (!dry_run && f->lock != BMF_LOCK_EXCLUSIVE) {
    bmerr_set (err, EBADF, "%s: opened read-only", f->path);
    bmf_state_free (&t->st);
    free (t);
    return NULL;
  }
  t->f = f;
  t->dry_run = dry_run;
  t->orig_size = sb.st_size;
  return t;
}

const struct bmf_state *
bmf_txn_state (const struct bmf_txn *t)
{
  return &t->st;
}

struct bmf *
bmf_txn_file (const struct bmf_txn *t)
{
  return t->f;
}

void
bmf_txn_abort (struct bmf_txn *t)
{
  struct stat sb;
  uint64_t end;
  size_t i;

  if (t == NULL)
    return;
  /* Space appended for new regions goes again, but not what this
   * process still maps (reserved): a server's sets may map the new
   * regions already, and touching a page past the end of the file
   * would kill it (SIGBUS); nor what the committed header refers to
   * (a transaction prepared long before its abort may have seen a
   * shorter file than another one committed since).
   */
  end = MAX (t->orig_size, t->f->st.file_length);
  for (i = 0; i < t->f->nr_reserved; ++i)
    end = MAX (end, t->f->reserved[i].offset + t->f->reserved[i].length);
  if (!t->dry_run && fstat (t->f->fd, &sb) == 0 &&
      (uint64_t) sb.st_size > end &&
      ftruncate (t->f->fd, end) == -1)
    bm_debug ("%s: ftruncate: %m", t->f->path);
  bmf_state_free (&t->st);
  free (t);
}

/*----------------------------------------------------------------------
 * The operations.
 */

static struct bmf_bitmap *
need (struct bmf_txn *t, const char *name, struct bmerr *err)
{
  struct bmf_bitmap *bm = bmf_find (&t->st, name);

  if (bm == NULL)
    bmerr_set (err, ENOENT, "bitmap %s not found", name);
  return bm;
}

static int
need_consistent (struct bmf_txn *t, const struct bmf_bitmap *bm,
                 struct bmerr *err)
{
  if (!(bm->flags & BMF_INCONSISTENT))
    return 0;
  /* How the user removes it, its caller knows (bmerr_append_hint). */
  bmerr_set (err, EINVAL, "bitmap %s is inconsistent: %s; remove it",
             bm->name, bmf_inconsistent_reason (t->f));
  bmerr_hint_then (err, " and take a full backup");
  return -1;
}

int
bmf_txn_add (struct bmf_txn *t, const char *name, unsigned gbits,
             struct bmerr *err)
{
  struct bmf_bitmap *bms, bm = { .gbits = gbits, .flags = BMF_ENABLED };
  const char *why;

  if ((why = bmf_name_problem (name)) != NULL) {
    bmerr_set (err, EINVAL, "bitmap name %s", why);
    return -1;
  }
  if (gbits < BMF_MIN_GBITS || gbits > BMF_MAX_GBITS) {
    bmerr_set (err, EINVAL, "granularity %s",
               bmf_granularity_problem (0));
    return -1;
  }
  if (bmf_find (&t->st, name)) {
    bmerr_set (err, EEXIST, "bitmap %s already exists", name);
    return -1;
  }
  if (t->st.nr_bitmaps >= BMF_MAX_BITMAPS) {
    bmerr_set (err, ENOSPC, "too many bitmaps (the limit is %d)",
               BMF_MAX_BITMAPS);
    return -1;
  }
  if (!t->dry_run && t->st.sized) {
    bm.data_length = bmf_data_length (t->st.disk_size, gbits);
    if (txn_alloc_region (t, bm.data_length, &bm.data_offset, err) == -1)
      return -1;
  }
  bm.name = strdup (name);
  bms = realloc (t->st.bitmaps, (t->st.nr_bitmaps + 1) * sizeof *bms);
  if (bm.name == NULL || bms == NULL) {
    bmerr_set (err, errno, "%s", strerror (errno));
    free (bm.name);
    if (bms)
      t->st.bitmaps = bms;
    return -1;
  }
  t->st.bitmaps = bms;
  bms[t->st.nr_bitmaps++] = bm;
  /* (Added first, so that the shadow's space avoids its data.) */
  if (txs_empty (t, &bms[t->st.nr_bitmaps - 1], err) == -1) {
    free (bms[--t->st.nr_bitmaps].name);
    return -1;
  }
  return 0;
}

int
bmf_txn_remove (struct bmf_txn *t, const char *name, struct bmerr *err)
{
  struct bmf_bitmap *bm = need (t, name, err);
  size_t i;

  if (bm == NULL)
    return -1;
  i = bm - t->st.bitmaps;
  free (bm->name);
  memmove (&t->st.bitmaps[i], &t->st.bitmaps[i + 1],
           (t->st.nr_bitmaps - i - 1) * sizeof *bm);
  t->st.nr_bitmaps--;
  return 0;
}

int
bmf_txn_clear (struct bmf_txn *t, const char *name, struct bmerr *err)
{
  struct bmf_bitmap *bm = need (t, name, err);
  uint64_t offset;

  if (bm == NULL || need_consistent (t, bm, err) == -1)
    return -1;
  if (t->dry_run || bm->data_length == 0)
    return 0;
  if (txn_alloc_region (t, bm->data_length, &offset, err) == -1)
    return -1;
  bm->data_offset = offset;
  return txs_empty (t, bm, err);
}

int
bmf_txn_enable (struct bmf_txn *t, const char *name, bool enable,
                struct bmerr *err)
{
  struct bmf_bitmap *bm = need (t, name, err);

  if (bm == NULL || need_consistent (t, bm, err) == -1)
    return -1;
  if (enable)
    bm->flags |= BMF_ENABLED;
  else
    bm->flags &= ~BMF_ENABLED;
  return 0;
}

int
bmf_txn_resize (struct bmf_txn *t, uint64_t new_size, struct bmerr *err)
{
  const uint64_t old_size = t->st.disk_size;
  const bool was_sized = t->st.sized;
  size_t i;

  if (was_sized && old_size == new_size)
    return 0;
  if (t->st.restore.state == BMF_RESTORE_RUNNING) {
    bmerr_set (err, EBUSY, "the disk is being restored from %s, of %"
               PRIu64 " bytes: its size cannot change until the restore "
               "is complete", t->st.restore.source, old_size);
    return -1;
  }
  if (new_size > BMF_MAX_DISK_SIZE) {
    bmerr_set (err, EINVAL, "disk size %" PRIu64 " is too large", new_size);
    return -1;
  }
  for (i = 0; !t->dry_run && i < t->st.nr_bitmaps; ++i) {
    struct bmf_bitmap *bm = &t->st.bitmaps[i];
    uint64_t nbits = bmf_nr_bits (new_size, bm->gbits);
    uint64_t len = bmf_data_length (new_size, bm->gbits), offset;
    struct bits old, new;

    if (txn_alloc_region (t, len, &offset, err) == -1 ||
        txn_map (t->f, offset, len, nbits, true, &new, err) == -1)
      return -1;
    if (len && was_sized && bm->data_length) {
      uint64_t nwords = MIN (bits_nr_words (nbits),
                             bits_nr_words (bmf_nr_bits (old_size,
                                                         bm->gbits)));
      if (txn_map (t->f, bm->data_offset, bm->data_length, 0, false,
                   &old, err) == -1) {
        bmf_unmap (&new);
        return -1;
      }
      memcpy (new.words, old.words, nwords * 8);
      bmf_unmap (&old);
      /* Shrunk: bits past the new end go. */
      if (nbits & 63)
        new.words[nbits / 64] &= (UINT64_C (1) << (nbits & 63)) - 1;
    }
    /* Grown: every granule holding new bytes is dirty. */
    if (was_sized && new_size > old_size)
      bits_set_range (&new, old_size >> bm->gbits, nbits - 1);
    /* (Placed first, so that the shadow's space avoids it.) */
    bm->data_offset = offset;
    bm->data_length = len;
    if (txs_coarsen (t, bm, &new, new_size, err) == -1) {
      bmf_unmap (&new);
      return -1;
    }
    bmf_unmap (&new);
  }
  t->st.disk_size = new_size;
  t->st.sized = true;
  return 0;
}

/* Bitmap dst |= sbits, the bits of a bitmap of 2^sgbits byte
 * granules over a disk of ssize bytes (the size of this file's disk,
 * or this file has never seen its disk): copied on write.
 */
static int
merge_bits (struct bmf_txn *t, const char *dst, const struct bits *sbits,
            unsigned sgbits, uint64_t ssize, struct bmerr *err)
{
  struct bmf_bitmap *d;
  struct bits dbits, old;
  uint64_t offset;
  int r;

  /* This file has never seen its disk (and so no write): it takes
   * the source's size, clean.
   */
  if (!t->st.sized && bmf_txn_resize (t, ssize, err) == -1)
    return -1;
  d = bmf_find (&t->st, dst);
  if (d->data_length == 0)
    return 0;

  if (txn_alloc_region (t, d->data_length, &offset, err) == -1 ||
      txn_map (t->f, offset, d->data_length,
               bmf_nr_bits (t->st.disk_size, d->gbits), true, &dbits,
               err) == -1)
    return -1;
  r = txn_map (t->f, d->data_offset, d->data_length, 0, false, &old, err);
  if (r == 0) {
    memcpy (dbits.words, old.words, d->data_length);
    bmf_unmap (&old);
    bits_merge (&dbits, d->gbits, sbits, sgbits, t->st.disk_size);
    /* (Placed first, so that the shadow's space avoids it.) */
    d->data_offset = offset;
    r = txs_coarsen (t, d, &dbits, t->st.disk_size, err);
  }
  bmf_unmap (&dbits);
  return r;
}

int
bmf_txn_merge (struct bmf_txn *t, const char *dst, struct bmf *src_file,
               const char *src, struct bmerr *err)
{
  const struct bmf_state *sst = src_file ? &src_file->st : &t->st;
  struct bmf_bitmap *d, *s;
  struct bits sbits;
  int r;

  if ((d = need (t, dst, err)) == NULL || need_consistent (t, d, err) == -1)
    return -1;
  s = bmf_find (sst, src);
  if (s == NULL) {
    if (src_file)
      bmerr_set (err, ENOENT, "bitmap %s not found in %s", src,
                 src_file->path);
    else
      bmerr_set (err, ENOENT, "bitmap %s not found", src);
    return -1;
  }
  if (need_consistent (t, s, err) == -1)
    return -1;
  if (src_file && sst->sized && t->st.sized &&
      sst->disk_size != t->st.disk_size) {
    bmerr_set (err, EINVAL, "bitmap %s in %s covers a disk of %" PRIu64
               " bytes, but this disk is %" PRIu64 " bytes",
               src, src_file->path, sst->disk_size, t->st.disk_size);
    return -1;
  }
  if (t->dry_run || !sst->sized)
    return 0;                   /* an unsized source has no bits */
  if (txn_map (src_file ? src_file : t->f, s->data_offset, s->data_length,
               bmf_nr_bits (sst->disk_size, s->gbits), false, &sbits,
               err) == -1)
    return -1;
  r = merge_bits (t, dst, &sbits, s->gbits, sst->disk_size, err);
  bmf_unmap (&sbits);
  return r;
}

int
bmf_txn_merge_foreign (struct bmf_txn *t, const char *dst,
                       const struct bmf_foreign *src, struct bmerr *err)
{
  struct bmf_bitmap *d;

  if ((d = need (t, dst, err)) == NULL || need_consistent (t, d, err) == -1)
    return -1;
  if (src->problem.errnum) {
    if (err)
      *err = src->problem;
    return -1;
  }
  if (t->st.sized && src->disk_size != t->st.disk_size) {
    bmerr_set (err, EINVAL, "bitmap %s in %s covers a disk of %" PRIu64
               " bytes, but this disk is %" PRIu64 " bytes",
               src->name, src->origin, src->disk_size, t->st.disk_size);
    return -1;
  }
  if (t->dry_run)
    return 0;
  return merge_bits (t, dst, &src->bits, src->gbits, src->disk_size, err);
}

void
bmf_txn_mark_enabled_inconsistent (struct bmf_txn *t)
{
  size_t i;

  for (i = 0; i < t->st.nr_bitmaps; ++i)
    if (bmf_flags_unsettled (t->st.bitmaps[i].flags))
      t->st.bitmaps[i].flags |= BMF_INCONSISTENT;
}

void
bmf_txn_set_open (struct bmf_txn *t, bool open, enum bmf_durability mode)
{
  t->st.open = open;
  t->st.open_mode = open ? mode : 0;
  memset (t->st.boot_id, 0, sizeof t->st.boot_id);
  t->st.open_pid = 0;
  if (open) {
    bmf_boot_id (t->st.boot_id);
    t->st.open_pid = getpid ();
  }
}

void
bmf_txn_set_disk_id (struct bmf_txn *t, const struct bmf_disk_id *id)
{
  t->st.has_disk_id = id != NULL;
  memset (&t->st.disk_id, 0, sizeof t->st.disk_id);
  if (id)
    t->st.disk_id = *id;
}

/*----------------------------------------------------------------------
 * Commit.
 */

/* The end of the last region of st, the file's length; -1 if out of
 * memory.
 */
static int
end_of_regions (const struct bmf_state *st, uint64_t *end)
{
  struct bmf_region *r = calloc (MAX (bmf_max_regions (st), 1), sizeof *r);
  size_t i, n;

  if (r == NULL)
    return -1;
  n = bmf_state_regions (st, r);
  *end = BMF_FIRST_REGION;
  for (i = 0; i < n; ++i)
    *end = MAX (*end, ROUND_UP (r[i].offset + r[i].length, BMF_ALIGN));
  free (r);
  return 0;
}

/* Write the directory of t->st, reusing the committed copy when the
 * file holds it byte for byte.  Compare with the file, not with an
 * encoding of f->st: opening a file can change f->st in memory (the
 * marks of an unclean stop), and a header whose checksum describes
 * bytes that are not there makes a file that no longer opens.
 * Returns the checksum through *crc.
 */
static int
write_dir (struct bmf_txn *t, uint32_t *crc, struct bmerr *err)
{
  struct bmf *f = t->f;
  unsigned char *buf, *old = NULL;
  size_t len;
  int r = 0;

  buf = bmf_encode_dir (&t->st, &len);
  if (buf == NULL) {
    bmerr_set (err, errno, "%s", strerror (errno));
    return -1;
  }
  *crc = crc32c (buf, len);
  t->st.dir_length = len;
  t->st.dir_offset = 0;
  if (len == 0)
    goto out;
  if (len == f->st.dir_length && (old = malloc (len)) != NULL &&
      pread (f->fd, old, len, f->st.dir_offset) == (ssize_t) len &&
      memcmp (buf, old, len) == 0) {
    t->st.dir_offset = f->st.dir_offset;
    goto out;
  }
  if (len > UINT32_MAX) {
    bmerr_set (err, E2BIG, "%s: directory too large", f->path);
    r = -1;
    goto out;
  }
  r = txn_alloc_region (t, ROUND_UP (len, BMF_ALIGN), &t->st.dir_offset, err);
  if (r == 0 && pwrite (f->fd, buf, len, t->st.dir_offset) != (ssize_t) len) {
    bmerr_set (err, errno ? errno : EIO, "%s: write directory: %s", f->path,
               errno ? strerror (errno) : "short write");
    r = -1;
  }
 out:
  free (buf);
  free (old);
  return r;
}

int
bmf_txn_prepare (struct bmf_txn *t, struct bmerr *err)
{
  struct bmf *f = t->f;
  uint32_t dir_crc = 0, shadow_crc = 0;

  if (t->dry_run) {
    bmerr_set (err, EINVAL, "%s: a dry run cannot be committed", f->path);
    return -1;
  }
  if (f->st.seq >= BMF_MAX_SEQ) {
    bmerr_set (err, EOVERFLOW, "%s: the header sequence number is at its "
               "limit", f->path);
    return -1;
  }
  txn_marks (t);
  if (write_dir (t, &dir_crc, err) == -1 ||
      txs_write_table (t, &shadow_crc, err) == -1)
    return -1;
  t->st.seq = f->st.seq + 1;
  if (end_of_regions (&t->st, &t->st.file_length) == -1) {
    bmerr_set (err, errno, "%s", strerror (errno));
    return -1;
  }
  if (txn_sync_before_header (t, err) == -1)
    return -1;
  bmf_encode_header (&t->st, dir_crc, shadow_crc, t->hdr);
  t->prepared = true;
  return 0;
}

/* Keep every region of st from reuse by this process.  (Out of
 * memory, the file may only grow: the abort keeps its length.)
 */
static void
reserve_all (struct bmf *f, const struct bmf_state *st)
{
  struct bmf_region *r = calloc (MAX (bmf_max_regions (st), 1), sizeof *r);
  size_t i, n;

  if (r == NULL)
    return;
  n = bmf_state_regions (st, r);
  for (i = 0; i < n; ++i)
    bmf_reserve (f, r[i].offset, r[i].length);
  free (r);
}

int
bmf_txn_finish (struct bmf_txn *t, struct bmerr *err)
{
  struct bmf *f = t->f;
  uint64_t end;
  int slot = 1 - f->slot;
  size_t i;

  if (!t->prepared) {
    bmerr_set (err, EINVAL, "%s: the transaction was not prepared",
               f->path);
    goto err;
  }
  /* The used part of the slot only: the liveness record follows it
   * in the first (identity.h).
   */
  if (pwrite (f->fd, t->hdr, BMF_HEADER_LENGTH,
              (off_t) slot * BMF_HEADER_SLOT) != BMF_HEADER_LENGTH ||
      txn_sync_header (t, slot) == -1) {
    /* The new header may be on disk, and a later commit goes to the
     * same slot: until one succeeds, this header may be the current
     * one after a crash.  Keep every byte it refers to: no truncation
     * now, and no reuse by later transactions of this process.
     */
    bmerr_set (err, errno, "%s: write header: %s", f->path,
               strerror (errno));
    t->orig_size = UINT64_MAX;
    reserve_all (f, &t->st);
    goto err;
  }

  bmf_state_free (&f->st);
  f->st = t->st;
  f->slot = slot;
  bm_debug ("%s: committed seq %" PRIu64 " (%zu bitmaps)",
            f->path, f->st.seq, f->st.nr_bitmaps);

  /* Give back space past the last region still in use. */
  end = f->st.file_length;
  for (i = 0; i < f->nr_reserved; ++i)
    end = MAX (end, f->reserved[i].offset + f->reserved[i].length);
  if ((uint64_t) lseek (f->fd, 0, SEEK_END) > end &&
      ftruncate (f->fd, end) == -1)
    bm_debug ("%s: ftruncate: %m", f->path);
  free (t);
  return 0;

 err:
  bmf_txn_abort (t);
  return -1;
}

int
bmf_txn_commit (struct bmf_txn *t, struct bmerr *err)
{
  if (bmf_txn_prepare (t, err) == -1) {
    bmf_txn_abort (t);
    return -1;
  }
  return bmf_txn_finish (t, err);
}
