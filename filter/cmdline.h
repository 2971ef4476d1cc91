/* SPDX-License-Identifier: BSD-3-Clause */
/* cmdline.h: what nbdkit's command line says that a filter cannot
 * otherwise learn in time.
 */

#ifndef DIRTYBITMAP_CMDLINE_H
#define DIRTYBITMAP_CMDLINE_H

#include <stdbool.h>

/* nbdkit was given -r (--read-only): no client can write. */
extern bool nbdkit_started_readonly (void);

#endif /* DIRTYBITMAP_CMDLINE_H */
