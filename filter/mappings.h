/* SPDX-License-Identifier: BSD-3-Clause */
/* mappings.h: regions of the bitmap file mapped once, shared by every
 * live set that uses them, and counted.
 */

#ifndef DIRTYBITMAP_MAPPINGS_H
#define DIRTYBITMAP_MAPPINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "bits.h"
#include "bmfile.h"

/* The region's bits if it is mapped already for out->nr_bits bits
 * (words and summary shared), with one more reference; false if not.
 */
extern bool mapping_find (uint64_t offset, uint64_t length, bool writable,
                          struct bits *out);

/* A region just mapped (b taken over, its space reserved in the file by
 * the caller), with one reference.  -1 if out of memory.
 */
extern int mapping_add (uint64_t offset, uint64_t length, bool writable,
                        const struct bits *b);

/* One reference fewer; the last unmaps and gives the region back. */
extern void mapping_put (struct bmf *f, const struct bits *b);

#endif /* DIRTYBITMAP_MAPPINGS_H */
