/* SPDX-License-Identifier: BSD-3-Clause */
/* restore.c: dirtybitmap restore: a point of a backup repository
 * (repo.h) written to a target (a file, a block device or an NBD
 * URI), one disk or several, each verified against its checksums as
 * it is copied.
 *
 * The command line is read here; the checks and the copies are
 * restore-point.c's (restore.h), which rollback shares.  Exit 0 only
 * if every disk was copied and matches.
 */

#include <config.h>

#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/fs.h>

#include <json-c/json.h>

#include "copy/copy.h"
#include "dirtybitmap.h"
#include "msg.h"
#include "qemu.h"
#include "repo.h"
#include "restore.h"
#include "sums.h"
#include "util.h"

static void __attribute__ ((noreturn))
restore_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s restore [-p] [--output=human|json] [--requests N]\n"
"                  DIR[@POINT] TARGET\n"
"       %s restore [OPTIONS] DIR[@POINT] --disk NAME=TARGET [--disk ...]\n"
"\n"
"Write a point of the backup repository DIR (the newest by default) to\n"
"TARGET: a file (created if it does not exist), a block device, or an\n"
"NBD URI, which must be the disk's size.  Each chunk is checked against\n"
"the point's checksums as it is copied: exit 0 only if every one\n"
"matches; otherwise the ranges that differ are named.  Restored through\n"
"a server with nbdkit-dirtybitmap-filter, the writes are recorded, and\n"
"the next backup into DIR is an incremental.\n"
"\n"
"  --disk NAME=TARGET    restore disk NAME of the point to TARGET (a\n"
"                        point of several disks; repeat for each)\n"
"  -p, --progress        show progress on stderr\n"
"  --output=human|json   the result as text (default) or JSON\n"
"  --requests N          requests in flight per connection (default %d)\n"
"\n"
"Examples:\n"
"  %s restore /backup/vm1@tue /srv/vm1-os.img\n"
"  %s restore /backup/vm1 --disk os=nbd+unix:///?socket=/run/os.sock \\\n"
"      --disk db=/srv/vm1-db.img\n",
           prog, prog, COPY_DEFAULT_REQUESTS, prog, prog);
  exit (status);
}

/*----------------------------------------------------------------------
 * The command line.
 */

/* The --disk values (kept until the point is known), or TARGET. */
static int
add_jobs (struct restore *st, char **specs, size_t nspecs,
          const char *target)
{
  size_t i;
  int r;

  if (target)
    return restore_add_job (st, NULL, target);
  if (nspecs == 0)
    return bad_usage ("restore ", "expecting TARGET (or --disk "
                      "NAME=TARGET)");
  for (i = 0; i < nspecs; ++i) {
    char *eq = strchr (specs[i], '=');
    if (eq == NULL || eq == specs[i] || eq[1] == '\0')
      return bad_usage ("restore ", "--disk %s: must be NAME=TARGET",
                        specs[i]);
    *eq = '\0';
    r = restore_add_job (st, specs[i], eq + 1);
    *eq = '=';
    if (r != 0)
      return r;
  }
  return 0;
}

static int
parse_restore (int argc, char *argv[], struct restore *st)
{
  enum { OUTPUT = 256, DISK, REQUESTS };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "progress", no_argument, NULL, 'p' },
    { "output", required_argument, NULL, OUTPUT },
    { "disk", required_argument, NULL, DISK },
    { "requests", required_argument, NULL, REQUESTS },
    { NULL }
  };
  char **specs = NULL, **more;
  size_t nspecs = 0;
  int opt, r = 0, json;

  while (r == 0 &&
         (opt = getopt_long (argc, argv, "hp", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': free (specs); restore_usage (EXIT_SUCCESS);
    case 'p': st->progress = true; break;
    case OUTPUT:
      if ((json = parse_output ("restore ", optarg)) == -1)
        r = EXIT_FAILURE;
      st->json = json == 1;
      break;
    case REQUESTS:
      if (parse_count ("restore ", "--requests", optarg, COPY_MAX_REQUESTS,
                       &st->requests) == -1)
        r = EXIT_FAILURE;
      break;
    case DISK:
      if ((more = realloc (specs, (nspecs + 1) * sizeof *more)) == NULL) {
        bm_error ("%m");
        r = EXIT_FAILURE;
        break;
      }
      specs = more;
      specs[nspecs++] = optarg;
      break;
    default: r = try_help ("restore ");
    }
  }
  if (r == 0 && (optind >= argc || optind < argc - 2))
    r = bad_usage ("restore ", "expecting DIR[@POINT] and TARGET");
  else if (r == 0 && nspecs && optind == argc - 2)
    r = bad_usage ("restore ", "%s: with --disk, the targets are in the "
                   "--disk options", argv[optind + 1]);
  if (r == 0)
    r = restore_open_point (st, argv[optind]);
  if (r == 0)
    r = add_jobs (st, specs, nspecs,
                  optind == argc - 2 ? argv[optind + 1] : NULL);
  free (specs);
  return r;
}

int
do_restore (int argc, char *argv[])
{
  struct restore st = RESTORE_INIT ("restore");
  struct bmerr err = { 0 };
  int status;
  size_t done;
  bool ok = false;

  if ((status = parse_restore (argc, argv, &st)) != 0)
    goto out;
  status = EXIT_FAILURE;
  if (restore_check_all (&st) == -1)
    goto out;
  if (copy_signals_trap (&err) == -1) {
    bm_error ("restore: %s", err.msg);
    goto out;
  }
  done = restore_run (&st, &ok);
  if (copy_interrupted ())
    bm_error ("restore: interrupted");
  copy_signals_release ();
  if (st.json) {
    json_object *j = restore_json (&st, done, ok);
    copy_print_json (stdout, j);
    json_object_put (j);
  }
  status = ok ? EXIT_SUCCESS : EXIT_FAILURE;

 out:
  restore_free (&st);
  if (fflush (stdout) == EOF)
    status = EXIT_FAILURE;
  return status;
}
