/* SPDX-License-Identifier: BSD-3-Clause */
/* resize.c: dirtybitmap resize: the disk file and every bitmap of its
 * bitmap file resized in one step, as qemu-img resize does for a qcow2
 * image and its bitmaps: a grown area is dirty, a shrink cuts them,
 * and the disk's identity is recorded (lib/identity.h), so that the
 * next start trusts bitmaps that saw the resize.
 *
 * The order, so that a crash anywhere leaves either the old state, or
 * the new one, or every enabled bitmap inconsistent, never bitmaps
 * that trust a disk they did not see: (1) judge the disk; (2) resize
 * the disk file and sync it; (3) commit the bitmaps at the new size
 * with the disk's new identity.  A crash between (2) and (3) leaves
 * the old header, whose identity the resized disk no longer has: the
 * next start finds it written without the filter, and the next resize
 * a disk resized without its bitmaps, which it resizes only to the
 * size it has (check_sizes): that finishes the interrupted resize.
 *
 * The disk may be given as a symlink, which is followed (as qemu-img
 * and nbdkit's file plugin do); it is opened once, and resized through
 * that descriptor.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <unistd.h>
#include <sys/stat.h>

#include "dirtybitmap.h"
#include "identity.h"
#include "txn.h"

static void __attribute__ ((noreturn))
resize_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s resize [--shrink] [--disk DISKFILE] FILE [+|-]SIZE\n"
"\n"
"Resize the disk that the bitmap file FILE describes, and every bitmap\n"
"of FILE with it, while nbdkit is stopped: a grown area is dirty in\n"
"every bitmap, a shrink cuts them, and the bitmaps stay trusted.  With\n"
"+ or -, SIZE is added to or taken from the disk's size.\n"
"\n"
"  --shrink         allow the disk to shrink (what is cut is lost)\n"
"  --disk DISKFILE  the disk (default: FILE less \".bitmaps\"); a symlink\n"
"                   is followed\n"
"\n"
"Example:\n"
"  %s resize disk.img.bitmaps +10G\n",
           prog, prog);
  exit (status);
}

/* The new size from [+|-]SIZE and the current size: -1 if invalid. */
static int64_t
new_size (const char *arg, uint64_t now)
{
  int64_t n = parse_size (arg[0] == '+' || arg[0] == '-' ? arg + 1 : arg);

  if (n < 0)
    return -1;
  if (arg[0] == '+')
    return (uint64_t) n > BMF_MAX_DISK_SIZE - now ? -1 : (int64_t) (now + n);
  if (arg[0] == '-')
    return (uint64_t) n > now ? -1 : (int64_t) (now - n);
  return n;
}

/* Resize the disk file open on fd to size bytes and make that
 * durable.
 */
static int
resize_disk (int fd, const char *disk, uint64_t size)
{
  if (ftruncate (fd, size) == -1 || fsync (fd) == -1) {
    bm_error ("resize: %s: %s", disk, strerror (errno));
    return -1;
  }
  return 0;
}

/* Steps (2) and (3) of the top of this file: the disk, of now bytes,
 * and its bitmaps to size bytes.
 */
static int
resize_both (struct bmf *f, int fd, const char *disk, uint64_t now,
             uint64_t size)
{
  struct bmf_txn *t;
  struct bmerr err;

  /* A file that has never been told the disk's size first learns the
   * size the disk has, as the filter would, so that what grows beyond
   * it is dirty: it is new since the bitmaps began.
   */
  t = bmf_txn_begin (f, false, &err);
  if (t == NULL ||
      (!bmf_txn_state (t)->sized && bmf_txn_resize (t, now, &err) == -1) ||
      bmf_txn_resize (t, size, &err) == -1) {
    bm_error ("%s", err.msg);
    bmf_txn_abort (t);
    return -1;
  }
  if (resize_disk (fd, disk, size) == -1) {
    bmf_txn_abort (t);
    return -1;
  }
  bmf_disk_written (f);
  /* Any bit of a run that left the file open is durable with this
   * commit, as when the filter starts.
   */
  bmf_txn_set_open (t, false, BMF_FLUSH);
  disk_seen (t, disk);
  if (bmf_txn_commit (t, &err) == -1) {
    bm_error ("%s", err.msg);
    bm_error ("resize: %s is resized, but its bitmaps could "
              "not be: the next start finds the disk written without the "
              "filter, and every enabled bitmap inconsistent", disk);
    return -1;
  }
  return 0;
}

/* The disk file, opened to be resized: fd, and its stat in *sb; or
 * -1 (said).  A symlink is followed, as qemu-img resize and nbdkit's
 * file plugin follow it (only the bitmap file, which the tool creates
 * and writes itself, refuses them).
 */
static int
open_disk (const char *disk, struct stat *sb)
{
  int fd;

  if (stat (disk, sb) == -1)
    goto errno_out;
  if (!S_ISREG (sb->st_mode))
    goto not_regular;
  fd = open (disk, O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd == -1)
    goto errno_out;
  if (fstat (fd, sb) == -1) {
    close (fd);
    goto errno_out;
  }
  if (S_ISREG (sb->st_mode))
    return fd;
  close (fd);
 not_regular:
  bm_error ("resize: %s: not a regular file", disk);
  return -1;

 errno_out:
  bm_error ("resize: %s: %s", disk, strerror (errno));
  return -1;
}

/* Whether the disk (of sb) is the size its bitmaps cover: 0 if so; 1
 * if it was resized without them (the size they recorded for it is
 * theirs: a resize interrupted between its two steps, or another
 * program), which only a resize to the size it has now may follow;
 * -1 if not otherwise (said).
 */
static int
check_sizes (struct bmf *f, const char *disk, const struct stat *sb)
{
  const struct bmf_state *st = bmf_state (f);
  const uint64_t now = sb->st_size;

  if (!st->sized || st->disk_size == now)
    return 0;
  if (st->has_disk_id && st->disk_id.size == st->disk_size)
    return 1;
  if (!st->has_disk_id)
    bm_error ("resize: %s: its bitmaps cover %" PRIu64 " bytes, "
              "but %s is %" PRIu64 " bytes: either a filter below changes "
              "its size (partition, truncate: resize it through nbdkit, or "
              "with its plugin's own tools), or it was resized without its "
              "bitmaps (a dirtybitmap resize interrupted between its two "
              "steps, or another program: serve it once through the "
              "filter, which takes its size and marks every enabled bitmap "
              "inconsistent)", bmf_path (f), st->disk_size, disk,
              now);
  /* Where a filter below changes the size (partition, truncate), the
   * file is not the disk that the bitmaps cover.
   */
  else
    bm_error ("resize: %s: its bitmaps cover %" PRIu64 " bytes, "
              "but %s is %" PRIu64 " bytes: resize it through nbdkit, or "
              "with its plugin's own tools", bmf_path (f),
              st->disk_size, disk, now);
  return -1;
}

/* Why a disk resized without its bitmaps is refused, and the way out. */
static void
say_resized_outside (struct bmf *f, const char *disk, const char *given,
                     uint64_t now)
{
  bm_error ("resize: %s: its bitmaps cover %" PRIu64 " bytes, "
            "the size %s had when they last recorded it, but it is %" PRIu64
            " bytes now: it was resized without them (a dirtybitmap resize "
            "interrupted between its two steps, or another program), so "
            "every enabled bitmap is to be taken as inconsistent.  To bring "
            "the bitmaps to the disk as it is: %s resize%s%s %s %" PRIu64
            "", bmf_path (f), bmf_state (f)->disk_size, disk, now,
            prog, given ? " --disk " : "", given ? given : "", bmf_path (f),
            now);
}

/* Open the bitmap file path for writing and its disk (given, or path
 * less ".bitmaps"), which must be a regular file: *f, *disk (free it),
 * its fd, stat and check_sizes in *outside; or -1 (said).
 */
static int
open_both (const char *path, const char *given, struct bmf **f,
           char **disk, struct stat *sb, bool *outside)
{
  struct bmerr err;
  int fd = -1, r;

  *disk = NULL;
  *f = bmf_open (path, BMF_LOCK_EXCLUSIVE, &err);
  if (*f == NULL) {
    bm_error ("%s", err.msg);
    if (err.errnum == EBUSY)
      bm_error ("resize the disk while nbdkit is stopped (a "
                "disk that grows or shrinks while served is followed by "
                "the filter)");
    return -1;
  }
  *disk = find_disk (path, given);
  if (*disk == NULL)
    bm_error ("resize: %s: which disk it describes is not "
              "known: give --disk DISKFILE", path);
  else if ((fd = open_disk (*disk, sb)) >= 0 &&
           (r = check_sizes (*f, *disk, sb)) >= 0) {
    *outside = r == 1;
    return fd;
  }
  if (fd >= 0)
    close (fd);
  bmf_close (*f);
  *f = NULL;
  free (*disk);
  *disk = NULL;
  return -1;
}

int
do_resize (int argc, char *argv[])
{
  enum { SHRINK = 256, DISK };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "shrink", no_argument, NULL, SHRINK },
    { "disk", required_argument, NULL, DISK },
    { NULL }
  };
  const char *given = NULL;
  bool shrink = false, outside;
  char *disk;
  struct bmf *f;
  struct stat sb;
  int64_t size;
  int c, fd, r = EXIT_FAILURE;

  /* "+" first: a "-1G" after FILE is SIZE, not an option. */
  while ((c = getopt_long (argc, argv, "+h", long_options, NULL)) != -1) {
    switch (c) {
    case 'h': resize_usage (EXIT_SUCCESS);
    case SHRINK: shrink = true; break;
    case DISK: given = optarg; break;
    default: return try_help ("resize ");
    }
  }
  if (optind != argc - 2)
    return bad_usage ("resize ", "expecting FILE and SIZE");
  fd = open_both (argv[optind], given, &f, &disk, &sb, &outside);
  if (fd == -1)
    return EXIT_FAILURE;

  size = new_size (argv[optind + 1], sb.st_size);
  if (size < 0 || (uint64_t) size > BMF_MAX_DISK_SIZE)
    bm_error ("resize: %s: invalid size",
              argv[optind + 1]);
  else if ((uint64_t) size < (uint64_t) sb.st_size && !shrink)
    bm_error ("resize: Use the --shrink option to perform a "
              "shrink operation.");
  /* Resized without its bitmaps: they may follow it to the size it
   * has (which finishes an interrupted resize), not in the same step
   * to another.
   */
  else if (outside && size != sb.st_size)
    say_resized_outside (f, disk, given, sb.st_size);
  else {
    judge_disk (f, disk, true);
    if (resize_both (f, fd, disk, sb.st_size, size) == 0) {
      printf ("Image resized.\n");
      r = EXIT_SUCCESS;
    }
  }
  close (fd);
  bmf_close (f);
  free (disk);
  return r;
}
