/* SPDX-License-Identifier: BSD-3-Clause */
/* txn-shadow.c: the coarse shadows in transactions (see shadow.h and
 * txn-impl.h).  Every operation keeps each shadow exactly the
 * coarsening of its bitmap's bits: a new or cleared bitmap has an
 * empty shadow, a merged or resized one the coarsening of its new
 * bits (so a merge ORs the shadows, and a grown area is dirty in
 * both).  Shadows are copied on write like bitmap data, into new
 * regions, so that they change atomically with the bits, at the
 * commit.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include "crc32c.h"
#include "shadow.h"
#include "txn-impl.h"
#include "util.h"

static bool
keeps_shadows (const struct bmf_txn *t)
{
  return t->st.has_shadows && !t->dry_run;
}

int
txs_empty (struct bmf_txn *t, struct bmf_bitmap *bm, struct bmerr *err)
{
  if (!keeps_shadows (t))
    return 0;
  bm->shadow_length = bmf_shadow_length (&t->st, bm);
  return txn_alloc_region (t, bm->shadow_length, &bm->shadow_offset, err);
}

int
txs_coarsen (struct bmf_txn *t, struct bmf_bitmap *bm,
             const struct bits *fine, uint64_t disk_size, struct bmerr *err)
{
  const unsigned sg = MAX (t->st.cgbits, bm->gbits);
  uint64_t len, offset;
  struct bits sh;

  if (!keeps_shadows (t))
    return 0;
  len = bmf_data_length (disk_size, sg);
  if (txn_alloc_region (t, len, &offset, err) == -1 ||
      txn_map (t->f, offset, len, bmf_nr_bits (disk_size, sg), true, &sh,
               err) == -1)
    return -1;
  if (sh.words && fine->words)
    bits_merge (&sh, sg, fine, bm->gbits, disk_size);
  bmf_unmap (&sh);
  bm->shadow_offset = offset;
  bm->shadow_length = len;
  return 0;
}

int
bmf_txn_set_shadows (struct bmf_txn *t, unsigned cgbits, struct bmerr *err)
{
  size_t i;

  if (cgbits == 0) {
    /* Dropped: their regions are free once this commits. */
    t->st.has_shadows = false;
    t->st.cgbits = 0;
    for (i = 0; i < t->st.nr_bitmaps; ++i)
      t->st.bitmaps[i].shadow_offset = t->st.bitmaps[i].shadow_length = 0;
    return 0;
  }
  if (cgbits < BMF_MIN_GBITS || cgbits > BMF_MAX_GBITS) {
    bmerr_set (err, EINVAL, "coarse granularity %s",
               bmf_coarse_granularity_problem (0));
    return -1;
  }
  if (t->st.has_shadows && t->st.cgbits == cgbits)
    return 0;
  t->st.has_shadows = true;
  t->st.cgbits = cgbits;
  for (i = 0; i < t->st.nr_bitmaps; ++i) {
    struct bmf_bitmap *bm = &t->st.bitmaps[i];
    struct bits fine;

    bm->shadow_offset = bm->shadow_length = 0;
    if (t->dry_run || bm->data_length == 0)
      continue;
    if (txn_map (t->f, bm->data_offset, bm->data_length,
                 bmf_nr_bits (t->st.disk_size, bm->gbits), false, &fine,
                 err) == -1)
      return -1;
    if (txs_coarsen (t, bm, &fine, t->st.disk_size, err) == -1) {
      bmf_unmap (&fine);
      return -1;
    }
    bmf_unmap (&fine);
  }
  return 0;
}

int
txs_write_table (struct bmf_txn *t, uint32_t *crc, struct bmerr *err)
{
  struct bmf *f = t->f;
  unsigned char *buf, *old = NULL;
  size_t len;
  int r = 0;

  *crc = 0;
  t->st.shadow_table_offset = 0;
  t->st.shadow_table_length = 0;
  if (!t->st.has_shadows)
    return 0;
  buf = bmf_encode_shadows (&t->st, &len);
  if (buf == NULL) {
    bmerr_set (err, errno, "%s", strerror (errno));
    return -1;
  }
  *crc = crc32c (buf, len);
  t->st.shadow_table_length = len;
  if (len == 0)
    goto out;
  /* Compared with the file, as the directory is (txn.c, write_dir). */
  if (f->st.has_shadows && len == f->st.shadow_table_length &&
      (old = malloc (len)) != NULL &&
      pread (f->fd, old, len, f->st.shadow_table_offset) == (ssize_t) len &&
      memcmp (buf, old, len) == 0) {
    t->st.shadow_table_offset = f->st.shadow_table_offset;
    goto out;
  }
  r = txn_alloc_region (t, ROUND_UP (len, BMF_ALIGN),
                        &t->st.shadow_table_offset, err);
  if (r == 0 && pwrite (f->fd, buf, len, t->st.shadow_table_offset)
      != (ssize_t) len) {
    bmerr_set (err, errno ? errno : EIO, "%s: write shadow table: %s",
               f->path, errno ? strerror (errno) : "short write");
    r = -1;
  }
 out:
  free (buf);
  free (old);
  return r;
}
