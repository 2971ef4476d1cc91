/* SPDX-License-Identifier: BSD-3-Clause */
/* format.c: what every part of a bitmap file's bytes shares (see
 * format.h; the byte layout is in nbdkit-dirtybitmap-filter(1), FILE
 * FORMAT): the limits on a granularity and a name, the size of a
 * bitmap's data and the bits past its last granule, the decoded state
 * (found, copied, freed), and the problems a decoder reports.  The
 * header slots are in format-header.c, the directory in format-dir.c,
 * the regions the file is made of in format-region.c.  No I/O.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>

#include "format.h"
#include "util.h"

const char *
bmf_granularity_problem (uint64_t bytes)
{
  if (bytes < BMF_MIN_GRANULARITY || bytes > BMF_MAX_GRANULARITY ||
      !is_power_of_2 (bytes))
    return "must be a power of 2 from 512 to 2G";
  return NULL;
}

const char *
bmf_name_problem (const char *name)
{
  size_t len = strlen (name);

  if (len == 0 || len > BMF_MAX_NAME)
    return "must be 1 to 1023 bytes";
  return NULL;
}

uint64_t
bmf_nr_bits (uint64_t disk_size, unsigned gbits)
{
  return disk_size == 0 ? 0 : ((disk_size - 1) >> gbits) + 1;
}

uint64_t
bmf_data_length (uint64_t disk_size, unsigned gbits)
{
  return ROUND_UP (DIV_ROUND_UP (bmf_nr_bits (disk_size, gbits), 64) * 8,
                   BMF_ALIGN);
}

struct bmf_bitmap *
bmf_find (const struct bmf_state *st, const char *name)
{
  size_t i;

  for (i = 0; i < st->nr_bitmaps; ++i)
    if (strcmp (st->bitmaps[i].name, name) == 0)
      return &st->bitmaps[i];
  return NULL;
}

void
bmf_state_free (struct bmf_state *st)
{
  size_t i;

  for (i = 0; st->bitmaps && i < st->nr_bitmaps; ++i)
    free (st->bitmaps[i].name);
  free (st->bitmaps);
  st->bitmaps = NULL;
  st->nr_bitmaps = 0;
}

int
bmf_state_copy (struct bmf_state *dst, const struct bmf_state *src)
{
  size_t i;

  *dst = *src;
  dst->bitmaps = calloc (MAX (src->nr_bitmaps, 1), sizeof *dst->bitmaps);
  if (dst->bitmaps == NULL)
    return -1;
  for (i = 0; i < src->nr_bitmaps; ++i) {
    dst->bitmaps[i] = src->bitmaps[i];
    dst->bitmaps[i].name = strdup (src->bitmaps[i].name);
    if (dst->bitmaps[i].name == NULL) {
      dst->nr_bitmaps = i;
      bmf_state_free (dst);
      return -1;
    }
  }
  return 0;
}

void
bmf_problem (struct bmf_problems *p, const char *fs, ...)
{
  va_list args;
  char msg[1024];

  va_start (args, fs);
  vsnprintf (msg, sizeof msg, fs, args);
  va_end (args);
  if (p->report) {
    char full[sizeof p->first.msg];
    snprintf (full, sizeof full, "%s: %s", p->path, msg);
    p->report (p->opaque, full);
  }
  else
    bmerr_first (&p->first, EINVAL, "%s: %s", p->path, msg);
  p->count++;
}

bool
bmf_tail_dirty (const uint64_t *tail, size_t len, uint64_t nbits)
{
  size_t w;

  if ((nbits & 63) && (tail[0] >> (nbits & 63)) != 0)
    return true;
  for (w = (nbits & 63) ? 1 : 0; w < len / 8; ++w)
    if (tail[w] != 0)
      return true;
  return false;
}
