/* SPDX-License-Identifier: BSD-3-Clause */
/* msg.h: how lib/ reports.  lib/ never prints or exits by itself: the
 * filter implements these with nbdkit_verror/nbdkit_vdebug, the tool
 * with stderr, each adding its "dirtybitmap: " prefix.
 */

#ifndef DIRTYBITMAP_MSG_H
#define DIRTYBITMAP_MSG_H

extern void bm_error (const char *fs, ...)
  __attribute__ ((format (printf, 1, 2)));
extern void bm_debug (const char *fs, ...)
  __attribute__ ((format (printf, 1, 2)));

#endif /* DIRTYBITMAP_MSG_H */
