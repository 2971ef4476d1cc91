/* SPDX-License-Identifier: BSD-3-Clause */
/* format-region.c: the regions a bitmap file is made of, as its state
 * places them (the directory, the shadow table, each bitmap's data and
 * shadow, the restore record's): each checked against the file's
 * length, listed, and checked for overlaps (see format.h).  No I/O.
 */

#include <config.h>

#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>

#include "format.h"

const char *
bmf_region_problem (uint64_t offset, uint64_t length, uint64_t file_length)
{
  if (offset % BMF_ALIGN != 0)
    return "is not aligned to 4096 bytes";
  if (offset < BMF_FIRST_REGION)
    return "overlaps the header slots";
  if (offset > file_length || length > file_length - offset)
    return "lies outside the file";
  return NULL;
}

int
bmf_region_cmp (const void *a, const void *b)
{
  const struct bmf_region *ra = a, *rb = b;
  return ra->offset < rb->offset ? -1 : ra->offset > rb->offset;
}

size_t
bmf_max_regions (const struct bmf_state *st)
{
  return 3 + 2 * st->nr_bitmaps;
}

static void
add_region (struct bmf_region *r, size_t *n, uint64_t offset,
            uint64_t length)
{
  if (offset && length)
    r[(*n)++] = (struct bmf_region) { offset, length };
}

size_t
bmf_state_regions (const struct bmf_state *st, struct bmf_region *r)
{
  size_t i, n = 0;

  add_region (r, &n, st->dir_offset, st->dir_length);
  if (st->has_shadows)
    add_region (r, &n, st->shadow_table_offset, st->shadow_table_length);
  for (i = 0; i < st->nr_bitmaps; ++i) {
    add_region (r, &n, st->bitmaps[i].data_offset,
                st->bitmaps[i].data_length);
    if (st->has_shadows)
      add_region (r, &n, st->bitmaps[i].shadow_offset,
                  st->bitmaps[i].shadow_length);
  }
  if (st->restore.state != BMF_RESTORE_NONE)
    add_region (r, &n, st->restore.region.offset, st->restore.region.length);
  return n;
}

void
bmf_check_overlaps (const struct bmf_state *st, struct bmf_problems *p)
{
  struct bmf_region *r;
  size_t i, n;

  r = calloc (bmf_max_regions (st), sizeof *r);
  if (r == NULL) {
    bmf_problem (p, "%s", strerror (errno));
    return;
  }
  n = bmf_state_regions (st, r);
  qsort (r, n, sizeof *r, bmf_region_cmp);
  for (i = 1; i < n; ++i)
    if (r[i - 1].offset + r[i - 1].length > r[i].offset)
      bmf_problem (p, "regions at offsets %" PRIu64 " and %" PRIu64
                   " overlap", r[i - 1].offset, r[i].offset);
  free (r);
}
