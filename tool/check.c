/* SPDX-License-Identifier: BSD-3-Clause */
/* check.c: dirtybitmap check: validate a bitmap file (magic, version,
 * checksums, sizes, regions, bitmap lengths) and list every problem.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <getopt.h>

#include "dirtybitmap.h"

static void __attribute__ ((noreturn))
check_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s check FILE\n"
"\n"
"Validate the bitmap file FILE.  Exit status 0 if it is sound, 1 with\n"
"a description of each problem otherwise.\n",
           prog);
  exit (status);
}

static void
report (void *opaque, const char *problem)
{
  bm_error ("%s", problem);
}

int
do_check (int argc, char *argv[])
{
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { NULL }
  };
  unsigned problems;
  int c;

  while ((c = getopt_long (argc, argv, "h", long_options, NULL)) != -1) {
    if (c == 'h')
      check_usage (EXIT_SUCCESS);
    return try_help ("check ");
  }
  if (optind != argc - 1)
    return bad_usage ("check ", "expecting one FILE");

  problems = bmf_check (argv[optind], report, NULL);
  if (problems) {
    bm_error ("%s: %u problem%s found", argv[optind],
              problems, problems == 1 ? "" : "s");
    return EXIT_FAILURE;
  }
  printf ("No errors were found in the bitmap file.\n");
  return EXIT_SUCCESS;
}
