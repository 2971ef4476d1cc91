/* SPDX-License-Identifier: BSD-3-Clause */
/* format-header.c: the two header slots of a bitmap file, encoded,
 * decoded, judged and the current one picked, and the liveness record
 * beside the header in the first slot (see format.h; the byte layout
 * is in nbdkit-dirtybitmap-filter(1), FILE FORMAT).  No I/O.
 *
 * Two 4096 byte header slots each carry a sequence number and a
 * CRC-32C; the valid slot with the higher sequence number is current.
 * It points to a directory (format-dir.c) and to the other regions of
 * the file (format-region.c).
 *
 * Every field is checked before it is used: a slot is judged here
 * whole, with the fields of the coarse shadows (shadow.h) and of the
 * restore record (restore-record.h).  The decoder stops at the first
 * problem, unless the caller asks to hear them all (the check
 * subcommand).  A slot whose CRC holds was written whole, so a field
 * in it that this program rejects is corruption or a feature it does
 * not know, never a torn write: the file is refused rather than read
 * through its older slot, which would lose what the newer one
 * recorded.
 */

#include <config.h>

#include <stdio.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>

#include "crc32c.h"
#include "format.h"
#include "util.h"

static const char magic[8] = { 'D', 'I', 'R', 'T', 'Y', 'B', 'M', 'P' };

/* Header field offsets. */
#define H_MAGIC        0
#define H_VERSION      8
#define H_LENGTH      12
#define H_SEQ         16
#define H_DISK_SIZE   24
#define H_FLAGS       32
#define H_OPEN_MODE   36
#define H_DIR_OFFSET  40
#define H_DIR_LENGTH  48
#define H_NR_BITMAPS  52
#define H_DIR_CRC     56
#define H_INCOMPAT    60
#define H_FILE_LENGTH 64
#define H_OPEN_PID    72
#define H_BOOT_ID     80
#define H_COMPAT     120
#define H_ID_DEV     128
#define H_ID_INO     136
#define H_ID_SIZE    144
#define H_ID_MTIME   152
#define H_SH_OFFSET  160
#define H_SH_LENGTH  168
#define H_SH_CRC     172
#define H_SH_CGBITS  176
#define H_SEEN       184
#define H_RS_OFFSET  192
#define H_RS_LENGTH  200
#define H_RS_GBITS   208
#define H_RS_SRCLEN  212
#define H_RS_CRC     216
#define H_CRC        252

/* Each field ends before the next begins, and all fit in the part of
 * the slot that is used and checksummed.
 */
_Static_assert (H_BOOT_ID + BMF_BOOT_ID_LEN <= H_COMPAT,
                "the boot id overlaps the compatible features");
_Static_assert (H_ID_MTIME + 8 <= H_SH_OFFSET,
                "the disk id overlaps the shadow fields");
_Static_assert (H_SH_CGBITS + 4 <= H_SEEN,
                "the shadow fields overlap the seen time");
_Static_assert (H_SEEN + 8 <= H_RS_OFFSET,
                "the seen time overlaps the restore record");
_Static_assert (H_RS_CRC + 4 <= H_CRC,
                "the restore record overlaps the CRC");
_Static_assert (H_CRC + 4 == BMF_HEADER_LENGTH,
                "the CRC must end the used part of the slot");
_Static_assert (BMF_HEADER_LENGTH <= BMF_HEADER_SLOT,
                "a header must fit in its slot");
_Static_assert (BMF_FIRST_REGION % BMF_ALIGN == 0,
                "the first region must be aligned");

/*----------------------------------------------------------------------
 * The liveness record: magic, process id, alive until, zero, CRC-32C
 * of the 28 bytes before it.
 */

static const char alive_magic[8] = { 'D', 'B', 'M', 'A', 'L', 'I', 'V', 'E' };

void
bmf_encode_alive (uint64_t pid, int64_t until_ns,
                  unsigned char buf[BMF_ALIVE_LENGTH])
{
  memset (buf, 0, BMF_ALIVE_LENGTH);
  memcpy (buf, alive_magic, 8);
  put_le64 (buf + 8, pid);
  put_le64 (buf + 16, until_ns);
  put_le32 (buf + 28, crc32c (buf, 28));
}

int
bmf_decode_alive (const unsigned char buf[BMF_ALIVE_LENGTH],
                  uint64_t *pid, int64_t *until_ns)
{
  if (memcmp (buf, alive_magic, 8) != 0 ||
      get_le32 (buf + 28) != crc32c (buf, 28))
    return -1;
  *pid = get_le64 (buf + 8);
  *until_ns = get_le64 (buf + 16);
  return 0;
}

/*----------------------------------------------------------------------
 * Header slots.
 */

void
bmf_encode_header (const struct bmf_state *st, uint32_t dir_crc,
                   uint32_t shadow_crc, unsigned char buf[BMF_HEADER_SLOT])
{
  const struct bmf_restore_record *rs = &st->restore;
  uint32_t compat = (st->has_disk_id ? BMF_COMPAT_DISK_ID : 0) |
    (st->has_shadows ? BMF_COMPAT_SHADOWS : 0) |
    (st->has_seen ? BMF_COMPAT_SEEN : 0) |
    (rs->state == BMF_RESTORE_DONE ? BMF_COMPAT_RESTORED : 0);

  memset (buf, 0, BMF_HEADER_SLOT);
  memcpy (buf + H_MAGIC, magic, 8);
  put_le32 (buf + H_VERSION, BMF_VERSION);
  put_le32 (buf + H_LENGTH, BMF_HEADER_LENGTH);
  put_le64 (buf + H_SEQ, st->seq);
  put_le64 (buf + H_DISK_SIZE, st->disk_size);
  put_le32 (buf + H_FLAGS,
            (st->sized ? BMF_HDR_SIZED : 0) | (st->open ? BMF_HDR_OPEN : 0));
  put_le32 (buf + H_OPEN_MODE, st->open ? st->open_mode : 0);
  put_le64 (buf + H_DIR_OFFSET, st->dir_offset);
  put_le32 (buf + H_DIR_LENGTH, st->dir_length);
  put_le32 (buf + H_NR_BITMAPS, st->nr_bitmaps);
  put_le32 (buf + H_DIR_CRC, dir_crc);
  put_le32 (buf + H_INCOMPAT, rs->state == BMF_RESTORE_RUNNING ?
            BMF_INCOMPAT_RESTORING : 0);
  put_le64 (buf + H_FILE_LENGTH, st->file_length);
  if (st->open) {
    put_le64 (buf + H_OPEN_PID, st->open_pid);
    memcpy (buf + H_BOOT_ID, st->boot_id, strnlen (st->boot_id,
                                                   BMF_BOOT_ID_LEN - 1));
  }
  put_le32 (buf + H_COMPAT, compat);
  if (st->has_disk_id) {
    put_le64 (buf + H_ID_DEV, st->disk_id.dev);
    put_le64 (buf + H_ID_INO, st->disk_id.ino);
    put_le64 (buf + H_ID_SIZE, st->disk_id.size);
    put_le64 (buf + H_ID_MTIME, st->disk_id.mtime_ns);
  }
  if (st->has_shadows) {
    put_le64 (buf + H_SH_OFFSET, st->shadow_table_offset);
    put_le32 (buf + H_SH_LENGTH, st->shadow_table_length);
    put_le32 (buf + H_SH_CRC, shadow_crc);
    put_le32 (buf + H_SH_CGBITS, st->cgbits);
  }
  if (st->has_seen)
    put_le64 (buf + H_SEEN, st->seen_ns);
  if (rs->state != BMF_RESTORE_NONE) {
    put_le64 (buf + H_RS_OFFSET, rs->region.offset);
    put_le64 (buf + H_RS_LENGTH, rs->region.length);
    put_le32 (buf + H_RS_GBITS, rs->gbits);
    put_le32 (buf + H_RS_SRCLEN, rs->source_length);
    put_le32 (buf + H_RS_CRC, rs->source_crc);
  }
  put_le32 (buf + H_CRC, crc32c (buf, H_CRC));
}

/* The slot's envelope: its magic, length, version and checksum.
 * Returns whether the slot is whole (its fields can be decoded).
 */
static bool
slot_envelope (const unsigned char *buf, size_t got, struct bmf_slot *s)
{
  memset (s, 0, sizeof *s);
  if (got < 8 || memcmp (buf + H_MAGIC, magic, 8) != 0) {
    s->status = got < 8 ? SLOT_SHORT : SLOT_MAGIC;
    return false;
  }
  if (got < BMF_HEADER_LENGTH) {
    s->status = SLOT_SHORT;
    return false;
  }
  memcpy (s->raw, buf, BMF_HEADER_LENGTH);
  if (get_le32 (buf + H_VERSION) != BMF_VERSION) {
    s->status = SLOT_VERSION;
    snprintf (s->why, sizeof s->why,
              "unsupported format version %" PRIu32
              " (this program reads version %d)",
              get_le32 (buf + H_VERSION), BMF_VERSION);
    return false;
  }
  if (get_le32 (buf + H_CRC) != crc32c (buf, H_CRC)) {
    s->status = SLOT_CRC;
    snprintf (s->why, sizeof s->why, "header checksum mismatch");
    return false;
  }

  return true;
}

/* The raw header words that st does not keep. */
struct raw_words {
  uint32_t hlen, flags, incompat, compat, mode;
};

/* Decode a whole slot's fields into s->st (checked by field_problem). */
static void
decode_fields (const unsigned char *buf, struct bmf_slot *s,
               struct raw_words *w)
{
  struct bmf_state *st = &s->st;
  struct bmf_restore_record *rs = &st->restore;
  uint32_t compat;

  w->hlen = get_le32 (buf + H_LENGTH);
  w->flags = get_le32 (buf + H_FLAGS);
  w->incompat = get_le32 (buf + H_INCOMPAT);
  compat = w->compat = get_le32 (buf + H_COMPAT);
  w->mode = get_le32 (buf + H_OPEN_MODE);
  st->seq = get_le64 (buf + H_SEQ);
  st->disk_size = get_le64 (buf + H_DISK_SIZE);
  st->sized = w->flags & BMF_HDR_SIZED;
  st->open = w->flags & BMF_HDR_OPEN;
  st->open_mode = w->mode;
  st->open_pid = get_le64 (buf + H_OPEN_PID);
  memcpy (st->boot_id, buf + H_BOOT_ID, BMF_BOOT_ID_LEN);
  st->dir_offset = get_le64 (buf + H_DIR_OFFSET);
  st->dir_length = get_le32 (buf + H_DIR_LENGTH);
  st->nr_bitmaps = get_le32 (buf + H_NR_BITMAPS);
  st->file_length = get_le64 (buf + H_FILE_LENGTH);
  s->dir_crc = get_le32 (buf + H_DIR_CRC);
  if (compat & BMF_COMPAT_DISK_ID) {
    st->has_disk_id = true;
    st->disk_id.dev = get_le64 (buf + H_ID_DEV);
    st->disk_id.ino = get_le64 (buf + H_ID_INO);
    st->disk_id.size = get_le64 (buf + H_ID_SIZE);
    st->disk_id.mtime_ns = get_le64 (buf + H_ID_MTIME);
  }
  if (compat & BMF_COMPAT_SHADOWS) {
    st->has_shadows = true;
    st->shadow_table_offset = get_le64 (buf + H_SH_OFFSET);
    st->shadow_table_length = get_le32 (buf + H_SH_LENGTH);
    s->shadow_crc = get_le32 (buf + H_SH_CRC);
    st->cgbits = get_le32 (buf + H_SH_CGBITS);
  }
  if (compat & BMF_COMPAT_SEEN) {
    st->has_seen = true;
    st->seen_ns = get_le64 (buf + H_SEEN);
  }
  if ((w->incompat & BMF_INCOMPAT_RESTORING) ||
      (compat & BMF_COMPAT_RESTORED)) {
    rs->state = (w->incompat & BMF_INCOMPAT_RESTORING) ?
      BMF_RESTORE_RUNNING : BMF_RESTORE_DONE;
    rs->region.offset = get_le64 (buf + H_RS_OFFSET);
    rs->region.length = get_le64 (buf + H_RS_LENGTH);
    rs->gbits = get_le32 (buf + H_RS_GBITS);
    rs->source_length = get_le32 (buf + H_RS_SRCLEN);
    rs->source_crc = get_le32 (buf + H_RS_CRC);
  }
}

/* Whether the header fields of a state with shadows (shadow.h) keep
 * the rules; if not the reason goes into why.
 */
static bool
shadow_fields_ok (const struct bmf_state *st, char *why, size_t len)
{
  const char *rp;

  if (st->cgbits < BMF_MIN_GBITS || st->cgbits > BMF_MAX_GBITS)
    snprintf (why, len, "coarse granularity 2^%u is out of range "
              "(512 to 2G)", st->cgbits);
  else if (st->shadow_table_length !=
           (uint64_t) st->nr_bitmaps * BMF_SHADOW_ENTRY)
    snprintf (why, len, "a shadow table of %" PRIu32 " bytes for %zu "
              "bitmaps", st->shadow_table_length, st->nr_bitmaps);
  else if (st->shadow_table_length == 0 && st->shadow_table_offset != 0)
    snprintf (why, len, "shadow table offset %" PRIu64 " without a "
              "shadow table", st->shadow_table_offset);
  else if (st->shadow_table_length > 0 &&
           (rp = bmf_region_problem (st->shadow_table_offset,
                                     st->shadow_table_length,
                                     st->file_length)) != NULL)
    snprintf (why, len, "shadow table (offset %" PRIu64 ", length %"
              PRIu32 ") %s", st->shadow_table_offset,
              st->shadow_table_length, rp);
  else
    return true;
  return false;
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

/* Whether the header fields of st's restore record keep the rules
 * (restore-record.h); if not the reason goes into why.  (No I/O: the
 * loader reads the source later.)
 */
static bool
restore_fields_ok (const struct bmf_state *st, char *why, size_t len)
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

/* Whether the decoded fields keep every rule: if not, s->why says
 * which one they break first.
 */
static bool
fields_ok (struct bmf_slot *s, const struct raw_words *w)
{
  const struct bmf_state *st = &s->st;
  const char *rp;

  if (w->hlen != BMF_HEADER_LENGTH)
    snprintf (s->why, sizeof s->why, "header length %" PRIu32
              " is not %d", w->hlen, BMF_HEADER_LENGTH);
  else if (w->incompat & ~BMF_INCOMPAT_FEATURES)
    snprintf (s->why, sizeof s->why,
              "unsupported incompatible features 0x%" PRIx32,
              w->incompat & ~BMF_INCOMPAT_FEATURES);
  else if (st->seq == 0 || st->seq > BMF_MAX_SEQ)
    snprintf (s->why, sizeof s->why,
              "header sequence number %" PRIu64 " is out of range "
              "(1 to 2^63-1)", st->seq);
  else if (w->flags & ~BMF_HDR_FLAGS)
    snprintf (s->why, sizeof s->why, "unknown header flags 0x%" PRIx32,
              w->flags & ~BMF_HDR_FLAGS);
  else if (w->mode > BMF_MAX_DURABILITY)
    snprintf (s->why, sizeof s->why, "unknown durability mode %" PRIu32,
              w->mode);
  else if (memchr (st->boot_id, '\0', BMF_BOOT_ID_LEN) == NULL)
    snprintf (s->why, sizeof s->why, "boot id is not terminated");
  else if (st->disk_size > BMF_MAX_DISK_SIZE)
    snprintf (s->why, sizeof s->why, "disk size %" PRIu64 " is too large",
              st->disk_size);
  else if (!st->sized && st->disk_size != 0)
    snprintf (s->why, sizeof s->why,
              "disk size %" PRIu64 " recorded but not marked known",
              st->disk_size);
  else if (st->nr_bitmaps > BMF_MAX_BITMAPS)
    snprintf (s->why, sizeof s->why, "%zu bitmaps (the limit is %d)",
              st->nr_bitmaps, BMF_MAX_BITMAPS);
  else if (st->file_length < BMF_FIRST_REGION ||
           st->file_length % BMF_ALIGN != 0)
    snprintf (s->why, sizeof s->why, "invalid file length %" PRIu64,
              st->file_length);
  else if (st->dir_length == 0 && st->nr_bitmaps > 0)
    snprintf (s->why, sizeof s->why,
              "no directory, but %zu bitmaps", st->nr_bitmaps);
  else if (st->dir_length > 0 && st->nr_bitmaps == 0)
    snprintf (s->why, sizeof s->why,
              "a directory of %" PRIu32 " bytes, but no bitmaps",
              st->dir_length);
  else if (st->dir_length == 0 && st->dir_offset != 0)
    snprintf (s->why, sizeof s->why,
              "directory offset %" PRIu64 " without a directory",
              st->dir_offset);
  else if (st->dir_length > 0 &&
           (rp = bmf_region_problem (st->dir_offset, st->dir_length,
                                     st->file_length)) != NULL)
    snprintf (s->why, sizeof s->why,
              "directory (offset %" PRIu64 ", length %" PRIu32 ") %s",
              st->dir_offset, st->dir_length, rp);
  else if (st->has_shadows &&
           !shadow_fields_ok (st, s->why, sizeof s->why)) {
    /* (why is said) */
  }
  else if ((w->incompat & BMF_INCOMPAT_RESTORING) &&
           (w->compat & BMF_COMPAT_RESTORED))
    snprintf (s->why, sizeof s->why, "a restore is said to be both running "
              "and complete");
  else if (st->restore.state != BMF_RESTORE_NONE &&
           !restore_fields_ok (st, s->why, sizeof s->why)) {
    /* (why is said) */
  }
  else
    return true;
  return false;
}

void
bmf_decode_slot (const unsigned char *buf, size_t got, struct bmf_slot *s)
{
  struct raw_words w;

  if (!slot_envelope (buf, got, s))
    return;
  s->status = SLOT_FIELD;
  decode_fields (buf, s, &w);
  if (fields_ok (s, &w))
    s->status = SLOT_OK;
}

static bool
whole (const struct bmf_slot *s)
{
  return s->status == SLOT_OK || s->status == SLOT_FIELD;
}

int
bmf_pick_slot (const struct bmf_slot s[2], uint64_t file_size,
               struct bmf_problems *p)
{
  int i, newest = -1, slot;

  for (i = 0; i < 2; ++i)
    if (s[i].status == SLOT_VERSION) {
      bmf_problem (p, "%s", s[i].why);
      return -1;
    }
  /* The newest whole slot must be one this program accepts (see the
   * comment at the top).  Two whole slots with one sequence number
   * cannot come from commits, which alternate slots and count up: the
   * file was edited or corrupted, and which of them is current cannot
   * be told, unless they are the same bytes.
   */
  for (i = 0; i < 2; ++i)
    if (whole (&s[i]) && (newest == -1 || s[i].st.seq > s[newest].st.seq))
      newest = i;
  if (newest >= 0 && s[newest].status == SLOT_FIELD) {
    bmf_problem (p, "%s", s[newest].why);
    return -1;
  }
  if (whole (&s[0]) && whole (&s[1]) && s[0].st.seq == s[1].st.seq &&
      memcmp (s[0].raw, s[1].raw, BMF_HEADER_LENGTH) != 0) {
    bmf_problem (p, "both header slots have sequence number %" PRIu64
                 " but differ: which one is current cannot be told",
                 s[0].st.seq);
    return -1;
  }

  if (s[0].status == SLOT_OK &&
      (s[1].status != SLOT_OK || s[0].st.seq >= s[1].st.seq))
    slot = 0;
  else if (s[1].status == SLOT_OK)
    slot = 1;
  else {
    if (file_size == 0)
      bmf_problem (p, "empty file (truncated?)");
    else if (s[0].status == SLOT_MAGIC &&
             (s[1].status == SLOT_MAGIC || s[1].status == SLOT_SHORT))
      bmf_problem (p, "not a dirtybitmap file (bad magic)");
    else if (s[0].status == SLOT_SHORT)
      bmf_problem (p, "truncated: %" PRIu64 " bytes, too short for a "
                   "header", file_size);
    else {
      /* Name the most telling failure. */
      const struct bmf_slot *w = s[0].status >= s[1].status ? &s[0] : &s[1];
      bmf_problem (p, "%s",
                   w->status == SLOT_SHORT ? "truncated header" : w->why);
    }
    return -1;
  }

  if (s[slot].st.file_length > file_size) {
    bmf_problem (p, "truncated: %" PRIu64 " bytes, the header says %"
                 PRIu64, file_size, s[slot].st.file_length);
    return -1;
  }
  return slot;
}
