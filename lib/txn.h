/* SPDX-License-Identifier: BSD-3-Clause */
/* txn.h: changing a bitmap file: transactions that commit atomically.
 *
 * Operations change a copy of the state; data regions are copied on
 * write, so nothing the committed state refers to is touched until
 * bmf_txn_commit switches the header.  An operation that fails returns
 * -1 with the reason in err (without the file name, unless it is an
 * I/O error); the transaction stays usable (it can be aborted, or the
 * caller may go on without that operation).  A dry run checks the
 * rules only and writes nothing.
 */

#ifndef DIRTYBITMAP_TXN_H
#define DIRTYBITMAP_TXN_H

#include <stdbool.h>
#include <stdint.h>

#include "bmfile.h"
#include "error.h"
#include "format.h"

struct bmf_txn;

extern struct bmf_txn *bmf_txn_begin (struct bmf *f, bool dry_run,
                                      struct bmerr *err);
/* The state the transaction would commit. */
extern const struct bmf_state *bmf_txn_state (const struct bmf_txn *t);
extern struct bmf *bmf_txn_file (const struct bmf_txn *t);

extern int bmf_txn_add (struct bmf_txn *t, const char *name, unsigned gbits,
                        struct bmerr *err);
extern int bmf_txn_remove (struct bmf_txn *t, const char *name,
                           struct bmerr *err);
extern int bmf_txn_clear (struct bmf_txn *t, const char *name,
                          struct bmerr *err);
extern int bmf_txn_enable (struct bmf_txn *t, const char *name, bool enable,
                           struct bmerr *err);
/* dst |= src; src_file is NULL for a bitmap of the same file. */
extern int bmf_txn_merge (struct bmf_txn *t, const char *dst,
                          struct bmf *src_file, const char *src,
                          struct bmerr *err);
/* A bitmap from outside the bitmap files (a qcow2 image's, read
 * through qemu by the tool): its bits in memory, or why it cannot be
 * used, which a merge from it reports in its turn (after the checks
 * of its target, as qemu-img does).
 */
struct bmf_foreign {
  const char *name;             /* as its image calls it */
  const char *origin;           /* the image, as the user named it */
  struct bmerr problem;         /* errnum 0, or why it cannot be used */
  uint64_t disk_size;
  unsigned gbits;               /* granularity 2^gbits bytes */
  struct bits bits;             /* malloced words */
};
/* dst |= src, across granularities as bmf_txn_merge. */
extern int bmf_txn_merge_foreign (struct bmf_txn *t, const char *dst,
                                  const struct bmf_foreign *src,
                                  struct bmerr *err);
/* Cover a disk of new_size bytes; when the size was known, the new
 * area is dirty.  Refused while a restore runs (EBUSY).
 */
extern int bmf_txn_resize (struct bmf_txn *t, uint64_t new_size,
                           struct bmerr *err);
/* Give every bitmap a coarse shadow of 2^cgbits byte granules (see
 * shadow.h), made from its bits, unless it has one of that
 * granularity; cgbits 0 drops the shadows.
 */
extern int bmf_txn_set_shadows (struct bmf_txn *t, unsigned cgbits,
                                struct bmerr *err);
/* Begin restoring the disk from source (a URI, restore-record.h), in
 * granules of 2^gbits bytes: none is restored yet, and every recording
 * bitmap becomes dirty all over (txn-restore.c).  The disk's size must be
 * known, and no other restore may be running (a complete one is
 * replaced).
 */
extern int bmf_txn_restore_begin (struct bmf_txn *t, const char *source,
                                  unsigned gbits, struct bmerr *err);
/* The running restore is complete: only its source is kept. */
extern int bmf_txn_restore_done (struct bmf_txn *t, struct bmerr *err);

/* Mark every enabled or settling bitmap inconsistent (bits may have
 * been lost).
 */
extern void bmf_txn_mark_enabled_inconsistent (struct bmf_txn *t);
extern void bmf_txn_set_open (struct bmf_txn *t, bool open,
                              enum bmf_durability mode);
/* Record (or, with NULL, forget) the disk's identity. */
extern void bmf_txn_set_disk_id (struct bmf_txn *t,
                                 const struct bmf_disk_id *id);

/* The file is served, and writers set bits in it (txn-sync.c): from
 * now on commits sync only what the new header needs that may not be
 * on stable storage yet, not the whole file.  Not while a commit must
 * make every bit durable (at startup and at close).  The first call
 * opens the descriptor commits sync through (bmfile-impl.h): -1 with
 * err if it cannot.
 */
extern int bmf_set_live (struct bmf *f, bool live, struct bmerr *err);

/* Commit and free t.  On error the file keeps its previous state. */
extern int bmf_txn_commit (struct bmf_txn *t, struct bmerr *err);
/* The commit in two steps, for a server whose writers set bits
 * meanwhile: prepare writes and syncs everything but the header (on
 * error t stays, to abort); finish writes and syncs the header, and
 * frees t.  With bmf_set_live, a bitmap that stops recording is
 * committed settling (txn-sync.c): its bits are not synced, and the
 * caller may go on setting them until it settles it.
 */
extern int bmf_txn_prepare (struct bmf_txn *t, struct bmerr *err);
extern int bmf_txn_finish (struct bmf_txn *t, struct bmerr *err);
extern void bmf_txn_abort (struct bmf_txn *t);

/* Whether a bitmap of the committed state is settling. */
extern bool bmf_settling (const struct bmf *f);
/* Have this commit settle every settling bitmap: sync its bits before
 * the header, which no longer says it settles.  Only once nothing
 * sets bits in them any more.
 */
extern void bmf_txn_settle (struct bmf_txn *t);

#endif /* DIRTYBITMAP_TXN_H */
