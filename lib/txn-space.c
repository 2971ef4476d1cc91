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

#include "fullio.h"
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

static const char zero[BMF_ALIGN];

/* Make [pos, pos + length) of space that a removed bitmap (or another
 * freed region) held read as zeroes, by writing zeroes over the blocks
 * that hold anything else.  Not with fallocate(PUNCH_HOLE): a punch
 * holds the file's invalidate lock, which a writer's first store to a
 * clean page of the file's mapping takes too (page_mkwrite), and on
 * some file systems it waits there for a discard: every write of a
 * running server that sets a bit would wait for it.  The holes
 * (SEEK_DATA) and the blocks that read as zeroes already are skipped:
 * a removed bitmap is mostly zeroes.
 */
static int
zero_reused (struct bmf *f, uint64_t pos, uint64_t length, struct bmerr *err)
{
  char buf[16 * BMF_ALIGN];
  const uint64_t end = pos + length;
  uint64_t o = pos;

  while (o < end) {
    off_t data = lseek (f->fd, o, SEEK_DATA);
    uint64_t stop;
    size_t i, n;

    if (data == -1 && errno == ENXIO)
      break;                    /* holes to the end of the file */
    if (data != -1) {
      off_t hole = lseek (f->fd, data, SEEK_HOLE);
      o = data;
      stop = hole == -1 ? end : MIN ((uint64_t) hole, end);
    }
    else
      stop = end;               /* no SEEK_DATA here: read it all */
    for (; o < stop; o += n) {
      ssize_t r = full_pread (f->fd, buf, MIN (sizeof buf, stop - o), o);
      if (r == -1) {
        bmerr_set (err, errno, "%s: read: %s", f->path, strerror (errno));
        return -1;
      }
      if (r == 0)
        return 0;               /* the end of the file */
      n = r;
      for (i = 0; i < n; i += BMF_ALIGN) {
        size_t len = MIN (BMF_ALIGN, n - i);
        if (!buf_is_zero (buf + i, len) &&
            full_pwrite (f->fd, zero, len, o + i) == -1) {
          bmerr_set (err, errno, "%s: write: %s", f->path, strerror (errno));
          return -1;
        }
      }
    }
  }
  return 0;
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
  /* Old bytes in reused space: write zeroes over them (see
   * zero_reused), then allocate every block now.
   */
  if (pos < (uint64_t) sb.st_size &&
      zero_reused (f, pos, MIN (length, sb.st_size - pos), err) == -1)
    return -1;
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
    uint64_t o;
    for (o = 0; o < length; o += BMF_ALIGN)
      if (full_pwrite (f->fd, zero, BMF_ALIGN, pos + o) == -1) {
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
