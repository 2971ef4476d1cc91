/* SPDX-License-Identifier: BSD-3-Clause */
/* msg.h: messages.  lib/ never prints an error (errors are returned
 * as values, see error.h): what it says for debugging goes through
 * bm_debug, which the filter implements with nbdkit_debug and the
 * tool with stderr (only with -v), each adding its "dirtybitmap: "
 * prefix.  bm_error is the tool's one printer of what it tells its
 * user on stderr (errors, warnings and notes alike): "dirtybitmap: ",
 * the message, a newline; the filter reports its errors with
 * filter_error (filter/report.h).
 */

#ifndef DIRTYBITMAP_MSG_H
#define DIRTYBITMAP_MSG_H

#include <stdarg.h>

extern void bm_error (const char *fs, ...)
  __attribute__ ((format (printf, 1, 2)));
extern void bm_verror (const char *fs, va_list args)
  __attribute__ ((format (printf, 1, 0)));
extern void bm_debug (const char *fs, ...)
  __attribute__ ((format (printf, 1, 2)));

#endif /* DIRTYBITMAP_MSG_H */
