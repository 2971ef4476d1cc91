/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz-load.c: libFuzzer target for the bitmap file loader ("make
 * fuzz" in tests/).  Each input is written to a file, which is then
 *
 *   - validated with bmf_check, and opened with bmf_open: a file that
 *     check finds sound must open, and a file that fails to open must
 *     be left exactly as it was;
 *   - if it opened: every bitmap is mapped and scanned, then a
 *     transaction adds, clears, toggles, merges, removes and resizes
 *     bitmaps, and makes or drops their coarse shadows (as the last
 *     byte of the input picks) and commits.  After a commit the file
 *     must open again, every bitmap that was neither cleared nor
 *     removed must keep every bit it had (a lost bit is the one thing
 *     this format must never do), a file that was sound must still
 *     pass bmf_check, and if every shadow covered its bits (each
 *     dirty granule's coarse granule set) before, every shadow must
 *     still cover them.
 *
 * Random bytes rarely carry a right CRC-32C, so each input is tried
 * twice: as it is, and with its checksums made right.
 *
 * Any violation aborts, which libFuzzer reports with the input.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

#include "bits.h"
#include "bmfile.h"
#include "crc32c.h"
#include "format.h"
#include "msg.h"
#include "shadow.h"
#include "txn.h"
#include "util.h"

/* The operations of the transaction (see test_one). */
#define OP_ADD      1
#define OP_CLEAR    2
#define OP_ENABLE   4
#define OP_MERGE    8
#define OP_REMOVE  16
#define OP_RESIZE  32
#define OP_OPEN    64
#define OP_SHADOWS 128

/* Keep bitmap data small: large disks would make a run allocate
 * gigabytes in the temporary file.
 */
#define MAX_DATA (1024 * 1024)

void
bm_debug (const char *fs, ...)
{
}

static void
ignore (void *opaque, const char *problem)
{
}

static char path[4096];

static void
remove_file (void)
{
  unlink (path);
}

static void
die (const char *what)
{
  fprintf (stderr, "fuzz-load: %s\n", what);
  abort ();
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  const char *dir = getenv ("FUZZ_TMPDIR");
  struct stat sb;

  if (dir == NULL)
    dir = stat ("/dev/shm", &sb) == 0 ? "/dev/shm" : "/tmp";
  snprintf (path, sizeof path, "%s/fuzz-load.%ld.bitmaps", dir,
            (long) getpid ());
  atexit (remove_file);
  return 0;
}

static void
write_input (const uint8_t *data, size_t size)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

  if (fd == -1 || (size && write (fd, data, size) != (ssize_t) size))
    die ("cannot write the input file");
  close (fd);
}

static bool
unchanged (const uint8_t *data, size_t size)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  uint8_t *buf = malloc (size + 1);
  ssize_t r;
  bool same;

  if (fd == -1 || buf == NULL)
    die ("cannot read the input file back");
  r = pread (fd, buf, size + 1, 0);
  same = r == (ssize_t) size && memcmp (buf, data, size) == 0;
  free (buf);
  close (fd);
  return same;
}

/* A copy of each bitmap's bits before the transaction. */
struct saved {
  char *name;
  unsigned gbits;
  uint64_t nr_bits;
  uint64_t *words;
  bool cleared;
  bool removed;
};

static void
scan (struct bmf *f, const struct bmf_bitmap *bm, struct saved *sv)
{
  struct bits b;
  uint64_t n, pos, runs = 0;

  sv->name = strdup (bm->name);
  sv->gbits = bm->gbits;
  if (sv->name == NULL || bmf_map (f, bmf_state (f), bm, false, &b,
                                   NULL) == -1)
    die ("cannot map a bitmap that loaded");
  sv->nr_bits = b.nr_bits;
  n = bits_nr_words (b.nr_bits);
  sv->words = calloc (MAX (n, 1), 8);
  if (sv->words == NULL)
    die ("calloc");
  if (n)
    memcpy (sv->words, b.words, n * 8);
  /* Walk the runs the way map and extents do. */
  for (pos = 0; pos < b.nr_bits; ++runs) {
    bool dirty;
    pos = bits_run (&b, pos, b.nr_bits, &dirty);
  }
  if (runs > b.nr_bits || bits_count (&b) > b.nr_bits)
    die ("scan out of bounds");
  bmf_unmap (&b);
}

/* Every bit of sv (within the disk both cover) is still set. */
static void
check_kept (struct bmf *f, const struct saved *sv)
{
  const struct bmf_bitmap *bm = bmf_find (bmf_state (f), sv->name);
  struct bits b;
  uint64_t i, n;

  if (bm == NULL)
    die ("a bitmap disappeared in a commit");
  if (bmf_map (f, bmf_state (f), bm, false, &b, NULL) == -1)
    die ("cannot map a committed bitmap");
  n = MIN (sv->nr_bits, b.nr_bits);
  for (i = 0; i < n; ++i)
    if (((sv->words[i / 64] >> (i & 63)) & 1) && !bits_test (&b, i))
      die ("a commit lost a dirty bit");
  bmf_unmap (&b);
}

/* Whether every shadow of f covers its bits: each dirty granule's
 * coarse granule is set.
 */
static bool
shadows_cover (struct bmf *f)
{
  const struct bmf_state *st = bmf_state (f);
  bool ok = true;
  size_t i;

  if (!st->has_shadows)
    return true;
  for (i = 0; ok && i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *bm = &st->bitmaps[i];
    const unsigned sg = bmf_shadow_gbits (st, bm);
    struct bits b, sh;
    uint64_t g;

    if (bm->data_length == 0)
      continue;
    if (bmf_map (f, st, bm, false, &b, NULL) == -1 ||
        bmf_map_shadow (f, st, bm, &sh, NULL) == -1)
      die ("cannot map a bitmap or its shadow that loaded");
    for (g = bits_next_set (&b, 0, b.nr_bits); ok && g < b.nr_bits;
         g = bits_next_set (&b, g + 1, b.nr_bits))
      if (!bits_test (&sh, (g << bm->gbits) >> sg))
        ok = false;
    bmf_unmap (&sh);
    bmf_unmap (&b);
  }
  return ok;
}

/* After a commit: the file opens, and keeps the bits of sv. */
static struct bmf *
reopen_committed (const struct saved *sv, size_t n, unsigned problems)
{
  struct bmf *f;
  size_t i;

  if (problems == 0 && bmf_check (path, ignore, NULL) != 0)
    die ("a commit turned a sound file into a broken one");
  f = bmf_open (path, BMF_LOCK_EXCLUSIVE, NULL);
  if (f == NULL)
    die ("a committed file does not open");
  for (i = 0; i < n; ++i)
    if (!sv[i].cleared && !sv[i].removed)
      check_kept (f, &sv[i]);
  return f;
}

static bool
small (const struct bmf_state *st, uint64_t disk_size, unsigned gbits)
{
  return !st->sized || bmf_data_length (disk_size, gbits) <= MAX_DATA;
}

/* Header fields that carry checksums (the FILE FORMAT section of
 * nbdkit-dirtybitmap-filter(1)).
 */
#define H_DIR_OFFSET  40
#define H_DIR_LENGTH  48
#define H_DIR_CRC     56
#define H_COMPAT     120
#define H_SH_OFFSET  160
#define H_SH_LENGTH  168
#define H_SH_CRC     172
#define H_CRC        252

/* Random bytes almost never carry the right CRC-32C, so on their own
 * they would not get past the header: each input is also tried with
 * the checksums of both slots (and of the directory each names) made
 * right.
 */
static bool
fix_checksums (uint8_t *buf, size_t size)
{
  bool changed = false;
  int slot;

  for (slot = 0; slot < 2; ++slot) {
    uint8_t *h = buf + slot * BMF_HEADER_SLOT;
    uint64_t off;
    uint32_t len, crc;

    if (size < (size_t) slot * BMF_HEADER_SLOT + BMF_HEADER_LENGTH)
      break;
    off = get_le64 (h + H_DIR_OFFSET);
    len = get_le32 (h + H_DIR_LENGTH);
    if (off <= size && len <= size - off) {
      crc = crc32c (buf + off, len);
      changed |= get_le32 (h + H_DIR_CRC) != crc;
      put_le32 (h + H_DIR_CRC, crc);
    }
    if (get_le32 (h + H_COMPAT) & BMF_COMPAT_SHADOWS) {
      off = get_le64 (h + H_SH_OFFSET);
      len = get_le32 (h + H_SH_LENGTH);
      if (off <= size && len <= size - off) {
        crc = crc32c (buf + off, len);
        changed |= get_le32 (h + H_SH_CRC) != crc;
        put_le32 (h + H_SH_CRC, crc);
      }
    }
    crc = crc32c (h, H_CRC);
    changed |= get_le32 (h + H_CRC) != crc;
    put_le32 (h + H_CRC, crc);
  }
  return changed;
}

static void test_one (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  uint8_t *copy;

  test_one (data, size);
  copy = malloc (size + 1);
  if (copy == NULL)
    die ("malloc");
  memcpy (copy, data, size);
  if (fix_checksums (copy, size))
    test_one (copy, size);
  free (copy);
  /* libFuzzer may end with _Exit, which skips atexit. */
  remove_file ();
  return 0;
}

static void
test_one (const uint8_t *data, size_t size)
{
  const struct bmf_state *st, *tst;
  struct bmf *f;
  struct bmf_txn *t;
  struct saved *sv;
  unsigned problems, ops;
  size_t i, n;
  bool all_small = true, covered;

  write_input (data, size);
  problems = bmf_check (path, ignore, NULL);
  f = bmf_open (path, BMF_LOCK_EXCLUSIVE, NULL);
  if (f == NULL) {
    if (problems == 0)
      die ("bmf_check passed a file that bmf_open refuses");
    if (!unchanged (data, size))
      die ("a file that failed to open was changed");
    return;
  }

  st = bmf_state (f);
  n = st->nr_bitmaps;
  sv = calloc (MAX (n, 1), sizeof *sv);
  if (sv == NULL)
    die ("calloc");
  for (i = 0; i < n; ++i) {
    scan (f, &st->bitmaps[i], &sv[i]);
    all_small &= small (st, st->disk_size, st->bitmaps[i].gbits);
  }

  covered = shadows_cover (f);

  /* First a commit that changes nothing but what opening the file
   * did (crash marks, the dropped open record): the filter's startup.
   */
  t = bmf_txn_begin (f, false, NULL);
  if (t == NULL)
    die ("bmf_txn_begin");
  if (bmf_txn_commit (t, NULL) == 0) {
    bmf_close (f);
    f = reopen_committed (sv, n, problems);
  }

  /* Then a transaction whose operations the last byte of the input picks
   * (all of them when it is 0, as it is at the end of most files);
   * rule violations (an inconsistent bitmap, a name in use) just leave
   * an operation out.
   */
  ops = size ? ~(unsigned) data[size - 1] : ~0u;
  t = bmf_txn_begin (f, false, NULL);
  if (t == NULL)
    die ("bmf_txn_begin");
  tst = bmf_txn_state (t);
  if ((ops & OP_ADD) && small (tst, tst->disk_size, 9))
    bmf_txn_add (t, "fuzz", 9, NULL);
  for (i = 0; i < n && i < 4; ++i) {
    const char *name = sv[i].name;
    if (i == 0 && (ops & OP_CLEAR) && bmf_txn_clear (t, name, NULL) == 0)
      sv[i].cleared = true;
    if (ops & OP_ENABLE)
      bmf_txn_enable (t, name, i & 1, NULL);
    if (ops & OP_MERGE)
      bmf_txn_merge (t, "fuzz", NULL, name, NULL);
  }
  if ((ops & OP_REMOVE) && n >= 2 &&
      bmf_txn_remove (t, sv[n - 1].name, NULL) == 0)
    sv[n - 1].removed = true;
  if ((ops & OP_RESIZE) && all_small &&
      small (tst, tst->disk_size + 4096, 9))
    bmf_txn_resize (t, tst->disk_size + 4096, NULL);
  if (ops & OP_OPEN)
    bmf_txn_set_open (t, true, (ops & OP_SHADOWS) ? BMF_COARSE : BMF_FLUSH);
  /* With OP_SHADOWS, shadows of 1M granules (made from the bits where
   * there are none, or none of that size); else, half the time,
   * none.
   */
  if (all_small && ((ops & OP_SHADOWS) || (ops & OP_ADD)))
    bmf_txn_set_shadows (t, (ops & OP_SHADOWS) ? 20 : 0, NULL);
  if (bmf_txn_commit (t, NULL) == 0) {
    bmf_close (f);
    f = reopen_committed (sv, n, problems);
    if (covered && !shadows_cover (f))
      die ("a commit left a shadow that misses bits");
  }
  bmf_close (f);
  for (i = 0; i < n; ++i) {
    free (sv[i].name);
    free (sv[i].words);
  }
  free (sv);
}
