/* SPDX-License-Identifier: BSD-3-Clause */
/* format-dir.c: the directory of a bitmap file, encoded, decoded and
 * checked (see format.h; the byte layout is in
 * nbdkit-dirtybitmap-filter(1), FILE FORMAT).  No I/O.
 *
 * The directory holds one entry per bitmap (its CRC-32C is in the
 * header) and every entry points to a 4096-aligned data region of
 * little-endian 64 bit words, one bit per granule.  As for the header,
 * every field is checked before it is used, and the decoder stops at
 * the first problem unless the caller asks to hear them all.
 */

#include <config.h>

#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>

#include "crc32c.h"
#include "format.h"
#include "util.h"

/* Directory entry field offsets. */
#define E_DATA_OFFSET  0
#define E_DATA_LENGTH  8
#define E_GBITS       16
#define E_FLAGS       20
#define E_NAME_LENGTH 24
#define E_NAME        BMF_ENTRY_FIXED

_Static_assert (E_NAME_LENGTH + 2 <= E_NAME,
                "the name length overlaps the name");
_Static_assert (BMF_MAX_NAME < (1 << 16),
                "a name length must fit in 16 bits");

static size_t
entry_length (size_t name_length)
{
  return BMF_ENTRY_FIXED + ROUND_UP (name_length, 8);
}

unsigned char *
bmf_encode_dir (const struct bmf_state *st, size_t *len)
{
  unsigned char *buf, *p;
  size_t i;

  *len = 0;
  for (i = 0; i < st->nr_bitmaps; ++i)
    *len += entry_length (strlen (st->bitmaps[i].name));
  buf = calloc (1, MAX (*len, 1));
  if (buf == NULL)
    return NULL;
  for (i = 0, p = buf; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *bm = &st->bitmaps[i];
    size_t n = strlen (bm->name);

    put_le64 (p + E_DATA_OFFSET, bm->data_offset);
    put_le64 (p + E_DATA_LENGTH, bm->data_length);
    put_le32 (p + E_GBITS, bm->gbits);
    put_le32 (p + E_FLAGS, bm->flags);
    put_le16 (p + E_NAME_LENGTH, n);
    memcpy (p + E_NAME, bm->name, n);
    p += entry_length (n);
  }
  return buf;
}

/* The rules of one decoded entry (its name is already checked). */
static void
check_entry (const struct bmf_state *st, const struct bmf_bitmap *bm,
             struct bmf_problems *p)
{
  const char *rp;

  if (bmf_find (st, bm->name) != bm)
    bmf_problem (p, "bitmap %s: name used twice", bm->name);
  if (bm->gbits < BMF_MIN_GBITS || bm->gbits > BMF_MAX_GBITS)
    bmf_problem (p, "bitmap %s: granularity 2^%u is out of range "
                 "(512 to 2G)", bm->name, bm->gbits);
  else if (bm->data_length !=
           (st->sized ? bmf_data_length (st->disk_size, bm->gbits) : 0))
    bmf_problem (p, "bitmap %s: data length %" PRIu64 " does not match "
                 "the disk size %" PRIu64 " at granularity %" PRIu64,
                 bm->name, bm->data_length, st->disk_size,
                 UINT64_C (1) << bm->gbits);
  if (bm->flags & ~BMF_ENTRY_FLAGS)
    bmf_problem (p, "bitmap %s: unknown flags 0x%" PRIx32,
                 bm->name, bm->flags & ~BMF_ENTRY_FLAGS);
  if (bm->data_length == 0 && bm->data_offset != 0)
    bmf_problem (p, "bitmap %s: data offset %" PRIu64 " without data",
                 bm->name, bm->data_offset);
  else if (bm->data_length > 0 &&
           (rp = bmf_region_problem (bm->data_offset, bm->data_length,
                                     st->file_length)) != NULL)
    bmf_problem (p, "bitmap %s: data (offset %" PRIu64 ", length %" PRIu64
                 ") %s", bm->name, bm->data_offset, bm->data_length, rp);
}

int
bmf_decode_dir (const unsigned char *buf, size_t len, uint32_t crc,
                struct bmf_state *st, struct bmf_problems *p)
{
  const unsigned char *q = buf, *end = buf + len;
  const unsigned before = p->count;
  size_t i, n = st->nr_bitmaps;

  st->nr_bitmaps = 0;
  st->bitmaps = calloc (MAX (n, 1), sizeof *st->bitmaps);
  if (st->bitmaps == NULL) {
    bmf_problem (p, "%s", strerror (errno));
    return -1;
  }
  if (n == 0)
    return 0;
  if (crc32c (buf, len) != crc) {
    bmf_problem (p, "directory checksum mismatch");
    if (!p->report)
      return -1;
  }

  for (i = 0; i < n; ++i) {
    struct bmf_bitmap *bm = &st->bitmaps[i];
    size_t nlen;

    if ((size_t) (end - q) < BMF_ENTRY_FIXED) {
      bmf_problem (p, "directory entry %zu is cut off", i);
      break;
    }
    nlen = get_le16 (q + E_NAME_LENGTH);
    if (nlen == 0 || nlen > BMF_MAX_NAME) {
      bmf_problem (p, "directory entry %zu: name length %zu "
                   "(must be 1 to %d)", i, nlen, BMF_MAX_NAME);
      break;
    }
    if ((size_t) (end - q) < entry_length (nlen)) {
      bmf_problem (p, "directory entry %zu is cut off", i);
      break;
    }
    bm->name = strndup ((const char *) q + E_NAME, nlen);
    if (bm->name == NULL) {
      bmf_problem (p, "%s", strerror (errno));
      break;
    }
    st->nr_bitmaps++;
    bm->data_offset = get_le64 (q + E_DATA_OFFSET);
    bm->data_length = get_le64 (q + E_DATA_LENGTH);
    bm->gbits = get_le32 (q + E_GBITS);
    bm->flags = get_le32 (q + E_FLAGS);
    q += entry_length (nlen);

    if (strlen (bm->name) != nlen)
      bmf_problem (p, "directory entry %zu: name contains a NUL byte", i);
    else
      check_entry (st, bm, p);
    if (!p->report && p->count > before)
      return -1;
  }
  if (i == n && q != end)
    bmf_problem (p, "directory has %zu bytes after its last entry",
                 (size_t) (end - q));
  return p->count > before ? -1 : 0;
}
