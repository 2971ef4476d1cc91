/* SPDX-License-Identifier: BSD-3-Clause */
/* copy.h: what the parts of "dirtybitmap copy" share: the list of
 * dirty ranges, the target, and the state the copying threads work
 * on.
 *
 * copy.c          options, connecting, checks, progress, summary
 * copy-ranges.c   block status of the source into a list of ranges
 * copy-file.c     a file or block device as the target
 * copy-worker.c   one thread per connection: asynchronous reads,
 *                 writes and write-zeroes, several in flight
 */

#ifndef DIRTYBITMAP_COPY_H
#define DIRTYBITMAP_COPY_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <pthread.h>

#include <libnbd.h>

/* A range of the disk to bring to the target: read and written
 * (data), or made zeroes with write-zeroes (zero).  Clean ranges
 * (holes) are not in the list.
 */
struct range {
  uint64_t offset;
  uint64_t length;
  bool zero;
};

struct ranges {
  struct range *r;
  size_t n, cap;
  uint64_t data_bytes;          /* sum of the data ranges */
  uint64_t zero_bytes;          /* sum of the zero ranges */
};

/* Ask the source for base:allocation over [0, size) and list the
 * dirty ranges in out: data (type 0) is copied, anything with the zero
 * bit is zeroed, a hole without it is clean.  Adjacent ranges of the
 * same kind are merged.  Prints the error and returns -1 on failure.
 */
extern int scan_ranges (struct nbd_handle *src, const char *uri,
                        uint64_t size, struct ranges *out);

/* The whole disk as one data range (--full). */
extern int full_range (uint64_t size, struct ranges *out);

extern void free_ranges (struct ranges *rs);

/* A file or block device target.  The operations return -1 with
 * errno set; they are safe to call from several threads at once.
 */
#define WRITEBACK_WINDOW 16
struct wb_range {
  uint64_t offset, length;
};

struct file_target {
  const char *name;
  int fd;
  bool is_block_device;
  uint64_t size;
  const char *zero_buf;         /* zero_buf_size bytes of zeroes */
  size_t zero_buf_size;
  /* Which ways to zero have failed as unsupported (set once). */
  bool no_punch_hole, no_zero_range, no_blkzeroout;
  /* The last ranges written, oldest at wb_next (see copy-file.c). */
  pthread_mutex_t wb_lock;
  struct wb_range wb[WRITEBACK_WINDOW];
  unsigned wb_next;
};

/* Open an existing file or block device read-write and find its size;
 * with create, a missing regular file is created with size bytes.
 * Prints the error and returns -1 on failure.
 */
extern int file_target_open (struct file_target *t, const char *name,
                             bool create, uint64_t size);
extern int file_target_write (struct file_target *t, const void *buf,
                              size_t count, uint64_t offset);
extern int file_target_zero (struct file_target *t, uint64_t count,
                             uint64_t offset);
extern int file_target_flush (struct file_target *t);
extern void file_target_close (struct file_target *t);

/* The state shared by the copying threads. */
struct copy {
  const char *src_name;         /* how messages name the source */
  const char *dst_name;         /* and the target */
  unsigned connections;
  unsigned requests;            /* in flight per connection */
  size_t request_size;          /* largest read or write */
  uint64_t zero_size;           /* largest write-zeroes */
  struct nbd_handle **src;      /* [connections] */
  struct nbd_handle **dst;      /* [connections], or NULL for a file */
  bool dst_can_zero;            /* NBD target: write-zeroes works */
  struct file_target *file;     /* or NULL for an NBD target */
  const char *zero_buf;         /* request_size bytes of zeroes */
  const struct ranges *ranges;

  /* Protects the work cursor, the first error and running. */
  pthread_mutex_t lock;
  pthread_cond_t finished;      /* signalled when a thread ends */
  size_t next_range;            /* the next piece of work: */
  uint64_t next_offset;         /*   offset inside that range */
  char *error;                  /* the first error, or NULL */
  unsigned running;             /* threads still copying */

  /* Updated atomically by the threads. */
  bool stop;                    /* an error happened: start nothing */
  uint64_t copied;              /* bytes read and written */
  uint64_t zeroed;              /* bytes made zero on the target */
};

/* Record an error (only the first one is kept) and stop the copy. */
extern void copy_error (struct copy *c, const char *fs, ...)
  __attribute__ ((format (printf, 2, 3)));

/* The thread of connection i; arg is a struct worker. */
struct worker {
  struct copy *c;
  unsigned i;
};
extern void *copy_worker (void *arg);

#endif /* DIRTYBITMAP_COPY_H */
