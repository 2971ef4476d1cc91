/* SPDX-License-Identifier: BSD-3-Clause */
/* repo-impl.h: what the files of the repository module share (repo.c
 * names, opens and locks a repository; repo-record.c reads and writes
 * its points' records; repo-files.c makes and removes their files;
 * repo-verified.c keeps what verify records; repo-fold.c removes a
 * point, folding its data into its successor; repo-mend.c checks a
 * fold that did not complete).
 * Nothing outside them includes it.
 */

#ifndef DIRTYBITMAP_REPO_IMPL_H
#define DIRTYBITMAP_REPO_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "error.h"
#include "repo.h"

/* fs (a printf format) with a, b and c: malloced, NULL on ENOMEM. */
extern char *repo_path_of (const char *fs, const char *a, const char *b,
                           const char *c);

/* Sync the directory DIR/rel. */
extern int repo_sync_dir (const struct repo *r, const char *rel,
                          struct bmerr *err);

/* flock(2) on DIR/points, exclusive, waited for (each holder rewrites
 * one record, or removes what a backup left there): the descriptor to
 * close, or -1 with err.
 */
extern int repo_lock_records (const struct repo *r, struct bmerr *err);

/* The string at key of o, or NULL if it is not one. */
extern const char *repo_json_str (json_object *o, const char *key);

/* Read the JSON file path (at most 1 MiB): NULL with err. */
extern json_object *repo_read_json (const char *path, struct bmerr *err);

/* Write j to DIR/rel atomically (rel.tmp, fsync, rename, fsync the
 * directory DIR/dirrel).
 */
extern int repo_write_json (const struct repo *r, const char *rel,
                            const char *dirrel, json_object *j,
                            struct bmerr *err);

/* Is t a time as records hold it (2026-12-06T05:00:00.123456Z)? */
extern bool repo_valid_time (const char *t);

/* Run a qemu program (argv), its output to *out if out is not NULL.
 * -1 with err (its words).
 */
extern int repo_run_qemu (char *const argv[], char **out,
                          struct bmerr *err);

/* A record's "verified" (v: NULL if null) into p; what it holds freed.
 * -1 with err naming path.
 */
extern int repo_verified_parse (const char *path, json_object *v,
                                struct repo_point *p, struct bmerr *err);
extern void repo_verified_free (struct repo_point *p);

/* fn for each extent that qcow2 image holds itself, as qemu-img map
 * says (depth 0, present: data, or zeroes recorded): its start and
 * length.  -1 with err.
 */
extern int repo_own_extents (const char *image,
                             void (*fn) (uint64_t start, uint64_t length,
                                         void *opaque),
                             void *opaque, struct bmerr *err);

/* The bytes allocated in image itself, as qemu-img map says: its
 * extents at depth 0 that are present (data, or zeroes recorded).
 */
extern int repo_stored_bytes (const char *image, uint64_t *stored,
                              struct bmerr *err);

/* Before a fold of p_image into s_image (disk's images of a point and
 * of point, its successor) is done again after an interruption: the
 * chunks both hold checked against point's checksums, and those a
 * fold left torn written again (repo-mend.c); *mended: how many.  -1
 * with err.
 */
extern int repo_mend_fold (const struct repo *r, const char *disk,
                           const char *point, const char *p_image,
                           const char *s_image, uint64_t *mended,
                           struct bmerr *err);

/* A step of a removal (repo-fold.c): said with -v; a place where a
 * test stops or kills a prune.
 */
extern void repo_fold_step (const char *step, const char *point,
                            const char *disk);

#endif /* DIRTYBITMAP_REPO_IMPL_H */
