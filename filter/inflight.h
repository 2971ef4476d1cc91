/* SPDX-License-Identifier: BSD-3-Clause */
/* inflight.h: request accounting: which requests are in flight, a
 * gate that holds new ones, and grace periods after which no request
 * can still use something that was replaced.
 */

#ifndef DIRTYBITMAP_INFLIGHT_H
#define DIRTYBITMAP_INFLIGHT_H

#include <stdbool.h>

/* give_up says, for a request held at the closed gate, that it must
 * stop waiting (nbdkit is shutting down, or its client has gone).
 */
extern void inflight_init (bool (*give_up) (void));

/* Every data request of a disk connection runs between these.
 * inflight_enter waits while the gate is closed and sets a token for
 * inflight_exit; -1 if it gave up waiting (then it has not entered).
 */
extern int inflight_enter (unsigned *token);
extern void inflight_exit (unsigned token);

/* Close the gate (new requests wait at inflight_enter) and wait until
 * no request is in flight.  Closes nest: the gate opens again at the
 * last inflight_open.
 */
extern void inflight_close (void);
extern void inflight_open (void);

/* Wait until every request that entered before this call has exited.
 * New requests are not held.  What they can see must be published
 * before the call: they see that, the old one is then unused.
 */
extern void inflight_grace (void);

#endif /* DIRTYBITMAP_INFLIGHT_H */
