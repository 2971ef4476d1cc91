/* SPDX-License-Identifier: BSD-3-Clause */
/* unit-restore.c: the restore record of a bitmap file (lib/restore-record.c,
 * lib/txn-restore.c), through the file: a restore begins on a sized
 * disk only, dirties every recording bitmap all over (and no other),
 * keeps its source and restored bits across a reopen, forbids a
 * resize while it runs, and once complete keeps only its source.  A
 * record whose source does not match its checksum is refused.  Each
 * failed check prints what was expected and what came; the exit
 * status is 1 if any failed.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

#include "bmfile.h"
#include "restore-record.h"
#include "txn.h"

static unsigned checks, failures;

#define CHECK(what, cond)                                               \
  do {                                                                  \
    checks++;                                                           \
    if (!(cond)) {                                                      \
      printf ("FAIL: %s\n", what);                                      \
      failures++;                                                       \
    }                                                                   \
  } while (0)

#define CHECK_EQ(what, want, got)                                       \
  do {                                                                  \
    uint64_t want_ = (want), got_ = (got);                              \
    checks++;                                                           \
    if (want_ != got_) {                                                \
      printf ("FAIL: %s: expected %" PRIu64 ", got %" PRIu64 "\n",      \
              what, want_, got_);                                       \
      failures++;                                                       \
    }                                                                   \
  } while (0)

/* lib/ speaks through these (msg.h); nothing here needs them. */
void
bm_error (const char *fs, ...)
{
}

void
bm_debug (const char *fs, ...)
{
}

#define SIZE ((UINT64_C (1) << 20) + 4096)      /* 17 granules of 64K */
#define SOURCE "nbd+unix:///?socket=/run/point.sock"

static char path[64];

static struct bmf *
reopen (struct bmf *f)
{
  struct bmerr err;

  bmf_close (f);
  f = bmf_open (path, BMF_LOCK_EXCLUSIVE, &err);
  if (f == NULL) {
    printf ("FAIL: reopen: %s\n", err.msg);
    exit (EXIT_FAILURE);
  }
  return f;
}

static uint64_t
dirty_bytes (struct bmf *f, const char *name)
{
  const struct bmf_state *st = bmf_state (f);
  struct bmerr err;
  struct bits b;
  uint64_t n;

  if (bmf_read_bits (f, bmf_find (st, name), &b, &err) == -1)
    return UINT64_MAX;
  n = bmf_restored_bytes (&b, bmf_find (st, name)->gbits, st->disk_size);
  bmf_unmap (&b);
  return n;
}

/* A file with a recording bitmap (on) and a disabled one (off). */
static struct bmf *
make_file (void)
{
  struct bmerr err;
  struct bmf_txn *t;
  struct bmf *f;

  f = bmf_create (path, 0600, true, SIZE, &err);
  if (f == NULL || bmf_publish (f, &err) == -1 ||
      (t = bmf_txn_begin (f, false, &err)) == NULL ||
      bmf_txn_add (t, "on", 12, &err) == -1 ||
      bmf_txn_add (t, "off", 16, &err) == -1 ||
      bmf_txn_enable (t, "off", false, &err) == -1 ||
      bmf_txn_commit (t, &err) == -1) {
    printf ("FAIL: make the file: %s\n", err.msg);
    exit (EXIT_FAILURE);
  }
  return f;
}

static void
test_unsized (void)
{
  struct bmerr err;
  struct bmf_txn *t;
  struct bmf *f;

  f = bmf_create (path, 0600, false, 0, &err);
  t = f ? bmf_txn_begin (f, false, &err) : NULL;
  CHECK ("an unsized file", t != NULL);
  if (t) {
    CHECK ("a restore needs the disk's size",
           bmf_txn_restore_begin (t, SOURCE, 16, &err) == -1 &&
           strcmp (err.msg, "the disk's size is not known") == 0);
    bmf_txn_abort (t);
  }
  bmf_close (f);                /* unpublished: removed */
}

/* Begin, set some restored bits, commit; return the file reopened. */
static struct bmf *
test_begin (struct bmf *f)
{
  const struct bmf_state *st;
  struct bmerr err;
  struct bmf_txn *t;
  struct bits b;

  t = bmf_txn_begin (f, false, &err);
  CHECK ("an empty source is refused",
         bmf_txn_restore_begin (t, "", 16, &err) == -1);
  CHECK ("begin", bmf_txn_restore_begin (t, SOURCE, 16, &err) == 0);
  CHECK ("a second begin in one transaction is refused",
         bmf_txn_restore_begin (t, SOURCE, 16, &err) == -1);
  CHECK ("commit", bmf_txn_commit (t, &err) == 0);
  f = reopen (f);
  st = bmf_state (f);
  CHECK ("running after a reopen",
         st->restore.state == BMF_RESTORE_RUNNING);
  CHECK ("its source", strcmp (st->restore.source, SOURCE) == 0);
  CHECK_EQ ("a recording bitmap is all dirty", SIZE, dirty_bytes (f, "on"));
  CHECK_EQ ("a disabled bitmap is as it was", 0, dirty_bytes (f, "off"));

  CHECK ("map the restored bits", bmf_map_restored (f, true, &b, &err) == 0);
  CHECK_EQ ("granules", 17, b.nr_bits);
  CHECK_EQ ("nothing restored yet", 0, bmf_restored_bytes (&b, 16, SIZE));
  bits_set_range (&b, 3, 3);
  bits_set_range (&b, 16, 16);          /* the short last one */
  bmf_unmap (&b);
  f = reopen (f);
  CHECK ("map the restored bits again",
         bmf_map_restored (f, false, &b, &err) == 0);
  CHECK_EQ ("the bits set in place are kept", 65536 + 4096,
            bmf_restored_bytes (&b, 16, SIZE));
  bmf_unmap (&b);
  return f;
}

static struct bmf *
test_running (struct bmf *f)
{
  struct bmerr err;
  struct bmf_txn *t;

  t = bmf_txn_begin (f, false, &err);
  CHECK ("no resize while a restore runs",
         bmf_txn_resize (t, 2 * SIZE, &err) == -1 && err.errnum == EBUSY);
  /* Other changes carry the record along. */
  CHECK ("add a bitmap", bmf_txn_add (t, "after", 16, &err) == 0);
  CHECK ("commit", bmf_txn_commit (t, &err) == 0);
  f = reopen (f);
  CHECK ("still running", bmf_state (f)->restore.state ==
         BMF_RESTORE_RUNNING);
  CHECK_EQ ("a bitmap added after the begin is clean", 0,
            dirty_bytes (f, "after"));
  return f;
}

static struct bmf *
test_done (struct bmf *f)
{
  const struct bmf_state *st;
  struct bmerr err;
  struct bmf_txn *t;

  t = bmf_txn_begin (f, false, &err);
  CHECK ("done", bmf_txn_restore_done (t, &err) == 0);
  CHECK ("done twice is refused", bmf_txn_restore_done (t, &err) == -1);
  CHECK ("commit", bmf_txn_commit (t, &err) == 0);
  f = reopen (f);
  st = bmf_state (f);
  CHECK ("complete after a reopen", st->restore.state == BMF_RESTORE_DONE);
  CHECK ("its source is kept", strcmp (st->restore.source, SOURCE) == 0);
  CHECK_EQ ("only the source's page", BMF_SOURCE_PAGE,
            st->restore.region.length);
  t = bmf_txn_begin (f, false, &err);
  CHECK ("resize once complete", bmf_txn_resize (t, 2 * SIZE, &err) == 0);
  CHECK ("commit", bmf_txn_commit (t, &err) == 0);
  return f;
}

/* A source whose bytes do not match the header's checksum. */
static void
test_corrupt (struct bmf *f)
{
  const uint64_t at = bmf_state (f)->restore.region.offset;
  struct bmerr err;
  int fd;

  bmf_close (f);
  fd = open (path, O_WRONLY);
  CHECK ("corrupt the source", fd >= 0 && pwrite (fd, "X", 1, at) == 1);
  close (fd);
  f = bmf_open (path, BMF_LOCK_SHARED, &err);
  CHECK ("a corrupt source is refused", f == NULL &&
         strstr (err.msg, "restore record: source checksum mismatch"));
  bmf_close (f);
}

int
main (void)
{
  struct bmf *f;

  snprintf (path, sizeof path, "unit-restore-%d.bitmaps", (int) getpid ());
  test_unsized ();
  f = make_file ();
  f = test_begin (f);
  f = test_running (f);
  f = test_done (f);
  test_corrupt (f);
  unlink (path);
  printf ("unit-restore: %u checks, %u failed\n", checks, failures);
  return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
