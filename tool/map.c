/* SPDX-License-Identifier: BSD-3-Clause */
/* map.c: dirtybitmap map: the dirty ranges of a bitmap, in the shape
 * nbdinfo --map prints them for the filter (dirty is "data", clean is
 * "hole"; the file alone cannot tell which dirty ranges now read as
 * zeroes).
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <errno.h>
#include <getopt.h>

#include "dirtybitmap.h"

static void __attribute__ ((noreturn))
map_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s map [--output=human|json] [-U] [--disk DISKFILE] FILE BITMAP\n"
"\n"
"Print the dirty (data) and clean (hole) ranges of bitmap BITMAP of the\n"
"bitmap file FILE, as nbdinfo --map prints them for the filter.\n"
"\n"
"  --output=json     the JSON of nbdinfo --map --json\n"
"  -U, --force-share read a file that a running nbdkit holds (a snapshot)\n"
"  --disk DISKFILE   the disk that FILE describes (default: FILE less\n"
"                    \".bitmaps\"), checked for writes made without the\n"
"                    filter\n",
           prog);
  exit (status);
}

static void
print_run (uint64_t offset, uint64_t length, bool dirty, void *opaque)
{
  int *json = opaque;
  const unsigned type = dirty ? 0 : 1;
  const char *descr = dirty ? "data" : "hole";

  if (*json < 0)
    printf ("%10" PRIu64 "  %10" PRIu64 "  %3u  %s\n",
            offset, length, type, descr);
  else {
    printf ("%s{ \"offset\": %" PRIu64 ", \"length\": %" PRIu64
            ", \"type\": %u, \"description\": \"%s\"}",
            *json > 1 ? ",\n" : "", offset, length, type, descr);
    *json = 2;
  }
}

int
do_map (int argc, char *argv[])
{
  enum { DISK = 256 };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "output", required_argument, NULL, 'o' },
    { "force-share", no_argument, NULL, 'U' },
    { "disk", required_argument, NULL, DISK },
    { NULL }
  };
  const char *disk = NULL;
  int c, json = 0, r = EXIT_FAILURE;
  bool force = false;
  const struct bmf_bitmap *bm;
  struct bmf *f;
  struct bmerr err;
  struct bits b;

  while ((c = getopt_long (argc, argv, "hU", long_options, NULL)) != -1) {
    switch (c) {
    case 'h': map_usage (EXIT_SUCCESS);
    case 'U': force = true; break;
    case DISK: disk = optarg; break;
    case 'o':
      if ((json = parse_output ("map ", optarg)) == -1)
        return EXIT_FAILURE;
      break;
    default: return try_help ("map ");
    }
  }
  if (optind != argc - 2)
    return bad_usage ("map ", "expecting FILE and BITMAP");

  f = bmf_open (argv[optind], force ? BMF_LOCK_NONE : BMF_LOCK_SHARED,
                &err);
  if (f == NULL) {
    bm_error ("%s", err.msg);
    if (err.errnum == EBUSY)
      bm_error ("use -U to read it while it is in use");
    return EXIT_FAILURE;
  }
  judge_disk_read (f, disk);
  bm = bmf_find (bmf_state (f), argv[optind + 1]);
  if (bm == NULL)
    bm_error ("bitmap %s not found in %s",
              argv[optind + 1], bmf_path (f));
  else if (bm->flags & BMF_INCONSISTENT)
    bm_error ("bitmap %s is inconsistent: %s; remove it and "
              "take a full backup", bm->name,
              bmf_inconsistent_reason (f));
  else if (bmf_read_bits (f, bm, &b, &err) == -1)
    bm_error ("%s", err.msg);
  else {
    json = json ? 1 : -1;
    if (json > 0)
      printf ("[\n");
    bits_for_each_run (&b, bm->gbits, bmf_state (f)->disk_size, print_run,
                       &json);
    if (json > 0)
      printf ("\n]\n");
    bmf_unmap (&b);
    r = EXIT_SUCCESS;
  }
  bmf_close (f);
  return r;
}
