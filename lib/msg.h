/* SPDX-License-Identifier: BSD-3-Clause */
/* msg.h: messages.  lib/ never prints an error (errors are returned
 * as values, see error.h): what it says for debugging goes through
 * bm_debug, which the filter implements with nbdkit_debug and the
 * tool with stderr (only with -v), each adding its "dirtybitmap: "
 * prefix.  bm_error is the tool's, on stderr; the filter reports its
 * errors with filter_error (filter/report.h).
 */

#ifndef DIRTYBITMAP_MSG_H
#define DIRTYBITMAP_MSG_H

extern void bm_error (const char *fs, ...)
  __attribute__ ((format (printf, 1, 2)));
extern void bm_debug (const char *fs, ...)
  __attribute__ ((format (printf, 1, 2)));

#endif /* DIRTYBITMAP_MSG_H */
