/* SPDX-License-Identifier: BSD-3-Clause */
/* error.c: errors as values (see error.h). */

#include <config.h>

#include <stdio.h>
#include <stdarg.h>
#include <string.h>

#include "error.h"

void
bmerr_set (struct bmerr *e, int errnum, const char *fs, ...)
{
  va_list args;

  if (e == NULL)
    return;
  e->errnum = errnum;
  va_start (args, fs);
  vsnprintf (e->msg, sizeof e->msg, fs, args);
  va_end (args);
}

void
bmerr_prefix (struct bmerr *e, const char *fs, ...)
{
  char old[sizeof e->msg];
  size_t n, rest;
  va_list args;

  if (e == NULL)
    return;
  memcpy (old, e->msg, sizeof old);
  va_start (args, fs);
  n = vsnprintf (e->msg, sizeof e->msg - 2, fs, args);
  va_end (args);
  n = n < sizeof e->msg - 2 ? n : sizeof e->msg - 3;
  e->msg[n++] = ':';
  e->msg[n++] = ' ';
  rest = strnlen (old, sizeof old);
  if (rest > sizeof e->msg - n - 1)
    rest = sizeof e->msg - n - 1;
  memcpy (e->msg + n, old, rest);
  e->msg[n + rest] = '\0';
}
