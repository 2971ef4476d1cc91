/* SPDX-License-Identifier: BSD-3-Clause */
/* utf8.c: text for JSON (see utf8.h). */

#include <config.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* The length of the valid UTF-8 sequence at s, which has left bytes
 * (at least 1), from 1 to 4, or 0.
 */
static size_t
sequence (const unsigned char *s, size_t left)
{
  size_t n, i;
  unsigned long cp;

  if (s[0] < 0x80)
    return 1;
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    n = 2, cp = s[0] & 0x1f;
  else if (s[0] >= 0xe0 && s[0] <= 0xef)
    n = 3, cp = s[0] & 0x0f;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4)
    n = 4, cp = s[0] & 0x07;
  else
    return 0;
  if (n > left)
    return 0;
  for (i = 1; i < n; ++i) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  /* Overlong forms, surrogates, beyond U+10FFFF. */
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
      (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
    return 0;
  return n;
}

bool
utf8_valid (const char *str, size_t len)
{
  const unsigned char *s = (const unsigned char *) str;
  size_t n;

  while (len > 0) {
    n = sequence (s, len);
    if (n == 0)
      return false;
    s += n;
    len -= n;
  }
  return true;
}

char *
utf8_valid_copy (const char *str)
{
  static const char replacement[] = "\xef\xbf\xbd";     /* U+FFFD */
  const unsigned char *s = (const unsigned char *) str;
  size_t left = strlen (str), n;
  char *out = malloc (left * 3 + 1), *p = out;

  if (out == NULL)
    return NULL;
  while (left > 0) {
    n = sequence (s, left);
    if (n == 0) {
      memcpy (p, replacement, 3);
      p += 3;
      s++;
      left--;
    }
    else {
      memcpy (p, s, n);
      p += n;
      s += n;
      left -= n;
    }
  }
  *p = '\0';
  return out;
}
