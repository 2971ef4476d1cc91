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

#include "dirtybitmap.h"
#include "msg.h"
#include "util.h"

const char *prog = "dirtybitmap";
bool verbose;

void
bm_error (const char *fs, ...)
{
  va_list args;

  fprintf (stderr, "%s: ", prog);
  va_start (args, fs);
  vfprintf (stderr, fs, args);
  va_end (args);
  fputc ('\n', stderr);
}

void
bm_debug (const char *fs, ...)
{
  va_list args;

  if (!verbose)
    return;
  fprintf (stderr, "%s: debug: ", prog);
  va_start (args, fs);
  vfprintf (stderr, fs, args);
  va_end (args);
  fputc ('\n', stderr);
}

int
bad_usage (const char *sub, const char *fs, ...)
{
  va_list args;

  fprintf (stderr, "%s: ", prog);
  va_start (args, fs);
  vfprintf (stderr, fs, args);
  va_end (args);
  fputc ('\n', stderr);
  return try_help (sub);
}

int
try_help (const char *sub)
{
  fprintf (stderr, "Try '%s %s--help' for more information.\n",
           prog, sub ? sub : "");
  return EXIT_FAILURE;
}

char *
human_size (uint64_t bytes, char *buf, size_t len)
{
  static const char *const units[] = {
    "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"
  };
  unsigned i = 0;
  double v = bytes;

  /* Keep at most three digits before the point: 1000 bytes is
   * 0.977 KiB, not 1000 B.
   */
  while (i < 6 && v >= 1000) {
    v /= 1024;
    i++;
  }
  snprintf (buf, len, "%.3g %s", v, units[i]);
  return buf;
}

int64_t
parse_size (const char *s)
{
  static const char suffixes[] = "KMGTPE";
  const char *p;
  char *end;
  uint64_t v;
  int shift = 0;

  if (!isdigit ((unsigned char) *s))
    return -1;
  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno)
    return -1;
  if (*end && (p = strchr (suffixes, toupper ((unsigned char) *end)))) {
    shift = 10 * (p - suffixes + 1);
    end++;
    if (*end == 'i')
      end++;
    if (*end == 'B')
      end++;
  }
  else if (*end == 'B' || *end == 'b')
    end++;
  if (*end || (shift && v > (UINT64_C (1) << (63 - shift)) - 1))
    return -1;
  v <<= shift;
  return v > INT64_MAX ? -1 : (int64_t) v;
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
  fputc ('"', fp);
  for (; *s; ++s) {
    unsigned char c = *s;
    if (c == '"' || c == '\\')
      fprintf (fp, "\\%c", c);
    else if (c < 0x20)
      fprintf (fp, "\\u%04x", c);
    else
      fputc (c, fp);
  }
  fputc ('"', fp);
}

void
for_each_run (const struct bits *b, unsigned gbits, uint64_t disk_size,
              void (*fn) (uint64_t, uint64_t, bool, void *), void *opaque)
{
  uint64_t g = 0, n = b->nr_bits;

  while (g < n) {
    bool dirty = bits_test (b, g);
    uint64_t e = dirty ? bits_next_clear (b, g, n) : bits_next_set (b, g, n);
    uint64_t start = g << gbits, end = MIN (e << gbits, disk_size);
    fn (start, end - start, dirty, opaque);
    g = e;
  }
}

int
read_bits (struct bmf *f, const struct bmf_bitmap *bm, struct bits *b)
{
  uint64_t len;
  ssize_t r;

  if (f->lock != BMF_LOCK_NONE)
    return bmf_map (f, &f->st, bm, false, b);

  /* -U: a server may resize the file under us; a copy cannot fault. */
  memset (b, 0, sizeof *b);
  b->nr_bits = f->st.sized ? bmf_nr_bits (f->st.disk_size, bm->gbits) : 0;
  len = bits_nr_words (b->nr_bits) * 8;
  if (len == 0)
    return 0;
  b->words = malloc (len);
  if (b->words == NULL) {
    fprintf (stderr, "%s: %s: bitmap %s: %m\n", prog, f->path, bm->name);
    return -1;
  }
  r = pread (f->fd, b->words, len, bm->data_offset);
  if (r != (ssize_t) len) {
    if (r == -1)
      fprintf (stderr, "%s: %s: bitmap %s: read: %m\n",
               prog, f->path, bm->name);
    else
      fprintf (stderr, "%s: %s: bitmap %s: short read (the file changed "
               "while it was read: try again)\n", prog, f->path, bm->name);
    free (b->words);
    b->words = NULL;
    return -1;
  }
  return 0;
}

void
free_bits (struct bits *b)
{
  if (b->map_base)
    bmf_unmap (b);
  else {
    free (b->words);
    memset (b, 0, sizeof *b);
  }
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
"  %s info [--output=human|json] [-U] FILE\n"
"  %s bitmap (--add | --remove | --clear | --enable | --disable |\n"
"            --merge SRC)... [-b SOURCE_FILE] [-g GRANULARITY]\n"
"            [--size SIZE] FILE BITMAP\n"
"  %s map [--output=human|json] [-U] FILE BITMAP\n"
"  %s check FILE\n"
"  %s copy [-p] [--output=human|json] [--requests N] [--connections N]\n"
"            [--request-size SIZE] [--full] [--trim-source]\n"
"            SOURCE_URI TARGET\n"
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
"\n"
"'%s SUBCOMMAND --help' describes a subcommand; see dirtybitmap(1).\n",
           prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog,
           prog);
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
    { "check", do_check }, { "copy", do_copy },
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
        perror (prog);
        return EXIT_FAILURE;
      }
      argv[1] = name;
      return subs[i].fn (argc - 1, argv + 1);
    }
  return bad_usage (NULL, "unknown subcommand '%s'", argv[1]);
}
