/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/slot.h: a piece of work in flight of one copying thread (its
 * slot: copy/worker.c), and what copy/plan.c makes of a piece read:
 * shared by those two files only.
 */

#ifndef DIRTYBITMAP_COPY_SLOT_H
#define DIRTYBITMAP_COPY_SLOT_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include <libnbd.h>

#include "internal.h"

/* Data blocks checked for zeroes: the page and file system block. */
#define SPARSE_SIZE 4096

enum slot_state {
  SLOT_FREE,
  SLOT_READ,                    /* reading data from the source */
  SLOT_TARGET,                  /* writing or zeroing on the target */
  SLOT_TRIM,                    /* trimming on the source */
};

struct slot;

/* One operation on the target, the callback's opaque: a write of
 * length bytes from buf, or a zero operation (buf NULL).
 */
struct op {
  struct slot *s;
  uint64_t offset, length;
  const char *buf;
};

/* A run of the piece: data, or bytes that read as zeroes. */
struct run {
  uint64_t offset, end;
  bool zero;
};

/* A chunk of a read reply. */
struct chunk {
  uint64_t offset, length;
};

struct slot {
  enum slot_state state;
  struct loop *l;
  unsigned pending;             /* operations of the stage still running */
  bool done;                    /* pending reached 0 */
  int err;                      /* the first errno of the stage, or 0 */
  const struct op *err_op;      /* and the target operation it came from */
  uint64_t offset;              /* the piece */
  uint64_t length;
  bool zero;                    /*   is a zero range */
  char *buf;                    /* grown to the largest piece read */
  size_t buf_size;
  char *tbuf;                   /* the same for what the target holds */
  size_t tbuf_size;
  int terr;                     /* the target read's errno, or 0 */
  struct op *ops;               /* the target operations of the piece */
  size_t ops_cap;
  struct chunk *chunks;         /* the chunks of the read reply */
  size_t nchunks, chunks_cap;
  bool chunks_nomem;
  bool *same;                   /* with checksums and compare: which
                                 * checksum chunks of the piece are as
                                 * before, not to be written */
  size_t same_cap;
};

struct loop {
  struct copy *c;
  unsigned conn;
  struct nbd_handle *src;
  bool src_dead, dst_dead;
  bool woken;                   /* the interrupt pipe was seen readable */
  struct slot *slots;
  unsigned in_flight;           /* slots not free */
};

/* Count n more bytes in a counter of struct copy (read by the
 * progress display while the threads run).
 */
static inline void
add_done (uint64_t *counter, uint64_t n)
{
  __atomic_fetch_add (counter, n, __ATOMIC_RELAXED);
}

/* copy/plan.c (each said there). */
extern void hash_held (struct copy *c, struct slot *s);
extern int hash_piece (struct copy *c, struct slot *s);
extern ssize_t plan_ops (struct copy *c, struct slot *s);

#endif /* DIRTYBITMAP_COPY_SLOT_H */
