/* SPDX-License-Identifier: BSD-3-Clause */
/* recover.c: a bitmap after a power loss in durability=coarse (see
 * recover.h).
 *
 * Why this never misses a write.  At the last sync before the power
 * loss, every bit set so far was on stable storage; bits are only
 * ever set, so the file has at least those.  Every write after that
 * sync went down only once the shadow bit of its coarse granule was
 * on stable storage (the write path, filter/coarse.c).  So the bits
 * the file has, OR the coarse granules of the shadow, cover every
 * write.  The granules this adds were perhaps never written: the
 * result over-approximates, by at most the coarse granules written
 * since the shadow was last cleared.
 *
 * The shadow may itself lack bits whose granules reached the disk
 * (the kernel wrote a page of bits back before the sync that was to
 * cover the shadow bit, whose write then never went down): they are
 * added to the shadow first, so that the shadow is again exactly the
 * coarsened bits, and recovering twice (a writer that recovered in
 * place and stopped before its commit) gives what recovering once
 * gave.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include "bmfile-impl.h"
#include "msg.h"
#include "recover.h"
#include "shadow.h"
#include "util.h"

uint64_t
bmf_expand_shadow (struct bits *fine, unsigned gbits,
                   const struct bits *shadow, unsigned sgbits,
                   uint64_t disk_size)
{
  const unsigned shift = sgbits - gbits;
  uint64_t c, bytes = 0;

  for (c = bits_next_set (shadow, 0, shadow->nr_bits);
       c < shadow->nr_bits;
       c = bits_next_set (shadow, c + 1, shadow->nr_bits)) {
    uint64_t first = c << shift, end, i, e;

    if (first >= fine->nr_bits)
      break;
    end = MIN ((c + 1) << shift, fine->nr_bits);
    /* Count the clean runs before setting them. */
    for (i = bits_next_clear (fine, first, end); i < end;
         i = bits_next_clear (fine, e, end)) {
      e = bits_next_set (fine, i, end);
      bytes += MIN (e << gbits, disk_size) - (i << gbits);
    }
    bits_set_range (fine, first, end - 1);
  }
  return bytes;
}

/* Read length bytes at offset into malloced words. */
static int
read_words (struct bmf *f, uint64_t offset, uint64_t length,
            uint64_t nr_bits, struct bits *out)
{
  memset (out, 0, sizeof *out);
  out->nr_bits = nr_bits;
  if (length == 0)
    return 0;
  out->words = malloc (length);
  if (out->words == NULL)
    return -1;
  if (pread (f->fd, out->words, length, offset) != (ssize_t) length) {
    if (errno == 0)
      errno = EIO;
    free (out->words);
    out->words = NULL;
    return -1;
  }
  return 0;
}

int
bmf_recover_read (struct bmf *f, const struct bmf_state *st,
                  const struct bmf_bitmap *bm, struct bits *b,
                  struct bmerr *err)
{
  const unsigned sg = bmf_shadow_gbits (st, bm);
  struct bits sh;

  if (read_words (f, bm->shadow_offset, bm->shadow_length,
                  bmf_nr_bits (st->disk_size, sg), &sh) == -1) {
    bmerr_set (err, errno, "%s: bitmap %s: cannot read its shadow: %s",
               f->path, bm->name, strerror (errno));
    return -1;
  }
  if (sh.words && b->words) {
    bits_merge (&sh, sg, b, bm->gbits, st->disk_size);
    bmf_expand_shadow (b, bm->gbits, &sh, sg, st->disk_size);
  }
  free (sh.words);
  return 0;
}

/* Recover bm in place (write lock held): returns the bytes, or -1. */
static int64_t
recover_in_place (struct bmf *f, const struct bmf_bitmap *bm)
{
  const unsigned sg = bmf_shadow_gbits (&f->st, bm);
  struct bits fine, sh;
  uint64_t bytes;

  memset (&fine, 0, sizeof fine);
  memset (&sh, 0, sizeof sh);
  if (bmf_map_region (f->fd, bm->data_offset, bm->data_length, true,
                      &fine) == -1)
    return -1;
  if (bmf_map_region (f->fd, bm->shadow_offset, bm->shadow_length, true,
                      &sh) == -1) {
    bmf_unmap (&fine);
    return -1;
  }
  fine.nr_bits = bmf_nr_bits (f->st.disk_size, bm->gbits);
  sh.nr_bits = bmf_nr_bits (f->st.disk_size, sg);
  bits_merge (&sh, sg, &fine, bm->gbits, f->st.disk_size);
  bytes = bmf_expand_shadow (&fine, bm->gbits, &sh, sg, f->st.disk_size);
  bmf_unmap (&sh);
  bmf_unmap (&fine);
  return bytes;
}

/* Count bm's recovery without changing the file: returns the bytes,
 * or -1.
 */
static int64_t
recover_counted (struct bmf *f, const struct bmf_bitmap *bm)
{
  const unsigned sg = bmf_shadow_gbits (&f->st, bm);
  struct bits fine, sh;
  uint64_t bytes = 0;

  if (read_words (f, bm->data_offset, bm->data_length,
                  bmf_nr_bits (f->st.disk_size, bm->gbits), &fine) == -1)
    return -1;
  if (read_words (f, bm->shadow_offset, bm->shadow_length,
                  bmf_nr_bits (f->st.disk_size, sg), &sh) == -1) {
    free (fine.words);
    return -1;
  }
  if (sh.words && fine.words) {
    bits_merge (&sh, sg, &fine, bm->gbits, f->st.disk_size);
    bytes = bmf_expand_shadow (&fine, bm->gbits, &sh, sg, f->st.disk_size);
  }
  free (sh.words);
  free (fine.words);
  return bytes;
}

void
bmf_recover_coarse (struct bmf *f)
{
  const bool writer = f->lock == BMF_LOCK_EXCLUSIVE;
  size_t i;

  for (i = 0; i < f->st.nr_bitmaps; ++i) {
    struct bmf_bitmap *bm = &f->st.bitmaps[i];
    int64_t bytes;

    if (!bmf_flags_unsettled (bm->flags))
      continue;
    if (!f->st.has_shadows) {
      bm->flags |= BMF_INCONSISTENT;
      bm_debug ("%s: bitmap %s has no shadow: it is now inconsistent",
                f->path, bm->name);
      continue;
    }
    if (bm->data_length == 0)
      continue;                 /* the disk was never seen: no bits */
    bytes = writer ? recover_in_place (f, bm) : recover_counted (f, bm);
    if (bytes == -1) {
      bm->flags |= BMF_INCONSISTENT;
      bm_debug ("%s: bitmap %s cannot be recovered from its shadow (%m): "
                "it is now inconsistent", f->path, bm->name);
      continue;
    }
    bm->recovered = bytes;
    bm->recovery = writer ? BMF_RECOVERED : BMF_RECOVER_ON_READ;
    bm_debug ("%s: bitmap %s: %" PRIu64 " bytes dirty after the power "
              "loss, from its shadow", f->path, bm->name, bm->recovered);
  }
}
