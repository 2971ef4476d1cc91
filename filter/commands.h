/* SPDX-License-Identifier: BSD-3-Clause */
/* commands.h: the control commands, run one at a time for the control
 * channel (control.c).
 */

#ifndef DIRTYBITMAP_COMMANDS_H
#define DIRTYBITMAP_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* What a control client holds. */
struct session {
  bool paused;                  /* it paused the disk */
};

/* flush_plugin flushes the layer below (for pause). */
extern void commands_init (int (*flush_plugin) (struct bmerr *err));

/* Run one request line (len bytes, no newline) and return the reply
 * line (malloced, no newline; NULL only when out of memory).
 */
extern char *commands_execute (struct session *s, const char *line,
                               size_t len);

/* After each round of requests, their replies queued: work left for
 * once the pause has ended (the checkpoint of a begin made in it).
 */
extern void commands_after (void);

/* The client has gone: what it held is let go (a pause resumes). */
extern void commands_end (struct session *s);

#endif /* DIRTYBITMAP_COMMANDS_H */
