/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/error.c: the engine's errors are values, a malloced string in
 * the result; the first one is what the caller reports.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>

#include "internal.h"

void
set_error (char **errp, const char *fs, ...)
{
  va_list args;

  if (*errp)
    return;
  va_start (args, fs);
  if (vasprintf (errp, fs, args) == -1)
    *errp = strdup ("out of memory");
  va_end (args);
}
