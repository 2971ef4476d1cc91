/* SPDX-License-Identifier: BSD-3-Clause */
/* bmfile.c: the bitmap file: open, lock, validate, map, and commit
 * metadata atomically.
 *
 * The byte layout is documented in nbdkit-dirtybitmap-filter(1), FILE
 * FORMAT.  In short: two 4096 byte header slots, each with a sequence number and
 * a CRC-32C; the valid slot with the highest sequence number is
 * current.  It points to a directory (one entry per bitmap, CRC-32C in
 * the header) and every entry to a 4096-aligned data region of
 * little-endian 64 bit words, one bit per granule.
 *
 * Every change is copy-on-write: a transaction writes new data
 * regions and a new directory into space that the current header does
 * not refer to, fdatasyncs, then writes the header into the other
 * slot and fdatasyncs again.  A crash before the second sync leaves
 * the old header current (a torn slot fails its CRC), after it the
 * new one: never a mix.  Data bits themselves are set in place,
 * through a shared mapping, by the filter.
 *
 * One process writes a file at a time: it holds flock(LOCK_EX) on it
 * (a lock of the open file description, so it survives nbdkit's
 * fork); readers take LOCK_SH, or no lock at all (-U).
 */

#include <config.h>

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "bmfile.h"
#include "crc32c.h"
#include "msg.h"
#include "util.h"

static const char magic[8] = { 'D', 'I', 'R', 'T', 'Y', 'B', 'M', 'P' };

/* Header field offsets (dirtybitmap(1), FILE FORMAT). */
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
#define H_CRC        252

/* Directory entry field offsets. */
#define E_DATA_OFFSET  0
#define E_DATA_LENGTH  8
#define E_GBITS       16
#define E_FLAGS       20
#define E_NAME_LENGTH 24
#define E_NAME        32

uint64_t
bmf_nr_bits (uint64_t disk_size, unsigned gbits)
{
  return disk_size == 0 ? 0 : ((disk_size - 1) >> gbits) + 1;
}

uint64_t
bmf_data_length (uint64_t disk_size, unsigned gbits)
{
  return ROUND_UP (bits_nr_words (bmf_nr_bits (disk_size, gbits)) * 8,
                   BMF_ALIGN);
}

static size_t
entry_length (size_t name_length)
{
  return BMF_ENTRY_FIXED + ROUND_UP (name_length, 8);
}

struct bmf_bitmap *
bmf_find (const struct bmf_state *st, const char *name)
{
  size_t i;

  for (i = 0; i < st->nr_bitmaps; ++i)
    if (strcmp (st->bitmaps[i].name, name) == 0)
      return &st->bitmaps[i];
  return NULL;
}

void
bmf_boot_id (char out[BMF_BOOT_ID_LEN])
{
  FILE *fp = fopen ("/proc/sys/kernel/random/boot_id", "re");

  out[0] = '\0';
  if (fp) {
    if (fgets (out, BMF_BOOT_ID_LEN, fp) == NULL)
      out[0] = '\0';
    fclose (fp);
  }
  out[strcspn (out, "\n")] = '\0';
}

static void
free_state (struct bmf_state *st)
{
  size_t i;

  /* Until load_dir allocates them, nr_bitmaps is the header's count
   * and there are no bitmaps to free.
   */
  for (i = 0; st->bitmaps && i < st->nr_bitmaps; ++i)
    free (st->bitmaps[i].name);
  free (st->bitmaps);
  st->bitmaps = NULL;
  st->nr_bitmaps = 0;
}

static int
copy_state (struct bmf_state *dst, const struct bmf_state *src)
{
  size_t i;

  *dst = *src;
  dst->bitmaps = calloc (MAX (src->nr_bitmaps, 1), sizeof *dst->bitmaps);
  if (dst->bitmaps == NULL)
    return -1;
  for (i = 0; i < src->nr_bitmaps; ++i) {
    dst->bitmaps[i] = src->bitmaps[i];
    dst->bitmaps[i].name = strdup (src->bitmaps[i].name);
    if (dst->bitmaps[i].name == NULL) {
      dst->nr_bitmaps = i;
      free_state (dst);
      return -1;
    }
  }
  return 0;
}

/*----------------------------------------------------------------------
 * Encoding.
 */

static size_t
dir_length_of (const struct bmf_state *st)
{
  size_t i, len = 0;

  for (i = 0; i < st->nr_bitmaps; ++i)
    len += entry_length (strlen (st->bitmaps[i].name));
  return len;
}

/* Serialize the directory; returns a malloced buffer (or NULL if
 * empty or out of memory; *len tells which).
 */
static unsigned char *
encode_dir (const struct bmf_state *st, size_t *len)
{
  unsigned char *buf, *p;
  size_t i;

  *len = dir_length_of (st);
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

static void
encode_header (const struct bmf_state *st, uint32_t dir_crc,
               unsigned char buf[BMF_HEADER_SLOT])
{
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
  put_le64 (buf + H_FILE_LENGTH, st->file_length);
  if (st->open) {
    put_le64 (buf + H_OPEN_PID, st->open_pid);
    memcpy (buf + H_BOOT_ID, st->boot_id, strnlen (st->boot_id,
                                                   BMF_BOOT_ID_LEN - 1));
  }
  put_le32 (buf + H_CRC, crc32c (buf, H_CRC));
}

/*----------------------------------------------------------------------
 * Loading and validation.  Every field is checked before it is used;
 * the loader stops at the first problem, bmf_check reports them all.
 */

struct load {
  const char *path;
  int fd;
  uint64_t size;                /* actual file size */
  struct bmf_state st;
  int slot;
  uint32_t dir_crc;
  unsigned problems;
  void (*report) (const char *problem); /* NULL: keep the first */
  char first[1024];
};

static void __attribute__ ((format (printf, 2, 3)))
problem (struct load *ld, const char *fs, ...)
{
  va_list args;
  char msg[900];

  va_start (args, fs);
  vsnprintf (msg, sizeof msg, fs, args);
  va_end (args);
  if (ld->report) {
    char full[2048];
    snprintf (full, sizeof full, "%s: %s", ld->path, msg);
    ld->report (full);
  }
  else if (ld->problems == 0)
    snprintf (ld->first, sizeof ld->first, "%s: %s", ld->path, msg);
  ld->problems++;
}

/* What is wrong with a region (the directory, a bitmap's data) of a
 * file whose header says it is file_length bytes long, or NULL.
 */
static const char *
region_problem (uint64_t offset, uint64_t length, uint64_t file_length)
{
  if (offset % BMF_ALIGN != 0)
    return "is not aligned to 4096 bytes";
  if (offset < BMF_FIRST_REGION)
    return "overlaps the header slots";
  if (offset > file_length || length > file_length - offset)
    return "lies outside the file";
  return NULL;
}

enum slot_status { SLOT_OK, SLOT_SHORT, SLOT_MAGIC, SLOT_VERSION,
                   SLOT_CRC, SLOT_FIELD };

struct slot {
  enum slot_status status;
  char why[256];
  uint32_t dir_crc;
  struct bmf_state st;          /* without bitmaps */
};

static void
decode_slot (const unsigned char *buf, size_t got, struct slot *s)
{
  uint32_t flags, incompat, hlen, mode;
  struct bmf_state *st = &s->st;
  const char *rp;

  memset (s, 0, sizeof *s);
  if (got < 8 || memcmp (buf + H_MAGIC, magic, 8) != 0) {
    s->status = got < 8 ? SLOT_SHORT : SLOT_MAGIC;
    return;
  }
  if (got < BMF_HEADER_LENGTH) {
    s->status = SLOT_SHORT;
    return;
  }
  if (get_le32 (buf + H_VERSION) != BMF_VERSION) {
    s->status = SLOT_VERSION;
    snprintf (s->why, sizeof s->why,
              "unsupported format version %" PRIu32
              " (this program reads version %d)",
              get_le32 (buf + H_VERSION), BMF_VERSION);
    return;
  }
  if (get_le32 (buf + H_CRC) != crc32c (buf, H_CRC)) {
    s->status = SLOT_CRC;
    snprintf (s->why, sizeof s->why, "header checksum mismatch");
    return;
  }

  s->status = SLOT_FIELD;
  hlen = get_le32 (buf + H_LENGTH);
  flags = get_le32 (buf + H_FLAGS);
  incompat = get_le32 (buf + H_INCOMPAT);
  mode = get_le32 (buf + H_OPEN_MODE);
  st->seq = get_le64 (buf + H_SEQ);
  st->disk_size = get_le64 (buf + H_DISK_SIZE);
  st->sized = flags & BMF_HDR_SIZED;
  st->open = flags & BMF_HDR_OPEN;
  st->open_mode = mode;
  st->open_pid = get_le64 (buf + H_OPEN_PID);
  memcpy (st->boot_id, buf + H_BOOT_ID, BMF_BOOT_ID_LEN);
  st->dir_offset = get_le64 (buf + H_DIR_OFFSET);
  st->dir_length = get_le32 (buf + H_DIR_LENGTH);
  st->nr_bitmaps = get_le32 (buf + H_NR_BITMAPS);
  st->file_length = get_le64 (buf + H_FILE_LENGTH);
  s->dir_crc = get_le32 (buf + H_DIR_CRC);

  if (hlen != BMF_HEADER_LENGTH)
    snprintf (s->why, sizeof s->why, "header length %" PRIu32
              " is not %d", hlen, BMF_HEADER_LENGTH);
  else if (incompat != 0)
    snprintf (s->why, sizeof s->why,
              "unsupported incompatible features 0x%" PRIx32, incompat);
  else if (flags & ~BMF_HDR_FLAGS)
    snprintf (s->why, sizeof s->why, "unknown header flags 0x%" PRIx32,
              flags & ~BMF_HDR_FLAGS);
  else if (mode > BMF_STRICT)
    snprintf (s->why, sizeof s->why, "unknown durability mode %" PRIu32,
              mode);
  else if (memchr (st->boot_id, '\0', BMF_BOOT_ID_LEN) == NULL)
    snprintf (s->why, sizeof s->why, "boot id is not terminated");
  else if (st->disk_size > INT64_MAX)
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
           (rp = region_problem (st->dir_offset, st->dir_length,
                                 st->file_length)) != NULL)
    snprintf (s->why, sizeof s->why,
              "directory (offset %" PRIu64 ", length %" PRIu32 ") %s",
              st->dir_offset, st->dir_length, rp);
  else
    s->status = SLOT_OK;
}

/* Pick the current header slot. */
static int
load_header (struct load *ld)
{
  unsigned char buf[BMF_HEADER_LENGTH];
  struct slot s[2];
  int i;
  ssize_t r;

  for (i = 0; i < 2; ++i) {
    r = pread (ld->fd, buf, sizeof buf, (off_t) i * BMF_HEADER_SLOT);
    if (r == -1) {
      problem (ld, "read header: %s", strerror (errno));
      return -1;
    }
    decode_slot (buf, r, &s[i]);
  }

  for (i = 0; i < 2; ++i)
    if (s[i].status == SLOT_VERSION) {
      problem (ld, "%s", s[i].why);
      return -1;
    }
  /* A slot whose CRC holds was written whole.  If the newest such
   * slot has a field this program rejects (an unknown feature, or
   * corruption), it is not a torn write: falling back to the older
   * slot would lose what it recorded (and the next commit would
   * overwrite it), so the file is refused.
   */
  {
    int newest = -1;
    for (i = 0; i < 2; ++i)
      if ((s[i].status == SLOT_OK || s[i].status == SLOT_FIELD) &&
          (newest == -1 || s[i].st.seq > s[newest].st.seq))
        newest = i;
    if (newest >= 0 && s[newest].status == SLOT_FIELD) {
      problem (ld, "%s", s[newest].why);
      return -1;
    }
  }
  if (s[0].status == SLOT_OK &&
      (s[1].status != SLOT_OK || s[0].st.seq >= s[1].st.seq))
    ld->slot = 0;
  else if (s[1].status == SLOT_OK)
    ld->slot = 1;
  else {
    if (ld->size == 0)
      problem (ld, "empty file (truncated?)");
    else if (s[0].status == SLOT_MAGIC &&
             (s[1].status == SLOT_MAGIC || s[1].status == SLOT_SHORT))
      problem (ld, "not a dirtybitmap file (bad magic)");
    else if (s[0].status == SLOT_SHORT)
      problem (ld, "truncated: %" PRIu64 " bytes, too short for a header",
               ld->size);
    else {
      /* Name the most telling failure. */
      const struct slot *w = s[0].status >= s[1].status ? &s[0] : &s[1];
      problem (ld, "%s",
               w->status == SLOT_SHORT ? "truncated header" : w->why);
    }
    return -1;
  }

  ld->st = s[ld->slot].st;
  ld->dir_crc = s[ld->slot].dir_crc;
  if (ld->st.file_length > ld->size) {
    problem (ld, "truncated: %" PRIu64 " bytes, the header says %" PRIu64,
             ld->size, ld->st.file_length);
    return -1;
  }
  return 0;
}

static int
region_cmp (const void *a, const void *b)
{
  const struct bmf_region *ra = a, *rb = b;
  return ra->offset < rb->offset ? -1 : ra->offset > rb->offset;
}

static int
load_dir (struct load *ld)
{
  struct bmf_state *st = &ld->st;
  unsigned char *buf, *p, *end;
  size_t i, n = st->nr_bitmaps;
  ssize_t r;

  st->bitmaps = calloc (MAX (n, 1), sizeof *st->bitmaps);
  if (st->bitmaps == NULL) {
    problem (ld, "%s", strerror (errno));
    return -1;
  }
  st->nr_bitmaps = 0;
  if (n == 0)
    return 0;

  buf = malloc (st->dir_length);
  if (buf == NULL) {
    problem (ld, "%s", strerror (errno));
    return -1;
  }
  r = pread (ld->fd, buf, st->dir_length, st->dir_offset);
  if (r != (ssize_t) st->dir_length) {
    problem (ld, "read directory: %s",
             r == -1 ? strerror (errno) : "short read");
    free (buf);
    return -1;
  }
  if (crc32c (buf, st->dir_length) != ld->dir_crc) {
    problem (ld, "directory checksum mismatch");
    if (!ld->report) {
      free (buf);
      return -1;
    }
  }

  for (i = 0, p = buf, end = buf + st->dir_length; i < n; ++i) {
    struct bmf_bitmap *bm = &st->bitmaps[i];
    const char *rp;
    size_t nlen;

    if ((size_t) (end - p) < BMF_ENTRY_FIXED) {
      problem (ld, "directory entry %zu is cut off", i);
      break;
    }
    nlen = get_le16 (p + E_NAME_LENGTH);
    if (nlen == 0 || nlen > BMF_MAX_NAME) {
      problem (ld, "directory entry %zu: name length %zu "
               "(must be 1 to %d)", i, nlen, BMF_MAX_NAME);
      break;
    }
    if ((size_t) (end - p) < entry_length (nlen)) {
      problem (ld, "directory entry %zu is cut off", i);
      break;
    }
    bm->name = strndup ((const char *) p + E_NAME, nlen);
    if (bm->name == NULL) {
      problem (ld, "%s", strerror (errno));
      break;
    }
    st->nr_bitmaps++;
    bm->data_offset = get_le64 (p + E_DATA_OFFSET);
    bm->data_length = get_le64 (p + E_DATA_LENGTH);
    bm->gbits = get_le32 (p + E_GBITS);
    bm->flags = get_le32 (p + E_FLAGS);
    p += entry_length (nlen);

    if (strlen (bm->name) != nlen)
      problem (ld, "directory entry %zu: name contains a NUL byte", i);
    else if (bmf_find (st, bm->name) != bm)
      problem (ld, "bitmap %s: name used twice", bm->name);
    if (bm->gbits < BMF_MIN_GBITS || bm->gbits > BMF_MAX_GBITS)
      problem (ld, "bitmap %s: granularity 2^%u is out of range "
               "(512 to 2G)", bm->name, bm->gbits);
    else if (bm->data_length !=
             (st->sized ? bmf_data_length (st->disk_size, bm->gbits) : 0))
      problem (ld, "bitmap %s: data length %" PRIu64 " does not match "
               "the disk size %" PRIu64 " at granularity %" PRIu64,
               bm->name, bm->data_length, st->disk_size,
               UINT64_C (1) << bm->gbits);
    if (bm->flags & ~BMF_ENTRY_FLAGS)
      problem (ld, "bitmap %s: unknown flags 0x%" PRIx32,
               bm->name, bm->flags & ~BMF_ENTRY_FLAGS);
    if (bm->data_length == 0 && bm->data_offset != 0)
      problem (ld, "bitmap %s: data offset %" PRIu64 " without data",
               bm->name, bm->data_offset);
    else if (bm->data_length > 0 &&
             (rp = region_problem (bm->data_offset, bm->data_length,
                                   st->file_length)) != NULL)
      problem (ld, "bitmap %s: data (offset %" PRIu64 ", length %" PRIu64
               ") %s", bm->name, bm->data_offset, bm->data_length, rp);
  }
  if (i == n && p != end)
    problem (ld, "directory has %zu bytes after its last entry",
             (size_t) (end - p));
  free (buf);
  return ld->problems ? -1 : 0;
}

/* No two regions (directory, bitmap data) may overlap. */
static void
check_overlaps (struct load *ld)
{
  const struct bmf_state *st = &ld->st;
  struct bmf_region *r;
  size_t i, n = 0;

  r = calloc (st->nr_bitmaps + 1, sizeof *r);
  if (r == NULL)
    return;
  if (st->dir_length)
    r[n++] = (struct bmf_region) { st->dir_offset, st->dir_length };
  for (i = 0; i < st->nr_bitmaps; ++i)
    if (st->bitmaps[i].data_length)
      r[n++] = (struct bmf_region) { st->bitmaps[i].data_offset,
                                     st->bitmaps[i].data_length };
  qsort (r, n, sizeof *r, region_cmp);
  for (i = 1; i < n; ++i)
    if (r[i - 1].offset + r[i - 1].length > r[i].offset)
      problem (ld, "regions at offsets %" PRIu64 " and %" PRIu64 " overlap",
               r[i - 1].offset, r[i].offset);
  free (r);
}

/* Bits past the last granule must be clear, in the last word and in
 * the padding up to the end of the data (bmf_check only).  It runs
 * after problems too, so entries already found broken (their
 * granularity, length or place) are skipped.
 */
static void
check_tails (struct load *ld)
{
  const struct bmf_state *st = &ld->st;
  size_t i;

  for (i = 0; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *bm = &st->bitmaps[i];
    uint64_t tail[BMF_ALIGN / 8], nbits, start;
    size_t len, w;
    bool dirty;

    /* Only where the entry itself is sound (else its problem is
     * already reported, and gbits may be any number).
     */
    if (bm->gbits < BMF_MIN_GBITS || bm->gbits > BMF_MAX_GBITS ||
        bm->data_length == 0 ||
        bm->data_length != bmf_data_length (st->disk_size, bm->gbits) ||
        region_problem (bm->data_offset, bm->data_length,
                        MIN (st->file_length, ld->size)) != NULL)
      continue;
    /* From the word holding the last granule (or, when that word is
     * full, the next one) to the end: at most 4096 bytes.
     */
    nbits = bmf_nr_bits (st->disk_size, bm->gbits);
    start = (nbits / 64) * 8;
    len = bm->data_length - start;
    if (len == 0)
      continue;
    assert (len <= sizeof tail);
    if (pread (ld->fd, tail, len, bm->data_offset + start) != (ssize_t) len) {
      problem (ld, "bitmap %s: cannot read its data", bm->name);
      continue;
    }
    dirty = (nbits & 63) && (tail[0] >> (nbits & 63)) != 0;
    for (w = (nbits & 63) ? 1 : 0; !dirty && w < len / 8; ++w)
      dirty = tail[w] != 0;
    if (dirty)
      problem (ld, "bitmap %s: bits set past the end of the disk",
               bm->name);
  }
}

static int
load (struct load *ld)
{
  struct stat sb;

  if (fstat (ld->fd, &sb) == -1) {
    problem (ld, "fstat: %s", strerror (errno));
    return -1;
  }
  if (!S_ISREG (sb.st_mode)) {
    problem (ld, "not a regular file");
    return -1;
  }
  ld->size = sb.st_size;
  if (load_header (ld) == -1)
    return -1;
  if (load_dir (ld) == -1 && !ld->report)
    return -1;
  check_overlaps (ld);
  return ld->problems ? -1 : 0;
}

/* Apply what an unclean stop means: after a reboot, bitmaps that were
 * recording in a flush-mode run may have lost bits.
 */
static void
mark_after_crash (struct bmf *f)
{
  char boot[BMF_BOOT_ID_LEN];
  size_t i;

  if (!f->st.open)
    return;
  f->unclean = true;
  bmf_boot_id (boot);
  f->rebooted = boot[0] == '\0' || strcmp (boot, f->st.boot_id) != 0;
  bm_debug ("%s: was not closed cleanly (pid %" PRIu64 ", %s, %s)",
            f->path, f->st.open_pid,
            f->rebooted ? "machine restarted since" : "same boot",
            f->st.open_mode == BMF_STRICT ?
            "durability=strict" : "durability=flush");
  if (!f->rebooted || f->st.open_mode == BMF_STRICT)
    return;
  for (i = 0; i < f->st.nr_bitmaps; ++i) {
    struct bmf_bitmap *bm = &f->st.bitmaps[i];
    if ((bm->flags & BMF_ENABLED) && !(bm->flags & BMF_INCONSISTENT)) {
      bm->flags |= BMF_INCONSISTENT;
      bm_debug ("%s: bitmap %s is now inconsistent", f->path, bm->name);
    }
  }
}

const char *bmf_remove_hint;

const char *
bmf_inconsistent_reason (const struct bmf *f)
{
  return "it was recording when the machine stopped uncleanly or its "
    "file could not be synced, so it may have missed changes";
}

unsigned
bmf_check (const char *path, void (*report) (const char *problem))
{
  struct load ld = { .path = path, .report = report };

  ld.fd = open (path, O_RDONLY | O_CLOEXEC);
  if (ld.fd == -1) {
    problem (&ld, "%s", strerror (errno));
    return ld.problems;
  }
  if (load (&ld) == 0 || ld.st.bitmaps)
    check_tails (&ld);
  free_state (&ld.st);
  close (ld.fd);
  return ld.problems;
}

/*----------------------------------------------------------------------
 * Opening, creating, locking.
 */

static int
sync_dir_of (const char *path)
{
  char *copy = strdup (path);
  int dfd, r = 0;

  if (copy == NULL)
    return -1;
  dfd = open (dirname (copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd == -1 || fsync (dfd) == -1)
    r = -1;
  if (dfd >= 0)
    close (dfd);
  free (copy);
  return r;
}

/* Create a file atomically: write it under a temporary name, sync,
 * and link it into place (which fails if the name exists).
 * Returns 0, or -1 with errno EEXIST if it exists, reporting other
 * errors.
 */
static int
create_file (const char *path, uint64_t disk_size, bool sized)
{
  struct bmf_state st = {
    .seq = 1, .disk_size = disk_size, .sized = sized,
    .file_length = BMF_FIRST_REGION,
  };
  unsigned char *buf;
  char *tmp;
  int fd, r = -1, saved;

  if (asprintf (&tmp, "%s.XXXXXX", path) == -1) {
    bm_error ("%s: %m", path);
    return -1;
  }
  fd = mkostemp (tmp, O_CLOEXEC);
  if (fd == -1) {
    bm_error ("%s: cannot create: %m", path);
    free (tmp);
    return -1;
  }
  /* mkostemp makes it 0600: give it the mode a new file would have.
   * (Reading the umask sets it: done before threads start.)
   */
  {
    mode_t mask = umask (0);
    umask (mask);
    fchmod (fd, 0666 & ~mask);
  }
  buf = calloc (1, BMF_FIRST_REGION);
  if (buf == NULL) {
    bm_error ("%s: %m", path);
    goto out;
  }
  encode_header (&st, 0, buf);
  if (pwrite (fd, buf, BMF_FIRST_REGION, 0) != BMF_FIRST_REGION ||
      fsync (fd) == -1) {
    bm_error ("%s: cannot create: %m", path);
    goto out;
  }
  if (link (tmp, path) == -1) {
    if (errno != EEXIST)
      bm_error ("%s: cannot create: %m", path);
    goto out;
  }
  r = 0;
  if (sync_dir_of (path) == -1) {
    bm_error ("%s: fsync of its directory: %m", path);
    r = -1;
  }
 out:
  saved = errno;
  close (fd);
  unlink (tmp);
  free (tmp);
  free (buf);
  errno = saved;
  return r;
}

static int
lock_file (int fd, const char *path, enum bmf_lock lock)
{
  if (lock == BMF_LOCK_NONE)
    return 0;
  if (flock (fd, (lock == BMF_LOCK_EXCLUSIVE ? LOCK_EX : LOCK_SH)
             | LOCK_NB) == -1) {
    if (errno == EWOULDBLOCK) {
      bm_error ("%s: in use by another process (a running nbdkit or "
                "dirtybitmap)", path);
      errno = EBUSY;
    }
    else
      bm_error ("%s: lock: %m", path);
    return -1;
  }
  return 0;
}

static struct bmf *
open_fd (const char *path, int fd, enum bmf_lock lock)
{
  struct load ld = { .path = path, .fd = fd };
  struct bmf *f;

  if (lock_file (fd, path, lock) == -1) {
    close (fd);
    return NULL;
  }
  if (load (&ld) == -1) {
    bm_error ("%s", ld.first);
    free_state (&ld.st);
    close (fd);
    errno = EINVAL;
    return NULL;
  }
  f = calloc (1, sizeof *f);
  if (f == NULL || (f->path = strdup (path)) == NULL) {
    bm_error ("%s: %m", path);
    free (f);
    free_state (&ld.st);
    close (fd);
    return NULL;
  }
  f->fd = fd;
  f->lock = lock;
  f->slot = ld.slot;
  f->st = ld.st;
  mark_after_crash (f);
  /* With the write lock, the run that left an open record is gone and
   * its consequences are applied above: the next commit drops the
   * record (its first fdatasync makes that run's bits durable, and
   * its marks persist), so that it cannot condemn bitmaps that this
   * process adds or enables.
   */
  if (lock == BMF_LOCK_EXCLUSIVE && f->st.open) {
    f->st.open = false;
    f->st.open_mode = 0;
    f->st.open_pid = 0;
    memset (f->st.boot_id, 0, sizeof f->st.boot_id);
  }
  bm_debug ("%s: opened: %zu bitmaps, disk size %" PRIu64 "%s, seq %"
            PRIu64, path, f->st.nr_bitmaps, f->st.disk_size,
            f->st.sized ? "" : " (unknown)", f->st.seq);
  return f;
}

struct bmf *
bmf_open (const char *path, enum bmf_lock lock, bool create)
{
  bool rw = lock == BMF_LOCK_EXCLUSIVE;
  int fd;

  fd = open (path, (rw ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd == -1 && errno == ENOENT && create && rw) {
    if (create_file (path, 0, false) == -1 && errno != EEXIST)
      return NULL;
    bm_debug ("%s: created", path);
    fd = open (path, O_RDWR | O_CLOEXEC);
  }
  if (fd == -1) {
    bm_error ("%s: %m", path);
    return NULL;
  }
  return open_fd (path, fd, lock);
}

struct bmf *
bmf_create_sized (const char *path, uint64_t disk_size)
{
  int fd;

  if (create_file (path, disk_size, true) == -1) {
    if (errno == EEXIST)
      bm_error ("%s: already exists", path);
    return NULL;
  }
  fd = open (path, O_RDWR | O_CLOEXEC);
  if (fd == -1) {
    bm_error ("%s: %m", path);
    return NULL;
  }
  return open_fd (path, fd, BMF_LOCK_EXCLUSIVE);
}

void
bmf_close (struct bmf *f)
{
  if (f == NULL)
    return;
  close (f->fd);              /* releases the lock */
  free_state (&f->st);
  free (f->reserved);
  free (f->path);
  free (f);
}

int
bmf_sync (struct bmf *f)
{
  return fdatasync (f->fd);
}

int
bmf_reserve (struct bmf *f, uint64_t offset, uint64_t length)
{
  struct bmf_region *r;

  if (length == 0)
    return 0;
  r = realloc (f->reserved, (f->nr_reserved + 1) * sizeof *r);
  if (r == NULL)
    return -1;
  f->reserved = r;
  r[f->nr_reserved++] = (struct bmf_region) { offset, length };
  return 0;
}

/*----------------------------------------------------------------------
 * Mapping bitmap data.
 */

static int
map_region (int fd, uint64_t offset, uint64_t length, bool writable,
            struct bits *out)
{
  uint64_t page = sysconf (_SC_PAGESIZE);
  uint64_t start = ROUND_DOWN (offset, page);
  size_t len = length + (offset - start);
  void *p;

  if (length > SIZE_MAX - page) {
    errno = ENOMEM;
    return -1;
  }
  p = mmap (NULL, len, writable ? PROT_READ | PROT_WRITE : PROT_READ,
            MAP_SHARED, fd, start);
  if (p == MAP_FAILED)
    return -1;
  out->map_base = p;
  out->map_length = len;
  out->words = (uint64_t *) ((char *) p + (offset - start));
  return 0;
}

int
bmf_map (struct bmf *f, const struct bmf_state *st,
         const struct bmf_bitmap *bm, bool writable, struct bits *out)
{
  memset (out, 0, sizeof *out);
  out->nr_bits = st->sized ? bmf_nr_bits (st->disk_size, bm->gbits) : 0;
  if (bm->data_length == 0)
    return 0;
  if (map_region (f->fd, bm->data_offset, bm->data_length,
                  writable, out) == -1) {
    bm_error ("%s: bitmap %s: cannot map %" PRIu64 " bytes: %m",
              f->path, bm->name, bm->data_length);
    return -1;
  }
  return 0;
}

void
bmf_unmap (struct bits *b)
{
  if (b->map_base)
    munmap (b->map_base, b->map_length);
  bits_free_summary (b);
  memset (b, 0, sizeof *b);
}

/*----------------------------------------------------------------------
 * Transactions.
 */

static int __attribute__ ((format (printf, 2, 3)))
txn_fail (struct bmf_txn *t, const char *fs, ...)
{
  va_list args;

  va_start (args, fs);
  vsnprintf (t->err, sizeof t->err, fs, args);
  va_end (args);
  return -1;
}

struct bmf_txn *
bmf_txn_begin (struct bmf *f, bool dry_run)
{
  struct bmf_txn *t = calloc (1, sizeof *t);
  struct stat sb;

  if (t == NULL || copy_state (&t->st, &f->st) == -1 ||
      fstat (f->fd, &sb) == -1) {
    bm_error ("%s: %m", f->path);
    free (t);
    return NULL;
  }
  t->f = f;
  t->dry_run = dry_run;
  t->orig_size = sb.st_size;
  return t;
}

void
bmf_txn_abort (struct bmf_txn *t)
{
  struct stat sb;

  if (t == NULL)
    return;
  /* Space appended for new regions goes again. */
  if (!t->dry_run && fstat (t->f->fd, &sb) == 0 &&
      (uint64_t) sb.st_size > t->orig_size &&
      ftruncate (t->f->fd, t->orig_size) == -1)
    bm_debug ("%s: ftruncate: %m", t->f->path);
  free_state (&t->st);
  free (t);
}

/* Every region that new space must avoid: what the committed state
 * and the transaction refer to, and what this process still maps.
 */
static struct bmf_region *
live_regions (struct bmf_txn *t, size_t *n)
{
  const struct bmf *f = t->f;
  struct bmf_region *r;
  size_t i, max = 1 + f->st.nr_bitmaps + t->st.nr_bitmaps + f->nr_reserved;

  r = calloc (max, sizeof *r);
  if (r == NULL)
    return NULL;
  *n = 0;
  if (f->st.dir_length)
    r[(*n)++] = (struct bmf_region) { f->st.dir_offset, f->st.dir_length };
  for (i = 0; i < f->st.nr_bitmaps; ++i)
    r[(*n)++] = (struct bmf_region) { f->st.bitmaps[i].data_offset,
                                      f->st.bitmaps[i].data_length };
  for (i = 0; i < t->st.nr_bitmaps; ++i)
    r[(*n)++] = (struct bmf_region) { t->st.bitmaps[i].data_offset,
                                      t->st.bitmaps[i].data_length };
  for (i = 0; i < f->nr_reserved; ++i)
    r[(*n)++] = f->reserved[i];
  qsort (r, *n, sizeof *r, region_cmp);
  return r;
}

/* Find length bytes (a multiple of BMF_ALIGN) of free space, first
 * fit, allocate it and make it read as zeroes.  Nothing that a header
 * refers to is touched.
 */
static int
alloc_region (struct bmf_txn *t, uint64_t length, uint64_t *offset)
{
  struct bmf *f = t->f;
  struct bmf_region *r;
  size_t i, n;
  uint64_t pos = BMF_FIRST_REGION;
  struct stat sb;
  int err;

  *offset = 0;
  if (length == 0)
    return 0;
  r = live_regions (t, &n);
  if (r == NULL)
    return txn_fail (t, "%s: %s", f->path, strerror (errno));
  for (i = 0; i < n; ++i) {
    if (r[i].length == 0)
      continue;
    if (r[i].offset >= pos && r[i].offset - pos >= length)
      break;
    pos = MAX (pos, ROUND_UP (r[i].offset + r[i].length, BMF_ALIGN));
  }
  free (r);

  if (fstat (f->fd, &sb) == -1)
    return txn_fail (t, "%s: fstat: %s", f->path, strerror (errno));
  /* Old bytes in reused space: punch them out (falling back to
   * writing zeroes below), then allocate every block now, so that
   * setting a bit through the mapping can never hit ENOSPC (SIGBUS).
   */
  bool zero_by_hand = false;
  if (pos < (uint64_t) sb.st_size &&
      fallocate (f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                 pos, MIN (length, sb.st_size - pos)) == -1)
    zero_by_hand = true;
  err = posix_fallocate (f->fd, pos, length);
  if (err == EOPNOTSUPP || err == EINVAL) {
    /* No fallocate here (some filesystems): write the zeroes. */
    zero_by_hand = true;
    err = 0;
  }
  if (err)
    return txn_fail (t, "%s: cannot allocate %" PRIu64 " bytes: %s",
                     f->path, length, strerror (err));
  if (zero_by_hand) {
    static const char zero[BMF_ALIGN];
    uint64_t o;
    for (o = 0; o < length; o += BMF_ALIGN)
      if (pwrite (f->fd, zero, BMF_ALIGN, pos + o) != BMF_ALIGN)
        return txn_fail (t, "%s: write: %s", f->path, strerror (errno));
  }
  *offset = pos;
  return 0;
}

static struct bmf_bitmap *
need (struct bmf_txn *t, const char *name)
{
  struct bmf_bitmap *bm = bmf_find (&t->st, name);

  if (bm == NULL)
    txn_fail (t, "bitmap %s not found", name);
  return bm;
}

static int
need_consistent (struct bmf_txn *t, const struct bmf_bitmap *bm)
{
  if (bm->flags & BMF_INCONSISTENT)
    return txn_fail (t, "bitmap %s is inconsistent: %s; remove it%s%s%s "
                     "and take a full backup", bm->name,
                     bmf_inconsistent_reason (t->f),
                     bmf_remove_hint ? " (" : "",
                     bmf_remove_hint ? bmf_remove_hint : "",
                     bmf_remove_hint ? ")" : "");
  return 0;
}

int
bmf_txn_add (struct bmf_txn *t, const char *name, unsigned gbits)
{
  struct bmf_bitmap *bms, bm = { .gbits = gbits, .flags = BMF_ENABLED };
  size_t len = strlen (name);

  if (len == 0 || len > BMF_MAX_NAME)
    return txn_fail (t, "bitmap name must be 1 to %d bytes", BMF_MAX_NAME);
  if (gbits < BMF_MIN_GBITS || gbits > BMF_MAX_GBITS)
    return txn_fail (t, "granularity must be a power of 2 from 512 to 2G");
  if (bmf_find (&t->st, name))
    return txn_fail (t, "bitmap %s already exists", name);
  if (t->st.nr_bitmaps >= BMF_MAX_BITMAPS)
    return txn_fail (t, "too many bitmaps (the limit is %d)",
                     BMF_MAX_BITMAPS);
  if (!t->dry_run && t->st.sized) {
    bm.data_length = bmf_data_length (t->st.disk_size, gbits);
    if (alloc_region (t, bm.data_length, &bm.data_offset) == -1)
      return -1;
  }
  bm.name = strdup (name);
  bms = realloc (t->st.bitmaps, (t->st.nr_bitmaps + 1) * sizeof *bms);
  if (bm.name == NULL || bms == NULL) {
    free (bm.name);
    return txn_fail (t, "%s", strerror (errno));
  }
  t->st.bitmaps = bms;
  bms[t->st.nr_bitmaps++] = bm;
  return 0;
}

int
bmf_txn_remove (struct bmf_txn *t, const char *name)
{
  struct bmf_bitmap *bm = need (t, name);
  size_t i;

  if (bm == NULL)
    return -1;
  i = bm - t->st.bitmaps;
  free (bm->name);
  memmove (&t->st.bitmaps[i], &t->st.bitmaps[i + 1],
           (t->st.nr_bitmaps - i - 1) * sizeof *bm);
  t->st.nr_bitmaps--;
  return 0;
}

int
bmf_txn_clear (struct bmf_txn *t, const char *name)
{
  struct bmf_bitmap *bm = need (t, name);
  uint64_t offset;

  if (bm == NULL || need_consistent (t, bm) == -1)
    return -1;
  if (t->dry_run || bm->data_length == 0)
    return 0;
  if (alloc_region (t, bm->data_length, &offset) == -1)
    return -1;
  bm->data_offset = offset;
  return 0;
}

int
bmf_txn_enable (struct bmf_txn *t, const char *name, bool enable)
{
  struct bmf_bitmap *bm = need (t, name);

  if (bm == NULL || need_consistent (t, bm) == -1)
    return -1;
  if (enable)
    bm->flags |= BMF_ENABLED;
  else
    bm->flags &= ~BMF_ENABLED;
  return 0;
}

/* Map a data region of this file that the transaction has written or
 * is reading.
 */
static int
txn_map (struct bmf_txn *t, struct bmf *f, uint64_t offset, uint64_t length,
         uint64_t nr_bits, bool writable, struct bits *out)
{
  memset (out, 0, sizeof *out);
  out->nr_bits = nr_bits;
  if (length == 0)
    return 0;
  if (map_region (f->fd, offset, length, writable, out) == -1)
    return txn_fail (t, "%s: cannot map %" PRIu64 " bytes: %s",
                     f->path, length, strerror (errno));
  return 0;
}

int
bmf_txn_resize (struct bmf_txn *t, uint64_t new_size)
{
  const uint64_t old_size = t->st.disk_size;
  const bool was_sized = t->st.sized;
  size_t i;

  if (was_sized && old_size == new_size)
    return 0;
  if (new_size > INT64_MAX)
    return txn_fail (t, "disk size %" PRIu64 " is too large", new_size);
  for (i = 0; !t->dry_run && i < t->st.nr_bitmaps; ++i) {
    struct bmf_bitmap *bm = &t->st.bitmaps[i];
    uint64_t nbits = bmf_nr_bits (new_size, bm->gbits);
    uint64_t len = bmf_data_length (new_size, bm->gbits), offset;
    struct bits old, new;

    if (alloc_region (t, len, &offset) == -1)
      return -1;
    if (txn_map (t, t->f, offset, len, nbits, true, &new) == -1)
      return -1;
    if (len && was_sized && bm->data_length) {
      uint64_t nwords = MIN (bits_nr_words (nbits),
                             bits_nr_words (bmf_nr_bits (old_size,
                                                         bm->gbits)));
      if (txn_map (t, t->f, bm->data_offset, bm->data_length, 0, false,
                   &old) == -1) {
        bmf_unmap (&new);
        return -1;
      }
      memcpy (new.words, old.words, nwords * 8);
      bmf_unmap (&old);
      /* Shrunk: bits past the new end go. */
      if (nbits & 63)
        new.words[nbits / 64] &= (UINT64_C (1) << (nbits & 63)) - 1;
    }
    /* Grown: every granule holding new bytes is dirty. */
    if (was_sized && new_size > old_size)
      bits_set_range (&new, old_size >> bm->gbits, nbits - 1);
    bmf_unmap (&new);
    bm->data_offset = offset;
    bm->data_length = len;
  }
  t->st.disk_size = new_size;
  t->st.sized = true;
  return 0;
}

int
bmf_txn_merge (struct bmf_txn *t, const char *dst,
               struct bmf *src_file, const char *src)
{
  const struct bmf_state *sst = src_file ? &src_file->st : &t->st;
  struct bmf_bitmap *d, *s;
  struct bits dbits, sbits;
  uint64_t offset;
  int r;

  if ((d = need (t, dst)) == NULL || need_consistent (t, d) == -1)
    return -1;
  s = bmf_find (sst, src);
  if (s == NULL)
    return src_file ?
      txn_fail (t, "bitmap %s not found in %s", src, src_file->path) :
      txn_fail (t, "bitmap %s not found", src);
  if (need_consistent (t, s) == -1)
    return -1;
  if (src_file && sst->sized && t->st.sized &&
      sst->disk_size != t->st.disk_size)
    return txn_fail (t, "bitmap %s in %s covers a disk of %" PRIu64
                     " bytes, but this disk is %" PRIu64 " bytes",
                     src, src_file->path, sst->disk_size, t->st.disk_size);
  if (t->dry_run || !sst->sized)
    return 0;                   /* an unsized source has no bits */
  /* This file has never seen its disk (and so no write): it takes
   * the source's size, clean.
   */
  if (!t->st.sized) {
    if (bmf_txn_resize (t, sst->disk_size) == -1)
      return -1;
    d = bmf_find (&t->st, dst);
  }
  if (d->data_length == 0)
    return 0;

  if (alloc_region (t, d->data_length, &offset) == -1)
    return -1;
  if (txn_map (t, t->f, offset, d->data_length,
               bmf_nr_bits (t->st.disk_size, d->gbits), true, &dbits) == -1)
    return -1;
  r = txn_map (t, t->f, d->data_offset, d->data_length, 0, false, &sbits);
  if (r == 0) {
    memcpy (dbits.words, sbits.words, d->data_length);
    bmf_unmap (&sbits);
    r = txn_map (t, src_file ? src_file : t->f, s->data_offset,
                 s->data_length, bmf_nr_bits (sst->disk_size, s->gbits),
                 false, &sbits);
  }
  if (r == 0) {
    bits_merge (&dbits, d->gbits, &sbits, s->gbits, t->st.disk_size);
    bmf_unmap (&sbits);
    d->data_offset = offset;
  }
  bmf_unmap (&dbits);
  return r;
}

void
bmf_txn_set_open (struct bmf_txn *t, bool open, enum bmf_durability mode)
{
  t->st.open = open;
  t->st.open_mode = open ? mode : 0;
  memset (t->st.boot_id, 0, sizeof t->st.boot_id);
  t->st.open_pid = 0;
  if (open) {
    bmf_boot_id (t->st.boot_id);
    t->st.open_pid = getpid ();
  }
}

static uint64_t
end_of_regions (const struct bmf_state *st)
{
  uint64_t end = BMF_FIRST_REGION;
  size_t i;

  if (st->dir_length)
    end = MAX (end, ROUND_UP (st->dir_offset + st->dir_length, BMF_ALIGN));
  for (i = 0; i < st->nr_bitmaps; ++i)
    if (st->bitmaps[i].data_length)
      end = MAX (end, st->bitmaps[i].data_offset +
                 st->bitmaps[i].data_length);
  return end;
}

/* Write the directory of t->st, reusing the committed copy when the
 * file holds it byte for byte.  Compare with the file, not with an
 * encoding of f->st: opening a file can change f->st in memory (the
 * marks of an unclean stop), and a header whose checksum describes
 * bytes that are not there makes a file that no longer opens.
 * Returns the checksum through *crc.
 */
static int
write_dir (struct bmf_txn *t, uint32_t *crc)
{
  struct bmf *f = t->f;
  unsigned char *buf, *old = NULL;
  size_t len;
  int r = 0;

  buf = encode_dir (&t->st, &len);
  if (buf == NULL)
    return txn_fail (t, "%s", strerror (errno));
  *crc = crc32c (buf, len);
  t->st.dir_length = len;
  t->st.dir_offset = 0;
  if (len == 0)
    goto out;
  if (len == f->st.dir_length && (old = malloc (len)) != NULL &&
      pread (f->fd, old, len, f->st.dir_offset) == (ssize_t) len &&
      memcmp (buf, old, len) == 0) {
    t->st.dir_offset = f->st.dir_offset;
    goto out;
  }
  if (len > UINT32_MAX) {
    r = txn_fail (t, "directory too large");
    goto out;
  }
  r = alloc_region (t, ROUND_UP (len, BMF_ALIGN), &t->st.dir_offset);
  if (r == 0 && pwrite (f->fd, buf, len, t->st.dir_offset) != (ssize_t) len)
    r = txn_fail (t, "%s: write directory: %s", f->path,
                  errno ? strerror (errno) : "short write");
 out:
  free (buf);
  free (old);
  return r;
}

int
bmf_txn_commit (struct bmf_txn *t)
{
  struct bmf *f = t->f;
  unsigned char hdr[BMF_HEADER_SLOT];
  uint32_t dir_crc = 0;
  uint64_t end;
  int slot = 1 - f->slot;
  size_t i;

  if (write_dir (t, &dir_crc) == -1)
    goto err;
  t->st.seq = f->st.seq + 1;
  t->st.file_length = end_of_regions (&t->st);
  if (fdatasync (f->fd) == -1) {
    txn_fail (t, "%s: fdatasync: %s", f->path, strerror (errno));
    goto err;
  }
  encode_header (&t->st, dir_crc, hdr);
  if (pwrite (f->fd, hdr, sizeof hdr, (off_t) slot * BMF_HEADER_SLOT)
      != sizeof hdr || fdatasync (f->fd) == -1) {
    /* The new header may be on disk, and a later commit goes to the
     * same slot: until one succeeds, this header may be the current
     * one after a crash.  Keep every byte it refers to: no truncation
     * now, and no reuse by later transactions of this process.
     */
    txn_fail (t, "%s: write header: %s", f->path, strerror (errno));
    t->orig_size = UINT64_MAX;
    if (t->st.dir_length)
      bmf_reserve (f, t->st.dir_offset, t->st.dir_length);
    for (i = 0; i < t->st.nr_bitmaps; ++i)
      bmf_reserve (f, t->st.bitmaps[i].data_offset,
                   t->st.bitmaps[i].data_length);
    goto err;
  }

  free_state (&f->st);
  f->st = t->st;
  f->slot = slot;
  bm_debug ("%s: committed seq %" PRIu64 " (%zu bitmaps)",
            f->path, f->st.seq, f->st.nr_bitmaps);

  /* Give back space past the last region still in use. */
  end = f->st.file_length;
  for (i = 0; i < f->nr_reserved; ++i)
    end = MAX (end, f->reserved[i].offset + f->reserved[i].length);
  if ((uint64_t) lseek (f->fd, 0, SEEK_END) > end &&
      ftruncate (f->fd, end) == -1)
    bm_debug ("%s: ftruncate: %m", f->path);
  free (t);
  return 0;

 err:
  bm_error ("%s", t->err);
  bmf_txn_abort (t);
  return -1;
}
