/* SPDX-License-Identifier: BSD-3-Clause */
/* store.h: the bitmap file of a running filter: opening it at startup
 * with the action= list, changing it while the disk is served
 * (transactions, resizes, the selected bitmap), and closing it.
 */

#ifndef DIRTYBITMAP_STORE_H
#define DIRTYBITMAP_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "actions.h"
#include "bits.h"
#include "bmfile.h"
#include "error.h"

enum extents_mode { EXTENTS_DEFAULT, EXTENTS_BITMAP, EXTENTS_PASSTHROUGH };

struct store_config {
  const char *path;             /* the bitmap file */
  const char *bitmap;           /* bitmap= or NULL */
  struct action *actions;       /* action=, targets set to bitmap= */
  size_t nr_actions;
  const char *merge_file;       /* merge-file= or NULL */
  enum bmf_durability durability;
  unsigned cgbits;              /* durability=coarse: its granularity */
  enum extents_mode extents;
  bool readonly;                /* nbdkit -r: never write the file */
  const char *disk_file;        /* the plugin's regular file, or NULL */
  mode_t create_mode;           /* permission bits of a new file */
  const char *restore_from;     /* restore-from=, or NULL */
  const char *restore_checkpoint; /* restore-checkpoint=, or NULL */
  unsigned checkpoint_gbits;    /* its granularity */
};

/* At .get_ready: open (or create), lock, apply the actions, record
 * the open.  Errors are reported (nbdkit_error).
 */
extern int store_open (const struct store_config *cfg);

/* Every BMF_ALIVE_PERIOD while serving (liveness.h): renew the
 * liveness record of a run that writes.
 */
extern void store_alive (void);

/* At .cleanup: sync, record the clean close, unmap, unlock. */
extern void store_close (void);

/* At .prepare: make the bitmaps cover a disk of this size. */
extern int store_resize (uint64_t disk_size);

/* The bitmap that answers block status for connections made from now
 * on (NULL: the layer below answers).
 */
extern int store_select (const char *name, struct bmerr *err);

/* Apply actions all-or-nothing while serving: a cut through the
 * writes (see nbdkit-dirtybitmap-filter(1), CONTROL).
 */
extern int store_transaction (struct action *acts, size_t n,
                              struct bmerr *err);

/* The cut of a backup view (backup.c; store-cut.c says how), in
 * three steps.  store_cut_prepare, the writes going on: check bitmap
 * B (unless NULL: a full backup), size frozen for its bits (its words
 * malloced, or kept if of that size already), copy them into it
 * (tracker_copy_begin) and give its granularity (else the default) in
 * gbits, and prepare the transaction that adds checkpoint (unless
 * NULL).  store_cut_make, the gate closed: bring the bitmaps to
 * disk_size (a resize, as at .prepare: the disk may have changed size
 * while no client was connected), bring frozen up to B's bits now (the
 * pages changed since the copy; all of them if the preparation no
 * longer holds; gbits set), and publish the
 * checkpoint recording: the cut.  With a checkpoint it returns with
 * meta_lock held, for store_cut_finish, which commits it, writes going
 * on, and must come next on the same thread.  -1 with err: ENOENT,
 * EINVAL if B is inconsistent, EROFS, the resize or the commit
 * failed, ENOMEM.  store_cut_free frees a cut that is not between its
 * make and its finish.
 */
struct store_cut;
extern struct store_cut *store_cut_prepare (const char *bitmap,
                                            const char *checkpoint,
                                            uint64_t disk_size,
                                            struct bits *frozen,
                                            unsigned *gbits,
                                            struct bmerr *err);
extern int store_cut_make (struct store_cut *c, uint64_t disk_size,
                           struct bits *frozen, unsigned *gbits,
                           struct bmerr *err);
extern int store_cut_finish (struct store_cut *c, struct bmerr *err);
extern void store_cut_free (struct store_cut *c);

/* A running restore (restore.h), as the file records it: its source
 * (malloced), the disk's size, its granularity, and its restored bits
 * mapped writable (their region kept from reuse until
 * store_restore_unmap).  0 with *source NULL if no restore runs.
 */
extern int store_restore_map (char **source, uint64_t *size,
                              unsigned *gbits, struct bits *bits,
                              struct bmerr *err);
extern void store_restore_unmap (struct bits *bits);

/* The running restore is complete: record it (a commit). */
extern int store_restore_done (struct bmerr *err);

/* The restore the file records, for the query: its state and source
 * (malloced, NULL if none) and the disk's size.
 */
extern int store_restore_record (enum bmf_restore *state, char **source,
                                 uint64_t *size);

/* Whether path names the bitmap file of this store. */
extern bool store_is_bitmap_file (const char *path);

/* Make every bit set so far durable. */
extern int store_sync (struct bmerr *err);

/* A connection's first block status pins the bitmap it reads
 * (selection_pin), atomically with transactions: the pin comes before
 * a transaction checks the pins, which then refuses to clear or
 * remove it, or after the transaction has published, and the
 * connection reads the bitmaps as they are after it from its first
 * block status on.  So it may wait for a transaction to commit.
 */
extern int store_pin (const char *name);

struct store_bitmap_info {
  char *name;
  uint64_t granularity;
  bool recording, consistent, selected;
  uint64_t dirty_bytes;
};

struct store_info {
  char *path;
  bool sized;
  uint64_t size;
  enum bmf_durability durability;
  bool readonly;
  const char *state;            /* "open", "closed", "failed" */
  size_t nr;
  struct store_bitmap_info *bitmaps;
};

extern int store_query (struct store_info *info, struct bmerr *err);
extern void store_info_free (struct store_info *info);

#endif /* DIRTYBITMAP_STORE_H */
