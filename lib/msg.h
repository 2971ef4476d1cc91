/* SPDX-License-Identifier: BSD-3-Clause */
/* msg.h: messages.  lib/ never prints an error (errors are returned
 * as values, see error.h): what it says for debugging goes through
 * bm_debug.  The filter implements these with nbdkit_error and
 * nbdkit_debug, the tool with stderr (debug only with -v), each
 * adding its "dirtybitmap: " prefix.
 */

#ifndef DIRTYBITMAP_MSG_H
#define DIRTYBITMAP_MSG_H

extern void bm_error (const char *fs, ...)
  __attribute__ ((format (printf, 1, 2)));
extern void bm_debug (const char *fs, ...)
  __attribute__ ((format (printf, 1, 2)));

#endif /* DIRTYBITMAP_MSG_H */
