/* SPDX-License-Identifier: BSD-3-Clause */
/* extents.c: base:allocation answered from a bitmap.
 *
 * A clean granule is a hole (type 1): unchanged since the bitmap
 * started recording.  A dirty granule is data (type 0), except where
 * the layer below reports that it reads as zeroes, which is zero
 * (type 2): changed, and now zero.  Clean is never reported as zero,
 * so every dirty range shows as data or zero in nbdinfo --map.
 *
 * Runs are found with bits_run, which skips clean areas through the
 * summary, so the cost grows with the number of
 * dirty runs in the request, not its length.  The last clean run may
 * reach up to 4G past the request: nbdkit sends the extents up to the
 * first one that ends past the request, each cut to UINT32_MAX bytes,
 * so a clean run that starts inside the request carries the client
 * past its end.  A request that is clean from its start still moves
 * the client on by only UINT32_MAX bytes: a map of a 16 TiB disk takes
 * at least 4096 requests, whatever the bitmap (see BENCHMARKS.md).
 */

#include <config.h>

#include <stdint.h>
#include <stdbool.h>
#include <errno.h>

#include <nbdkit-filter.h>

#include "extents.h"
#include "util.h"

/* What the layer below says about the dirty runs of one request:
 * fetched once, from the first dirty run to the end of the request,
 * and walked forward run by run.  (One call per run would cost one
 * search of the file each: on tmpfs a search for the next hole scans
 * to the end of the file.)
 */
struct below {
  int can;                      /* the layer below answers extents */
  struct nbdkit_extents *ex;    /* NULL until the first dirty run */
  size_t i;                     /* first extent not yet passed */
};

/* Add [start, end) of a dirty run, split where the layer below says
 * the data reads as zeroes.  With REQ_ONE only the first extent below
 * matters, so only that is asked for.
 */
static int
add_dirty (nbdkit_next *next, struct below *bl, uint64_t start,
           uint64_t end, uint64_t req_end, uint32_t flags,
           struct nbdkit_extents *extents, int *err)
{
  size_t n;
  int r = 0;

  if (!bl->can)
    goto as_data;
  if (bl->ex == NULL) {
    if (flags & NBDKIT_FLAG_REQ_ONE) {
      bl->ex = nbdkit_extents_new (start, end);
      if (bl->ex == NULL)
        goto fail;
      if (next->extents (next, end - start, start, NBDKIT_FLAG_REQ_ONE,
                         bl->ex, err) == -1)
        return -1;
    }
    else {
      bl->ex = nbdkit_extents_full (next, req_end - start, start, 0, err);
      if (bl->ex == NULL)
        return -1;
    }
  }

  n = nbdkit_extents_count (bl->ex);
  for (; bl->i < n && r == 0; ++bl->i) {
    struct nbdkit_extent e = nbdkit_get_extent (bl->ex, bl->i);
    uint64_t s = MAX (e.offset, start), t = MIN (e.offset + e.length, end);

    if (e.offset >= end)
      break;
    if (s < t) {
      r = nbdkit_add_extent (extents, s, t - s,
                             (e.type & NBDKIT_EXTENT_ZERO) ?
                             NBDKIT_EXTENT_ZERO : 0);
      start = t;
    }
    if (e.offset + e.length > end)
      break;                    /* it goes on into the next run */
  }
  /* Nothing (more) from below for this run: assume data. */
  if (r == 0 && start < end)
    r = nbdkit_add_extent (extents, start, end - start, 0);
  if (r == -1)
    goto fail;
  return 0;

 as_data:
  if (nbdkit_add_extent (extents, start, end - start, 0) == 0)
    return 0;
 fail:
  *err = errno;
  return -1;
}

int
bitmap_extents (nbdkit_next *next, const struct bitmap_set *s,
                const struct live_bitmap *lb,
                uint32_t count, uint64_t offset, uint32_t flags,
                struct nbdkit_extents *extents, int *err)
{
  const unsigned g = lb->gbits;
  const uint64_t size = s->disk_size, end = offset + count;
  const uint64_t far = MIN (size, end + UINT32_MAX);
  const struct bits *b = &lb->bits;
  uint64_t pos = offset;
  struct below bl = { .can = next->can_extents (next) };
  int r = 0;

  if (bl.can == -1) {
    *err = errno;
    return -1;
  }

  while (r == 0 && pos < end) {
    uint64_t g0 = pos >> g, run_end;
    bool dirty;

    if (pos >= size || g0 >= b->nr_bits) {
      /* Past the bitmap (the disk shrank for another connection):
       * nothing is known, so it counts as changed.
       */
      if ((r = nbdkit_add_extent (extents, pos, end - pos, 0)) == -1)
        *err = errno;
      break;
    }
    if (!bits_test (b, g0)) {
      uint64_t limit = ((far - 1) >> g) + 1;
      run_end = MIN (bits_run (b, g0, limit, &dirty) << g, size);
      if ((r = nbdkit_add_extent (extents, pos, run_end - pos,
                                  NBDKIT_EXTENT_HOLE)) == -1)
        *err = errno;
    }
    else {
      /* Refining a run needs the layer below: stop it at the
       * request's end, unless there is nothing to refine.
       */
      uint64_t stop = bl.can ? MIN (size, end) : far;
      uint64_t limit = ((stop - 1) >> g) + 1;
      run_end = MIN (bits_run (b, g0, limit, &dirty) << g, stop);
      r = add_dirty (next, &bl, pos, run_end, MIN (size, end), flags,
                     extents, err);
    }
    pos = run_end;
    if (flags & NBDKIT_FLAG_REQ_ONE)
      break;
  }
  if (bl.ex)
    nbdkit_extents_free (bl.ex);
  return r;
}
