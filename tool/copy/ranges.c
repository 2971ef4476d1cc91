/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/ranges.c: the ranges of the source to bring to the target,
 * from its base:allocation block status.
 *
 * An incremental copy (SCAN_DIRTY) reads the extents as
 * nbdkit-dirtybitmap-filter answers them from a bitmap: a hole is
 * clean (not copied), data is dirty (copied), and zero is dirty and
 * now reads as zeroes (zeroed on the target).  A hole that also has
 * the zero bit never comes from the filter (it reports clean ranges
 * as holes only); a server that sends one is describing allocation,
 * and the range reads as zeroes, so it is zeroed on the target: taking
 * it as dirty is always safe, taking it as clean is not.
 *
 * A full copy (SCAN_ALL) covers every byte, and block status only
 * tells which ranges need no reading: those with the zero bit.
 * Everything else is data, holes included: through the filter with
 * bitmap= a hole without the zero bit means "unchanged", not "zero",
 * and reads as whatever the disk holds.
 *
 * The whole disk is scanned before copying starts, in requests of up
 * to 4G, so the total is known for the progress display and for the
 * messages of a copy that stops; the time this takes grows with the
 * number of extents, not with the size of the disk.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>

#include <libnbd.h>

#include "internal.h"
#include "util.h"

/* Largest block status request: 4G minus 64K keeps it within the 32
 * bit length of the protocol and aligned for any server minimum block
 * size.
 */
#define MAX_BLOCK_STATUS (UINT64_C (0xffff0000))

static int
add_range (struct ranges *rs, uint64_t offset, uint64_t length, bool zero)
{
  struct range *last = rs->n ? &rs->r[rs->n - 1] : NULL;

  if (length == 0)
    return 0;
  if (zero)
    rs->zero_bytes += length;
  else
    rs->data_bytes += length;
  if (last && last->zero == zero && last->offset + last->length == offset) {
    last->length += length;
    return 0;
  }
  if (array_room (&rs->r, &rs->cap, rs->n, sizeof *rs->r, 256) == -1)
    return -1;
  rs->r[rs->n++] = (struct range) { offset, length, zero };
  return 0;
}

struct scan {
  struct ranges *out;
  enum scan_mode mode;
  uint64_t size;
  uint64_t pos;                 /* where the next extent must start */
  bool failed;                  /* out of memory or a bad reply */
  char msg[160];
};

static int
extent_cb (void *opaque, const char *metacontext, uint64_t offset,
           uint32_t *entries, size_t nr_entries, int *error)
{
  struct scan *s = opaque;
  size_t i;

  if (strcmp (metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0 ||
      *error || s->failed)
    return 0;
  if (offset != s->pos) {
    snprintf (s->msg, sizeof s->msg,
              "block status reply starts at offset %" PRIu64
              ", expected %" PRIu64, offset, s->pos);
    s->failed = true;
    return 0;
  }
  for (i = 0; i + 1 < nr_entries && s->pos < s->size; i += 2) {
    uint64_t length = MIN ((uint64_t) entries[i], s->size - s->pos);
    uint32_t type = entries[i + 1];

    if (type & LIBNBD_STATE_ZERO) {
      if (add_range (s->out, s->pos, length, true) == -1)
        goto nomem;
    }
    else if (s->mode == SCAN_ALL || !(type & LIBNBD_STATE_HOLE)) {
      if (add_range (s->out, s->pos, length, false) == -1)
        goto nomem;
    }
    s->pos += length;
  }
  return 0;

 nomem:
  snprintf (s->msg, sizeof s->msg, "%s", strerror (ENOMEM));
  s->failed = true;
  return 0;
}

int
scan_ranges (struct nbd_handle *src, const char *uri, uint64_t size,
             enum scan_mode mode, struct ranges *out, struct bmerr *err)
{
  struct scan s = { .out = out, .mode = mode, .size = size, .pos = 0 };

  while (s.pos < size) {
    uint64_t start = s.pos;
    uint64_t count = MIN (size - start, MAX_BLOCK_STATUS);

    if (nbd_block_status (src, count, start,
                          (nbd_extent_callback) { .callback = extent_cb,
                                                  .user_data = &s },
                          0) == -1) {
      bmerr_first (err, 0, "source %s: block status at offset %" PRIu64
                   ": %s", uri, start, nbd_get_error ());
      return -1;
    }
    if (s.failed) {
      bmerr_first (err, 0, "source %s: block status at offset %" PRIu64
                   ": %s", uri, start, s.msg);
      return -1;
    }
    if (s.pos == start) {
      bmerr_first (err, 0, "source %s: block status at offset %" PRIu64
                   " returned no extents", uri, start);
      return -1;
    }
  }
  return 0;
}

int
full_range (uint64_t size, struct ranges *out, struct bmerr *err)
{
  if (add_range (out, 0, size, false) == -1) {
    bmerr_first (err, 0, "%s", strerror (ENOMEM));
    return -1;
  }
  return 0;
}

/* Add [start, end) to out as zero or data, less what out covers
 * already (up to *covered).
 */
static int
add_clipped (struct ranges *out, uint64_t *covered, uint64_t start,
             uint64_t end, bool zero)
{
  if (start < *covered)
    start = *covered;
  if (start >= end)
    return 0;
  *covered = end;
  return add_range (out, start, end - start, zero);
}

int
chunk_ranges (struct ranges *rs, uint64_t chunk, uint64_t size,
              struct bmerr *err)
{
  struct ranges out = { 0 };
  uint64_t covered = 0;
  size_t i;
  int r = 0;

  for (i = 0; i < rs->n && r == 0; ++i) {
    const struct range *x = &rs->r[i];
    uint64_t end = x->offset + x->length;
    uint64_t head = ROUND_DOWN (x->offset, chunk);
    uint64_t tail = MIN (ROUND_UP (end, chunk), size);
    uint64_t zs = ROUND_UP (x->offset, chunk);
    uint64_t ze = end == size ? size : ROUND_DOWN (end, chunk);

    if (!x->zero || zs >= ze)
      r = add_clipped (&out, &covered, head, tail, false);
    else {
      /* Only the chunks wholly inside a zero range stay zero. */
      r = add_clipped (&out, &covered, head, zs, false);
      if (r == 0)
        r = add_clipped (&out, &covered, zs, ze, true);
      if (r == 0)
        r = add_clipped (&out, &covered, ze, tail, false);
    }
  }
  if (r == -1) {
    free_ranges (&out);
    bmerr_first (err, 0, "%s", strerror (ENOMEM));
    return -1;
  }
  free_ranges (rs);
  *rs = out;
  return 0;
}

/* Ranges in order of offset; at one offset, data first. */
static int
compare_ranges (const void *a, const void *b)
{
  const struct range *x = a, *y = b;

  if (x->offset != y->offset)
    return x->offset < y->offset ? -1 : 1;
  return (int) x->zero - (int) y->zero;
}

int
force_ranges (struct ranges *rs, const uint8_t *force, uint64_t chunk,
              uint64_t size, struct bmerr *err)
{
  const uint64_t n = DIV_ROUND_UP (size, chunk);
  uint64_t i, forced = 0;
  struct range *r;
  size_t k;

  for (i = 0; i < n; ++i)
    forced += force[i] != 0;
  if (forced == 0)
    return 0;
  r = realloc (rs->r, (rs->n + forced) * sizeof *r);
  if (r == NULL) {
    bmerr_first (err, 0, "%s", strerror (ENOMEM));
    return -1;
  }
  rs->r = r;
  rs->cap = rs->n + forced;
  for (i = 0, k = rs->n; i < n; ++i)
    if (force[i])
      r[k++] = (struct range) { i * chunk, MIN (chunk, size - i * chunk),
                                false };
  rs->n = k;
  qsort (rs->r, rs->n, sizeof *rs->r, compare_ranges);
  return 0;
}

int
copy_dirty_chunks (const char *uri, uint64_t size, uint64_t chunk,
                   uint8_t *only, struct bmerr *err)
{
  struct nbd_handle *h;
  struct ranges rs = { 0 };
  int64_t v;
  uint64_t c;
  size_t i;
  int r = -1;

  bmerr_clear (err);
  if ((h = connect_uri ("source", uri, true, err)) == NULL)
    return -1;
  if ((v = nbd_get_size (h)) == -1)
    bmerr_first (err, 0, "%s: %s", uri, nbd_get_error ());
  else if ((uint64_t) v != size)
    bmerr_first (err, 0, "%s is %" PRIi64 " bytes, not %" PRIu64, uri, v,
                 size);
  else if (nbd_can_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) != 1)
    bmerr_first (err, 0, "%s does not offer base:allocation", uri);
  else if (scan_ranges (h, uri, size, SCAN_DIRTY, &rs, err) == 0)
    r = 0;
  close_handles (&h, 1, true);
  for (i = 0; r == 0 && i < rs.n; ++i)
    for (c = rs.r[i].offset / chunk;
         c * chunk < rs.r[i].offset + rs.r[i].length; ++c)
      only[c] = 1;
  free_ranges (&rs);
  return r;
}

int
select_chunks (struct ranges *rs, uint64_t chunk, const uint8_t *only,
               struct bmerr *err)
{
  struct ranges out = { 0 };
  size_t i;
  int r = 0;

  for (i = 0; i < rs->n && r == 0; ++i) {
    const struct range *x = &rs->r[i];
    uint64_t end = x->offset + x->length, pos, next;

    for (pos = x->offset; pos < end && r == 0; pos = next) {
      next = MIN (ROUND_DOWN (pos, chunk) + chunk, end);
      if (only[pos / chunk])
        r = add_range (&out, pos, next - pos, x->zero);
    }
  }
  if (r == -1) {
    free_ranges (&out);
    bmerr_first (err, 0, "%s", strerror (ENOMEM));
    return -1;
  }
  free_ranges (rs);
  *rs = out;
  return 0;
}

void
free_ranges (struct ranges *rs)
{
  free (rs->r);
  rs->r = NULL;
  rs->n = rs->cap = 0;
}
