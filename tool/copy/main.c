/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/main.c: dirtybitmap copy, the pull-mode backup client: its usage,
 * its options, and the exit status.  The copy itself is copy_run
 * (copy.h); this file turns the command line into copy_options and
 * the copy_result into a summary on stdout and messages on stderr.
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
#include "msg.h"
#include "copy/copy.h"
#include "sums.h"
#include "util.h"

static void __attribute__ ((noreturn))
copy_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s copy [-p|--progress] [--output=human|json] [--requests N]\n"
"                    [--connections N] [--request-size SIZE] [--full]\n"
"                    [--trim-source] [--sums FILE [--base-sums FILE]]\n"
"                    SOURCE_URI TARGET\n"
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
"  --sums FILE           write the checksums of the target's image to\n"
"                        FILE (with --full, or updating --base-sums)\n"
"  --base-sums FILE      the checksums of the previous copy\n"
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

/* The checksums a copy of source will leave: the set of base (for the
 * same disk, updated by the copy), or a new one.  NULL (said) on
 * failure.
 */
static struct sums *
new_sums (const char *source, const char *base)
{
  struct sums *old = NULL, *s;
  struct bmerr err = { 0 };
  int64_t size;

  if ((size = copy_export_size (source, &err)) == -1 ||
      (base && sums_load (base, &old, &err) == -1)) {
    bm_error ("copy: %s", err.msg);
    return NULL;
  }
  if (old && old->disk_size != (uint64_t) size) {
    bm_error ("copy: --base-sums %s: the checksums of a disk of %" PRIu64
              " bytes, but %s is %" PRIi64 " bytes", base, old->disk_size,
              source, size);
    sums_free (old);
    return NULL;
  }
  s = sums_new (size, old ? old->chunk : SUMS_MIN_CHUNK,
                old ? old->checkpoint : "", source);
  if (s && old)
    sums_copy_digests (s, old);
  if (s == NULL)
    bm_error ("copy: %s", strerror (ENOMEM));
  sums_free (old);
  return s;
}

/* What the command line asks for. */
struct cmdline {
  struct copy_options o;
  const char *sums_path;        /* --sums, or NULL */
  const char *base_path;        /* --base-sums, or NULL */
  int json;                     /* --output=json */
};

/* The options into cl.  -1 (reported) on a usage error. */
static int
parse_options (int argc, char *argv[], struct cmdline *cl)
{
  enum { REQUESTS = 256, CONNECTIONS, REQUEST_SIZE, FULL, OUTPUT,
         TRIM_SOURCE, SUMS, BASE_SUMS };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "progress", no_argument, NULL, 'p' },
    { "output", required_argument, NULL, OUTPUT },
    { "requests", required_argument, NULL, REQUESTS },
    { "connections", required_argument, NULL, CONNECTIONS },
    { "request-size", required_argument, NULL, REQUEST_SIZE },
    { "full", no_argument, NULL, FULL },
    { "trim-source", no_argument, NULL, TRIM_SOURCE },
    { "sums", required_argument, NULL, SUMS },
    { "base-sums", required_argument, NULL, BASE_SUMS },
    { NULL }
  };
  struct copy_options *o = &cl->o;
  int opt;
  int64_t v;

  while ((opt = getopt_long (argc, argv, "hp", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': copy_usage (EXIT_SUCCESS);
    case 'p': o->progress = true; break;
    case FULL: o->full = true; break;
    case TRIM_SOURCE: o->trim_source = true; break;
    case SUMS: cl->sums_path = optarg; break;
    case BASE_SUMS: cl->base_path = optarg; break;
    case OUTPUT:
      if ((cl->json = parse_output ("copy ", optarg)) == -1)
        return -1;
      break;
    case REQUESTS:
      if (parse_count ("copy ", "--requests", optarg, COPY_MAX_REQUESTS,
                       &o->requests) == -1)
        return -1;
      break;
    case CONNECTIONS:
      if (parse_count ("copy ", "--connections", optarg,
                       COPY_MAX_CONNECTIONS, &o->connections) == -1)
        return -1;
      break;
    case REQUEST_SIZE:
      v = parse_size (optarg);
      if (v < COPY_MIN_REQUEST_SIZE || v > COPY_MAX_REQUEST_SIZE ||
          !is_power_of_2 (v)) {
        bad_usage ("copy ", "--request-size %s: must be a power of 2 "
                   "from 512 to 32M", optarg);
        return -1;
      }
      o->request_size = v;
      break;
    default:
      /* getopt has said what is wrong. */
      try_help ("copy ");
      return -1;
    }
  }
  return 0;
}

/* SOURCE_URI and TARGET, and the options that go together.  -1
 * (reported) on a usage error.
 */
static int
check_arguments (int argc, char *argv[], struct cmdline *cl)
{
  if (optind != argc - 2) {
    bad_usage ("copy ", "expecting SOURCE_URI and TARGET");
    return -1;
  }
  cl->o.source = argv[optind];
  cl->o.target = argv[optind + 1];
  if (!is_nbd_uri (cl->o.source)) {
    bad_usage ("copy ", "%s: SOURCE_URI must be an NBD URI "
               "(nbd://... or nbd+unix://...)", cl->o.source);
    return -1;
  }
  if (cl->base_path && !cl->sums_path) {
    bad_usage ("copy ", "--base-sums needs --sums");
    return -1;
  }
  if (cl->sums_path && !cl->o.full && !cl->base_path) {
    bad_usage ("copy ", "--sums: an incremental copy updates the "
               "checksums of the previous one (--base-sums FILE); or "
               "copy everything (--full)");
    return -1;
  }
  return 0;
}

/* Run the copy into r, and write its checksums (--sums) once it is
 * complete.  Returns the exit status, or -1 (reported) if the
 * checksums could not be prepared and nothing was copied.
 */
static int
copy_with_sums (struct cmdline *cl, struct copy_result *r)
{
  struct copy_sums cs;
  struct sums *sums = NULL;
  struct bmerr err = { 0 };
  int status;

  if (cl->sums_path) {
    if ((sums = new_sums (cl->o.source, cl->base_path)) == NULL)
      return -1;
    cs = (struct copy_sums) { .chunk = sums->chunk, .n = sums->n,
                              .digests = sums->digests };
    cl->o.sums = &cs;
  }
  status = copy_run (&cl->o, r) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
  /* A whole copy holds the image; an incremental one holds what its
   * target held before, which nothing here shows.
   */
  if (status == EXIT_SUCCESS && sums &&
      (sums_bind (sums, cl->o.target, cl->o.full) == -1 ||
       sums_write (cl->sums_path, sums, &err) == -1)) {
    bm_error ("copy: the copy is complete, but its checksums could not "
              "be written: %s",
              bmerr_failed (&err) ? err.msg : strerror (ENOMEM));
    status = EXIT_FAILURE;
  }
  cl->o.sums = NULL;
  sums_free (sums);
  return status;
}

int
do_copy (int argc, char *argv[])
{
  struct cmdline cl = { .o = { .requests = COPY_DEFAULT_REQUESTS } };
  struct copy_result r;
  int status;

  if (parse_options (argc, argv, &cl) == -1 ||
      check_arguments (argc, argv, &cl) == -1 ||
      (status = copy_with_sums (&cl, &r)) == -1)
    return EXIT_FAILURE;
  copy_print_failure (&cl.o, &r);
  copy_print_summary (stdout, &cl.o, &r, cl.json);
  copy_result_free (&r);
  if (fflush (stdout) == EOF) {
    bm_error ("copy: stdout: %s", strerror (errno));
    status = EXIT_FAILURE;
  }
  return status;
}
