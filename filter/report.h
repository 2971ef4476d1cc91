/* SPDX-License-Identifier: BSD-3-Clause */
/* report.h: the filter's messages.  nbdkit prefixes a message with
 * the plugin's name, not the filter's, so every error and debug
 * message of the filter starts with "dirtybitmap: ", written here
 * once.
 */

#ifndef DIRTYBITMAP_REPORT_H
#define DIRTYBITMAP_REPORT_H

#include <nbdkit-filter.h>

/* filter_error ("%s: fdatasync: %m", path): nbdkit_error with the
 * prefix.  The format must be a string literal (it is joined to the
 * prefix at compile time, so nbdkit's format checks and %m still
 * apply).
 */
#define filter_error(...) nbdkit_error ("dirtybitmap: " __VA_ARGS__)

/* The same for nbdkit_debug (-v, or -D dirtybitmap.verbose=1 for the
 * write path's traces).
 */
#define filter_debug(...) nbdkit_debug ("dirtybitmap: " __VA_ARGS__)

#endif /* DIRTYBITMAP_REPORT_H */
