/* SPDX-License-Identifier: BSD-3-Clause */
/* repo-fold.c: a point of a repository removed (repo.h, retention),
 * every other point reading exactly what it did, at the cost of one
 * increment: nothing is read or written whole.
 *
 * Each disk's images form a chain, each image a qcow2 on the previous
 * point's ("PREV.qcow2"), its cluster the checksum chunk.  A point's
 * checksums describe its whole disk, so no point's need to change.
 * Removing point P, of base B (maybe none) and successor S (whose
 * images back on P's), disk by disk:
 *
 *   P/D on B/D   qemu-img rebase -b B.qcow2 S/D (the safe rebase): the
 *                clusters that P/D holds itself, S/D does not, and
 *                whose data differs from B's are written into S/D, then
 *                S/D's backing file becomes B.qcow2.  qemu reads only
 *                the clusters that P/D holds (B is in S/D's chain).
 *   P/D alone    qemu-img commit -d S/D: the clusters S/D holds are
 *                written into P/D, then P/D's file is renamed over
 *                S/D's (S's successor backs on "S.qcow2" by name).
 *                The cost is S's increment.
 *   S has no D, or its D does not build on P/D: P/D is removed.
 *
 * Neither writing changes what S/D reads (it read those clusters
 * through P/D, or holds them itself), so S restores exactly at every
 * moment.  The order, each step durable before the next:
 *
 *   (1) DIR/prune.json, the intent: P, B, S, P's disks;
 *   (2) P's record removed: P no longer exists (its image may now
 *       change, and repo_clean must not run before (6));
 *   (3) each disk folded as above, its image synced, a rename
 *       followed by a sync of its folder;
 *   (4) S's record: its base B, and what its images now hold;
 *   (5) what is left of P removed (images, checksums);
 *   (6) the intent removed.
 *
 * Every step can be done again: a disk whose S/D no longer backs on
 * P.qcow2, or whose P/D is gone, is done.  So a removal killed at any
 * point is finished by repo_finish_removal, the same steps from (2);
 * a fold in the middle of a chain is first checked against S's
 * checksums and mended (repo-mend.c), for qemu does not order a new
 * cluster's data before its table entry.  A first point's fold needs
 * no such check: commit writes only clusters S/D holds itself, and
 * the rename comes once they are synced.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <json-c/json.h>

#include "dirtybitmap.h"
#include "msg.h"
#include "qemu.h"
#include "repo.h"
#include "repo-impl.h"

#define INTENT "prune.json"

/* What DIR/prune.json says. */
struct intent {
  char *remove;                 /* P */
  char *base;                   /* B, or NULL */
  char *into;                   /* S, or NULL */
  char **disks;                 /* P's disks */
  size_t n;
  bool resumed;                 /* by repo_finish_removal */
};

static void
intent_free (struct intent *in)
{
  free (in->remove);
  free (in->base);
  free (in->into);
  repo_names_free (in->disks, in->n);
  memset (in, 0, sizeof *in);
}

static json_object *
name_or_null (const char *s)
{
  return s ? json_object_new_string (s) : NULL;
}

static int
intent_write (const struct repo *r, const struct intent *in,
              struct bmerr *err)
{
  json_object *j = json_object_new_object ();
  json_object *disks = json_object_new_array ();
  size_t i;
  int ret;

  json_object_object_add (j, "format", json_object_new_int (REPO_FORMAT));
  json_object_object_add (j, "remove", json_object_new_string (in->remove));
  json_object_object_add (j, "base", name_or_null (in->base));
  json_object_object_add (j, "into", name_or_null (in->into));
  for (i = 0; i < in->n; ++i)
    json_object_array_add (disks, json_object_new_string (in->disks[i]));
  json_object_object_add (j, "disks", disks);
  ret = repo_write_json (r, INTENT, ".", j, err);
  json_object_put (j);
  return ret;
}

/* j's key: a point's name (or null, if may_be_null): *out malloced. */
static int
get_point (json_object *j, const char *key, bool may_be_null, char **out)
{
  json_object *v;

  *out = NULL;
  if (!json_object_object_get_ex (j, key, &v))
    return -1;
  if (v == NULL)
    return may_be_null ? 0 : -1;
  if (!json_object_is_type (v, json_type_string) ||
      repo_check_point_name (json_object_get_string (v), NULL) == -1)
    return -1;
  return (*out = strdup (json_object_get_string (v))) ? 0 : -1;
}

static int
get_disks (json_object *j, struct intent *in)
{
  json_object *list, *v;
  size_t i, n;

  if (!json_object_object_get_ex (j, "disks", &list) ||
      !json_object_is_type (list, json_type_array))
    return -1;
  n = json_object_array_length (list);
  if ((in->disks = calloc (n + 1, sizeof *in->disks)) == NULL)
    return -1;
  for (i = 0; i < n; ++i) {
    v = json_object_array_get_idx (list, i);
    if (!json_object_is_type (v, json_type_string) ||
        repo_check_disk_name (json_object_get_string (v), NULL) == -1 ||
        (in->disks[i] = strdup (json_object_get_string (v))) == NULL)
      return -1;
    in->n = i + 1;
  }
  return 0;
}

/* Read DIR/prune.json: 1 with *in, 0 if there is none, -1 with err. */
static int
intent_read (const struct repo *r, struct intent *in, struct bmerr *err)
{
  char *path = repo_path (r, INTENT);
  json_object *j, *v;
  int ret = -1;

  memset (in, 0, sizeof *in);
  if (path == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  if (access (path, F_OK) == -1 && errno == ENOENT) {
    free (path);
    return 0;
  }
  if ((j = repo_read_json (path, err)) != NULL) {
    if (!json_object_object_get_ex (j, "format", &v) ||
        json_object_get_int64 (v) != REPO_FORMAT ||
        get_point (j, "remove", false, &in->remove) == -1 ||
        get_point (j, "base", true, &in->base) == -1 ||
        get_point (j, "into", true, &in->into) == -1 ||
        get_disks (j, in) == -1)
      bmerr_set (err, EINVAL, "%s: damaged: not {\"format\": %d, "
                 "\"remove\", \"base\", \"into\", \"disks\"}", path,
                 REPO_FORMAT);
    else
      ret = 1;
    json_object_put (j);
  }
  if (ret == -1)
    intent_free (in);
  free (path);
  return ret;
}

/* Each step of a removal, named for -v and for the tests that kill a
 * prune at each one (gdb: break *repo_fold_step if $_streq ((char *)
 * $rdi, "rebase")): called just before the step, never inlined.
 */
void __attribute__ ((noinline))
repo_fold_step (const char *step, const char *point, const char *disk)
{
  bm_debug ("removal of point %s: %s%s%s", point, step,
            disk ? ", disk " : "", disk ? disk : "");
}

/*----------------------------------------------------------------------
 * Files.
 */

static int
sync_file (const char *path, struct bmerr *err)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);

  if (fd == -1 || fsync (fd) == -1) {
    bmerr_set (err, errno, "%s: %s", path, strerror (errno));
    if (fd >= 0)
      close (fd);
    return -1;
  }
  close (fd);
  return 0;
}

/* DIR/disks/disk/point.qcow2, malloced. */
static char *
image_of (const struct repo *r, const char *disk, const char *point)
{
  char *rel = repo_image_rel (disk, point);
  char *path = rel ? repo_path (r, rel) : NULL;

  free (rel);
  return path;
}

/* The backing file image names (*backing malloced; NULL: none). */
static int
backing_of (const char *image, char **backing, struct bmerr *err)
{
  json_object *info = qemu_img_info (image, "qcow2", err), *v;

  *backing = NULL;
  if (info == NULL)
    return -1;
  if (json_object_object_get_ex (info, "backing-filename", &v) &&
      (*backing = strdup (json_object_get_string (v))) == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    json_object_put (info);
    return -1;
  }
  json_object_put (info);
  return 0;
}

/*----------------------------------------------------------------------
 * The folds of one disk.
 */

/* P/D on B/D: S/D rebased onto B/D, P's clusters copied into it. */
static int
fold_middle (const char *point, const char *disk, const char *p_image,
             const char *s_image, const char *base, struct repo_fold *f,
             struct bmerr *err)
{
  char *argv[] = { (char *) "qemu-img", (char *) "rebase", (char *) "-q",
                   (char *) "-f", (char *) "qcow2", (char *) "-b",
                   (char *) base, (char *) "-F", (char *) "qcow2",
                   (char *) "--", (char *) s_image, NULL };
  uint64_t before, after, folded;

  if (repo_stored_bytes (p_image, &folded, err) == -1 ||
      repo_stored_bytes (s_image, &before, err) == -1)
    return -1;
  repo_fold_step ("rebase", point, disk);
  if (repo_run_qemu (argv, NULL, err) == -1)
    return -1;
  repo_fold_step ("rebased", point, disk);
  if (sync_file (s_image, err) == -1 ||
      repo_stored_bytes (s_image, &after, err) == -1)
    return -1;
  f->folded += folded;
  f->written += after > before ? after - before : 0;
  return 0;
}

/* P/D's file, holding what S/D reads, renamed over S/D's. */
static int
take_over (const struct repo *r, const char *point, const char *disk,
           const char *p_image, const char *s_image, const char *folder,
           struct bmerr *err)
{
  repo_fold_step ("rename", point, disk);
  if (rename (p_image, s_image) == -1) {
    bmerr_set (err, errno, "rename %s to %s: %s", p_image, s_image,
               strerror (errno));
    return -1;
  }
  repo_fold_step ("renamed", point, disk);
  return repo_sync_dir (r, folder, err);
}

/* P/D alone: S/D's clusters committed into P/D, which becomes S/D. */
static int
fold_oldest (const struct repo *r, const char *point, const char *disk,
             const char *p_image, const char *s_image, struct repo_fold *f,
             struct bmerr *err)
{
  char *argv[] = { (char *) "qemu-img", (char *) "commit", (char *) "-q",
                   (char *) "-f", (char *) "qcow2", (char *) "-d",
                   (char *) "--", (char *) s_image, NULL };
  char *folder = repo_path_of ("disks/%s%s%s", disk, "", "");
  uint64_t own = 0;
  int ret = -1;

  if (folder == NULL)
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  else if (repo_stored_bytes (s_image, &own, err) == 0) {
    repo_fold_step ("commit", point, disk);
    if (repo_run_qemu (argv, NULL, err) == 0 &&
        sync_file (p_image, err) == 0)
      ret = take_over (r, point, disk, p_image, s_image, folder, err);
  }
  free (folder);
  f->folded += own;
  f->written += own;
  return ret;
}

/* A fold of P/D into S/D being done again, or done by a removal that
 * did not complete: what the rebase may have left torn, mended first
 * (repo-mend.c).  qemu-img rebase rewrites the backing file's name
 * without a flush before it, so after a power loss S/D may build on
 * B/D already and still hold a torn cluster.
 */
static int
resume_middle (const struct repo *r, const struct intent *in,
               const char *disk, const char *p_image, const char *s_image,
               struct repo_fold *f, struct bmerr *err)
{
  uint64_t mended = 0;

  if (!in->resumed)
    return 0;
  repo_fold_step ("mend", in->remove, disk);
  if (repo_mend_fold (r, disk, in->into, p_image, s_image, &mended,
                      err) == -1)
    return -1;
  f->mended += mended;
  return 0;
}

/* Fold disk of in->remove into in->into, unless done already. */
static int
fold_disk (const struct repo *r, const struct intent *in, const char *disk,
           struct repo_fold *f, struct bmerr *err)
{
  char *p_image = image_of (r, disk, in->remove);
  char *s_image = in->into ? image_of (r, disk, in->into) : NULL;
  char *s_backing = NULL, *p_backing = NULL, *want = NULL, *base = NULL;
  int ret = -1;

  if (p_image == NULL || (in->into && s_image == NULL) ||
      (want = repo_path_of ("%s%s%s", in->remove, ".qcow2", "")) == NULL ||
      (in->base && (base = repo_path_of ("%s%s%s", in->base, ".qcow2", ""))
       == NULL)) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    goto out;
  }
  if (s_image == NULL || access (p_image, F_OK) == -1 ||
      access (s_image, F_OK) == -1)
    ret = 0;                    /* done, or nothing builds on P/D */
  else if (backing_of (s_image, &s_backing, err) == -1 ||
           backing_of (p_image, &p_backing, err) == -1)
    ;
  else if (s_backing == NULL || strcmp (s_backing, want) != 0)
    /* Done: S/D does not build on P/D (any more: was the rebase that
     * made it build on B/D durable whole?).
     */
    ret = p_backing && base && s_backing && strcmp (s_backing, base) == 0
      ? resume_middle (r, in, disk, p_image, s_image, f, err) : 0;
  else if (p_backing && (base == NULL || strcmp (p_backing, base) != 0))
    bmerr_set (err, EINVAL, "%s: its backing file is %s, not %s: the "
               "repository is damaged", p_image, p_backing,
               base ? base : "none");
  else if (p_backing)
    ret = resume_middle (r, in, disk, p_image, s_image, f, err) == -1 ? -1
      : fold_middle (in->remove, disk, p_image, s_image, base, f, err);
  else
    ret = fold_oldest (r, in->remove, disk, p_image, s_image, f, err);
 out:
  free (p_image);
  free (s_image);
  free (s_backing);
  free (p_backing);
  free (want);
  free (base);
  return ret;
}

/*----------------------------------------------------------------------
 * The removal.
 */

/* (4): S's record, its base now B, its images' bytes counted again. */
static int
update_successor (const struct repo *r, const struct intent *in,
                  struct bmerr *err)
{
  struct repo_point s;
  size_t i;
  int ret = -1;

  if (repo_choose (r, in->into, &s, err) == -1)
    return -1;
  free (s.base);
  s.base = NULL;
  if (in->base && (s.base = strdup (in->base)) == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    goto out;
  }
  for (i = 0; i < s.n; ++i)
    if (repo_image_done (r, s.disks[i].name, s.name, &s.disks[i].stored,
                         err) == -1)
      goto out;
  ret = repo_point_write (r, &s, err);
 out:
  repo_point_free (&s);
  return ret;
}

/* Unlink DIR/rel if it is there, then sync the folder dirrel. */
static int
remove_file (const struct repo *r, const char *rel, const char *dirrel,
             struct bmerr *err)
{
  char *path = repo_path (r, rel);

  if (path == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  if (unlink (path) == -1 && errno != ENOENT) {
    bmerr_set (err, errno, "%s: %s", path, strerror (errno));
    free (path);
    return -1;
  }
  free (path);
  return repo_sync_dir (r, dirrel, err);
}

/* Steps (2) to (6). */
static int
fold (const struct repo *r, const struct intent *in, struct repo_fold *f,
      struct bmerr *err)
{
  char *record = repo_path_of ("points/%s%s%s", in->remove, ".json", "");
  size_t i;
  int ret = -1;

  if (record == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  repo_fold_step ("record", in->remove, NULL);
  if (remove_file (r, record, "points", err) == -1)
    goto out;
  for (i = 0; i < in->n; ++i) {
    repo_fold_step ("fold", in->remove, in->disks[i]);
    if (fold_disk (r, in, in->disks[i], f, err) == -1)
      goto out;
  }
  repo_fold_step ("successor", in->remove, NULL);
  if (in->into && update_successor (r, in, err) == -1)
    goto out;
  repo_fold_step ("discard", in->remove, NULL);
  repo_discard (r, in->remove);
  repo_fold_step ("done", in->remove, NULL);
  ret = remove_file (r, INTENT, ".", err);
 out:
  free (record);
  return ret;
}

/* Step (1), then the rest. */
static int
write_and_fold (const struct repo *r, const struct intent *in,
                struct repo_fold *f, struct bmerr *err)
{
  repo_fold_step ("intent", in->remove, NULL);
  if (intent_write (r, in, err) == -1)
    return -1;
  f->begun = true;
  return fold (r, in, f, err);
}

/* The intent of removing all->p[i]: -1 with err if it is the newest. */
static int
intent_of (const struct repo *r, const struct repo_points *all, size_t i,
           struct intent *in, struct bmerr *err)
{
  const struct repo_point *p = &all->p[i];
  size_t k, s = all->n;

  memset (in, 0, sizeof *in);
  for (k = 0; k < all->n; ++k) {
    if (all->p[k].base == NULL || strcmp (all->p[k].base, p->name) != 0)
      continue;
    if (s < all->n) {
      bmerr_set (err, EINVAL, "point %s of %s: points %s and %s both build "
                 "on it: the repository is damaged (each point builds on "
                 "the one before it)", p->name, r->dir, all->p[s].name,
                 all->p[k].name);
      return -1;
    }
    s = k;
  }
  if (s == all->n) {
    bmerr_set (err, EINVAL, "point %s of %s: no point builds on it: it is "
               "the newest, which is always kept", p->name, r->dir);
    return -1;
  }
  k = s;
  if ((in->remove = strdup (p->name)) == NULL ||
      (p->base && (in->base = strdup (p->base)) == NULL) ||
      (in->into = strdup (all->p[k].name)) == NULL ||
      (in->disks = calloc (p->n + 1, sizeof *in->disks)) == NULL)
    goto nomem;
  for (k = 0; k < p->n; ++k, in->n++)
    if ((in->disks[k] = strdup (p->disks[k].name)) == NULL)
      goto nomem;
  return 0;
 nomem:
  bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  intent_free (in);
  return -1;
}

int
repo_remove_point (const struct repo *r, const char *name,
                   struct repo_fold *f, struct bmerr *err)
{
  struct repo_points all;
  struct intent in = { 0 };
  uint64_t before, after;
  size_t i;
  int ret = -1;

  memset (f, 0, sizeof *f);
  if (repo_load (r, &all, err) == -1)
    return -1;
  for (i = 0; i < all.n; ++i)
    if (strcmp (all.p[i].name, name) == 0)
      break;
  if (i == all.n)
    bmerr_set (err, ENOENT, "%s has no point %s", r->dir, name);
  else if (intent_of (r, &all, i, &in, err) == 0 &&
           repo_size (r, &before, err) == 0 &&
           write_and_fold (r, &in, f, err) == 0 &&
           repo_size (r, &after, err) == 0) {
    f->freed = before > after ? before - after : 0;
    f->into = in.into;
    in.into = NULL;
    ret = 0;
  }
  intent_free (&in);
  repo_points_free (&all);
  return ret;
}

bool
repo_removal_pending (const struct repo *r)
{
  char *path = repo_path (r, INTENT);
  bool there = path == NULL || access (path, F_OK) == 0;

  free (path);
  return there;
}

int
repo_finish_removal (const struct repo *r, char **name, uint64_t *mended,
                     struct bmerr *err)
{
  struct repo_fold f = { 0 };
  struct intent in;
  char *tmp = repo_path (r, INTENT ".tmp");
  int found;

  *name = NULL;
  *mended = 0;
  if (tmp)
    unlink (tmp);               /* an intent not yet in place */
  free (tmp);
  if ((found = intent_read (r, &in, err)) <= 0)
    return found;
  in.resumed = true;
  if (fold (r, &in, &f, err) == -1) {
    bmerr_prefix (err, "%s: the removal of point %s, begun by a prune "
                  "that did not complete, could not be finished", r->dir,
                  in.remove);
    intent_free (&in);
    return -1;
  }
  *name = in.remove;
  *mended = f.mended;
  in.remove = NULL;
  intent_free (&in);
  return 0;
}

const char *
repo_mended_note (uint64_t mended, char *buf, size_t len)
{
  if (mended == 0)
    return "";
  snprintf (buf, len, " (%" PRIu64 " chunk%s that a power loss had left "
            "torn written again)", mended, mended == 1 ? "" : "s");
  return buf;
}
