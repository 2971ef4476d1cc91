/* SPDX-License-Identifier: BSD-3-Clause */
/* txn-cut.c: metadata changes are atomic, proved by cutting every
 * transaction at every system call (test-dirtybitmap-crash-txn.sh).
 *
 * The program defines pwrite, fdatasync, fsync, ftruncate, fallocate
 * and posix_fallocate itself, so the library linked into it calls
 * these (which forward to the kernel).  For each kind of transaction
 * (add, remove, clear, enable, disable, merge, grow, shrink, the open
 * record, several at once, and the first commit after a reboot, whose
 * crash marks exist only in memory until then), on a file without
 * coarse shadows and on one with them, and for the changes of the
 * shadows themselves (made from the bits, made again at another
 * granularity, dropped, and the first commit after a power loss in
 * coarse mode, whose recovery is done in place before it) it:
 *
 *   - runs it once and checks the order that power loss needs: each
 *     commit syncs every region before it writes the header slot, the
 *     header is one write into the slot not in use, synced at once,
 *     and nothing but a truncation follows;
 *   - runs it again for every N, copying the file as it is just before
 *     the Nth call: what a kill -9 at that instant leaves (stores into
 *     a shared mapping are in the page cache, so the copy has them).
 *     Each copy must pass bmf_check and hold exactly the old or the
 *     new state: the same bitmaps, flags and bits.
 *
 * Then a failing fdatasync: a commit whose header write may or may
 * not have reached the disk, followed by another commit in the same
 * process cut just before its header write, must still leave a file
 * that opens.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "bits.h"
#include "bmfile-impl.h"        /* white-box: the file descriptor */
#include "crc32c.h"
#include "format.h"
#include "msg.h"
#include "shadow.h"
#include "txn.h"
#include "util.h"

#define BASE "base.bitmaps"
#define REBOOTED "rebooted.bitmaps"
#define SHADOWED "shadowed.bitmaps"
#define POWERLOSS "powerloss.bitmaps"
#define CGBITS 20               /* shadows of 1M granules */
#define WORK "work.bitmaps"
#define CUT "cut.bitmaps"
#define DISK_SIZE (8 * 1024 * 1024 + 1000)

static int failures;

void
bm_debug (const char *fs, ...)
{
}

static void __attribute__ ((noreturn))
fatal (const char *what)
{
  fprintf (stderr, "txn-cut: %s: %s\n", what, strerror (errno));
  exit (EXIT_FAILURE);
}

/*----------------------------------------------------------------------
 * The interposed calls.
 */

enum call { C_PWRITE, C_FDATASYNC, C_FSYNC, C_FTRUNCATE, C_FALLOCATE };
static const char *call_names[] = {
  "pwrite", "fdatasync", "fsync", "ftruncate", "fallocate",
};

#define MAX_LOG 256
static struct logged {
  enum call call;
  uint64_t offset, length;
} call_log[MAX_LOG];
static unsigned nr_calls;       /* calls since the counter was reset */
static unsigned cut_at;         /* copy the file before this call; 0: never */
static unsigned fail_at;        /* this call fails with EIO; 0: never */
static bool cut_header;         /* copy the file before a header write */
static int watched_fd = -1;     /* count only calls on this fd */

static void
copy_file (const char *from, const char *to)
{
  char buf[65536];
  int in = open (from, O_RDONLY | O_CLOEXEC);
  int out = open (to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ssize_t r;

  if (in == -1 || out == -1)
    fatal ("copy_file: open");
  while ((r = read (in, buf, sizeof buf)) > 0)
    if (write (out, buf, r) != r)
      fatal ("copy_file: write");
  if (r == -1)
    fatal ("copy_file: read");
  close (in);
  close (out);
}

static bool
is_header_write (const struct logged *c)
{
  return c->call == C_PWRITE &&
    (c->offset == 0 || c->offset == BMF_HEADER_SLOT) &&
    c->length == BMF_HEADER_LENGTH;
}

/* Returns true if the call must fail. */
static bool
intercept (int fd, enum call call, uint64_t offset, uint64_t length)
{
  if (fd != watched_fd)
    return false;
  if (nr_calls < MAX_LOG)
    call_log[nr_calls] = (struct logged) { call, offset, length };
  nr_calls++;
  if (nr_calls == cut_at ||
      (cut_header && nr_calls <= MAX_LOG &&
       is_header_write (&call_log[nr_calls - 1])))
    copy_file (WORK, CUT);
  if (nr_calls == fail_at) {
    errno = EIO;
    return true;
  }
  return false;
}

ssize_t
pwrite (int fd, const void *buf, size_t count, off_t offset)
{
  if (intercept (fd, C_PWRITE, offset, count))
    return -1;
  return syscall (SYS_pwrite64, fd, buf, count, offset);
}

int
fdatasync (int fd)
{
  if (intercept (fd, C_FDATASYNC, 0, 0))
    return -1;
  return syscall (SYS_fdatasync, fd);
}

int
fsync (int fd)
{
  if (intercept (fd, C_FSYNC, 0, 0))
    return -1;
  return syscall (SYS_fsync, fd);
}

int
ftruncate (int fd, off_t length)
{
  if (intercept (fd, C_FTRUNCATE, length, 0))
    return -1;
  return syscall (SYS_ftruncate, fd, length);
}

int
fallocate (int fd, int mode, off_t offset, off_t len)
{
  if (intercept (fd, C_FALLOCATE, offset, len))
    return -1;
  return syscall (SYS_fallocate, fd, mode, offset, len);
}

int
posix_fallocate (int fd, off_t offset, off_t len)
{
  if (intercept (fd, C_FALLOCATE, offset, len))
    return EIO;
  return syscall (SYS_fallocate, fd, 0, offset, len) == -1 ? errno : 0;
}

/*----------------------------------------------------------------------
 * States.
 */

/* A bitmap's shadow, read from the file, as the recovery of a power
 * loss would leave it when that is still pending (the bits it has
 * reached the disk with are in it).  Returns whether it is exactly
 * the coarsening of fine.
 */
static bool
shadow_of (struct bmf *f, const struct bmf_state *st,
           const struct bmf_bitmap *bm, const struct bits *fine,
           uint32_t *crc, uint64_t *count)
{
  const unsigned sg = bmf_shadow_gbits (st, bm);
  struct bits sh = { .nr_bits = bmf_nr_bits (st->disk_size, sg) };
  struct bits want = { .nr_bits = sh.nr_bits };
  uint64_t n = bits_nr_words (sh.nr_bits);
  bool exact;

  sh.words = calloc (MAX (n, 1), 8);
  want.words = calloc (MAX (n, 1), 8);
  if (sh.words == NULL || want.words == NULL)
    fatal ("calloc");
  if (n && pread (f->fd, sh.words, n * 8, bm->shadow_offset) != (ssize_t) (n * 8))
    fatal ("pread shadow");
  if (fine->words) {
    bits_merge (&want, sg, fine, bm->gbits, st->disk_size);
    if (bm->recovery == BMF_RECOVER_ON_READ)
      bits_merge (&sh, sg, fine, bm->gbits, st->disk_size);
  }
  exact = memcmp (sh.words, want.words, n * 8) == 0;
  *crc = crc32c (sh.words, n * 8);
  *count = bits_count (&sh);
  free (sh.words);
  free (want.words);
  return exact;
}

/* Everything a user can see of a file, as text; NULL if it does not
 * open.  A shadow that is not exactly the coarsening of its bits is
 * shown as "INEXACT".
 */
static char *
describe (const char *path)
{
  struct bmf *f = bmf_open (path, BMF_LOCK_NONE, NULL);
  const struct bmf_state *st;
  char *s = NULL, *t;
  size_t i;

  if (f == NULL)
    return NULL;
  st = bmf_state (f);
  if (asprintf (&s, "size %" PRIu64 " sized %d open %d mode %u "
                "shadows %d cg %u\n", st->disk_size, st->sized, st->open,
                st->open_mode, st->has_shadows, st->cgbits) == -1)
    fatal ("asprintf");
  for (i = 0; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *bm = &st->bitmaps[i];
    struct bits b;
    uint32_t crc = 0, scrc = 0;
    uint64_t count = 0, scount = 0;
    bool exact = true;

    if (bmf_map (f, st, bm, false, &b, NULL) == -1)
      fatal ("bmf_map");
    if (b.words) {
      crc = crc32c (b.words, bits_nr_words (b.nr_bits) * 8);
      count = bits_count (&b);
    }
    if (st->has_shadows)
      exact = shadow_of (f, st, bm, &b, &scrc, &scount);
    bmf_unmap (&b);
    t = s;
    if (asprintf (&s, "%s%s g%u flags %" PRIu32 " bits %" PRIu64
                  " crc %08" PRIx32 " shadow %" PRIu64 " crc %08" PRIx32
                  "%s\n", t, bm->name, bm->gbits, bm->flags, count, crc,
                  scount, scrc, exact ? "" : " INEXACT") == -1)
      fatal ("asprintf");
    free (t);
  }
  bmf_close (f);
  return s;
}

static void
report (void *opaque, const char *problem)
{
  fprintf (stderr, "txn-cut: %s\n", problem);
}

/*----------------------------------------------------------------------
 * The transactions.
 */

static int
set_bits (struct bmf *f, const char *name, uint64_t first, uint64_t last)
{
  struct bits b;

  if (bmf_map (f, bmf_state (f), bmf_find (bmf_state (f), name), true, &b,
               NULL) == -1)
    return -1;
  bits_set_range (&b, first, last);
  bmf_unmap (&b);
  return 0;
}

static struct bmerr err;

static int op_add (struct bmf_txn *t)
{ return bmf_txn_add (t, "new", 12, &err); }
static int op_remove (struct bmf_txn *t)
{ return bmf_txn_remove (t, "b1", &err); }
static int op_clear (struct bmf_txn *t)
{ return bmf_txn_clear (t, "b0", &err); }
static int op_enable (struct bmf_txn *t)
{ return bmf_txn_enable (t, "b2", true, &err); }
static int op_disable (struct bmf_txn *t)
{ return bmf_txn_enable (t, "b0", false, &err); }
static int op_merge (struct bmf_txn *t)
{ return bmf_txn_merge (t, "b2", NULL, "b1", &err); }
static int op_grow (struct bmf_txn *t)
{ return bmf_txn_resize (t, DISK_SIZE + 3 * 1024 * 1024, &err); }
static int op_shrink (struct bmf_txn *t)
{ return bmf_txn_resize (t, DISK_SIZE / 3, &err); }
static int op_open (struct bmf_txn *t)
{ bmf_txn_set_open (t, true, BMF_STRICT); return 0; }
static int op_none (struct bmf_txn *t)
{ return 0; }
static int op_coarse (struct bmf_txn *t)
{ return bmf_txn_set_shadows (t, CGBITS, &err); }
static int op_recoarse (struct bmf_txn *t)
{ return bmf_txn_set_shadows (t, CGBITS + 2, &err); }
static int op_drop (struct bmf_txn *t)
{ return bmf_txn_set_shadows (t, 0, &err); }
static int op_several (struct bmf_txn *t)
{
  return bmf_txn_add (t, "new", 9, &err) ||
    bmf_txn_merge (t, "new", NULL, "b0", &err) ||
    bmf_txn_clear (t, "b0", &err) || bmf_txn_remove (t, "b2", &err) ||
    bmf_txn_resize (t, DISK_SIZE + 4096, &err);
}

/* Each on a copy of base: BASE, or REBOOTED, which opening marks
 * (so that the state in memory is not the state in the file).
 */
static const struct {
  const char *name;
  int (*apply) (struct bmf_txn *t);
  const char *base;
} txns[] = {
  { "add", op_add, BASE }, { "remove", op_remove, BASE },
  { "clear", op_clear, BASE }, { "enable", op_enable, BASE },
  { "disable", op_disable, BASE }, { "merge", op_merge, BASE },
  { "grow", op_grow, BASE }, { "shrink", op_shrink, BASE },
  { "open", op_open, BASE }, { "several", op_several, BASE },
  { "reboot", op_none, REBOOTED },
  /* The same on a file with shadows, and the shadows' own changes. */
  { "shadowed add", op_add, SHADOWED },
  { "shadowed remove", op_remove, SHADOWED },
  { "shadowed clear", op_clear, SHADOWED },
  { "shadowed enable", op_enable, SHADOWED },
  { "shadowed disable", op_disable, SHADOWED },
  { "shadowed merge", op_merge, SHADOWED },
  { "shadowed grow", op_grow, SHADOWED },
  { "shadowed shrink", op_shrink, SHADOWED },
  { "shadowed several", op_several, SHADOWED },
  { "coarse", op_coarse, BASE }, { "recoarse", op_recoarse, SHADOWED },
  { "drop", op_drop, SHADOWED }, { "power loss", op_none, POWERLOSS },
};

/* The base file: three bitmaps with bits, b2 disabled. */
static void
make_base (void)
{
  struct bmf *f;
  struct bmf_txn *t;

  unlink (BASE);
  f = bmf_create (BASE, 0644, true, DISK_SIZE, &err);
  if (f == NULL)
    goto fail;
  t = bmf_txn_begin (f, false, &err);
  if (t == NULL || bmf_txn_add (t, "b0", 16, &err) ||
      bmf_txn_add (t, "b1", 9, &err) || bmf_txn_add (t, "b2", 12, &err) ||
      bmf_txn_enable (t, "b2", false, &err) ||
      bmf_txn_commit (t, &err) == -1 || bmf_publish (f, &err) == -1)
    goto fail;
  if (set_bits (f, "b0", 3, 5) || set_bits (f, "b0", 128, 128) ||
      set_bits (f, "b1", 100, 5000) || set_bits (f, "b1", 16000, 16385) ||
      set_bits (f, "b2", 7, 7) || bmf_sync (f) == -1)
    exit (EXIT_FAILURE);
  bmf_close (f);
  return;

 fail:
  fprintf (stderr, "txn-cut: make_base: %s\n", err.msg);
  exit (EXIT_FAILURE);
}

/* Say that another boot of the machine had f open, in mode. */
static void
left_open_by_another_boot (struct bmf *f, enum bmf_durability mode)
{
  unsigned char buf[BMF_HEADER_SLOT];
  struct bmf_slot slot;
  struct bmf_txn *t;

  if ((t = bmf_txn_begin (f, false, &err)) == NULL)
    exit (EXIT_FAILURE);
  bmf_txn_set_open (t, true, mode);
  if (bmf_txn_commit (t, &err) == -1)
    exit (EXIT_FAILURE);
  if (pread (f->fd, buf, BMF_HEADER_LENGTH, f->slot * BMF_HEADER_SLOT) !=
      BMF_HEADER_LENGTH)
    fatal ("pread");
  bmf_decode_slot (buf, BMF_HEADER_LENGTH, &slot);
  slot.st.open_pid = 1;
  memset (slot.st.boot_id, 0, sizeof slot.st.boot_id);
  snprintf (slot.st.boot_id, sizeof slot.st.boot_id, "another boot");
  bmf_encode_header (&slot.st, slot.dir_crc, slot.shadow_crc, buf);
  if (pwrite (f->fd, buf, BMF_HEADER_SLOT, f->slot * BMF_HEADER_SLOT) !=
      BMF_HEADER_SLOT)
    fatal ("pwrite");
}

/* REBOOTED: BASE left open by a flush-mode run of another boot. */
static void
make_rebooted (void)
{
  struct bmf *f;

  copy_file (BASE, REBOOTED);
  f = bmf_open (REBOOTED, BMF_LOCK_EXCLUSIVE, &err);
  if (f == NULL)
    exit (EXIT_FAILURE);
  left_open_by_another_boot (f, BMF_FLUSH);
  bmf_close (f);
}

/* SHADOWED: BASE with coarse shadows. */
static void
make_shadowed (void)
{
  struct bmf *f;
  struct bmf_txn *t;

  copy_file (BASE, SHADOWED);
  f = bmf_open (SHADOWED, BMF_LOCK_EXCLUSIVE, &err);
  if (f == NULL || (t = bmf_txn_begin (f, false, &err)) == NULL ||
      bmf_txn_set_shadows (t, CGBITS, &err) == -1 ||
      bmf_txn_commit (t, &err) == -1) {
    fprintf (stderr, "txn-cut: make_shadowed: %s\n", err.msg);
    exit (EXIT_FAILURE);
  }
  bmf_close (f);
}

/* POWERLOSS: SHADOWED left open by a coarse run of another boot, whose
 * power loss kept a shadow bit whose bits were lost (b0, coarse
 * granule 6) and bits whose shadow bit was lost (b1, granule 12000 in
 * coarse granule 5): opening it recovers both in place.
 */
static void
make_powerloss (void)
{
  const struct bmf_state *st;
  struct bmf *f;
  struct bits sh;

  copy_file (SHADOWED, POWERLOSS);
  f = bmf_open (POWERLOSS, BMF_LOCK_EXCLUSIVE, &err);
  if (f == NULL)
    exit (EXIT_FAILURE);
  left_open_by_another_boot (f, BMF_COARSE);
  st = bmf_state (f);
  if (bmf_map_shadow (f, st, bmf_find (st, "b0"), &sh, &err) == -1)
    exit (EXIT_FAILURE);
  bits_set_range (&sh, 6, 6);
  bmf_unmap (&sh);
  if (set_bits (f, "b1", 12000, 12000) || bmf_sync (f) == -1)
    exit (EXIT_FAILURE);
  bmf_close (f);
}

/* Run transaction i on a fresh copy of its base file, with cut_at and
 * fail_at as set.  Returns the result of the commit.
 */
static int
run (size_t i)
{
  struct bmf *f;
  struct bmf_txn *t;
  int r;

  copy_file (txns[i].base, WORK);
  f = bmf_open (WORK, BMF_LOCK_EXCLUSIVE, &err);
  if (f == NULL)
    exit (EXIT_FAILURE);
  watched_fd = f->fd;
  nr_calls = 0;
  t = bmf_txn_begin (f, false, &err);
  if (t == NULL || txns[i].apply (t) == -1) {
    fprintf (stderr, "txn-cut: %s: %s\n", txns[i].name, err.msg);
    exit (EXIT_FAILURE);
  }
  r = bmf_txn_commit (t, &err);
  watched_fd = -1;
  bmf_close (f);
  return r;
}

static void
fail (const char *fs, ...)
{
  va_list args;

  fprintf (stderr, "txn-cut: FAIL: ");
  va_start (args, fs);
  vfprintf (stderr, fs, args);
  va_end (args);
  fputc ('\n', stderr);
  failures++;
}

/* The order power loss needs, from the log of one commit. */
static void
check_order (const char *name, unsigned n)
{
  unsigned i, headers = 0, h = 0;

  for (i = 0; i < n; ++i)
    if (is_header_write (&call_log[i])) {
      headers++;
      h = i;
    }
  if (headers != 1) {
    fail ("%s: %u header writes", name, headers);
    return;
  }
  if (h == 0 || call_log[h - 1].call != C_FDATASYNC)
    fail ("%s: the header is written without a sync before it", name);
  for (i = 0; i < h; ++i)
    if (call_log[i].call != C_FDATASYNC &&
        call_log[i].offset < BMF_FIRST_REGION)
      fail ("%s: call %u (%s) touches the header slots", name, i + 1,
            call_names[call_log[i].call]);
  if (h + 1 >= n || call_log[h + 1].call != C_FDATASYNC)
    fail ("%s: the header is not synced at once", name);
  for (i = h + 2; i < n; ++i)
    if (call_log[i].call != C_FTRUNCATE)
      fail ("%s: call %u (%s) after the header", name, i + 1,
            call_names[call_log[i].call]);
}

/* A fresh copy of the base file, opened for writing and watched. */
static struct bmf *
open_work (void)
{
  struct bmf *f;

  copy_file (BASE, WORK);
  f = bmf_open (WORK, BMF_LOCK_EXCLUSIVE, &err);
  if (f == NULL)
    exit (EXIT_FAILURE);
  watched_fd = f->fd;
  return f;
}

static int
commit_add (struct bmf *f, const char *name)
{
  struct bmf_txn *t;

  nr_calls = 0;
  t = bmf_txn_begin (f, false, &err);
  if (t == NULL || bmf_txn_add (t, name, 9, &err) == -1)
    exit (EXIT_FAILURE);
  return bmf_txn_commit (t, &err);
}

int
main (int argc, char *argv[])
{
  size_t i;
  unsigned k, n, cuts = 0;
  char *old, *new, *got;

  make_base ();
  make_rebooted ();
  make_shadowed ();
  make_powerloss ();

  for (i = 0; i < sizeof txns / sizeof txns[0]; ++i) {
    old = describe (txns[i].base);
    if (old == NULL)
      exit (EXIT_FAILURE);
    cut_at = fail_at = 0;
    if (run (i) == -1)
      exit (EXIT_FAILURE);
    n = nr_calls;
    if (n > MAX_LOG)
      exit (EXIT_FAILURE);
    check_order (txns[i].name, n);
    new = describe (WORK);
    if (strstr (old, "INEXACT") || (new && strstr (new, "INEXACT")))
      fail ("%s: a shadow is not the coarsening of its bits:\n%s%s",
            txns[i].name, old, new ? new : "");
    if (new == NULL || strcmp (old, new) == 0) {
      fail ("%s: %s", txns[i].name, new ? "the transaction changed nothing"
            : "the committed file does not open");
      free (old);
      continue;
    }
    printf ("%s: %u calls; new state:\n%s", txns[i].name, n, new);

    for (k = 1; k <= n; ++k) {
      cut_at = k;
      unlink (CUT);
      run (i);
      cuts++;
      if (bmf_check (CUT, report, NULL) != 0)
        fail ("%s: cut before call %u (%s): the file is broken",
              txns[i].name, k, call_names[call_log[k - 1].call]);
      got = describe (CUT);
      if (got == NULL || (strcmp (got, old) != 0 && strcmp (got, new) != 0))
        fail ("%s: cut before call %u (%s): neither the old nor the new "
              "state:\n%s", txns[i].name, k,
              call_names[call_log[k - 1].call], got ? got : "(none)\n");
      free (got);
    }
    free (new);
    free (old);
  }
  printf ("%u cuts\n", cuts);

  /* A commit fails at its last fdatasync, after its header write: the
   * header may be on disk or not.  A later commit of the same process,
   * cut just before its own header write, must not have overwritten
   * anything that header refers to.
   */
  {
    struct bmf *f;
    unsigned h;

    cut_at = fail_at = 0;
    f = open_work ();
    if (commit_add (f, "a") == -1)
      exit (EXIT_FAILURE);
    for (h = 0; h < nr_calls && !is_header_write (&call_log[h]); ++h)
      ;
    bmf_close (f);

    f = open_work ();
    fail_at = h + 2;            /* the fdatasync after the header */
    if (commit_add (f, "a") != -1)
      fail ("sync failure: the commit did not report the failed sync");
    fail_at = 0;
    cut_header = true;
    unlink (CUT);
    if (commit_add (f, "b") == -1)
      exit (EXIT_FAILURE);
    cut_header = false;
    watched_fd = -1;
    bmf_close (f);
    if (bmf_check (CUT, report, NULL) != 0)
      fail ("sync failure: a later commit, cut before its header write, "
            "left a broken file");
    else
      printf ("sync failure: the later commit, cut before its header "
              "write, left:\n%s", describe (CUT));
  }

  if (failures) {
    fprintf (stderr, "txn-cut: %d failures\n", failures);
    exit (EXIT_FAILURE);
  }
  printf ("txn-cut: all cuts left the old or the new state\n");
  exit (EXIT_SUCCESS);
}
