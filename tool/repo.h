/* SPDX-License-Identifier: BSD-3-Clause */
/* repo.h: the backup repository (dirtybitmap backup --repo DIR), the
 * one owner of its layout: nothing else builds a path inside DIR.
 *
 *   DIR/repository.json         {"format": 1}: DIR is a repository
 *   DIR/writer.lock             flock(2), exclusive: one writer at a
 *                               time (a backup or a prune)
 *   DIR/lock                    flock(2): exclusive for a prune (it
 *                               changes points' images); shared for
 *                               a backup (it only adds a point) and
 *                               for readers (list, restore, rollback,
 *                               serve, verify).  Neither lock is ever
 *                               waited for
 *   DIR/points/POINT.json       a complete point (struct repo_point),
 *                               written atomically and last: a point
 *                               exists iff its record does
 *   DIR/disks/NAME/POINT.qcow2  the disk NAME at POINT: qcow2, its
 *                               cluster the checksum chunk; backing
 *                               file "BASE.qcow2" (relative, same
 *                               directory, format qcow2) unless it is
 *                               the first image of its chain
 *   DIR/sums/NAME.POINT.sums    its checksums (sums.h)
 *   DIR/verify.json             {"started": TIME}: a verify of every
 *                               point under way, or interrupted (its
 *                               --resume skips the points it did)
 *   DIR/prune.json              a removal of a point under way
 *                               (repo-fold.c), finished by the next
 *                               writer before anything else
 *
 * A point's record changes after it is written in two ways only:
 * verify (which holds the shared lock, as readers do) records its
 * result in it, and a prune (exclusive) rewrites the record of the
 * point a removed one was folded into.  Such a rewrite is atomic (tmp,
 * rename) like every record's, so readers see the old record or the
 * new one; two verifies rewriting records take flock(2) on DIR/points,
 * exclusive, each for one read-modify-write of one record (or of
 * verify.json), so neither loses the other's result nor tears the
 * other's temporary file.
 *
 * Anything in DIR that belongs to a point without a record is what a
 * backup that did not complete left: the next writer removes it
 * (repo_clean, after repo_finish_removal: a point being removed has
 * lost its record first).  A point's record names its files exactly
 * as above, and is refused if it names any other (a record cannot
 * point outside DIR).  Functions here print nothing: errors are
 * values.
 */

#ifndef DIRTYBITMAP_REPO_H
#define DIRTYBITMAP_REPO_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include <json-c/json.h>

#include "error.h"

#define REPO_FORMAT 1
#define REPO_MAX_NAME 200       /* bytes of a point's or a disk's name */

struct repo {
  char *dir;                    /* as given */
  int lock_fd;                  /* DIR/lock */
  int add_fd;                   /* DIR/writer.lock, held by a writer */
  bool writer;                  /* a backup or a prune */
  bool changer;                 /* a prune: DIR/lock held exclusively */
};

/* One disk of a point (paths relative to DIR). */
struct repo_disk {
  char *name;
  uint64_t size;                /* bytes */
  uint64_t chunk;               /* the checksum chunk, the cluster size */
  char *image;                  /* disks/NAME/POINT.qcow2 */
  char *sums;                   /* sums/NAME.POINT.sums */
  char *mode;                   /* "full", "incremental" or "resync" */
  uint64_t stored;              /* bytes allocated in the image itself */
};

/* A range of a disk that a verification of a point found bad: its
 * chunks differ from the point's checksums (or could not be read).
 * in: the point whose own image held those clusters when they were
 * read (the point's, or one that it reads through), or NULL: none did
 * (they read as zeroes).
 */
struct repo_bad {
  char *disk;
  uint64_t offset, length;
  char *in;
};

struct repo_point {
  char *name;
  char *time;                   /* the cut, UTC: 2026-12-06T05:00:00.123456Z */
  char *base;                   /* the point its images build on, or NULL */
  struct repo_disk *disks;
  size_t n;
  bool verified;                /* a verification is recorded: */
  char *verified_time;
  bool verified_ok;
  struct repo_bad *bad;         /* what it found bad, if not ok */
  size_t nbad;
};

struct repo_points {
  struct repo_point *p;         /* oldest first: by time, then name */
  size_t n;
};

/* Open DIR.  A reader needs a repository; a writer (a backup: it adds
 * points while readers read) makes one of a missing or empty directory
 * (DIR itself mode 0700).  Then the locks, without waiting: errnum
 * EBUSY when another dirtybitmap holds one.  -1 with err.
 */
extern int repo_open (const char *dir, bool writer, struct repo *r,
                      struct bmerr *err);
/* For a writer that changes points (prune), of a repository that must
 * exist already: no reader may be there.
 */
extern int repo_open_existing (const char *dir, struct repo *r,
                               struct bmerr *err);
/* A backup about to finish a removal that a prune left (repo-fold.c):
 * DIR/lock made exclusive, without waiting (EBUSY while readers are
 * there), then made shared again by repo_share.  -1 with err.
 */
extern int repo_exclude_readers (struct repo *r, struct bmerr *err);
extern void repo_share (struct repo *r);
extern void repo_close (struct repo *r);

/* "DIR" or "DIR@POINT" (a point's name has no '@'; the whole of arg
 * is DIR unless what comes before its last '@' is a directory):
 * *dir and *point (NULL: none) malloced.  -1 on ENOMEM.
 */
extern int repo_parse_spec (const char *arg, char **dir, char **point);

/* Is name a point's (1 to REPO_MAX_NAME of A-Z a-z 0-9 . _ + : -, not
 * first . or -) or a disk's (the same without .)?  -1 with err saying
 * why, naming what.
 */
extern int repo_check_point_name (const char *name, struct bmerr *err);
extern int repo_check_disk_name (const char *name, struct bmerr *err);

/* Every point, oldest first.  A record that cannot be read or is
 * damaged is an error naming it.  -1 with err.
 */
extern int repo_load (const struct repo *r, struct repo_points *out,
                      struct bmerr *err);
/* The point name, or, if name is NULL, the newest.  errnum ENOENT if
 * there is no such point (the message lists those there are).
 */
extern int repo_choose (const struct repo *r, const char *name,
                        struct repo_point *out, struct bmerr *err);
extern const struct repo_disk *repo_point_disk (const struct repo_point *p,
                                                const char *disk);
extern void repo_point_free (struct repo_point *p);
extern void repo_points_free (struct repo_points *ps);

/* Paths, malloced (NULL on ENOMEM).  repo_path: DIR/rel. */
extern char *repo_path (const struct repo *r, const char *rel);
extern char *repo_image_rel (const char *disk, const char *point);
extern char *repo_sums_rel (const char *disk, const char *point);
/* DIR/sums, where backup keeps the checksums (--sums-dir). */
extern char *repo_sums_dir (const struct repo *r);

/* For a writer only. */

/* Remove what backups that did not complete left: the files of every
 * point without a record.  Their names go to *names (malloced, *n of
 * them; free with repo_names_free), for the caller to say.  -1 with
 * err.
 */
extern int repo_clean (const struct repo *r, char ***names, size_t *n,
                       struct bmerr *err);
extern void repo_names_free (char **names, size_t n);

/* Create the image of disk at point: size bytes, clusters of cluster
 * bytes, backed by the same disk's image at base (NULL: none).  It
 * must not exist.  -1 with err (qemu-img's words).
 */
extern int repo_image_create (const struct repo *r, const char *disk,
                              const char *point, const char *base,
                              uint64_t size, uint64_t cluster,
                              struct bmerr *err);

/* Once written: the image and its directory made durable, and the
 * bytes allocated in the image itself (not its backing chain) counted.
 */
extern int repo_image_done (const struct repo *r, const char *disk,
                            const char *point, uint64_t *stored,
                            struct bmerr *err);

/* Remove the images and checksums of point (which has no record): a
 * backup that failed.  Best effort.
 */
extern void repo_discard (const struct repo *r, const char *point);

/* Write p's record, atomically (tmp, fsync, rename, fsync the
 * directory): from here on the point exists.  -1 with err.
 */
extern int repo_point_write (const struct repo *r,
                             const struct repo_point *p, struct bmerr *err);

/* The bytes that the images and checksums of DIR take on its file
 * system (their allocated blocks).  -1 with err.
 */
extern int repo_size (const struct repo *r, uint64_t *total,
                      struct bmerr *err);

/* Retention (repo-fold.c).  A point is removed by folding what its
 * images hold into the images of its successor (the point whose base
 * it is), so that every other point reads exactly what it did; the
 * cost is one increment (dirtybitmap(1), prune).  An intent record,
 * DIR/prune.json, is written before the first change: a removal that
 * did not complete is finished by the next writer.
 */
struct repo_fold {
  char *into;                   /* the successor, or NULL: none */
  uint64_t written;             /* data bytes written into images */
  uint64_t folded;              /* bytes of the increments folded */
  uint64_t freed;               /* bytes freed on the file system */
  bool begun;                   /* the intent was written */
  uint64_t mended;              /* chunks an interrupted fold had left
                                 * torn, written again */
};

/* Remove point name, which must have a successor (the newest point
 * is never removed).  -1 with err; if f->begun, the removal began, and
 * the next repo_finish_removal ends it.  Free f->into.
 */
extern int repo_remove_point (const struct repo *r, const char *name,
                              struct repo_fold *f, struct bmerr *err);

/* Is a removal that a prune began, and did not complete, there? */
extern bool repo_removal_pending (const struct repo *r);

/* Finish the removal that a writer killed on the way left, if any:
 * *name is then its point (malloced), else NULL; *mended the chunks
 * of its successor that the fold had left torn and were written again
 * (repo-mend.c).  -1 with err.
 */
extern int repo_finish_removal (const struct repo *r, char **name,
                                uint64_t *mended, struct bmerr *err);
/* "" or " (N chunks ... written again)", into buf, for the message
 * that says a removal was finished.
 */
extern const char *repo_mended_note (uint64_t mended, char *buf,
                                     size_t len);

/* A point's "verified" in JSON (a new reference), or NULL: none yet. */
extern json_object *repo_verified_json (const struct repo_point *p);

/* For verify (repo-verified.c). */

/* The time now, as records hold it (UTC, 2026-12-06T05:00:00.123456Z). */
extern void repo_time_now (char *buf, size_t n);

/* Record in point's record a verification made at time: ok, or the
 * ranges found bad (nbad of them; past REPO_MAX_BAD, each disk's are
 * folded into one, held by the point: more is healed, never less).
 * The rest of the record is kept as it is.  -1 with err.
 */
#define REPO_MAX_BAD 1024
extern int repo_record_verified (const struct repo *r, const char *point,
                                 const char *time, bool ok,
                                 const struct repo_bad *bad, size_t nbad,
                                 struct bmerr *err);

/* A verify of every point begins: with resume and DIR/verify.json
 * there, *since is when the run it left began (the points with a
 * result recorded since then are done); otherwise verify.json is
 * written anew and *since is NULL.  -1 with err.
 */
extern int repo_session_begin (const struct repo *r, bool resume,
                               char **since, struct bmerr *err);
/* It ended (not interrupted): verify.json removed. */
extern int repo_session_end (const struct repo *r, struct bmerr *err);

/* Where each range of disk d of a point reads from: the point whose
 * own image holds it, or NULL (no image of its chain does: zeroes), as
 * qemu-img map says of its image with its chain.  *out (*n ranges, in
 * order, covering the disk) freed with repo_sources_free.  -1 with err.
 */
struct repo_source {
  uint64_t offset, length;
  char *point;
};
extern int repo_sources (const struct repo *r, const struct repo_disk *d,
                         struct repo_source **out, size_t *n,
                         struct bmerr *err);
/* The range of sources holding offset, or NULL if none does. */
extern const struct repo_source *repo_source_at (
  const struct repo_source *s, size_t n, uint64_t offset);
extern void repo_sources_free (struct repo_source *s, size_t n);

#endif /* DIRTYBITMAP_REPO_H */
