/* SPDX-License-Identifier: BSD-3-Clause */
/* restore-record.c: the restore record in the file (see
 * restore-record.h; the byte layout is in
 * nbdkit-dirtybitmap-filter(1), FILE FORMAT): its header fields
 * checked, its source loaded, its restored bitmap mapped.  As
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

/* The region's length for st's record. */
static uint64_t
record_length (const struct bmf_state *st)
{
  if (st->restore.state == BMF_RESTORE_RUNNING)
    return BMF_SOURCE_PAGE + bmf_data_length (st->disk_size,
                                              st->restore.gbits);
  return BMF_SOURCE_PAGE;
}

bool
bmf_restore_fields_ok (const struct bmf_state *st, char *why, size_t len)
{
  const struct bmf_restore_record *rs = &st->restore;
  const char *rp;

  if (rs->gbits < BMF_MIN_GBITS || rs->gbits > BMF_MAX_GBITS)
    snprintf (why, len, "restore record: granularity 2^%u is out of range "
              "(512 to 2G)", rs->gbits);
  else if (rs->source_length == 0 || rs->source_length > BMF_MAX_SOURCE)
    snprintf (why, len, "restore record: a source of %" PRIu32 " bytes "
              "(must be 1 to %d)", rs->source_length, BMF_MAX_SOURCE);
  else if (rs->state == BMF_RESTORE_RUNNING && !st->sized)
    snprintf (why, len, "restore record: a restore runs on a disk of "
              "unknown size");
  else if (rs->region.length != record_length (st))
    snprintf (why, len, "restore record: length %" PRIu64 " is not %"
              PRIu64, rs->region.length, record_length (st));
  else if ((rp = bmf_region_problem (rs->region.offset, rs->region.length,
                                     st->file_length)) != NULL)
    snprintf (why, len, "restore record (offset %" PRIu64 ", length %"
              PRIu64 ") %s", rs->region.offset, rs->region.length, rp);
  else
    return true;
  return false;
}

int
bmf_load_restore (int fd, struct bmf_state *st, struct bmf_problems *p)
{
  struct bmf_restore_record *rs = &st->restore;
  ssize_t r;

  memset (rs->source, 0, sizeof rs->source);
  r = pread (fd, rs->source, rs->source_length, rs->region.offset);
  if (r != (ssize_t) rs->source_length) {
    bmf_problem (p, "restore record: read its source: %s",
                 r == -1 ? strerror (errno) : "short read");
    return -1;
  }
  if (crc32c (rs->source, rs->source_length) != rs->source_crc) {
    bmf_problem (p, "restore record: source checksum mismatch");
    return -1;
  }
  if (strlen (rs->source) != rs->source_length) {
    bmf_problem (p, "restore record: the source contains a NUL byte");
    return -1;
  }
  return 0;
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
