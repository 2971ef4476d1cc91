/* SPDX-License-Identifier: BSD-3-Clause */
/* txn-space.c: the space a transaction writes into (see txn-impl.h):
 * found first fit among the regions that the committed state and the
 * transaction refer to and those this process still uses
 * (bmf_reserve), and allocated at once, so that setting a bit through
 * a mapping can never hit ENOSPC (SIGBUS); and its mapping.  Below the
 * operations (txn.c, txn-shadow.c, txn-restore.c), which all take
 * their space here.
 */

#include <config.h>

#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

#include "txn-impl.h"
#include "util.h"

/* Every region that new space must avoid: what the committed state
 * and the transaction refer to, and what this process still uses.
 */
static struct bmf_region *
live_regions (struct bmf_txn *t, size_t *n)
{
  const struct bmf *f = t->f;
  struct bmf_region *r;
  size_t i, max = bmf_max_regions (&f->st) + bmf_max_regions (&t->st) +
    f->nr_reserved;

  r = calloc (MAX (max, 1), sizeof *r);
  if (r == NULL)
    return NULL;
  *n = bmf_state_regions (&f->st, r);
  *n += bmf_state_regions (&t->st, r + *n);
  for (i = 0; i < f->nr_reserved; ++i)
    r[(*n)++] = f->reserved[i];
  qsort (r, *n, sizeof *r, bmf_region_cmp);
  return r;
}

/* Find length bytes (a multiple of BMF_ALIGN) of free space, first
 * fit, allocate it and make it read as zeroes.  Nothing that a header
 * refers to is touched.
 */
int
txn_alloc_region (struct bmf_txn *t, uint64_t length, uint64_t *offset,
                  struct bmerr *err)
{
  struct bmf *f = t->f;
  struct bmf_region *r;
  size_t i, n;
  uint64_t pos = BMF_FIRST_REGION;
  bool zero_by_hand = false;
  struct stat sb;
  int e;

  *offset = 0;
  if (length == 0)
    return 0;
  r = live_regions (t, &n);
  if (r == NULL) {
    bmerr_set (err, errno, "%s: %s", f->path, strerror (errno));
    return -1;
  }
  for (i = 0; i < n; ++i) {
    if (r[i].length == 0)
      continue;
    if (r[i].offset >= pos && r[i].offset - pos >= length)
      break;
    pos = MAX (pos, ROUND_UP (r[i].offset + r[i].length, BMF_ALIGN));
  }
  free (r);

  if (fstat (f->fd, &sb) == -1) {
    bmerr_set (err, errno, "%s: fstat: %s", f->path, strerror (errno));
    return -1;
  }
  /* Old bytes in reused space: punch them out (falling back to
   * writing zeroes below), then allocate every block now.
   */
  if (pos < (uint64_t) sb.st_size &&
      fallocate (f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                 pos, MIN (length, sb.st_size - pos)) == -1)
    zero_by_hand = true;
  e = posix_fallocate (f->fd, pos, length);
  if (e == EOPNOTSUPP || e == EINVAL) {
    /* No fallocate here (some file systems): write the zeroes. */
    zero_by_hand = true;
    e = 0;
  }
  if (e) {
    bmerr_set (err, e, "%s: cannot allocate %" PRIu64 " bytes: %s",
               f->path, length, strerror (e));
    return -1;
  }
  if (zero_by_hand) {
    static const char zero[BMF_ALIGN];
    uint64_t o;
    for (o = 0; o < length; o += BMF_ALIGN)
      if (pwrite (f->fd, zero, BMF_ALIGN, pos + o) != BMF_ALIGN) {
        bmerr_set (err, errno, "%s: write: %s", f->path, strerror (errno));
        return -1;
      }
  }
  *offset = pos;
  return 0;
}

int
txn_map (struct bmf *f, uint64_t offset, uint64_t length, uint64_t nr_bits,
         bool writable, struct bits *out, struct bmerr *err)
{
  memset (out, 0, sizeof *out);
  out->nr_bits = nr_bits;
  if (length == 0)
    return 0;
  if (bmf_map_region (f->fd, offset, length, writable, out) == -1) {
    bmerr_set (err, errno, "%s: cannot map %" PRIu64 " bytes: %s",
               f->path, length, strerror (errno));
    return -1;
  }
  return 0;
}
