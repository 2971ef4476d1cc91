/* SPDX-License-Identifier: BSD-3-Clause */
/* cmdline.c: whether nbdkit was started read-only (-r).
 *
 * nbdkit 1.32 tells a filter whether a connection is read-only, but
 * not, before the first connection, whether the whole server is: and
 * the bitmap file must be opened (shared or exclusive, read-only or
 * read-write) before then, at .get_ready, where errors still reach the
 * user.  So nbdkit's own command line is parsed again here, with
 * nbdkit's option table (the filter is built for one nbdkit version,
 * see configure.ac), from /proc/self/cmdline.
 *
 * nbdkit 1.32 has no call that says it before a connection: .get_ready
 * gets only the thread model, and the readonly flag of .preconnect and
 * .open comes with a client, too late to choose how to open and lock
 * the file and to report a refused start.  So the table stays, and two
 * things keep it honest: test-dirtybitmap-cmdline-options.sh fails
 * when the installed nbdkit's options (names, and whether each takes
 * an argument) differ from it, and cmdline_check_open refuses a
 * connection that nbdkit calls writable on a server taken for -r,
 * whose writes would go unrecorded.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <getopt.h>

#include <nbdkit-filter.h>

#include "cmdline.h"
#include "report.h"

/* nbdkit 1.32's options (nbdkit --short-options / --long-options,
 * with their arguments); the values only need to tell -r apart.
 * test-dirtybitmap-cmdline-options.sh reads this table as written:
 * keep one option a line.
 */
static const char short_options[] = "46D:e:fg:i:nop:P:rst:u:U:vV";
static const struct option long_options[] = {
  { "ipv4-only", no_argument, NULL, '4' },
  { "ipv6-only", no_argument, NULL, '6' },
  { "debug", required_argument, NULL, 'D' },
  { "dump-config", no_argument, NULL, 0 },
  { "dump-plugin", no_argument, NULL, 0 },
  { "exit-with-parent", no_argument, NULL, 0 },
  { "export", required_argument, NULL, 'e' },
  { "export-name", required_argument, NULL, 'e' },
  { "exportname", required_argument, NULL, 'e' },
  { "filter", required_argument, NULL, 0 },
  { "foreground", no_argument, NULL, 'f' },
  { "no-fork", no_argument, NULL, 'f' },
  { "group", required_argument, NULL, 'g' },
  { "help", no_argument, NULL, 0 },
  { "ip-addr", required_argument, NULL, 'i' },
  { "ipaddr", required_argument, NULL, 'i' },
  { "log", required_argument, NULL, 0 },
  { "long-options", no_argument, NULL, 0 },
  { "mask-handshake", required_argument, NULL, 0 },
  { "new-style", no_argument, NULL, 'n' },
  { "newstyle", no_argument, NULL, 'n' },
  { "no-sr", no_argument, NULL, 0 },
  { "old-style", no_argument, NULL, 'o' },
  { "oldstyle", no_argument, NULL, 'o' },
  { "pid-file", required_argument, NULL, 'P' },
  { "pidfile", required_argument, NULL, 'P' },
  { "port", required_argument, NULL, 'p' },
  { "read-only", no_argument, NULL, 'r' },
  { "readonly", no_argument, NULL, 'r' },
  { "run", required_argument, NULL, 0 },
  { "selinux-label", required_argument, NULL, 0 },
  { "short-options", no_argument, NULL, 0 },
  { "single", no_argument, NULL, 's' },
  { "stdin", no_argument, NULL, 's' },
  { "swap", no_argument, NULL, 0 },
  { "threads", required_argument, NULL, 't' },
  { "tls", required_argument, NULL, 0 },
  { "tls-certificates", required_argument, NULL, 0 },
  { "tls-psk", required_argument, NULL, 0 },
  { "tls-verify-peer", no_argument, NULL, 0 },
  { "unix", required_argument, NULL, 'U' },
  { "user", required_argument, NULL, 'u' },
  { "verbose", no_argument, NULL, 'v' },
  { "version", no_argument, NULL, 'V' },
  { "vsock", no_argument, NULL, 0 },
  { NULL }
};

/* The whole of /proc/self/cmdline, NUL-terminated arguments. */
static char *
read_cmdline (size_t *len)
{
  FILE *fp = fopen ("/proc/self/cmdline", "re");
  char *buf = NULL, chunk[4096];
  size_t r;

  *len = 0;
  if (fp == NULL)
    return NULL;
  while ((r = fread (chunk, 1, sizeof chunk, fp)) > 0) {
    char *nb = realloc (buf, *len + r + 1);
    if (nb == NULL) {
      free (buf);
      buf = NULL;
      break;
    }
    buf = nb;
    memcpy (buf + *len, chunk, r);
    *len += r;
  }
  fclose (fp);
  if (buf)
    buf[*len] = '\0';
  return buf;
}

/* What cmdline_readonly answered: -1 not asked, 0, 1. */
static int guessed = -1;

bool
cmdline_readonly (void)
{
  char **argv, *buf, *p;
  size_t len, n = 0, i;
  bool readonly = false;
  int c;

  buf = read_cmdline (&len);
  if (buf == NULL)
    return false;
  for (p = buf; p < buf + len; p += strlen (p) + 1)
    n++;
  argv = calloc (n + 1, sizeof *argv);
  if (argv == NULL) {
    free (buf);
    return false;
  }
  for (i = 0, p = buf; i < n; ++i, p += strlen (p) + 1)
    argv[i] = p;

  /* Like nbdkit: options may follow the plugin's name and parameters
   * (getopt permutes), up to "--".
   */
  optind = 0;
  opterr = 0;
  while ((c = getopt_long (n, argv, short_options, long_options,
                           NULL)) != -1)
    if (c == 'r')
      readonly = true;
  optind = 0;
  free (argv);
  free (buf);
  guessed = readonly;
  return readonly;
}

int
cmdline_check_open (int readonly)
{
  /* An outer filter may open this one read-only on a writable server
   * (cow does), so only a writable open of a server taken for -r is a
   * contradiction.
   */
  if (readonly || guessed != 1)
    return 0;
  filter_error ("nbdkit opens this connection writable, but "
                "the filter read its command line as read-only (-r) and "
                "opened the bitmap file read-only: its writes would not "
                "be recorded, so it is refused (nbdkit %s has options "
                "that the filter's copy of them, in cmdline.c, lacks: "
                "see test-dirtybitmap-cmdline-options.sh)",
                NBDKIT_VERSION_STRING);
  return -1;
}
