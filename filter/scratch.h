/* SPDX-License-Identifier: BSD-3-Clause */
/* scratch.h: the scratch store of a backup view: where the old data of
 * granules overwritten after the cut is kept.
 */

#ifndef DIRTYBITMAP_SCRATCH_H
#define DIRTYBITMAP_SCRATCH_H

#include <stdint.h>

#include "error.h"

struct scratch;

/* A new, empty store in directory dir. */
extern struct scratch *scratch_create (const char *dir, struct bmerr *err);
extern void scratch_free (struct scratch *s);

/* Data is kept at its offset on the disk.  -1 with errno on error. */
extern int scratch_write (struct scratch *s, const void *buf,
                          uint32_t count, uint64_t offset);
extern int scratch_read (struct scratch *s, void *buf,
                         uint32_t count, uint64_t offset);
/* Give the space of [offset, offset+count) back (best effort). */
extern void scratch_release (struct scratch *s, uint64_t count,
                             uint64_t offset);
/* Bytes of storage it uses now. */
extern uint64_t scratch_allocated (struct scratch *s);

#endif /* DIRTYBITMAP_SCRATCH_H */
