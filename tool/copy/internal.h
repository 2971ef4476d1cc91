/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/internal.h: what the parts of the copy engine share.  The
 * engine is this folder; copy.h and image.h are all its users see (the
 * copy, backup and verify subcommands).
 *
 * copy/main.c       dirtybitmap copy, the subcommand: its command line
 *                   and what it prints
 * copy/endpoint.c   what a source or target is, decided once
 * copy/run.c        copy_run: connect, check, list, copy, flush, close
 * copy/connect.c    NBD connections: open one, close them (bounded)
 * copy/ranges.c     the source's block status as a list of ranges
 * copy/worker.c     one thread per connection: reads, target writes
 *                   and zeroes, source trims, several in flight
 * copy/slot.h       a piece in flight (its slot), for worker.c and:
 * copy/plan.c       what a piece read becomes: its checksums, and its
 *                   writes and zeroes on the target
 * copy/target.h     the interface of a target, and its two kinds:
 * copy/file.c         a regular file or a block device
 * copy/nbd.c          an NBD server
 * copy/null.c         one that keeps nothing (a copy that only reads)
 * copy/progress.c   the progress display
 * copy/interrupt.c  SIGINT and SIGTERM while a copy runs
 * copy/summary.c    the summary (text or JSON) and failure messages
 * copy/image.c      image_hash (image.h): the digest of every chunk of
 *                   an image: a raw file read here, anything else
 *                   through copy_run with the null target
 */

#ifndef DIRTYBITMAP_COPY_INTERNAL_H
#define DIRTYBITMAP_COPY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <time.h>
#include <pthread.h>

#include <libnbd.h>

#include "copy.h"
#include "target.h"

/* Wait until *running (threads still working, under lock) is 0, or a
 * tick of the progress display (a fifth of a second) has passed:
 * whether any still runs.
 */
extern bool wait_workers (pthread_mutex_t *lock, pthread_cond_t *finished,
                          const unsigned *running);

/* Errors are values: each function that can fail takes a struct bmerr
 * (error.h) and offers it its error with bmerr_first, so that the
 * first one, usually the cause of the others, is what the caller
 * reports.
 */

/* Ranges. */

/* A range of the disk to bring to the target: read and written
 * (data), or made zeroes (zero).  Clean ranges are not in the list.
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

/* How to read base:allocation. */
enum scan_mode {
  SCAN_DIRTY,                   /* a hole is clean: not in the list */
  SCAN_ALL,                     /* --full: a hole is data like any other;
                                 * only the zero bit makes a zero range */
};

/* Ask the source for base:allocation over [0, size) and list in out
 * the ranges to bring to the target (see copy/ranges.c).  Adjacent
 * ranges of the same kind are merged.  -1 with err on failure.
 */
extern int scan_ranges (struct nbd_handle *src, const char *uri,
                        uint64_t size, enum scan_mode mode,
                        struct ranges *out, struct bmerr *err);

/* The whole disk as one data range (--full without block status). */
extern int full_range (uint64_t size, struct ranges *out, struct bmerr *err);

/* Add to rs, as data, each chunk of chunk bytes that force[i] marks
 * (the last one ends at size), the list kept in order of offset (for
 * chunk_ranges, which must follow: the ranges may now overlap, and it
 * makes each chunk one kind).  -1 with err on failure.
 */
extern int force_ranges (struct ranges *rs, const uint8_t *force,
                         uint64_t chunk, uint64_t size, struct bmerr *err);

extern void free_ranges (struct ranges *rs);

/* Widen the ranges to whole chunks of chunk bytes (the last one ends
 * at size): a chunk with a data byte in it becomes data, one made only
 * of zero ranges stays zero.  -1 with err on failure.
 */
extern int chunk_ranges (struct ranges *rs, uint64_t chunk, uint64_t size,
                         struct bmerr *err);

/* Keep of the chunk-aligned ranges rs only the chunks i (of chunk
 * bytes) with only[i] set.  -1 with err on failure.
 */
extern int select_chunks (struct ranges *rs, uint64_t chunk,
                          const uint8_t *only, struct bmerr *err);

/* Connections (copy/connect.c). */

/* Connect to uri; with meta, ask for base:allocation.  The handle is
 * named what ("source", "target") in libnbd's debug messages.  NULL
 * with err on failure.
 */
extern struct nbd_handle *connect_uri (const char *what, const char *uri,
                                       bool meta, struct bmerr *err);

/* Close n handles (NULL ones are skipped).  With graceful, each is
 * first disconnected (NBD_CMD_DISC) and given until
 * SHUTDOWN_WAIT_SECS in all to close its side; a server that keeps
 * the connection open after that is simply closed on.
 */
#define SHUTDOWN_WAIT_SECS 2
extern void close_handles (struct nbd_handle **hs, unsigned n,
                           bool graceful);

/* The server's largest read/write, or 0 if it did not say. */
extern uint64_t max_block (struct nbd_handle *h);

/* The copy in progress (copy/run.c creates it, the workers use it). */

struct copy {
  const char *src_name;         /* how messages name the source */
  const char *dst_name;         /* and the target */
  unsigned connections;
  unsigned requests;            /* in flight per connection */
  size_t request_size;          /* largest read or write */
  uint64_t zero_size;           /* largest zero request */
  bool trim_source;             /* trim each piece once it is on the target */
  struct copy_sums *sums;       /* or NULL; each thread writes only the
                                 * digests of the chunks it copies */
  uint8_t zero_digest[16];      /* of a chunk of zeroes */
  uint8_t zero_digest_last[16]; /* of the last chunk, if it is short */
  struct nbd_handle **src;      /* [connections] */
  struct target *dst;
  const struct ranges *ranges;
  int wake_fd;                  /* readable once the copy is interrupted */

  /* Protects the work cursor, the first error and running. */
  pthread_mutex_t workers_lock;
  pthread_cond_t finished;      /* signalled when a thread ends */
  size_t next_range;            /* the next piece of work: */
  uint64_t next_offset;         /*   offset inside that range */
  struct bmerr error;           /* the first error, or empty */
  unsigned running;             /* threads still copying */

  /* Updated atomically by the threads. */
  bool stop;                    /* an error or a signal: start nothing */
  uint64_t copied;              /* bytes written as data */
  uint64_t zeroed;              /* bytes made or left zero */
  uint64_t read;                /* bytes read from the source */
  uint64_t unchanged;           /* bytes not written: same digest */
};

/* Record an error (only the first one is kept) and stop the copy. */
extern void copy_error (struct copy *c, const char *fs, ...)
  __attribute__ ((format (printf, 2, 3)));

/* Stop the copy without an error (an interruption). */
extern void copy_stop (struct copy *c);

/* The thread of connection i; arg is a struct worker. */
struct worker {
  struct copy *c;
  unsigned i;
};
extern void *copy_worker (void *arg);

/* Progress (copy/progress.c): on a terminal a bar redrawn in place,
 * otherwise a line every PROGRESS_LINE_SECS seconds, on stderr.
 */
#define PROGRESS_LINE_SECS 5

struct progress {
  bool on;
  bool tty;
  bool drawn;                   /* a bar is on the screen */
  bool full;                    /* "bytes", not "dirty bytes" */
  const char *label;            /* named lines, no bar (or NULL) */
  double start, last_line;
  uint64_t total;
};

extern void progress_start (struct progress *p, bool on, bool full,
                            const char *label, uint64_t total);
extern void progress_draw (struct progress *p, uint64_t done, bool last);
/* Leave the bar where it is, on its own line, before a message. */
extern void progress_end (struct progress *p);

#endif /* DIRTYBITMAP_COPY_INTERNAL_H */
