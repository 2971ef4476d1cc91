/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/target.h: what the copy engine writes to.  One interface, two
 * kinds: a regular file or a block device (copy/file.c), and an NBD
 * server (copy/nbd.c); and a target that keeps nothing (copy/null.c).
 * The engine knows only these operations: the workers (copy/worker.c)
 * write, zero and poll, copy/run.c connects, flushes, commits and
 * closes.
 *
 * A target says where zero operations may go (zero_align): only over
 * whole blocks of that size, on multiples of it, the last block of the
 * disk possibly short.  Zeroes elsewhere are written as data, so a
 * zero operation never shares such a block with another operation.
 * The rule is applied in one place, the plan of a piece's operations
 * (plan_ops in copy/worker.c); each kind of target chooses the size
 * (an NBD target 2M, copy/nbd.c says why; a file and the null target
 * leave it 0: anywhere).
 *
 * Writes and zeroes are asynchronous in form: they start, and call
 * the callback once done (maybe before they return: a file does its
 * work at once).  Each worker thread uses only its own connection
 * number, so an implementation needs locks only for what connections
 * share.  The callback has libnbd's completion signature, so an NBD
 * target passes it straight to libnbd.
 */

#ifndef DIRTYBITMAP_COPY_TARGET_H
#define DIRTYBITMAP_COPY_TARGET_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* Called once an operation ends, with *error 0 or an errno; returns
 * 1 (as libnbd wants of a completion callback that retires the
 * command).
 */
struct target_cb {
  int (*fn) (void *opaque, int *error);
  void *opaque;
};

struct target;

struct target_ops {
  /* Open connections 1 .. n-1 (connection 0 is opened with the
   * target).  -1 with err on failure.
   */
  int (*connect) (struct target *t, unsigned n, struct bmerr *err);

  /* Start writing count bytes of buf at offset, or making count bytes
   * at offset read as zeroes (count at most t->zero_size).  0: started,
   * cb will be called once.  -1: it could not start, cb will not be
   * called, and last_error says why.
   */
  int (*write) (struct target *t, unsigned conn, const void *buf,
                size_t count, uint64_t offset, struct target_cb cb);
  int (*zero) (struct target *t, unsigned conn, uint64_t count,
               uint64_t offset, struct target_cb cb);

  /* Start reading count bytes at offset into buf (what the target
   * holds, for a resync that compares with it); bytes past the end of
   * a shorter file read as zeroes.  As write.
   */
  int (*read) (struct target *t, unsigned conn, void *buf, size_t count,
               uint64_t offset, struct target_cb cb);

  /* The message of the operation of this thread that just failed. */
  const char *(*last_error) (struct target *t, int err);

  /* For the worker's poll(2): the file descriptor of connection conn
   * and the events to wait for, or -1 if it has nothing to wait for.
   * After poll, notify with what it returned for that descriptor:
   * -1 when the connection failed, with *msg saying why (its
   * operations in flight have been failed).
   */
  int (*get_fd) (struct target *t, unsigned conn, short *events);
  int (*notify) (struct target *t, unsigned conn, short revents,
                 const char **msg);

  /* Make everything written durable.  -1 with err on failure. */
  int (*flush) (struct target *t, struct bmerr *err);

  /* After a successful flush: the copy is complete, put it in place
   * (a new file gets its name).  -1 with err on failure.
   */
  int (*commit) (struct target *t, struct bmerr *err);

  /* Close everything and free t.  graceful: the copy succeeded (an
   * NBD target is disconnected politely).  A new file that was not
   * committed is removed.
   */
  void (*close) (struct target *t, bool graceful);
};

struct target {
  const struct target_ops *ops;
  const char *name;             /* as given on the command line */
  uint64_t size;
  uint64_t max_request;         /* largest write the target takes; 0: any */
  uint64_t zero_size;           /* largest zero request */
  uint64_t zero_align;          /* zero operations cover whole blocks of
                                 * this many bytes (a power of 2), on
                                 * multiples of it, the last one maybe
                                 * ending at size; 0 or 1: anywhere */
  bool multi_conn;              /* several connections are safe */
  const char *zero_buf;         /* zero_buf_size bytes of zeroes, set by */
  size_t zero_buf_size;         /*   copy_run before the first zero */
};

/* Open a file or block device target.  With create, a missing regular
 * file is created, under a temporary name in the same directory, with
 * size bytes; commit renames it into place.  -1 with err on failure.
 */
extern struct target *file_target_open (const char *name, bool create,
                                        uint64_t size, struct bmerr *err);

/* Connect to an NBD target (connection 0 of at most max_connections).
 * NULL with err on failure.
 */
extern struct target *nbd_target_open (const char *uri,
                                       unsigned max_connections,
                                       struct bmerr *err);

/* A target that keeps nothing (copy/null.c): a copy that only reads. */
extern struct target *null_target_open (uint64_t size, struct bmerr *err);

#endif /* DIRTYBITMAP_COPY_TARGET_H */
