/* SPDX-License-Identifier: BSD-3-Clause */
/* fake-cmdline.c: an LD_PRELOAD shim for
 * test-dirtybitmap-cmdline-options.sh.  /proc/self/cmdline reads as
 * FAKE_CMDLINE with each space made a NUL (one argument per word), as
 * an nbdkit would look whose command line the filter's option table
 * misreads; every other fopen goes to libc.
 */

#include <config.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

FILE *
fopen (const char *path, const char *mode)
{
  static char buf[4096];
  FILE *(*real) (const char *, const char *) = dlsym (RTLD_NEXT, "fopen");
  const char *fake = getenv ("FAKE_CMDLINE");
  size_t i, n;

  if (fake == NULL || strcmp (path, "/proc/self/cmdline") != 0)
    return real (path, mode);
  n = strlen (fake);
  if (n >= sizeof buf)
    n = sizeof buf - 1;
  for (i = 0; i < n; ++i)
    buf[i] = fake[i] == ' ' ? '\0' : fake[i];
  buf[n++] = '\0';
  return fmemopen (buf, n, "r");
}
