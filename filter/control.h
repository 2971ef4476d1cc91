/* SPDX-License-Identifier: BSD-3-Clause */
/* control.h: the control socket (control=PATH). */

#ifndef DIRTYBITMAP_CONTROL_H
#define DIRTYBITMAP_CONTROL_H

#include "error.h"

/* At .get_ready, where errors reach the user: make the socket (a stale
 * one left by a dead server is replaced; anything else at path is
 * refused and left alone).
 */
extern int control_open (const char *path, struct bmerr *err);

/* At .after_fork: serve it from a thread. */
extern int control_start (struct bmerr *err);

/* At .cleanup: stop the thread, drop the clients, remove the socket. */
extern void control_close (void);

#endif /* DIRTYBITMAP_CONTROL_H */
