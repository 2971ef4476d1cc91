/* SPDX-License-Identifier: BSD-3-Clause */
/* restore.h: a disk restored from a source while it is served
 * (restore-from=, nbdkit-dirtybitmap-filter(1), INSTANT RESTORE): the
 * requests of the disk's connections while a restore runs (restore.c)
 * and the fill in the background (restore-fill.c).  The record that
 * makes it persistent is the store's (store-restore.c).
 */

#ifndef DIRTYBITMAP_RESTORE_H
#define DIRTYBITMAP_RESTORE_H

#include <stdbool.h>
#include <stdint.h>

#include <nbdkit-filter.h>

#include "error.h"

/* At .get_ready, once the store is open: take over the restore that
 * the file says runs, if any (reported on error).
 */
extern int restore_init (void);

/* At .after_fork: give_up says that nbdkit shuts down.  Then, if a
 * restore runs, restore_fill_start: the layer below, checked, and the
 * fill thread (restore-fill.c; reported on error).
 */
extern void restore_start (bool (*give_up) (void));
extern int restore_fill_start (nbdkit_backend *backend,
                               const char *export_name);

/* At .cleanup: restore_fill_stop stops the fill; then restore_stop
 * lets the source and the bits go.
 */
extern void restore_fill_stop (void);
extern void restore_stop (void);

/* A restore runs (lock-free).  Once false it stays false. */
extern bool restore_active (void);

/* At .prepare, while a restore runs: refuse (reported) a connection
 * to a disk of another size than the one being restored, or whose
 * layer below cannot flush or does not promise multi-conn.
 */
extern int restore_check_connection (nbdkit_next *next);

/* The requests of a disk connection while a restore runs, in flight
 * (inflight.h).  A read of granules not restored yet reads them from
 * the source and writes them below.  A change (pwrite, zero) first
 * fills from the source the granules it covers only in part, then
 * calls down (which tracks it and passes it down), flushes below and
 * marks its granules restored; fast_zero refuses (ENOTSUP) a change
 * that needs a fill.
 */
extern int restore_read (nbdkit_next *next, void *buf, uint32_t count,
                         uint64_t offset, uint32_t flags, int *err);
extern int restore_change (nbdkit_next *next, uint32_t count,
                           uint64_t offset, uint32_t flags,
                           int (*down) (void *opaque, int *err),
                           void *opaque, int *err);

/* Whether a trim may go down: only on granules all restored (a trim
 * elsewhere is dropped: the restore fills them).
 */
extern bool restore_may_trim (uint32_t count, uint64_t offset);

/* Make every restored bit set so far durable (a flush, a FUA write). */
extern int restore_sync (int *err);

/* Block status while a restore runs: answer fills a list from offset
 * (the layer below's, or a bitmap's); what it says of granules not
 * restored yet describes the disk as it was before, so there their
 * types become data, but for the bits of keep (NBDKIT_EXTENT_HOLE for
 * a bitmap's "unchanged").
 */
extern int restore_extents (nbdkit_next *next, uint32_t count,
                            uint64_t offset, uint32_t flags,
                            struct nbdkit_extents *extents, uint32_t keep,
                            int (*answer) (void *opaque,
                                           struct nbdkit_extents *ex,
                                           int *err),
                            void *opaque, int *err);

/* The restore for the query: none (source NULL), running, or
 * complete.
 */
struct restore_info {
  char *source;                 /* malloced */
  uint64_t done_bytes, size;
  bool complete;
};
extern int restore_query (struct restore_info *info, struct bmerr *err);
extern void restore_info_free (struct restore_info *info);

#endif /* DIRTYBITMAP_RESTORE_H */
