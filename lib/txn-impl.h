/* SPDX-License-Identifier: BSD-3-Clause */
/* txn-impl.h: what the files of a transaction share (txn.c, the
 * operations and the commit; txn-shadow.c, the coarse shadows;
 * txn-restore.c, the restore record; txn-space.c, the space they all
 * write into; txn-sync.c, what a commit makes durable).  Never
 * included outside lib/.
 */

#ifndef DIRTYBITMAP_TXN_IMPL_H
#define DIRTYBITMAP_TXN_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "bits.h"
#include "bmfile-impl.h"
#include "txn.h"

struct bmf_txn {
  struct bmf *f;
  struct bmf_state st;
  bool dry_run;
  uint64_t orig_size;           /* file size at begin, for abort */
  bool prepared;                /* bmf_txn_prepare done: hdr is the header */
  bool settle;                  /* bmf_txn_settle */
  unsigned char hdr[BMF_HEADER_SLOT];
};

/* Find, allocate and zero length bytes of space that nothing in use
 * refers to (first fit); *offset is 0 for a length of 0 (txn-space.c).
 */
extern int txn_alloc_region (struct bmf_txn *t, uint64_t length,
                             uint64_t *offset, struct bmerr *err);

/* Map a data region of file f that the transaction writes or reads. */
extern int txn_map (struct bmf *f, uint64_t offset, uint64_t length,
                    uint64_t nr_bits, bool writable, struct bits *out,
                    struct bmerr *err);

/* The shadow halves of the operations (txn-shadow.c).  Each does
 * nothing when the state has no shadows or in a dry run.
 */

/* bm is new or cleared: give it an empty shadow. */
extern int txs_empty (struct bmf_txn *t, struct bmf_bitmap *bm,
                      struct bmerr *err);
/* bm's bits are now fine, for a disk of disk_size bytes (a merge, a
 * resize): give it a new shadow, their coarsening.
 */
extern int txs_coarsen (struct bmf_txn *t, struct bmf_bitmap *bm,
                        const struct bits *fine, uint64_t disk_size,
                        struct bmerr *err);

/* Write the shadow table of t->st (or find the committed one that
 * holds the same bytes); its checksum through *crc.
 */
extern int txs_write_table (struct bmf_txn *t, uint32_t *crc,
                            struct bmerr *err);

/* The settling marks of t->st for this commit (txn-sync.c), before
 * its directory is written.
 */
extern void txn_marks (struct bmf_txn *t);
/* The commit's syncs (txn-sync.c): before the header, what the new
 * header refers to; after it, the header in slot.
 */
extern int txn_sync_before_header (struct bmf_txn *t, struct bmerr *err);
extern int txn_sync_header (struct bmf_txn *t, int slot);

#endif /* DIRTYBITMAP_TXN_IMPL_H */
