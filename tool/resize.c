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
 * next start finds it written without the filter.
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
"  --disk DISKFILE  the disk (default: FILE less \".bitmaps\")\n"
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

/* Resize the disk file to size bytes and make that durable. */
static int
resize_disk (const char *disk, uint64_t size)
{
  int fd = open (disk, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);

  if (fd == -1 || ftruncate (fd, size) == -1 || fsync (fd) == -1) {
    fprintf (stderr, "%s: resize: %s: %s\n", prog, disk, strerror (errno));
    if (fd >= 0)
      close (fd);
    return -1;
  }
  close (fd);
  return 0;
}

/* Steps (2) and (3) of the top of this file: the disk, of now bytes,
 * and its bitmaps to size bytes.
 */
static int
resize_both (struct bmf *f, const char *disk, uint64_t now, uint64_t size)
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
    report_error (&err);
    bmf_txn_abort (t);
    return -1;
  }
  if (resize_disk (disk, size) == -1) {
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
    report_error (&err);
    fprintf (stderr, "%s: resize: %s is resized, but its bitmaps could "
             "not be: the next start finds the disk written without the "
             "filter, and every enabled bitmap inconsistent\n", prog, disk);
    return -1;
  }
  return 0;
}

/* Open the bitmap file path for writing and find its disk (given, or
 * path less ".bitmaps"), which must be a regular file of the size its
 * bitmaps cover: *f, *disk (free it) and its stat, or -1 (said).
 */
static int
open_both (const char *path, const char *given, struct bmf **f,
           char **disk, struct stat *sb)
{
  const struct bmf_state *st;
  struct bmerr err;

  *disk = NULL;
  *f = bmf_open (path, BMF_LOCK_EXCLUSIVE, &err);
  if (*f == NULL) {
    report_error (&err);
    if (err.errnum == EBUSY)
      fprintf (stderr, "%s: resize the disk while nbdkit is stopped (a "
               "disk that grows or shrinks while served is followed by "
               "the filter)\n", prog);
    return -1;
  }
  *disk = find_disk (path, given);
  if (*disk == NULL)
    fprintf (stderr, "%s: resize: %s: which disk it describes is not "
             "known: give --disk DISKFILE\n", prog, path);
  else if (stat (*disk, sb) == -1)
    fprintf (stderr, "%s: resize: %s: %s\n", prog, *disk, strerror (errno));
  else if (!S_ISREG (sb->st_mode))
    fprintf (stderr, "%s: resize: %s: not a regular file\n", prog, *disk);
  /* Where a filter below changes the size (partition, truncate), the
   * file is not the disk that the bitmaps cover.
   */
  else if ((st = bmf_state (*f))->sized &&
           st->disk_size != (uint64_t) sb->st_size)
    fprintf (stderr, "%s: resize: %s: its bitmaps cover %" PRIu64 " bytes, "
             "but %s is %" PRIu64 " bytes: resize it through nbdkit, or "
             "with its plugin's own tools\n", prog, path, st->disk_size,
             *disk, (uint64_t) sb->st_size);
  else
    return 0;
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
  bool shrink = false;
  char *disk;
  struct bmf *f;
  struct stat sb;
  int64_t size;
  int c, r = EXIT_FAILURE;

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
  if (open_both (argv[optind], given, &f, &disk, &sb) == -1)
    return EXIT_FAILURE;

  size = new_size (argv[optind + 1], sb.st_size);
  if (size < 0 || (uint64_t) size > BMF_MAX_DISK_SIZE)
    fprintf (stderr, "%s: resize: %s: invalid size\n", prog,
             argv[optind + 1]);
  else if ((uint64_t) size < (uint64_t) sb.st_size && !shrink)
    fprintf (stderr, "%s: resize: Use the --shrink option to perform a "
             "shrink operation.\n", prog);
  else {
    judge_disk (f, disk, true);
    if (resize_both (f, disk, sb.st_size, size) == 0) {
      printf ("Image resized.\n");
      r = EXIT_SUCCESS;
    }
  }
  bmf_close (f);
  free (disk);
  return r;
}
