/* SPDX-License-Identifier: BSD-3-Clause */
/* selection.h: which bitmap answers block status for new connections,
 * and which bitmaps connections are reading block status from.
 */

#ifndef DIRTYBITMAP_SELECTION_H
#define DIRTYBITMAP_SELECTION_H

#include <stdbool.h>
#include <stddef.h>

#include "actions.h"
#include "error.h"

/* The bitmap for connections made from now on (NULL: none, block
 * status passes through); -1 if out of memory.
 */
extern int selection_set (const char *name);
extern bool selection_is (const char *name);
/* For a new connection: a malloced copy, or NULL. */
extern int selection_get (char **name);
/* Drop the selection if still_there says its bitmap is gone. */
extern void selection_forget_unless (bool (*still_there) (const char *));

/* A connection reads block status from name (until it unpins it).
 * Pin only through store_pin, under store.c's meta_lock, which a
 * transaction holds from selection_check_discards to its publish.
 */
extern int selection_pin (const char *name);
extern void selection_unpin (const char *name);

/* Refuse actions that would clear or remove a pinned bitmap. */
extern int selection_check_discards (const struct action *acts, size_t n,
                                     struct bmerr *err);

extern void selection_free (void);

#endif /* DIRTYBITMAP_SELECTION_H */
