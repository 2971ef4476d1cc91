/* SPDX-License-Identifier: BSD-3-Clause */
/* extents.h: base:allocation answered from a bitmap. */

#ifndef DIRTYBITMAP_EXTENTS_H
#define DIRTYBITMAP_EXTENTS_H

#include <stdint.h>

#include <nbdkit-filter.h>

#include "tracker.h"

extern int bitmap_extents (nbdkit_next *next, const struct bitmap_set *s,
                           const struct live_bitmap *lb,
                           uint32_t count, uint64_t offset, uint32_t flags,
                           struct nbdkit_extents *extents, int *err);

#endif /* DIRTYBITMAP_EXTENTS_H */
