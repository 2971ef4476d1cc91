/* SPDX-License-Identifier: BSD-3-Clause */
/* liveness.h: the thread that renews the server's liveness record
 * (identity.h), so that a start after a crash can tell the server's
 * own writes from those made without the filter after it died.
 */

#ifndef DIRTYBITMAP_LIVENESS_H
#define DIRTYBITMAP_LIVENESS_H

/* At .after_fork: call renew every BMF_ALIVE_PERIOD until
 * liveness_stop.  -1 with errno if the thread cannot start.
 */
extern int liveness_start (void (*renew) (void));

/* At .cleanup, before the file closes: stop and join the thread. */
extern void liveness_stop (void);

#endif /* DIRTYBITMAP_LIVENESS_H */
