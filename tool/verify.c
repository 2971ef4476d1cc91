/* SPDX-License-Identifier: BSD-3-Clause */
/* verify.c: dirtybitmap verify, in two forms told apart by their
 * operands: IMAGE_OR_URI SUMS reads an image (a raw file, a qcow2
 * chain, or any NBD export) and checks every chunk against the
 * checksums of a backup (sums.h); DIR[@POINT], one operand, verifies
 * points of a backup repository and records the result (repo-verify.c).
 * The reading and hashing is image_hash's (copy/image.h); this file
 * chooses the format, which is never guessed from the image's content,
 * and prints the ranges of chunks that differ.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <getopt.h>

#include "copy/copy.h"
#include "copy/image.h"
#include "dirtybitmap.h"
#include "msg.h"
#include "sums.h"
#include "util.h"

static void __attribute__ ((noreturn))
verify_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s verify [-p] [-f FMT] [--output=human|json] IMAGE_OR_URI SUMS\n"
"       %s verify [-p] [--resume] [--output=human|json] DIR[@POINT]\n"
"\n"
"Check an image against the checksums of a backup: read every chunk\n"
"of IMAGE_OR_URI (a file, or an NBD URI read as it is) and compare its\n"
"XXH3-128 with SUMS (the checksum file a backup wrote).  Exit 0 only\n"
"if every chunk matches; otherwise the ranges that differ are listed.\n"
"The format of a file is never guessed from its content.\n"
"\n"
"With one operand, check the point POINT of the backup repository DIR\n"
"(without @POINT, every point) against its checksums, and record the\n"
"result and its time in the point, for list; the next backup into DIR\n"
"copies again what is bad in its newest point.\n"
"\n"
"  -f, --format=FMT      raw: the file's bytes (the default); qcow2: a\n"
"                        qcow2 image, read through qemu-nbd with its\n"
"                        backing chain, each link naming its backing\n"
"                        file's format\n"
"  --resume              DIR: skip the points whose result was recorded\n"
"                        by an interrupted verify of every point\n"
"  -p, --progress        show progress on stderr\n"
"  --output=human|json   the result as text (default) or JSON\n"
"\n"
"Examples:\n"
"  %s verify backup.img backup/disk0.c1.sums\n"
"  %s verify -f qcow2 inc3.qcow2 backup/disk0.c4.sums\n"
"  %s verify /backup/vm1@tue\n",
           prog, prog, prog, prog, prog);
  exit (status);
}

/* The format of image when -f does not say: what the backup that
 * wrote s left there.  For now that is always raw (a file target);
 * once the checksum file records the format its backup wrote, it is
 * taken from there (image_format_parse) in this one place.  Never
 * from the image's content.
 */
static enum image_format
written_format (const char *image, const struct sums *s)
{
  (void) image;
  (void) s;
  return IMAGE_RAW;
}

/* Does chunk i of the image differ from its checksum? */
static bool
differs (const struct sums *s, const uint8_t *digests, uint64_t i)
{
  return memcmp (digests + i * SUMS_DIGEST, s->digests + i * SUMS_DIGEST,
                 SUMS_DIGEST) != 0;
}

static void
print_result (const char *image, const struct sums *s, const uint8_t *digests,
              const struct image_result *r, bool json)
{
  json_object *j = NULL, *list = NULL;
  uint64_t i, bad = 0;

  if (json) {
    j = json_object_new_object ();
    list = json_object_new_array ();
  }
  for (i = 0; i < s->n; ++i) {
    uint64_t start = i, off, len;
    if (!differs (s, digests, i))
      continue;
    while (i + 1 < s->n && differs (s, digests, i + 1))
      ++i;
    bad += i - start + 1;
    off = start * s->chunk;
    len = MIN ((i + 1) * s->chunk, s->disk_size) - off;
    if (json) {
      json_object *o = json_object_new_object ();
      json_object_object_add (o, "offset", json_object_new_uint64 (off));
      json_object_object_add (o, "length", json_object_new_uint64 (len));
      json_object_array_add (list, o);
    }
    else
      printf ("differs: offset %" PRIu64 ", %" PRIu64 " bytes\n", off, len);
  }
  if (json) {
    json_object_object_add (j, "result",
                            json_object_new_string (bad ? "differs"
                                                    : "matches"));
    json_object_object_add (j, "image", json_object_new_string (image));
    json_object_object_add (j, "checkpoint",
                            json_object_new_string (s->checkpoint));
    json_object_object_add (j, "chunk-size", json_object_new_uint64 (s->chunk));
    json_object_object_add (j, "chunks", json_object_new_uint64 (s->n));
    json_object_object_add (j, "chunks-differing",
                            json_object_new_uint64 (bad));
    json_object_object_add (j, "bytes-read", json_object_new_uint64 (r->read));
    json_object_object_add (j, "differing", list);
    copy_print_json (stdout, j);
    json_object_put (j);
  }
  else if (bad)
    printf ("%s: %" PRIu64 " of %" PRIu64 " chunks differ from the "
            "checksums of %s\n", image, bad, s->n,
            *s->checkpoint ? s->checkpoint : "the backup");
  else
    printf ("%s: all %" PRIu64 " chunks match the checksums of %s\n",
            image, s->n, *s->checkpoint ? s->checkpoint : "the backup");
}

/* Why image_hash failed, on stderr. */
static void
print_failure (const char *image, const char *sums_path,
               const struct sums *s, const struct image_result *r)
{
  if (r->wrong_size)
    bm_error ("verify: %s is %" PRIu64 " bytes, but %s has the checksums "
              "of a disk of %" PRIu64 " bytes", image, r->size, sums_path,
              s->disk_size);
  else if (r->interrupted)
    bm_error ("verify: interrupted: %s not checked to the end", image);
  else
    bm_error ("verify: %s", bmerr_failed (&r->error) ? r->error.msg
              : "failed");
}

int
do_verify (int argc, char *argv[])
{
  enum { OUTPUT = 256, RESUME };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "resume", no_argument, NULL, RESUME },
    { "format", required_argument, NULL, 'f' },
    { "progress", no_argument, NULL, 'p' },
    { "output", required_argument, NULL, OUTPUT },
    { NULL }
  };
  struct image_result r = { 0 };
  enum image_format fmt = IMAGE_RAW;
  struct sums *s = NULL;
  uint8_t *digests = NULL;
  const char *image, *sums_path, *format = NULL;
  struct bmerr err = { 0 };
  int opt, json = 0, status = EXIT_FAILURE;
  bool progress = false, resume = false;

  while ((opt = getopt_long (argc, argv, "f:hp", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': verify_usage (EXIT_SUCCESS);
    case 'p': progress = true; break;
    case RESUME: resume = true; break;
    case 'f':
      format = optarg;
      if (image_format_parse (format, &fmt) == -1)
        return bad_usage ("verify ", "-f %s: the image format is raw (the "
                          "default) or qcow2", format);
      break;
    case OUTPUT:
      if ((json = parse_output ("verify ", optarg)) == -1)
        return EXIT_FAILURE;
      break;
    default:
      return try_help ("verify ");
    }
  }
  if (optind == argc - 1 && format)
    return bad_usage ("verify ", "-f %s: a repository's images are qcow2: "
                      "-f goes with IMAGE_OR_URI SUMS only", format);
  if (optind == argc - 1)
    return verify_repo (argv[optind], progress, json == 1, resume);
  if (optind != argc - 2)
    return bad_usage ("verify ", "expecting DIR[@POINT] (a repository), or "
                      "IMAGE_OR_URI and SUMS");
  if (resume)
    return bad_usage ("verify ", "--resume: it resumes a verify of every "
                      "point of a repository (verify --resume DIR)");
  image = argv[optind];
  sums_path = argv[optind + 1];
  if (fmt != IMAGE_RAW && is_nbd_uri (image))
    return bad_usage ("verify ", "-f %s: %s is an NBD URI, which is read as "
                      "the server presents it (raw)", format, image);
  if (sums_load (sums_path, &s, &err) == -1) {
    bm_error ("verify: %s", err.msg);
    return EXIT_FAILURE;
  }
  if (format == NULL)
    fmt = written_format (image, s);
  digests = malloc (s->n ? s->n * SUMS_DIGEST : 1);
  if (digests == NULL)
    bm_error ("verify: %s", strerror (errno));
  else if (image_hash (image, fmt, s, s->chunk, s->disk_size, digests,
                       progress, &r) == -1)
    print_failure (image, sums_path, s, &r);
  else {
    print_result (image, s, digests, &r, json);
    status = r.differing ? EXIT_FAILURE : EXIT_SUCCESS;
  }
  free (digests);
  sums_free (s);
  if (fflush (stdout) == EOF)
    status = EXIT_FAILURE;
  return status;
}
