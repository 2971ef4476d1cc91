/* SPDX-License-Identifier: BSD-3-Clause */
/* copy.h: the copy engine of dirtybitmap, as the subcommands use it:
 * bring the changed ranges of an NBD export to a target, and report
 * what happened.  How it works lives in internal.h, beside it.
 *
 *   struct copy_options o = { .source = uri, .target = "backup.img" };
 *   struct copy_result r;
 *   copy_run (&o, &r);            (0 on success, -1 otherwise)
 *   copy_print_summary (stdout, &o, &r, json);
 *   copy_result_free (&r);
 *
 * copy_run prints nothing but the progress display (when asked), a
 * note when a server refuses the connections asked for, and debug
 * messages; every error is a value in the result (a struct bmerr, the
 * first one kept), for the caller to report.
 */

#ifndef DIRTYBITMAP_COPY_H
#define DIRTYBITMAP_COPY_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include <json-c/json.h>

#include "endpoint.h"
#include "error.h"

#define COPY_DEFAULT_REQUESTS 16
#define COPY_MAX_REQUESTS 1024
#define COPY_MAX_CONNECTIONS 64
#define COPY_DEFAULT_REQUEST_SIZE (1 << 20)
#define COPY_MIN_REQUEST_SIZE 512
#define COPY_MAX_REQUEST_SIZE (32 << 20)

/* Checksums kept by a copy (the file is sums.h's; the engine fills the
 * arrays).  The ranges to copy are widened to whole chunks; each chunk
 * read or zeroed gets its digest in digests[i], the rest keep theirs.
 * With compare, a chunk whose new digest equals the one already in
 * digests[i] is not written (a resync), and differ[i], if differ is
 * not NULL, says which chunks were.  With held too, the digest
 * compared with is not the one in digests[i] but that of what the
 * target holds there, read just before (a target not known to hold
 * the image of any set).  A chunk that force marks is copied whatever
 * the source's block status says of it (as data, or zeroes where the
 * source reads as zeroes), and with compare it is written even if its
 * digest is the same: what the target would read there is not to be
 * trusted (a backup healing a point of its repository).
 */
struct copy_sums {
  uint64_t chunk;               /* a power of 2 */
  uint64_t n;                   /* chunks: the source must have as many */
  uint8_t *digests;             /* [chunks][SUMS_DIGEST] */
  bool compare;
  bool held;                    /* compare with what the target holds */
  uint8_t *differ;              /* [chunks], or NULL */
  const uint8_t *force;         /* [chunks], or NULL */
};

struct copy_options {
  const char *source;           /* NBD URI */
  const char *source_name;      /* how messages name the source (an
                                 * image served for the copy), or NULL:
                                 * its URI */
  const char *target;           /* a file, a block device or an NBD URI */
  bool full;                    /* every byte, not only the dirty ones */
  bool progress;                /* the progress display on stderr */
  bool trim_source;             /* trim each range on the source once it
                                 * is on the target */
  unsigned requests;            /* in flight per connection; 0: default */
  unsigned connections;         /* 0: one per CPU, up to 4 */
  size_t request_size;          /* largest read or write; 0: default */
  struct copy_sums *sums;       /* or NULL */
  bool no_target;               /* read (and hash) only: target unused */
  const uint8_t *only;          /* with full and sums: only the chunks i
                                 * with only[i] set (sums->n of them)
                                 * are brought to the target, or NULL:
                                 * every chunk */
  const char *label;            /* the copy's name when several run at
                                 * once (a disk's), or NULL: progress is
                                 * then a line now and then, named */
};

/* How far a copy got. */
enum copy_stage {
  COPY_STAGE_SETUP,             /* connecting, checking, listing ranges */
  COPY_STAGE_COPY,              /* reading and writing the ranges */
  COPY_STAGE_FLUSH,             /* making the target durable, putting a
                                 * new file in place */
  COPY_STAGE_DONE,              /* the copy is complete */
};

struct copy_result {
  bool ok;                      /* stage is DONE */
  bool interrupted;             /* stopped by SIGINT or SIGTERM */
  enum copy_stage stage;        /* where it ended */
  bool sizes_known;             /* total and ranges are valid */
  uint64_t total;               /* bytes to bring to the target */
  size_t ranges;                /* dirty ranges (data and zero) */
  uint64_t copied;              /* bytes written to the target as data */
  uint64_t zeroed;              /* bytes made (or left) zero on it */
  uint64_t read;                /* bytes read from the source */
  uint64_t unchanged;           /* bytes not written: their digests
                                 * were the same (compare) */
  double seconds;               /* from connecting to the end */
  struct bmerr error;           /* the first error (bmerr_failed), or
                                 * empty */
};


/* The size of the export at uri: -1 with err on failure. */
extern int64_t copy_export_size (const char *uri, struct bmerr *err);

/* Set only[i] for each chunk i (of chunk bytes, a power of 2) that
 * the export at uri, of size bytes, says is dirty: data or zero in
 * its base:allocation as nbdkit-dirtybitmap-filter answers it from a
 * bitmap (a backup view's map).  A chunk with one dirty byte is
 * dirty.  -1 with err on failure: not that size, no block status.
 */
extern int copy_dirty_chunks (const char *uri, uint64_t size,
                              uint64_t chunk, uint8_t *only,
                              struct bmerr *err);

/* Run one copy.  Returns 0 when the target holds a complete, flushed
 * copy (r->ok), -1 otherwise (r->error says why, unless
 * r->interrupted).  SIGINT and SIGTERM stop it cleanly while it runs:
 * the requests in flight are waited for, and the target is left as
 * dirtybitmap(1) says.  r must be freed with copy_result_free.
 */
extern int copy_run (const struct copy_options *o, struct copy_result *r);
extern void copy_result_free (struct copy_result *r);

/* SIGINT and SIGTERM.  While caught (the calls nest: copy_run catches
 * them for its run, a caller may for longer, around several copies
 * and what comes between them), the first one sets the flag that
 * copy_interrupted reads and makes copy_interrupt_fd readable, for
 * poll; a second one ends the process as usual.  The flag is cleared
 * when the outermost catch begins.  -1 with err on failure.
 */
extern int copy_signals_trap (struct bmerr *err);
extern void copy_signals_release (void);
/* Stop every copy running, as a signal would (while caught). */
extern void copy_stop_all (void);
/* While on, a second signal is caught like the first instead of ending
 * the process: for a caller whose every wait is bounded and whose
 * work must not be cut short (a backup resuming its servers and
 * thawing its guest).
 */
extern void copy_signals_firm (bool on);
extern bool copy_interrupted (void);
extern int copy_interrupt_fd (void);

/* The summary: one line of text, or one JSON object (see the JSON
 * OUTPUT section of dirtybitmap(1)), on fp.
 */
extern void copy_print_summary (FILE *fp, const struct copy_options *o,
                                const struct copy_result *r, bool json);

/* The same object for a caller to put in one of its own (backup
 * reports every disk's copy), and how it is printed.
 */
extern json_object *copy_summary_json (const struct copy_options *o,
                                       const struct copy_result *r);
extern void copy_print_json (FILE *fp, json_object *j);

/* The lines on stderr that say why and how far a failed copy got. */
extern void copy_print_failure (const struct copy_options *o,
                                const struct copy_result *r);

#endif /* DIRTYBITMAP_COPY_H */
