/* SPDX-License-Identifier: BSD-3-Clause */
/* source.h: the source of a restore (restore.h): an NBD export, given
 * by its URI, read through libnbd.
 */

#ifndef DIRTYBITMAP_SOURCE_H
#define DIRTYBITMAP_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

struct source;

/* Connect once, to learn whether the source is there and its size,
 * and disconnect (at .get_ready: the connections that read it are
 * made after nbdkit forks).
 */
extern int source_probe (const char *uri, uint64_t *size,
                         struct bmerr *err);

extern struct source *source_new (const char *uri);
extern void source_free (struct source *s);

/* Read [offset, offset+count) of the source (several requests in
 * flight).  give_up (if set) is asked every second while the source
 * does not answer: true ends the wait with an error (nbdkit shuts
 * down, the client has gone).
 */
extern int source_pread (struct source *s, void *buf, uint64_t count,
                         uint64_t offset, bool (*give_up) (void),
                         struct bmerr *err);

/* Read the n ranges r of the source, all with requests in flight
 * together (as source_pread; each range's count more than 0).
 */
struct source_range {
  char *buf;
  uint64_t count, offset;
};
extern int source_preadv (struct source *s, const struct source_range *r,
                          size_t n, bool (*give_up) (void),
                          struct bmerr *err);

/* Which of the source reads as zeroes, from offset on: at most *n
 * extents (*n is set to how many), in order and adjacent, covering
 * [offset, offset+count) or less (the answer may stop short).  A
 * source that does not answer base:allocation is data all over.
 */
struct source_extent {
  uint64_t length;
  bool zero;
};
extern int source_map (struct source *s, uint64_t offset, uint64_t count,
                       struct source_extent *ex, size_t *n,
                       bool (*give_up) (void), struct bmerr *err);

#endif /* DIRTYBITMAP_SOURCE_H */
