/* SPDX-License-Identifier: BSD-3-Clause */
/* txn-restore.c: the restore record's operations in a transaction
 * (see txn.h and restore-record.h).
 *
 * A restore that begins changes the whole disk at once, as its
 * clients see it: every bitmap that records is made dirty all over in
 * the same commit (copied on write, its shadow too), so that no
 * incremental backup from a checkpoint taken before the restore can
 * miss a byte of it.  A bitmap added after the restore has begun (in
 * a later operation of the same transaction, or later) records only
 * the writes made to the restored disk.  The data the restore itself
 * writes is the source's, which its clients already read: it is no
 * change, and no bitmap records it.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include "crc32c.h"
#include "restore-record.h"
#include "txn-impl.h"

/* bm (recording) becomes dirty all over: new data, every bit set. */
static int
dirty_all (struct bmf_txn *t, struct bmf_bitmap *bm, struct bmerr *err)
{
  const uint64_t size = t->st.disk_size;
  const uint64_t nbits = bmf_nr_bits (size, bm->gbits);
  uint64_t offset;
  struct bits all;
  int r;

  if (bm->data_length == 0)
    return 0;
  if (txn_alloc_region (t, bm->data_length, &offset, err) == -1 ||
      txn_map (t->f, offset, bm->data_length, nbits, true, &all, err) == -1)
    return -1;
  bits_set_range (&all, 0, nbits - 1);
  /* (Placed first, so that the shadow's space avoids it.) */
  bm->data_offset = offset;
  r = txs_coarsen (t, bm, &all, size, err);
  bmf_unmap (&all);
  return r;
}

/* Write the record's first page: the source, zero padded. */
static int
write_source (struct bmf_txn *t, const char *source, struct bmerr *err)
{
  struct bmf_restore_record *rs = &t->st.restore;
  const size_t len = strlen (source);

  if (pwrite (t->f->fd, source, len, rs->region.offset) != (ssize_t) len) {
    bmerr_set (err, errno ? errno : EIO, "%s: write restore record: %s",
               t->f->path, errno ? strerror (errno) : "short write");
    return -1;
  }
  return 0;
}

int
bmf_txn_restore_begin (struct bmf_txn *t, const char *source, unsigned gbits,
                       struct bmerr *err)
{
  struct bmf_restore_record *rs = &t->st.restore;
  const char *why = bmf_source_problem (source);
  struct bmf_restore_record next = { .state = BMF_RESTORE_RUNNING,
                                     .gbits = gbits };
  size_t i;

  if (why) {
    bmerr_set (err, EINVAL, "the restore's source %s", why);
    return -1;
  }
  if (rs->state == BMF_RESTORE_RUNNING) {
    bmerr_set (err, EBUSY, "a restore from %s is running", rs->source);
    return -1;
  }
  if (!t->st.sized) {
    bmerr_set (err, EINVAL, "the disk's size is not known");
    return -1;
  }
  if (t->dry_run)
    return 0;
  next.source_length = strlen (source);
  next.source_crc = crc32c (source, next.source_length);
  memcpy (next.source, source, next.source_length + 1);
  next.region.length = BMF_SOURCE_PAGE +
    bmf_data_length (t->st.disk_size, gbits);
  if (txn_alloc_region (t, next.region.length, &next.region.offset,
                        err) == -1)
    return -1;
  *rs = next;
  if (write_source (t, source, err) == -1)
    return -1;
  for (i = 0; i < t->st.nr_bitmaps; ++i) {
    struct bmf_bitmap *bm = &t->st.bitmaps[i];
    if ((bm->flags & BMF_ENABLED) && !(bm->flags & BMF_INCONSISTENT) &&
        dirty_all (t, bm, err) == -1)
      return -1;
  }
  return 0;
}

int
bmf_txn_restore_done (struct bmf_txn *t, struct bmerr *err)
{
  struct bmf_restore_record *rs = &t->st.restore;

  if (rs->state != BMF_RESTORE_RUNNING) {
    bmerr_set (err, EINVAL, "no restore is running");
    return -1;
  }
  rs->state = BMF_RESTORE_DONE;
  rs->region.length = BMF_SOURCE_PAGE;
  return 0;
}
