/* SPDX-License-Identifier: BSD-3-Clause */
/* utf8.h: text for JSON.  Bitmap names are bytes (anything but NUL),
 * but JSON text must be UTF-8: what is not valid UTF-8 is shown as
 * U+FFFD, so that strict parsers accept every document printed.
 */

#ifndef DIRTYBITMAP_UTF8_H
#define DIRTYBITMAP_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* A malloced copy of s with each byte that does not start a valid
 * UTF-8 sequence replaced by U+FFFD; NULL if out of memory.
 */
extern char *utf8_valid_copy (const char *s);

/* Whether the len bytes at s are valid UTF-8: no overlong form, no
 * surrogate, nothing beyond U+10FFFF (NUL bytes are valid).
 */
extern bool utf8_valid (const char *s, size_t len);

#endif /* DIRTYBITMAP_UTF8_H */
