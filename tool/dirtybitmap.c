/* SPDX-License-Identifier: BSD-3-Clause */
/* dirtybitmap.c: the dirtybitmap command: main, usage, dispatch to
 * the subcommands, and helpers they share.  See dirtybitmap(1).
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <unistd.h>

#include <json-c/json.h>

#include "dirtybitmap.h"
#include "utf8.h"
#include "msg.h"
#include "util.h"

const char *prog = "dirtybitmap";
bool verbose;

/* A line on stderr: "dirtybitmap: ", the kind ("debug: " or none),
 * the message.  The one place the prefix is written; errno is kept
 * for a %m.
 */
static void __attribute__ ((format (printf, 2, 0)))
say (const char *kind, const char *fs, va_list args)
{
  int saved = errno;

  fprintf (stderr, "%s: %s", prog, kind);
  errno = saved;
  vfprintf (stderr, fs, args);
  fputc ('\n', stderr);
}

void
bm_verror (const char *fs, va_list args)
{
  say ("", fs, args);
}

void
bm_error (const char *fs, ...)
{
  va_list args;

  va_start (args, fs);
  say ("", fs, args);
  va_end (args);
}

void
bm_debug (const char *fs, ...)
{
  va_list args;

  if (!verbose)
    return;
  va_start (args, fs);
  say ("debug: ", fs, args);
  va_end (args);
}

int
bad_usage (const char *sub, const char *fs, ...)
{
  va_list args;

  va_start (args, fs);
  bm_verror (fs, args);
  va_end (args);
  return try_help (sub);
}

int
try_help (const char *sub)
{
  fprintf (stderr, "Try '%s %s--help' for more information.\n",
           prog, sub ? sub : "");
  return EXIT_FAILURE;
}

int
parse_count (const char *sub, const char *opt, const char *s,
             unsigned max, unsigned *out)
{
  char *end;
  unsigned long v;

  errno = 0;
  v = strtoul (s, &end, 10);
  if (errno || end == s || *end || *s == '-' || v < 1 || v > max) {
    bad_usage (sub, "%s %s: must be a number from 1 to %u", opt, s, max);
    return -1;
  }
  *out = v;
  return 0;
}

int
parse_output (const char *sub, const char *value)
{
  if (strcmp (value, "human") == 0)
    return 0;
  if (strcmp (value, "json") == 0)
    return 1;
  bad_usage (sub, "--output=%s: must be human or json", value);
  return -1;
}

void
print_json_string (FILE *fp, const char *s)
{
  char *valid = utf8_valid_copy (s);
  json_object *o = valid ? json_object_new_string (valid) : NULL;

  /* json-c escapes; bytes that are not UTF-8 are U+FFFD (utf8.h). */
  fputs (o ? json_object_to_json_string_ext (o, JSON_C_TO_STRING_PLAIN |
                                             JSON_C_TO_STRING_NOSLASHESCAPE)
         : "\"\"", fp);
  json_object_put (o);
  free (valid);
}

static void __attribute__ ((noreturn))
usage (int status)
{
  FILE *fp = status ? stderr : stdout;

  fprintf (fp,
"%s: manage the bitmap files of nbdkit-dirtybitmap-filter, and copy\n"
"the changed blocks of a disk (pull-mode incremental backup).\n"
"\n"
"Usage:\n"
"  %s [-v|--verbose] SUBCOMMAND [OPTIONS...] ARGS...\n"
"  %s --help | --version\n"
"\n"
"Subcommands:\n"
"  %s info [--output=human|json] [-U] [--disk DISKFILE] FILE\n"
"  %s info [--output=human|json] --control SOCKET\n"
"  %s bitmap (--add | --remove | --clear | --enable | --disable |\n"
"            --merge SRC)... [-b SOURCE_FILE [-F SOURCE_FMT]]\n"
"            [-g GRANULARITY] [--size SIZE] [--disk DISKFILE]\n"
"            FILE BITMAP\n"
"  %s bitmap ACTIONS... --control SOCKET BITMAP\n"
"  %s map [--output=human|json] [-U] [--disk DISKFILE] FILE BITMAP\n"
"  %s check FILE\n"
"  %s copy [-p] [--output=human|json] [--requests N] [--connections N]\n"
"            [--request-size SIZE] [--full] [--trim-source]\n"
"            SOURCE_URI TARGET\n"
"  %s backup --control SOCKET [--incremental BITMAP] --checkpoint NEW\n"
"            [--remove-incremental] [-p] [--output=human|json]\n"
"            SOURCE_URI TARGET\n"
"  %s backup --disk control=SOCKET,source=URI,target=TARGET...\n"
"            [OPTIONS]\n"
"  %s backup --repo DIR (--control SOCKET SOURCE_URI |\n"
"            --disk control=SOCKET,source=URI,name=NAME...) [OPTIONS]\n"
"  %s list [--output=human|json] DIR\n"
"  %s restore [-p] [--output=human|json] DIR[@POINT]\n"
"            (TARGET | --disk NAME=TARGET...)\n"
"  %s rollback [-p] [--output=human|json] DIR[@POINT]\n"
"            (--control SOCKET SOURCE_URI |\n"
"            --disk control=SOCKET,source=URI,name=NAME...)\n"
"  %s serve DIR[@POINT] [--disk NAME] --socket PATH\n"
"  %s prune [--keep-last N] [--keep-daily N] [--keep-weekly N] ...\n"
"            [--dry-run] [--output=human|json] DIR\n"
"  %s verify [-p] [-f FMT] [--output=human|json] IMAGE_OR_URI SUMS\n"
"  %s verify [-p] [--resume] [--output=human|json] DIR[@POINT]\n"
"  %s resize [--shrink] [--disk DISKFILE] FILE [+|-]SIZE\n"
"\n"
"Options:\n"
"  -v, --verbose   debug messages on stderr (as DIRTYBITMAP_DEBUG=1)\n"
"  -V, --version   print the version and exit\n"
"  -h, --help      print this help and exit\n"
"\n"
"Examples:\n"
"  %s bitmap --add --size 10G disk.img.bitmaps b0\n"
"  %s info disk.img.bitmaps\n"
"  %s copy -p nbd+unix:///?socket=/tmp/sock backup.img\n"
"  %s backup --control /tmp/ctl --incremental b0 --checkpoint b1 \\\n"
"      nbd+unix:///?socket=/tmp/sock backup.img\n"
"  %s backup --repo /backup/vm1 --checkpoint mon --control /tmp/ctl \\\n"
"      nbd+unix:///?socket=/tmp/sock\n"
"  %s restore /backup/vm1@mon disk.img\n"
"\n"
"'%s SUBCOMMAND --help' describes a subcommand; see dirtybitmap(1).\n",
           prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog,
           prog, prog,
           prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog,
           prog, prog, prog, prog);
  exit (status);
}

int
main (int argc, char *argv[])
{
  static const struct {
    const char *name;
    int (*fn) (int, char **);
  } subs[] = {
    { "info", do_info }, { "bitmap", do_bitmap }, { "map", do_map },
    { "check", do_check }, { "copy", do_copy }, { "backup", do_backup },
    { "resize", do_resize }, { "verify", do_verify }, { "list", do_list },
    { "restore", do_restore }, { "rollback", do_rollback },
    { "serve", do_serve }, { "prune", do_prune },
  };
  size_t i;

  prog = basename (argv[0]);
  if (getenv ("DIRTYBITMAP_DEBUG"))
    verbose = true;

  /* Global options, before the subcommand. */
  while (argc >= 2 && argv[1][0] == '-') {
    if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0)
      usage (EXIT_SUCCESS);
    if (strcmp (argv[1], "--version") == 0 || strcmp (argv[1], "-V") == 0) {
      printf ("%s %s\n", prog, PACKAGE_VERSION);
      return EXIT_SUCCESS;
    }
    if (strcmp (argv[1], "--verbose") == 0 || strcmp (argv[1], "-v") == 0)
      verbose = true;
    else
      return bad_usage (NULL, "unknown option '%s'", argv[1]);
    argv[1] = argv[0];
    argv++;
    argc--;
  }
  if (argc < 2)
    usage (EXIT_FAILURE);
  for (i = 0; i < sizeof subs / sizeof subs[0]; ++i)
    if (strcmp (argv[1], subs[i].name) == 0) {
      /* getopt names the program in its messages: "dirtybitmap info:
       * unrecognized option '--foo'".
       */
      char *name;
      if (asprintf (&name, "%s %s", prog, argv[1]) == -1) {
        bm_error ("%m");
        return EXIT_FAILURE;
      }
      argv[1] = name;
      return subs[i].fn (argc - 1, argv + 1);
    }
  return bad_usage (NULL, "unknown subcommand '%s'", argv[1]);
}
