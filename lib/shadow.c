/* SPDX-License-Identifier: BSD-3-Clause */
/* shadow.c: the coarse shadows in the file: their table, encoded,
 * decoded and checked (see shadow.h; the byte layout is in
 * nbdkit-dirtybitmap-filter(1), FILE FORMAT; their header fields are
 * checked with the rest of the header, in format-header.c).  As for
 * the directory, every field is checked before it is used, and the
 * decoder stops at the first problem unless the caller asks to hear
 * them all.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>

#include "crc32c.h"
#include "shadow.h"
#include "util.h"

/* Shadow table entry field offsets. */
#define S_OFFSET 0
#define S_LENGTH 8

_Static_assert (S_LENGTH + 8 == BMF_SHADOW_ENTRY,
                "a shadow table entry is two 64 bit fields");

const char *
bmf_coarse_granularity_problem (uint64_t bytes)
{
  if (bytes < BMF_MIN_GRANULARITY || bytes > BMF_MAX_GRANULARITY ||
      !is_power_of_2 (bytes))
    return "must be a power of 2 from 512 to 2G";
  return NULL;
}

uint64_t
bmf_shadow_length (const struct bmf_state *st, const struct bmf_bitmap *bm)
{
  return st->sized ? bmf_data_length (st->disk_size,
                                      bmf_shadow_gbits (st, bm)) : 0;
}

unsigned char *
bmf_encode_shadows (const struct bmf_state *st, size_t *len)
{
  unsigned char *buf;
  size_t i;

  *len = st->nr_bitmaps * BMF_SHADOW_ENTRY;
  buf = calloc (1, MAX (*len, 1));
  if (buf == NULL)
    return NULL;
  for (i = 0; i < st->nr_bitmaps; ++i) {
    put_le64 (buf + i * BMF_SHADOW_ENTRY + S_OFFSET,
              st->bitmaps[i].shadow_offset);
    put_le64 (buf + i * BMF_SHADOW_ENTRY + S_LENGTH,
              st->bitmaps[i].shadow_length);
  }
  return buf;
}

int
bmf_decode_shadows (const unsigned char *buf, size_t len, uint32_t crc,
                    struct bmf_state *st, struct bmf_problems *p)
{
  const unsigned before = p->count;
  size_t i;

  if (len != st->nr_bitmaps * BMF_SHADOW_ENTRY) {
    bmf_problem (p, "shadow table of %zu bytes for %zu bitmaps", len,
                 st->nr_bitmaps);
    return -1;
  }
  if (len && crc32c (buf, len) != crc) {
    bmf_problem (p, "shadow table checksum mismatch");
    if (!p->report)
      return -1;
  }
  for (i = 0; i < st->nr_bitmaps; ++i) {
    struct bmf_bitmap *bm = &st->bitmaps[i];
    const char *rp;

    bm->shadow_offset = get_le64 (buf + i * BMF_SHADOW_ENTRY + S_OFFSET);
    bm->shadow_length = get_le64 (buf + i * BMF_SHADOW_ENTRY + S_LENGTH);
    if (bm->gbits < BMF_MIN_GBITS || bm->gbits > BMF_MAX_GBITS)
      continue;                 /* reported by the directory */
    if (bm->shadow_length != bmf_shadow_length (st, bm))
      bmf_problem (p, "bitmap %s: shadow length %" PRIu64 " does not "
                   "match the disk size %" PRIu64 " at granularity %"
                   PRIu64, bm->name, bm->shadow_length, st->disk_size,
                   UINT64_C (1) << bmf_shadow_gbits (st, bm));
    else if (bm->shadow_length == 0 && bm->shadow_offset != 0)
      bmf_problem (p, "bitmap %s: shadow offset %" PRIu64 " without a "
                   "shadow", bm->name, bm->shadow_offset);
    else if (bm->shadow_length > 0 &&
             (rp = bmf_region_problem (bm->shadow_offset, bm->shadow_length,
                                       st->file_length)) != NULL)
      bmf_problem (p, "bitmap %s: shadow (offset %" PRIu64 ", length %"
                   PRIu64 ") %s", bm->name, bm->shadow_offset,
                   bm->shadow_length, rp);
    if (!p->report && p->count > before)
      return -1;
  }
  return p->count > before ? -1 : 0;
}
