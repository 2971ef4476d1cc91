/* SPDX-License-Identifier: BSD-3-Clause */
/* mappings.c: the regions of the bitmap file mapped for the live sets,
 * shared between them (see mappings.h).
 *
 * A region (a bitmap's data, or its coarse shadow) is mapped once, with
 * its summary, however many sets use it: a transaction builds two sets
 * (transitional and final) that map almost all the same regions as the
 * set before them, and mapping, summarizing and later unmapping every
 * region for each would cost in proportion to the size of all the
 * bitmaps, and each munmap interrupts every thread of nbdkit to flush
 * its TLB.  The last set to let a region go unmaps it and gives it back
 * to the file (bmf_unreserve): from then on a transaction may reuse its
 * space.
 */

#include <config.h>

#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>

#include "mappings.h"
#include "util.h"

struct mapping {
  uint64_t offset, length;
  bool writable;
  unsigned refs;
  struct bits bits;
};

/* Protects the list of mappings and their reference counts (not the
 * bits in them: see tracker.c).  Taken under the store's meta_lock
 * and the bits lock, never the other way.
 */
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mapping *maps;
static size_t nr_maps, cap_maps;

bool
mapping_find (uint64_t offset, uint64_t length, bool writable,
              struct bits *out)
{
  size_t i;
  bool found = false;

  pthread_mutex_lock (&maps_lock);
  for (i = 0; i < nr_maps; ++i)
    if (maps[i].offset == offset && maps[i].length == length &&
        maps[i].writable == writable &&
        maps[i].bits.nr_bits == out->nr_bits) {
      maps[i].refs++;
      *out = maps[i].bits;
      found = true;
      break;
    }
  pthread_mutex_unlock (&maps_lock);
  return found;
}

int
mapping_add (uint64_t offset, uint64_t length, bool writable,
             const struct bits *b)
{
  int r = 0;

  pthread_mutex_lock (&maps_lock);
  if (array_room (&maps, &cap_maps, nr_maps, sizeof *maps, 16) == -1) {
    r = -1;
    goto out;
  }
  maps[nr_maps++] = (struct mapping) {
    .offset = offset, .length = length, .writable = writable, .refs = 1,
    .bits = *b,
  };
 out:
  pthread_mutex_unlock (&maps_lock);
  return r;
}

void
mapping_put (struct bmf *f, const struct bits *b)
{
  struct mapping gone = { .refs = 1 };
  size_t i;

  if (b->map_base == NULL)
    return;
  pthread_mutex_lock (&maps_lock);
  for (i = 0; i < nr_maps; ++i)
    if (maps[i].bits.map_base == b->map_base) {
      if (--maps[i].refs == 0) {
        gone = maps[i];
        maps[i] = maps[--nr_maps];
      }
      break;
    }
  if (nr_maps == 0) {           /* the last set is gone: nothing kept */
    free (maps);
    maps = NULL;
    cap_maps = 0;
  }
  pthread_mutex_unlock (&maps_lock);
  if (gone.refs == 0) {
    bmf_unmap (&gone.bits);
    bmf_unreserve (f, gone.offset, gone.length);
  }
}
