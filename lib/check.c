/* SPDX-License-Identifier: BSD-3-Clause */
/* check.c: validate a bitmap file and report every problem found
 * (dirtybitmap check): what the loader checks, without stopping at the
 * first problem, plus what only a full read can find (bits set past
 * the last granule).
 */

#include <config.h>

#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

#include "bmfile-impl.h"
#include "restore-record.h"
#include "util.h"

/* Bits past the last granule must be clear, in the last word and in
 * the padding up to the end of the data.  Entries already found broken
 * (their granularity, length or place) are skipped.
 */
static void
check_tails (int fd, const struct bmf_state *st, uint64_t file_size,
             struct bmf_problems *p)
{
  size_t i;

  for (i = 0; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *bm = &st->bitmaps[i];
    uint64_t tail[BMF_ALIGN / 8], nbits, start;
    size_t len;

    if (bm->gbits < BMF_MIN_GBITS || bm->gbits > BMF_MAX_GBITS ||
        bm->data_length == 0 ||
        bm->data_length != bmf_data_length (st->disk_size, bm->gbits) ||
        bmf_region_problem (bm->data_offset, bm->data_length,
                            MIN (st->file_length, file_size)) != NULL)
      continue;
    /* From the word holding the last granule (or, when that word is
     * full, the next one) to the end: at most 4096 bytes.
     */
    nbits = bmf_nr_bits (st->disk_size, bm->gbits);
    start = (nbits / 64) * 8;
    len = bm->data_length - start;
    if (len == 0)
      continue;
    if (len > sizeof tail ||
        pread (fd, tail, len, bm->data_offset + start) != (ssize_t) len) {
      bmf_problem (p, "bitmap %s: cannot read its data", bm->name);
      continue;
    }
    if (bmf_tail_dirty (tail, len, nbits))
      bmf_problem (p, "bitmap %s: bits set past the end of the disk",
                   bm->name);
  }
}

/* The same for the restored bitmap of a running restore. */
static void
check_restored_tail (int fd, const struct bmf_state *st, uint64_t file_size,
                     struct bmf_problems *p)
{
  const struct bmf_region reg = bmf_restored_region (st);
  const uint64_t nbits = bmf_restored_nr_bits (st);
  const uint64_t start = (nbits / 64) * 8;
  uint64_t tail[BMF_ALIGN / 8];
  size_t len;

  if (reg.length == 0 || reg.length <= start ||
      bmf_region_problem (reg.offset, reg.length,
                          MIN (st->file_length, file_size)) != NULL)
    return;
  len = reg.length - start;
  if (len > sizeof tail ||
      pread (fd, tail, len, reg.offset + start) != (ssize_t) len)
    bmf_problem (p, "restore record: cannot read its restored bitmap");
  else if (bmf_tail_dirty (tail, len, nbits))
    bmf_problem (p, "restore record: bits set past the end of the disk");
}

unsigned
bmf_check (const char *path,
           void (*report) (void *opaque, const char *problem), void *opaque)
{
  struct bmf_problems p = { .path = path, .report = report,
                            .opaque = opaque };
  struct bmf_state st;
  uint64_t size = 0;
  int fd, slot;

  /* O_NONBLOCK: a FIFO is refused by the loader, not waited on. */
  fd = open (path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd == -1) {
    bmf_problem (&p, "%s", strerror (errno));
    return p.count;
  }
  if (bmf_load (fd, &st, &slot, &size, &p) == 0 || st.bitmaps) {
    check_tails (fd, &st, size, &p);
    check_restored_tail (fd, &st, size, &p);
  }
  bmf_state_free (&st);
  close (fd);
  return p.count;
}
