/* SPDX-License-Identifier: BSD-3-Clause */
/* copy.c: dirtybitmap copy, the pull-mode backup client: its usage,
 * its options, and the exit status.  The copy itself is copy_run
 * (copy.h); this file turns the command line into copy_options and
 * the copy_result into a summary on stdout and messages on stderr.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <getopt.h>

#include "dirtybitmap.h"
#include "msg.h"
#include "copy/copy.h"
#include "util.h"

static void __attribute__ ((noreturn))
copy_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s copy [-p|--progress] [--output=human|json] [--requests N]\n"
"                    [--connections N] [--request-size SIZE] [--full]\n"
"                    [--trim-source] SOURCE_URI TARGET\n"
"\n"
"Copy the dirty ranges of SOURCE_URI, an NBD export served through\n"
"nbdkit-dirtybitmap-filter, to TARGET (a file, a block device or an NBD\n"
"URI of the same size) that holds the previous copy: data is copied,\n"
"dirty ranges that read as zeroes are zeroed, clean ranges are not\n"
"touched.  Afterwards TARGET equals SOURCE_URI.  Blocks of zeroes are\n"
"not written as data, so the target stays sparse.  The summary goes to\n"
"stdout.\n"
"\n"
"  -p, --progress        show progress on stderr\n"
"  --output=human|json   the summary as a line of text (default) or as\n"
"                        a JSON object, printed even on failure\n"
"  --requests N          requests in flight per connection (default %d)\n"
"  --connections N       connections, if the servers allow multi-conn\n"
"                        (default: one per CPU, up to 4, if they do)\n"
"  --request-size SIZE   largest read and write (default 1M, or the\n"
"                        server's maximum block size if smaller)\n"
"  --full                copy every byte, whatever the extents say; a\n"
"                        missing TARGET file is created, and appears\n"
"                        only once the copy is complete\n"
"  --trim-source         trim each range on the source once it is on\n"
"                        the target (to release a backup view's space)\n"
"\n"
"SIGINT or SIGTERM stops the copy: exit status 1, and a new file is\n"
"not created.\n"
"\n"
"Example:\n"
"  nbdkit -r -U - --filter=dirtybitmap file disk.img bitmap=b0 \\\n"
"         --run '%s copy -p \"$uri\" backup.img'\n",
           prog, COPY_DEFAULT_REQUESTS, prog);
  exit (status);
}

static int
parse_count (const char *opt, const char *s, unsigned max, unsigned *out)
{
  char *end;
  unsigned long v;

  errno = 0;
  v = strtoul (s, &end, 10);
  if (errno || end == s || *end || *s == '-' || v < 1 || v > max) {
    bad_usage ("copy ", "%s %s: must be a number from 1 to %u", opt, s, max);
    return -1;
  }
  *out = v;
  return 0;
}

int
do_copy (int argc, char *argv[])
{
  enum { REQUESTS = 256, CONNECTIONS, REQUEST_SIZE, FULL, OUTPUT,
         TRIM_SOURCE };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "progress", no_argument, NULL, 'p' },
    { "output", required_argument, NULL, OUTPUT },
    { "requests", required_argument, NULL, REQUESTS },
    { "connections", required_argument, NULL, CONNECTIONS },
    { "request-size", required_argument, NULL, REQUEST_SIZE },
    { "full", no_argument, NULL, FULL },
    { "trim-source", no_argument, NULL, TRIM_SOURCE },
    { NULL }
  };
  struct copy_options o = { .requests = COPY_DEFAULT_REQUESTS };
  struct copy_result r;
  int opt, json = 0, status;
  int64_t v;

  while ((opt = getopt_long (argc, argv, "hp", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': copy_usage (EXIT_SUCCESS);
    case 'p': o.progress = true; break;
    case FULL: o.full = true; break;
    case TRIM_SOURCE: o.trim_source = true; break;
    case OUTPUT:
      if ((json = parse_output ("copy ", optarg)) == -1)
        return EXIT_FAILURE;
      break;
    case REQUESTS:
      if (parse_count ("--requests", optarg, COPY_MAX_REQUESTS,
                       &o.requests) == -1)
        return EXIT_FAILURE;
      break;
    case CONNECTIONS:
      if (parse_count ("--connections", optarg, COPY_MAX_CONNECTIONS,
                       &o.connections) == -1)
        return EXIT_FAILURE;
      break;
    case REQUEST_SIZE:
      v = parse_size (optarg);
      if (v < COPY_MIN_REQUEST_SIZE || v > COPY_MAX_REQUEST_SIZE ||
          !is_power_of_2 (v))
        return bad_usage ("copy ", "--request-size %s: must be a power "
                          "of 2 from 512 to 32M", optarg);
      o.request_size = v;
      break;
    default:
      /* getopt has said what is wrong. */
      return try_help ("copy ");
    }
  }
  if (optind != argc - 2)
    return bad_usage ("copy ", "expecting SOURCE_URI and TARGET");
  o.source = argv[optind];
  o.target = argv[optind + 1];
  if (!is_nbd_uri (o.source))
    return bad_usage ("copy ", "%s: SOURCE_URI must be an NBD URI "
                      "(nbd://... or nbd+unix://...)", o.source);

  status = copy_run (&o, &r) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
  copy_print_failure (&o, &r);
  copy_print_summary (stdout, &o, &r, json);
  copy_result_free (&r);
  if (fflush (stdout) == EOF) {
    bm_error ("copy: stdout: %s", strerror (errno));
    status = EXIT_FAILURE;
  }
  return status;
}
