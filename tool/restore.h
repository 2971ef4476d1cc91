/* SPDX-License-Identifier: BSD-3-Clause */
/* restore.h: a point of a backup repository (repo.h) written to
 * targets, disk by disk, each chunk checked against the point's
 * checksums as it is read: what dirtybitmap restore does (restore.c),
 * and rollback (rollback.c) with only the chunks that must change.
 * restore-point.c holds these parts; messages are prefixed with the
 * subcommand's name (cmd).
 */

#ifndef DIRTYBITMAP_RESTORE_H
#define DIRTYBITMAP_RESTORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include <json-c/json.h>

#include "copy/copy.h"
#include "repo.h"
#include "sums.h"

/* One disk of the point, and where it goes. */
struct restore_job {
  const struct repo_disk *d;
  const char *target;
  char *image;                  /* DIR/disks/NAME/POINT.qcow2 */
  char *sums_path;
  struct sums *sums;
  uint8_t *only;                /* [sums->n]: the chunks to write, or
                                 * NULL: all (owned) */
  uint64_t nr_only;             /* chunks set in only */
  const char *tracking;         /* how rollback chose them: "bitmap" or
                                 * "checksums", or NULL (restore) */
  const char *tracking_base;    /* the point whose bitmap it was */
  struct bmerr lost;            /* why no bitmap could be used, or
                                 * empty */
  uint8_t *digests;             /* what the copy read, [sums->n] */
  struct copy_options o;
  struct copy_result r;
  bool copied;
  uint64_t differing;           /* chunks */
};

struct restore {
  const char *cmd;              /* "restore" or "rollback" */
  const char *sub;              /* the same and a space, for bad_usage */
  struct repo repo;
  struct repo_point point;
  struct restore_job *jobs;
  size_t n;
  bool refuse_bad;              /* a point verify found bad in a disk
                                 * to write is refused (rollback) */
  bool json;
  bool progress;
  unsigned requests;
};

/* c: a string literal. */
#define RESTORE_INIT(c) { .cmd = c, .sub = c " ", \
                          .repo = { .lock_fd = -1, .add_fd = -1 }, \
                          .requests = COPY_DEFAULT_REQUESTS }

/* DIR[@POINT] opened (shared lock), its point read.  Prints why not. */
extern int restore_open_point (struct restore *st, const char *spec);

/* Disk name (NULL: the point's one disk) to target.  Prints why not;
 * returns an exit status.
 */
extern int restore_add_job (struct restore *st, const char *name,
                            const char *target);

/* Before anything is written, for every job: its checksums describe
 * its image, the image's chain, the target's size, and what verify
 * recorded bad in it (refused with refuse_bad, else said).  Prints why
 * not.
 */
extern int restore_check_all (struct restore *st);

/* Copy job j's image to its target (j->only: those chunks); -1 if the
 * copy failed.  j->differing then counts the chunks read that differ
 * from the checksums.
 */
extern int restore_copy (struct restore *st, struct restore_job *j);

/* Every job in turn, until one fails (said on stderr) or a signal
 * stops them; with text output, a summary of each on stdout.  Returns
 * how many were tried, *ok if every one was copied and matches.
 */
extern size_t restore_run (struct restore *st, bool *ok);

/* The JSON output of the first done jobs (a new object). */
extern json_object *restore_json (const struct restore *st, size_t done,
                                  bool ok);

extern void restore_free (struct restore *st);

#endif /* DIRTYBITMAP_RESTORE_H */
