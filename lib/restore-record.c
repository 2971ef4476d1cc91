/* SPDX-License-Identifier: BSD-3-Clause */
/* restore-record.c: the restore record in the file (see
 * restore-record.h; the byte layout is in
 * nbdkit-dirtybitmap-filter(1), FILE FORMAT): its restored bitmap
 * mapped.  Its header fields are checked with the rest of the header
 * (format-header.c) and its source by the loader (bmfile.c): as
 * everywhere in the format, every field is checked before it is used.
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
#include "crc32c.h"
#include "restore-record.h"
#include "util.h"

_Static_assert (BMF_MAX_SOURCE < BMF_SOURCE_PAGE,
                "a source and its NUL must fit in its page");
_Static_assert (BMF_SOURCE_PAGE % BMF_ALIGN == 0,
                "the restored bitmap must start aligned");

const char *
bmf_source_problem (const char *source)
{
  size_t len = strlen (source);

  if (len == 0 || len > BMF_MAX_SOURCE)
    return "must be 1 to 4095 bytes";
  return NULL;
}

struct bmf_region
bmf_restored_region (const struct bmf_state *st)
{
  const struct bmf_restore_record *rs = &st->restore;

  if (rs->state != BMF_RESTORE_RUNNING)
    return (struct bmf_region) { 0, 0 };
  return (struct bmf_region) { rs->region.offset + BMF_SOURCE_PAGE,
                               rs->region.length - BMF_SOURCE_PAGE };
}

uint64_t
bmf_restored_nr_bits (const struct bmf_state *st)
{
  if (st->restore.state != BMF_RESTORE_RUNNING || !st->sized)
    return 0;
  return bmf_nr_bits (st->disk_size, st->restore.gbits);
}

/* A copy of the restored bits, for a file opened without a lock (a
 * server may be setting them, and its commits change the file).
 */
static int
read_copy (struct bmf *f, struct bmf_region reg, struct bits *out,
           struct bmerr *err)
{
  uint64_t len = bits_nr_words (out->nr_bits) * 8;
  ssize_t r;

  if (len == 0)
    return 0;
  out->words = malloc (len);
  if (out->words == NULL) {
    bmerr_set (err, errno, "%s: restore record: %s", f->path,
               strerror (errno));
    return -1;
  }
  r = pread (f->fd, out->words, len, reg.offset);
  if (r != (ssize_t) len) {
    bmerr_set (err, r == -1 ? errno : EAGAIN, "%s: restore record: %s",
               f->path, r == -1 ? strerror (errno) : "short read (the file "
               "changed while it was read: try again)");
    bmf_unmap (out);
    return -1;
  }
  return 0;
}

int
bmf_map_restored (struct bmf *f, bool writable, struct bits *out,
                  struct bmerr *err)
{
  const struct bmf_region reg = bmf_restored_region (&f->st);

  memset (out, 0, sizeof *out);
  out->nr_bits = bmf_restored_nr_bits (&f->st);
  if (reg.length == 0)
    return 0;
  if (f->lock == BMF_LOCK_NONE && !writable)
    return read_copy (f, reg, out, err);
  if (writable && f->lock != BMF_LOCK_EXCLUSIVE) {
    bmerr_set (err, EBADF, "%s: opened read-only", f->path);
    return -1;
  }
  if (bmf_map_region (f->fd, reg.offset, reg.length, writable, out) == -1) {
    bmerr_set (err, errno, "%s: restore record: cannot map %" PRIu64
               " bytes: %s", f->path, reg.length, strerror (errno));
    return -1;
  }
  return 0;
}

uint64_t
bmf_restored_bytes (const struct bits *b, unsigned gbits, uint64_t disk_size)
{
  uint64_t n, bytes;

  if (b->nr_bits == 0)
    return 0;
  n = bits_count (b);
  bytes = n << gbits;
  /* The last granule may be short. */
  if (bits_test (b, b->nr_bits - 1))
    bytes -= (b->nr_bits << gbits) - disk_size;
  return bytes;
}
