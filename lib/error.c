/* SPDX-License-Identifier: BSD-3-Clause */
/* error.c: errors as values (see error.h). */

#include <config.h>

#include <stdio.h>
#include <stdarg.h>
#include <string.h>

#include "error.h"

void
bmerr_vset (struct bmerr *e, int errnum, const char *fs, va_list args)
{
  if (e == NULL)
    return;
  e->errnum = errnum;
  e->hint_at = 0;
  vsnprintf (e->msg, sizeof e->msg, fs, args);
}

void
bmerr_set (struct bmerr *e, int errnum, const char *fs, ...)
{
  va_list args;

  va_start (args, fs);
  bmerr_vset (e, errnum, fs, args);
  va_end (args);
}

void
bmerr_vfirst (struct bmerr *e, int errnum, const char *fs, va_list args)
{
  if (e && !bmerr_failed (e))
    bmerr_vset (e, errnum, fs, args);
}

void
bmerr_first (struct bmerr *e, int errnum, const char *fs, ...)
{
  va_list args;

  if (e == NULL || bmerr_failed (e))
    return;
  va_start (args, fs);
  bmerr_vset (e, errnum, fs, args);
  va_end (args);
}

void
bmerr_clear (struct bmerr *e)
{
  e->errnum = 0;
  e->hint_at = 0;
  e->msg[0] = '\0';
}

/* Put the n bytes of text at offset at of e's message, moving the rest
 * along (what no longer fits is cut); a hint's place after at moves
 * with it.
 */
static void
insert (struct bmerr *e, size_t at, const char *text, size_t n)
{
  size_t len = strnlen (e->msg, sizeof e->msg - 1);
  size_t rest;

  if (at > len || n >= sizeof e->msg - at)
    return;
  rest = len - at;
  if (at + n + rest > sizeof e->msg - 1)
    rest = sizeof e->msg - 1 - at - n;
  memmove (e->msg + at + n, e->msg + at, rest);
  memcpy (e->msg + at, text, n);
  e->msg[at + n + rest] = '\0';
  if (e->hint_at > 0 && (size_t) e->hint_at >= at)
    e->hint_at = e->hint_at + n < sizeof e->msg ? e->hint_at + n : 0;
}

void
bmerr_prefix (struct bmerr *e, const char *fs, ...)
{
  char prefix[sizeof e->msg];
  int n;
  va_list args;

  if (e == NULL)
    return;
  va_start (args, fs);
  n = vsnprintf (prefix, sizeof prefix - 2, fs, args);
  va_end (args);
  if (n < 0)
    return;
  if ((size_t) n > sizeof prefix - 3)
    n = sizeof prefix - 3;
  prefix[n++] = ':';
  prefix[n++] = ' ';
  insert (e, 0, prefix, n);
}

void
bmerr_hint_then (struct bmerr *e, const char *fs, ...)
{
  size_t len;
  va_list args;

  if (e == NULL)
    return;
  len = strnlen (e->msg, sizeof e->msg - 1);
  e->hint_at = len;
  va_start (args, fs);
  vsnprintf (e->msg + len, sizeof e->msg - len, fs, args);
  va_end (args);
}

void
bmerr_append_hint (struct bmerr *e, const char *fs, ...)
{
  char hint[256];
  int n;
  va_list args;

  if (e == NULL || e->hint_at <= 0)
    return;
  hint[0] = ' ';
  hint[1] = '(';
  va_start (args, fs);
  n = vsnprintf (hint + 2, sizeof hint - 3, fs, args);
  va_end (args);
  if (n < 0)
    return;
  n = 2 + ((size_t) n < sizeof hint - 4 ? (size_t) n : sizeof hint - 4);
  hint[n++] = ')';
  insert (e, e->hint_at, hint, n);
}
