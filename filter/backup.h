/* SPDX-License-Identifier: BSD-3-Clause */
/* backup.h: the backup view's lifecycle: begin at a cut, end, and
 * finding it for the write path and for connections.
 */

#ifndef DIRTYBITMAP_BACKUP_H
#define DIRTYBITMAP_BACKUP_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "view.h"

/* The export name of the disk (a view may not take it); disk_size
 * asks the layer below for the disk's size now (backup-begin reads it
 * at its cut).
 */
extern void backup_init (const char *export_name, const char *default_dir,
                         int (*disk_size) (uint64_t *size,
                                           struct bmerr *err));

/* At unload: frees what backup_init kept. */
extern void backup_unload (void);

/* The view that writes must keep, or NULL: lock-free, valid while the
 * request is in flight.
 */
extern struct view *backup_current (void);

struct backup_params {
  const char *name;             /* the view's export name */
  const char *bitmap;           /* incremental from it, or NULL: full */
  const char *checkpoint;       /* added at the cut, or NULL */
  const char *scratch;          /* directory of the store, or NULL */
};

/* Do, the writes going on, what a begin of p by owner needs that does
 * not depend on the instant (backup-prepare): the same checks as the
 * begin.  One preparation at a time: a new one replaces it.
 */
extern int backup_prepare (const struct backup_params *p, const void *owner,
                           struct bmerr *err);

/* Freeze a view (and add the checkpoint) at one cut through the
 * writes.  owner identifies who began it (backup_owned_by).  With
 * defer (the owner holds a pause), the reply may come before the
 * checkpoint is committed: backup_finish_pending commits it.
 */
extern int backup_begin (const struct backup_params *p, const void *owner,
                         bool end_with_owner, bool defer,
                         struct bmerr *err);

/* Commit the checkpoint of a begin with defer, if one waits (a failure
 * breaks the view and is said by the query).  On the control thread,
 * before anything else there that takes the store's locks.
 */
extern void backup_finish_pending (void);
extern int backup_end (const char *name, struct bmerr *err);

/* The owner has gone: if it began the backup asking for that, end it
 * and remove the checkpoint it added.
 */
extern void backup_owner_gone (const void *owner);

/* A connection for export name: a reference to the view, or NULL. */
extern struct view *backup_open_view (const char *name);

struct backup_info {
  bool active;
  char *name, *bitmap, *checkpoint;
  char *failure;                /* why it failed after it began, or NULL */
  struct view_info view;
};
extern void backup_query (struct backup_info *info);
extern void backup_info_free (struct backup_info *info);

#endif /* DIRTYBITMAP_BACKUP_H */
