/* SPDX-License-Identifier: BSD-3-Clause */
/* bmfile.h: a bitmap file, open: created, opened, locked, validated,
 * and its bitmap data mapped.  The file is opaque: its state is read
 * through bmf_state, and changed only by transactions (txn.h).
 */

#ifndef DIRTYBITMAP_BMFILE_H
#define DIRTYBITMAP_BMFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bits.h"
#include "error.h"
#include "format.h"

struct bmf;

enum bmf_lock { BMF_LOCK_NONE, BMF_LOCK_SHARED, BMF_LOCK_EXCLUSIVE };

/* Open an existing file.  BMF_LOCK_EXCLUSIVE opens it read-write and
 * refuses a symbolic link and a file owned by another user than this
 * process's (or root); the other modes open it read-only.  Anything
 * but a regular file is refused without blocking (a FIFO, a device).
 * Once the lock is held, path must still name the locked file: a file
 * unlinked or replaced meanwhile is opened again.  Another process
 * holding a conflicting lock gives EBUSY ("in use").
 */
extern struct bmf *bmf_open (const char *path, enum bmf_lock lock,
                             struct bmerr *err);

/* Create a new file for a disk of disk_size bytes (unknown unless
 * sized), with permission bits mode (never world-writable), locked
 * exclusively.  It is private until bmf_publish links it at path: no
 * other process can open it while it is incomplete, and closing it
 * unpublished leaves nothing at path.
 */
extern struct bmf *bmf_create (const char *path, mode_t mode, bool sized,
                               uint64_t disk_size, struct bmerr *err);
/* Move a created file to its path (EEXIST if something is there by
 * now) and make that durable.  Its descriptors name it by its path
 * from then on.
 */
extern int bmf_publish (struct bmf *f, struct bmerr *err);

/* Close (and release the lock); an unpublished file is removed. */
extern void bmf_close (struct bmf *f);

extern const char *bmf_path (const struct bmf *f);
extern const struct bmf_state *bmf_state (const struct bmf *f);
/* It was loaded with the open mark of a run that did not close it ... */
extern bool bmf_unclean (const struct bmf *f);
/* ... and that run was on another boot of the machine. */
extern bool bmf_rebooted (const struct bmf *f);
/* Opened without a lock (-U): whether a writer holds it right now. */
extern bool bmf_in_use (const struct bmf *f);
/* Whether path names this very file. */
extern bool bmf_same_file (const struct bmf *f, const char *path);

/* Map a bitmap's data (read-only unless writable); st is the state
 * (of the file, or of a transaction) that bm belongs to.
 */
extern int bmf_map (struct bmf *f, const struct bmf_state *st,
                    const struct bmf_bitmap *bm, bool writable,
                    struct bits *out, struct bmerr *err);
extern void bmf_unmap (struct bits *b);
/* Map a bitmap's coarse shadow (shadow.h) writable; st has shadows. */
extern int bmf_map_shadow (struct bmf *f, const struct bmf_state *st,
                           const struct bmf_bitmap *bm, struct bits *out,
                           struct bmerr *err);

/* A bitmap's bits to read: mapped when the file is locked, copied
 * when it was opened without a lock (a server may resize it under a
 * mapping).  Free with bmf_unmap.
 */
extern int bmf_read_bits (struct bmf *f, const struct bmf_bitmap *bm,
                          struct bits *out, struct bmerr *err);

/* fdatasync the file (bitmap data pages and all); -1 with errno. */
extern int bmf_sync (struct bmf *f);

/* Keep a region from reuse while this process may still use it (it is
 * mapped, or an uncommitted header may refer to it), and give it back.
 */
extern int bmf_reserve (struct bmf *f, uint64_t offset, uint64_t length);
extern void bmf_unreserve (struct bmf *f, uint64_t offset, uint64_t length);

/* The current boot id, "" if unknown. */
extern void bmf_boot_id (char out[BMF_BOOT_ID_LEN]);

/* Mark every enabled bitmap inconsistent in memory (the next commit
 * records it): writes reached the disk that they did not see.
 */
extern void bmf_condemn_enabled (struct bmf *f);

/* Why a bitmap is marked inconsistent. */
extern const char *bmf_inconsistent_reason (const struct bmf *f);

/* Validate a file without keeping it open: reports every problem
 * found to report, returns the number of problems.
 */
extern unsigned bmf_check (const char *path,
                           void (*report) (void *opaque,
                                           const char *problem),
                           void *opaque);

#endif /* DIRTYBITMAP_BMFILE_H */
