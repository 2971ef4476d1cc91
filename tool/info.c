/* SPDX-License-Identifier: BSD-3-Clause */
/* info.c: dirtybitmap info: the disk size, the file's state and, for
 * each bitmap, its granularity, whether it records, whether it is
 * consistent and how many bytes are dirty.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <getopt.h>

#include "dirtybitmap.h"
#include "util.h"

static void __attribute__ ((noreturn))
info_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s info [--output=human|json] [-U] FILE\n"
"\n"
"Show the disk size recorded in the bitmap file FILE and, for each\n"
"bitmap, its granularity, whether it is recording, whether it is\n"
"consistent and how many bytes are dirty.\n"
"\n"
"  --output=json     machine-readable output (see dirtybitmap(1))\n"
"  -U, --force-share read a file that a running nbdkit holds (a snapshot)\n",
           prog);
  exit (status);
}

static void
add_dirty (uint64_t offset, uint64_t length, bool dirty, void *opaque)
{
  if (dirty)
    *(uint64_t *) opaque += length;
}

/* "in-use", "unclean" or "closed".  Somebody holds the write lock
 * (only possible with -U): it is open, whether or not it has recorded
 * a write yet.
 */
static const char *
file_state (const struct bmf *f)
{
  if (bmf_in_use (f))
    return "in-use";
  return bmf_unclean (f) ? "unclean" : "closed";
}

static int
bitmap_dirty_bytes (struct bmf *f, const struct bmf_bitmap *bm,
                    uint64_t *bytes)
{
  struct bmerr err;
  struct bits b;

  *bytes = 0;
  if (bmf_read_bits (f, bm, &b, &err) == -1) {
    report_error (&err);
    return -1;
  }
  bits_for_each_run (&b, bm->gbits, bmf_state (f)->disk_size, add_dirty,
                     bytes);
  bmf_unmap (&b);
  return 0;
}

/* A name as text that cannot fake lines or drive the terminal:
 * control characters and backslashes are escaped (\n, \t, \\,
 * \xHH); everything else, UTF-8 included, is printed as it is.
 */
static void
print_escaped (const char *s)
{
  for (; *s; ++s) {
    unsigned char c = *s;
    if (c == '\\')
      fputs ("\\\\", stdout);
    else if (c == '\n')
      fputs ("\\n", stdout);
    else if (c == '\t')
      fputs ("\\t", stdout);
    else if (c < 0x20 || c == 0x7f)
      printf ("\\x%02x", c);
    else
      putchar (c);
  }
}

static void
print_human (struct bmf *f, const char *state, const uint64_t *dirty)
{
  const struct bmf_state *st = bmf_state (f);
  char hs[32];
  size_t i;

  printf ("file: ");
  print_escaped (bmf_path (f));
  putchar ('\n');
  printf ("format version: %d\n", BMF_VERSION);
  if (st->sized)
    printf ("disk size: %" PRIu64 " (%s)\n",
            st->disk_size, human_size (st->disk_size, hs, sizeof hs));
  else
    printf ("disk size: unknown (no client has connected yet)\n");
  if (strcmp (state, "closed") == 0)
    printf ("state: closed cleanly\n");
  else if (strcmp (state, "in-use") == 0 && !st->open)
    printf ("state: in use\n");
  else if (strcmp (state, "in-use") == 0)
    printf ("state: in use (pid %" PRIu64 ", durability=%s)\n",
            st->open_pid, st->open_mode == BMF_STRICT ? "strict" : "flush");
  else
    printf ("state: not closed cleanly (pid %" PRIu64 ", durability=%s, %s)\n",
            st->open_pid, st->open_mode == BMF_STRICT ? "strict" : "flush",
            bmf_rebooted (f) ? "machine restarted since" : "same boot");
  printf ("bitmaps:%s\n", st->nr_bitmaps ? "" : " none");
  for (i = 0; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *bm = &st->bitmaps[i];
    bool consistent = !(bm->flags & BMF_INCONSISTENT);
    printf ("    [%zu]:\n", i);
    printf ("        name: ");
    print_escaped (bm->name);
    putchar ('\n');
    printf ("        granularity: %" PRIu64 "\n", UINT64_C (1) << bm->gbits);
    printf ("        recording: %s\n",
            (bm->flags & BMF_ENABLED) && consistent ? "true" : "false");
    printf ("        consistent: %s\n", consistent ? "true" : "false");
    printf ("        dirty bytes: %" PRIu64 " (%s)\n",
            dirty[i], human_size (dirty[i], hs, sizeof hs));
  }
}

static void
print_json (struct bmf *f, const char *state, const uint64_t *dirty)
{
  const struct bmf_state *st = bmf_state (f);
  size_t i;

  printf ("{\n    \"filename\": ");
  print_json_string (stdout, bmf_path (f));
  printf (",\n    \"format-version\": %d,\n", BMF_VERSION);
  if (st->sized)
    printf ("    \"disk-size\": %" PRIu64 ",\n", st->disk_size);
  else
    printf ("    \"disk-size\": null,\n");
  printf ("    \"state\": \"%s\",\n", state);
  printf ("    \"bitmaps\": [");
  for (i = 0; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *bm = &st->bitmaps[i];
    bool consistent = !(bm->flags & BMF_INCONSISTENT);
    printf ("%s\n        {\n            \"name\": ", i ? "," : "");
    print_json_string (stdout, bm->name);
    printf (",\n            \"granularity\": %" PRIu64 ",\n",
            UINT64_C (1) << bm->gbits);
    printf ("            \"recording\": %s,\n",
            (bm->flags & BMF_ENABLED) && consistent ? "true" : "false");
    printf ("            \"consistent\": %s,\n",
            consistent ? "true" : "false");
    printf ("            \"dirty-bytes\": %" PRIu64 "\n        }",
            dirty[i]);
  }
  printf ("%s]\n}\n", st->nr_bitmaps ? "\n    " : "");
}

int
do_info (int argc, char *argv[])
{
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "output", required_argument, NULL, 'o' },
    { "force-share", no_argument, NULL, 'U' },
    { NULL }
  };
  int c, json = 0;
  bool force = false;
  struct bmf *f;
  const struct bmf_state *st;
  uint64_t *dirty;
  const char *state;
  struct bmerr err;
  size_t i;

  while ((c = getopt_long (argc, argv, "hU", long_options, NULL)) != -1) {
    switch (c) {
    case 'h': info_usage (EXIT_SUCCESS);
    case 'U': force = true; break;
    case 'o':
      if ((json = parse_output ("info ", optarg)) == -1)
        return EXIT_FAILURE;
      break;
    default: return try_help ("info ");
    }
  }
  if (optind != argc - 1)
    return bad_usage ("info ", "expecting one FILE");

  f = bmf_open (argv[optind], force ? BMF_LOCK_NONE : BMF_LOCK_SHARED,
                &err);
  if (f == NULL) {
    report_error (&err);
    if (err.errnum == EBUSY)
      fprintf (stderr, "%s: use -U to read it while it is in use\n", prog);
    return EXIT_FAILURE;
  }
  st = bmf_state (f);
  dirty = calloc (MAX (st->nr_bitmaps, 1), sizeof *dirty);
  if (dirty == NULL) {
    perror (prog);
    bmf_close (f);
    return EXIT_FAILURE;
  }
  for (i = 0; i < st->nr_bitmaps; ++i)
    if (bitmap_dirty_bytes (f, &st->bitmaps[i], &dirty[i]) == -1) {
      free (dirty);
      bmf_close (f);
      return EXIT_FAILURE;
    }
  state = file_state (f);
  if (json)
    print_json (f, state, dirty);
  else
    print_human (f, state, dirty);
  free (dirty);
  bmf_close (f);
  return EXIT_SUCCESS;
}
