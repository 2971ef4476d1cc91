/* SPDX-License-Identifier: BSD-3-Clause */
/* bmfile-impl.h: what the files of lib/ share about an open bitmap
 * file.  Never included outside lib/: the filter and the tool see
 * struct bmf only through bmfile.h.
 */

#ifndef DIRTYBITMAP_BMFILE_IMPL_H
#define DIRTYBITMAP_BMFILE_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "bmfile.h"
#include "format.h"

struct bmf {
  char *path;
  char *tmp_path;               /* its private name until published */
  int fd;
  enum bmf_lock lock;
  int slot;                     /* header slot holding st */
  struct bmf_state st;          /* committed state, crash marks applied */
  bool unclean;                 /* loaded with the OPEN flag set ... */
  bool rebooted;                /* ... by another boot of the machine */
  struct bmf_region *reserved;  /* never reused by this process */
  size_t nr_reserved;
  bool live;                    /* bmf_set_live */
  /* From bmf_set_live on, commits sync through a descriptor of their
   * own (txn-sync.c): the kernel reports a failed write-back once to
   * each open file, and a sync of the writers (bmf_sync) must not take
   * the report a commit needs.  -1 until then.
   */
  int sync_fd;
  /* The disk as bmf_check_disk judged it, which bmf_txn_disk_seen
   * records rather than a later stat (identity.c), until this process
   * writes the disk.  judged_disk (allocated) names it.
   */
  enum bmf_judged {
    BMF_NOT_JUDGED,
    BMF_JUDGED,                 /* judged_id may be recorded */
    BMF_JUDGED_UNSTABLE,        /* must not be: the clock had not
                                 * passed its time's granule */
  } judged;
  char *judged_disk;
  struct bmf_disk_id judged_id;
};

/* Read and validate the header and directory of the open file fd:
 * fills st (with its bitmaps) and the current slot.  Problems go to p
 * (all of them if p->report is set).  Returns 0 if there was none.
 */
extern int bmf_load (int fd, struct bmf_state *st, int *slot,
                     uint64_t *file_size, struct bmf_problems *p);

/* Open, check and lock path, and load its state as the file has it:
 * bmf_open without what an unclean stop means (open.c applies it).
 */
extern struct bmf *bmf_open_file (const char *path, enum bmf_lock lock,
                                  struct bmerr *err);

/* Map bm's data as the file has it (bmf_map without a pending
 * recovery), or copy it into malloced words.
 */
extern int bmf_map_data (struct bmf *f, const struct bmf_state *st,
                         const struct bmf_bitmap *bm, bool writable,
                         struct bits *out, struct bmerr *err);
extern int bmf_copy_bits (struct bmf *f, const struct bmf_state *st,
                          const struct bmf_bitmap *bm, struct bits *out,
                          struct bmerr *err);

/* Map length bytes at offset of fd (shared), into out->words. */
extern int bmf_map_region (int fd, uint64_t offset, uint64_t length,
                           bool writable, struct bits *out);

#endif /* DIRTYBITMAP_BMFILE_IMPL_H */
