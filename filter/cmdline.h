/* SPDX-License-Identifier: BSD-3-Clause */
/* cmdline.h: what nbdkit's command line says that a filter cannot
 * otherwise learn in time.
 */

#ifndef DIRTYBITMAP_CMDLINE_H
#define DIRTYBITMAP_CMDLINE_H

#include <stdbool.h>

/* nbdkit was given -r (--read-only): no client can write. */
extern bool cmdline_readonly (void);

/* At .open, with the readonly flag nbdkit passes: -1 (reported) if
 * nbdkit opens a connection writable on a server that
 * cmdline_readonly took for -r.
 */
extern int cmdline_check_open (int readonly);

#endif /* DIRTYBITMAP_CMDLINE_H */
