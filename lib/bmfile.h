/* SPDX-License-Identifier: BSD-3-Clause */
/* bmfile.h: the bitmap file (nbdkit-dirtybitmap-filter(1), FILE FORMAT):
 * open and lock it, validate every field, map bitmap data, and change
 * it through transactions that commit atomically.
 */

#ifndef DIRTYBITMAP_BMFILE_H
#define DIRTYBITMAP_BMFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bits.h"

#define BMF_VERSION         1
#define BMF_HEADER_SLOT     4096        /* two slots, at 0 and 4096 */
#define BMF_HEADER_LENGTH   256         /* bytes of a slot in use */
#define BMF_ALIGN           4096        /* regions start and end here */
#define BMF_FIRST_REGION    (2 * BMF_HEADER_SLOT)
#define BMF_ENTRY_FIXED     32          /* directory entry before name */
#define BMF_MAX_NAME        1023
#define BMF_MAX_BITMAPS     65535
#define BMF_MIN_GBITS       9           /* 512 bytes */
#define BMF_MAX_GBITS       31          /* 2 GiB */
#define BMF_DEFAULT_GBITS   16          /* 64 KiB */
#define BMF_BOOT_ID_LEN     40

/* Directory entry flags. */
#define BMF_ENABLED         1
#define BMF_INCONSISTENT    2
#define BMF_ENTRY_FLAGS     (BMF_ENABLED | BMF_INCONSISTENT)

/* Header flags. */
#define BMF_HDR_SIZED       1           /* disk_size is known */
#define BMF_HDR_OPEN        2           /* a server has it open */
#define BMF_HDR_FLAGS       (BMF_HDR_SIZED | BMF_HDR_OPEN)

enum bmf_durability { BMF_FLUSH = 0, BMF_STRICT = 1 };
enum bmf_lock { BMF_LOCK_NONE, BMF_LOCK_SHARED, BMF_LOCK_EXCLUSIVE };

struct bmf_bitmap {
  char *name;
  unsigned gbits;               /* granularity is 1 << gbits */
  uint32_t flags;               /* BMF_ENABLED | BMF_INCONSISTENT */
  uint64_t data_offset;         /* 0 when data_length is 0 */
  uint64_t data_length;
};

struct bmf_state {
  uint64_t seq;
  uint64_t disk_size;
  bool sized;                   /* disk_size is known */
  bool open;                    /* a server had it open and did not close */
  uint32_t open_mode;           /* its enum bmf_durability */
  char boot_id[BMF_BOOT_ID_LEN]; /* its boot id, NUL-terminated */
  uint64_t open_pid;
  uint64_t dir_offset;
  uint32_t dir_length;
  uint64_t file_length;
  size_t nr_bitmaps;
  struct bmf_bitmap *bitmaps;
};

struct bmf_region {
  uint64_t offset, length;
};

struct bmf {
  char *path;
  int fd;
  enum bmf_lock lock;
  int slot;                     /* header slot holding st */
  struct bmf_state st;          /* committed state, crash marks applied */
  bool unclean;                 /* loaded with the OPEN flag set ... */
  bool rebooted;                /* ... by another boot of the machine */
  struct bmf_region *reserved;  /* still mapped here: never reused */
  size_t nr_reserved;
};

/* Open a bitmap file.  With BMF_LOCK_EXCLUSIVE the file is opened for
 * writing, and created (empty, disk size unknown) if missing and
 * create is true.  Reports through bm_error and returns NULL on error.
 */
extern struct bmf *bmf_open (const char *path, enum bmf_lock lock,
                             bool create);
/* Create a new file for a disk of disk_size bytes; fails if it exists. */
extern struct bmf *bmf_create_sized (const char *path, uint64_t disk_size);
extern void bmf_close (struct bmf *f);

/* Validate a file without keeping it open: reports every problem
 * found through report, returns the number of problems.
 */
extern unsigned bmf_check (const char *path,
                           void (*report) (const char *problem));

extern struct bmf_bitmap *bmf_find (const struct bmf_state *st,
                                    const char *name);

/* Granules covering the disk, and bytes of data for them. */
extern uint64_t bmf_nr_bits (uint64_t disk_size, unsigned gbits);
extern uint64_t bmf_data_length (uint64_t disk_size, unsigned gbits);

/* Map a bitmap's data (read-only unless writable). */
extern int bmf_map (struct bmf *f, const struct bmf_state *st,
                    const struct bmf_bitmap *bm, bool writable,
                    struct bits *out);
extern void bmf_unmap (struct bits *b);

/* The current boot id, "" if unknown. */
extern void bmf_boot_id (char out[BMF_BOOT_ID_LEN]);

/* Transactions.  Operations change a copy of the state; data regions
 * are copied on write, so nothing the committed state refers to is
 * touched until bmf_txn_commit switches the header.  On an error the
 * operation returns -1 with the reason (without the file name unless
 * it is an I/O error) in txn->err.  A dry run checks the rules only.
 */
struct bmf_txn {
  struct bmf *f;
  struct bmf_state st;
  bool dry_run;
  uint64_t orig_size;           /* file size at begin, for abort */
  char err[1024];
};

extern struct bmf_txn *bmf_txn_begin (struct bmf *f, bool dry_run);
extern int bmf_txn_add (struct bmf_txn *t, const char *name, unsigned gbits);
extern int bmf_txn_remove (struct bmf_txn *t, const char *name);
extern int bmf_txn_clear (struct bmf_txn *t, const char *name);
extern int bmf_txn_enable (struct bmf_txn *t, const char *name, bool enable);
/* dst |= src; src_file is NULL for a bitmap of the same file. */
extern int bmf_txn_merge (struct bmf_txn *t, const char *dst,
                          struct bmf *src_file, const char *src);
/* Cover a disk of new_size bytes; when the size was known, the new
 * area is dirty.
 */
extern int bmf_txn_resize (struct bmf_txn *t, uint64_t new_size);
extern void bmf_txn_set_open (struct bmf_txn *t, bool open,
                              enum bmf_durability mode);
/* Commit (frees t).  On error reports through bm_error, the file
 * keeps its previous state, and -1 is returned.
 */
extern int bmf_txn_commit (struct bmf_txn *t);
extern void bmf_txn_abort (struct bmf_txn *t);

/* Keep a region from reuse for the life of this process. */
extern int bmf_reserve (struct bmf *f, uint64_t offset, uint64_t length);

/* fdatasync the file (bitmap data pages and all). */
extern int bmf_sync (struct bmf *f);

extern const char *bmf_inconsistent_reason (const struct bmf *f);

/* How the user removes a bitmap, named in the refusal of an action on
 * an inconsistent one ("remove it (action=remove) and take a full
 * backup"); NULL: not named.
 */
extern const char *bmf_remove_hint;

#endif /* DIRTYBITMAP_BMFILE_H */
