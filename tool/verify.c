/* SPDX-License-Identifier: BSD-3-Clause */
/* verify.c: dirtybitmap verify: read an image (a file, a qcow2 chain,
 * or any NBD export) and check every chunk against the checksums of a
 * backup (sums.h).  The reading and hashing is the copy engine's, with
 * a target that keeps nothing and the checksums compared: a chunk
 * whose digest differs is one the copy would have written.  A file is
 * read through qemu-nbd (read-only), which also follows a qcow2
 * image's backing chain.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/wait.h>

#include <libnbd.h>

#include "copy/copy.h"
#include "dirtybitmap.h"
#include "msg.h"
#include "sums.h"
#include "util.h"

static void __attribute__ ((noreturn))
verify_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s verify [-p] [--output=human|json] IMAGE_OR_URI SUMS\n"
"\n"
"Check an image against the checksums of a backup: read every chunk\n"
"of IMAGE_OR_URI (a raw or qcow2 file, read through qemu-nbd with its\n"
"backing chain, or an NBD URI) and compare its XXH3-128 with SUMS (the\n"
"checksum file a backup wrote).  Exit 0 only if every chunk matches;\n"
"otherwise the ranges that differ are listed.\n"
"\n"
"  -p, --progress        show progress on stderr\n"
"  --output=human|json   the result as text (default) or JSON\n"
"\n"
"Example:\n"
"  %s verify inc3.qcow2 backup/disk0.c4.sums\n",
           prog, prog);
  exit (status);
}

/* A file served read-only by qemu-nbd on a socket in a directory of
 * our own, until served_stop.
 */
struct served {
  char dir[64];
  char *uri;
  pid_t pid;
};

static int
serve_file (const char *path, struct served *sv)
{
  char sock[128], fmt[8] = "raw", magic[4];
  int fd, status;

  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1) {
    bm_error ("verify: %s: %s", path, strerror (errno));
    return -1;
  }
  if (read (fd, magic, 4) == 4 && memcmp (magic, "QFI\xfb", 4) == 0)
    strcpy (fmt, "qcow2");
  close (fd);
  strcpy (sv->dir, "/tmp/dirtybitmap-verify.XXXXXX");
  if (mkdtemp (sv->dir) == NULL) {
    bm_error ("verify: mkdtemp: %s", strerror (errno));
    return -1;
  }
  snprintf (sock, sizeof sock, "%s/sock", sv->dir);
  if (asprintf (&sv->uri, "nbd+unix:///?socket=%s", sock) == -1) {
    sv->uri = NULL;
    rmdir (sv->dir);
    return -1;
  }
  sv->pid = fork ();
  if (sv->pid == 0) {
    execlp ("qemu-nbd", "qemu-nbd", "-r", "-f", fmt, "-t", "-e", "16",
            "-k", sock, "--", path, (char *) NULL);
    fprintf (stderr, "%s: verify: qemu-nbd: %s\n", prog, strerror (errno));
    _exit (127);
  }
  if (sv->pid == -1) {
    bm_error ("verify: fork: %s", strerror (errno));
    return -1;
  }
  /* Until the socket is there (or qemu-nbd gave up). */
  for (int i = 0; i < 1000; ++i) {
    if (access (sock, F_OK) == 0)
      return 0;
    if (waitpid (sv->pid, &status, WNOHANG) == sv->pid) {
      sv->pid = -1;
      bm_error ("verify: qemu-nbd could not serve %s", path);
      return -1;
    }
    usleep (10000);
  }
  bm_error ("verify: qemu-nbd did not start serving %s", path);
  return -1;
}

static void
served_stop (struct served *sv)
{
  char sock[128];

  if (sv->pid > 0) {
    kill (sv->pid, SIGTERM);
    waitpid (sv->pid, NULL, 0);
  }
  if (sv->dir[0]) {
    snprintf (sock, sizeof sock, "%s/sock", sv->dir);
    unlink (sock);
    rmdir (sv->dir);
  }
  free (sv->uri);
}

static void
print_result (const char *image, const struct sums *s, const uint8_t *differ,
              const struct copy_result *r, bool json)
{
  json_object *j = NULL, *list = NULL;
  uint64_t i, bad = 0;

  if (json) {
    j = json_object_new_object ();
    list = json_object_new_array ();
  }
  for (i = 0; i < s->n; ++i) {
    uint64_t start = i, off, len;
    if (!differ[i])
      continue;
    while (i + 1 < s->n && differ[i + 1])
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

int
do_verify (int argc, char *argv[])
{
  enum { OUTPUT = 256 };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "progress", no_argument, NULL, 'p' },
    { "output", required_argument, NULL, OUTPUT },
    { NULL }
  };
  struct copy_options o = { .full = true, .no_target = true };
  struct copy_result r = { .ok = false };
  struct served sv = { .pid = -1 };
  struct copy_sums cs;
  struct sums *s = NULL;
  uint8_t *differ = NULL;
  const char *image;
  char *error;
  int opt, json = 0, status = EXIT_FAILURE;
  int64_t size;
  uint64_t i;

  while ((opt = getopt_long (argc, argv, "hp", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': verify_usage (EXIT_SUCCESS);
    case 'p': o.progress = true; break;
    case OUTPUT:
      if ((json = parse_output ("verify ", optarg)) == -1)
        return EXIT_FAILURE;
      break;
    default:
      return try_help ("verify ");
    }
  }
  if (optind != argc - 2)
    return bad_usage ("verify ", "expecting IMAGE_OR_URI and SUMS");
  image = argv[optind];
  if (sums_read (argv[optind + 1], &s, &error) == -1) {
    bm_error ("verify: %s", error ? error : strerror (ENOMEM));
    free (error);
    return EXIT_FAILURE;
  }
  if (is_nbd_uri (image))
    o.source = image;
  else if (serve_file (image, &sv) == -1)
    goto out;
  else
    o.source = sv.uri;
  if ((size = copy_export_size (o.source, &error)) == -1) {
    bm_error ("verify: %s", error ? error : strerror (ENOMEM));
    free (error);
    goto out;
  }
  if ((uint64_t) size != s->disk_size) {
    bm_error ("verify: %s is %" PRIi64 " bytes, but %s has the checksums "
              "of a disk of %" PRIu64 " bytes", image, size,
              argv[optind + 1], s->disk_size);
    goto out;
  }
  differ = calloc (s->n ? s->n : 1, 1);
  if (differ == NULL) {
    bm_error ("verify: %s", strerror (errno));
    goto out;
  }
  cs = (struct copy_sums) { .chunk = s->chunk, .n = s->n,
                            .digests = s->digests, .compare = true,
                            .differ = differ };
  o.sums = &cs;
  o.target = "(none)";
  if (copy_run (&o, &r) == -1) {
    copy_print_failure (&o, &r);
    goto out;
  }
  print_result (image, s, differ, &r, json);
  status = EXIT_SUCCESS;
  for (i = 0; i < s->n; ++i)
    if (differ[i])
      status = EXIT_FAILURE;

 out:
  copy_result_free (&r);
  if (sv.uri || sv.dir[0])
    served_stop (&sv);
  free (differ);
  sums_free (s);
  if (fflush (stdout) == EOF)
    status = EXIT_FAILURE;
  return status;
}
