/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/points.c: a backup into a repository (--repo DIR, see
 * repo.h): the point NEW made of one qcow2 image per disk, each served
 * writable by a qemu-nbd of our own for the time of the copy.
 *
 * The steps, around backup/main.c's (dirtybitmap(1), THE REPOSITORY):
 *
 *   points_open     DIR opened for writing (its lock held to the end),
 *                   a removal that a prune did not complete finished,
 *                   what backups that did not complete left removed,
 *                   the base chosen (the newest point), each disk's
 *                   target a qemu-nbd socket that listens already;
 *   points_servers  their checkpoints removed from the servers too, and
 *                   those of points older than the base;
 *   (cut_check: how each disk is copied; the cut; checksums_prepare)
 *   points_images   each disk's image created, of its size at the cut
 *                   (a server that no client has reached yet does not
 *                   know it before), on the base's, its cluster the
 *                   checksum chunk; and qemu-nbd started on it;
 *   (the copies, cut_end: the servers commit NEW; the checksums put
 *    in place)
 *   points_commit   every qemu-nbd stopped (its end flushes the image:
 *                   a qemu-nbd that does not end cleanly fails the
 *                   point), the images synced, the point's record
 *                   written last; then B removed from the servers.
 *
 * On any failure, points_undo stops the qemu-nbds and removes NEW's
 * images and checksums; after cut_end, NEW is removed from the servers
 * too (cut_forget), so every disk stays at B.  A process killed on the
 * way leaves files without a record, and maybe NEW on the servers: the
 * next points_open and points_servers remove both.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/wait.h>

#include "dirtybitmap.h"
#include "internal.h"
#include "qemu.h"
#include "repo.h"
#include "sums.h"

struct points {
  struct repo r;
  struct repo_point base;       /* the newest point (name NULL: none) */
  char *sums_dir;
  char **stale;                 /* checkpoints to remove from the servers:
                                 * of points that backups did not
                                 * complete, and of older points */
  size_t nstale;
  struct qemu_nbd *nbd;         /* [s->n], serving each disk's image */
  char **images;                /* [s->n], each image's path */
  bool made;                    /* images created (some may be) */
};

static int
fail_err (struct set *s, const struct bmerr *err)
{
  set_fail (s, "%s", err->msg);
  return -1;
}

/* Add name to the bitmaps to remove from the servers. */
static int
add_stale (struct points *p, const char *name)
{
  char **names = realloc (p->stale, (p->nstale + 1) * sizeof *names);

  if (names == NULL)
    return -1;
  p->stale = names;
  if ((names[p->nstale] = strdup (name)) == NULL)
    return -1;
  p->nstale++;
  return 0;
}

/* The base: the newest point, whose images the new ones build on.
 * Its checkpoint is the disks' B, unless --incremental names an older
 * point, whose checkpoint the disks have instead (a disk restored from
 * it with restore-checkpoint=): older.c then adds the chunks that
 * changed between the two.  The other points' checkpoints are stale
 * on the servers (only a backup killed between its point's record and
 * the removal of its base leaves one).
 */
static int
choose_base (struct set *s, struct points *p)
{
  struct repo_points all;
  struct bmerr err = { 0 };
  bool found = false;
  size_t i;

  if (repo_load (&p->r, &all, &err) == -1)
    return fail_err (s, &err);
  for (i = 0; i < all.n; ++i) {
    bool b = s->incremental && strcmp (all.p[i].name, s->incremental) == 0;
    found |= b;
    if (!b && i + 1 < all.n && add_stale (p, all.p[i].name) == -1) {
      repo_points_free (&all);
      set_fail (s, "out of memory");
      return -1;
    }
  }
  if (all.n > 0) {
    p->base = all.p[all.n - 1];
    all.n--;
  }
  repo_points_free (&all);
  if (s->incremental && p->base.name == NULL) {
    set_fail (s, "--incremental %s: %s has no points: its first backup is "
              "a full one (leave --incremental out)", s->incremental,
              p->r.dir);
    return -1;
  }
  if (s->incremental && !found) {
    set_fail (s, "--incremental %s: %s has no point %s (a backup into a "
              "repository builds on its newest point, %s: leave "
              "--incremental out)", s->incremental, p->r.dir,
              s->incremental, p->base.name);
    return -1;
  }
  if (s->incremental == NULL)
    s->incremental = p->base.name;
  return 0;
}

/* NEW is a name for a point, and not one already. */
static int
check_new (struct set *s, struct points *p)
{
  struct repo_point old;
  struct bmerr err = { 0 };

  if (repo_check_point_name (s->checkpoint, &err) == -1)
    return fail_err (s, &err);
  if (repo_choose (&p->r, s->checkpoint, &old, &err) == 0) {
    repo_point_free (&old);
    set_fail (s, "--checkpoint %s: %s has a point %s already: give the new "
              "point another name", s->checkpoint, p->r.dir, s->checkpoint);
    return -1;
  }
  if (err.errnum != ENOENT)
    return fail_err (s, &err);
  return 0;
}

/* Each disk's target: a socket that listens already (its qemu-nbd
 * comes once the image exists); its checksums under its name.
 */
static int
listen_all (struct set *s, struct points *p)
{
  struct bmerr err = { 0 };
  size_t i;

  p->nbd = calloc (s->n, sizeof *p->nbd);
  p->images = calloc (s->n, sizeof *p->images);
  if (p->nbd == NULL || p->images == NULL) {
    set_fail (s, "out of memory");
    return -1;
  }
  for (i = 0; i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    if (repo_check_disk_name (d->name, &err) == -1 ||
        qemu_nbd_listen (&p->nbd[i], &err) == -1)
      return fail_err (s, &err);
    d->named = true;
    if ((d->target = strdup (p->nbd[i].uri)) == NULL) {
      set_fail (s, "out of memory");
      return -1;
    }
  }
  return 0;
}

/* Finish the removal of a point that a prune killed on the way left
 * (before repo_clean: the point's record is gone, not its files).
 */
static int
finish_removal (struct set *s, struct points *p)
{
  struct bmerr err = { 0 };
  char *name = NULL;
  uint64_t mended = 0;
  char note[96];

  /* A removal changes images that readers may be reading: finished
   * only while none is there.
   */
  if (!repo_removal_pending (&p->r))
    return 0;
  if (repo_exclude_readers (&p->r, &err) == -1) {
    bmerr_prefix (&err, "%s: a prune that did not complete must be "
                  "finished first, by this backup", p->r.dir);
    return fail_err (s, &err);
  }
  if (repo_finish_removal (&p->r, &name, &mended, &err) == -1) {
    repo_share (&p->r);
    return fail_err (s, &err);
  }
  repo_share (&p->r);
  if (name)
    bm_error ("backup: %s: finished the removal of point %s, begun by a "
              "prune that did not complete%s", p->r.dir, name,
              repo_mended_note (mended, note, sizeof note));
  free (name);
  return 0;
}

int
points_open (struct set *s, const char *dir)
{
  struct points *p = calloc (1, sizeof *p);
  struct bmerr err = { 0 };
  size_t i;

  if (p == NULL) {
    set_fail (s, "out of memory");
    return -1;
  }
  p->r.lock_fd = p->r.add_fd = -1;
  s->points = p;
  if (repo_open (dir, true, &p->r, &err) == -1)
    return fail_err (s, &err);
  if (finish_removal (s, p) == -1)
    return -1;
  if (repo_clean (&p->r, &p->stale, &p->nstale, &err) == -1)
    return fail_err (s, &err);
  for (i = 0; i < p->nstale; ++i)
    bm_error ("backup: %s: removed the files of point %s, left "
              "by a backup that did not complete", dir,
              p->stale[i]);
  if (check_new (s, p) == -1 || choose_base (s, p) == -1)
    return -1;
  if ((p->sums_dir = repo_sums_dir (&p->r)) == NULL) {
    set_fail (s, "out of memory");
    return -1;
  }
  s->sums_dir = p->sums_dir;
  s->sums_required = true;
  return listen_all (s, p);
}

int
points_servers (struct set *s)
{
  return cut_remove_stale (s, s->points->stale, s->points->nstale);
}

/* Create disk i's image and serve it. */
static int
make_image (struct set *s, size_t i)
{
  struct points *p = s->points;
  struct disk *d = &s->disks[i];
  const char *base = p->base.name && repo_point_disk (&p->base, d->name)
    ? p->base.name : NULL;
  const char *args[] = { "-f", "qcow2", "-t", "-e", "16", "--", NULL, NULL };
  struct bmerr err = { 0 };
  char *rel = repo_image_rel (d->name, s->checkpoint);

  if (rel == NULL || (p->images[i] = repo_path (&p->r, rel)) == NULL) {
    free (rel);
    disk_fail (d, "out of memory");
    return -1;
  }
  free (rel);
  p->made = true;
  args[6] = p->images[i];
  if (repo_image_create (&p->r, d->name, s->checkpoint, base, d->size,
                         d->sums ? d->sums->chunk
                         : sums_chunk_for (d->granularity), &err) == -1 ||
      qemu_nbd_run (args, &p->nbd[i], &err) == -1) {
    disk_fail (d, "%s", err.msg);
    return -1;
  }
  return 0;
}

int
points_images (struct set *s)
{
  size_t i;

  for (i = 0; i < s->n; ++i)
    if (make_image (s, i) == -1)
      return -1;
  return 0;
}

/* Stop disk i's qemu-nbd: -1 unless it ended cleanly (its end flushes
 * what it wrote into the image).
 */
static int
stop_server (struct set *s, size_t i)
{
  struct disk *d = &s->disks[i];
  struct bmerr err = { 0 };
  char *text = NULL;
  int status = qemu_nbd_stop (&s->points->nbd[i], &text);

  if (status != 0) {
    qemu_error (&err, "qemu-nbd", text, status);
    disk_fail (d, "qemu-nbd serving %s did not end cleanly, so what it "
               "wrote may not all be there: %s", s->points->images[i],
               err.msg);
  }
  free (text);
  return status == 0 ? 0 : -1;
}

/* The point's record, from the disks as they were copied. */
static int
fill_record (struct set *s, struct repo_point *rec, char *when)
{
  struct bmerr err = { 0 };
  size_t i;

  *rec = (struct repo_point) { .name = (char *) s->checkpoint, .time = when,
                               .base = s->points->base.name, .n = s->n };
  if ((rec->disks = calloc (s->n, sizeof *rec->disks)) == NULL) {
    set_fail (s, "out of memory");
    return -1;
  }
  for (i = 0; i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    struct repo_disk *rd = &rec->disks[i];
    if (!d->sums_written) {
      disk_fail (d, "its checksums are not in place: a point of a "
                 "repository is restored against them");
      return -1;
    }
    *rd = (struct repo_disk) {
      .name = d->name, .size = d->size, .chunk = d->sums->chunk,
      .mode = (char *) backup_mode_name (d->mode),
      .image = repo_image_rel (d->name, s->checkpoint),
      .sums = repo_sums_rel (d->name, s->checkpoint),
    };
    if (rd->image == NULL || rd->sums == NULL) {
      set_fail (s, "out of memory");
      return -1;
    }
    if (repo_image_done (&s->points->r, d->name, s->checkpoint,
                         &rd->stored, &err) == -1) {
      disk_fail (d, "%s", err.msg);
      return -1;
    }
  }
  return 0;
}

static void
free_record (struct repo_point *rec)
{
  size_t i;

  for (i = 0; rec->disks && i < rec->n; ++i) {
    free (rec->disks[i].image);
    free (rec->disks[i].sums);
  }
  free (rec->disks);
}

int
points_commit (struct set *s)
{
  struct repo_point rec = { 0 };
  struct bmerr err = { 0 };
  char when[64];
  size_t i;
  int r = 0;

  for (i = 0; i < s->n; ++i)
    if (stop_server (s, i) == -1)
      r = -1;
  report_time (s->cut_wall, when, sizeof when);
  if (r == 0 && (r = fill_record (s, &rec, when)) == 0 &&
      (r = repo_point_write (&s->points->r, &rec, &err)) == -1)
    set_fail (s, "%s", err.msg);
  free_record (&rec);
  if (r == 0 && s->incremental)
    cut_remove_base (s);
  return r;
}

void
points_undo (struct set *s)
{
  struct points *p = s->points;
  size_t i;

  if (p == NULL || p->nbd == NULL)
    return;
  for (i = 0; i < s->n; ++i)
    qemu_nbd_stop (&p->nbd[i], NULL);
  if (p->made && p->r.dir)
    repo_discard (&p->r, s->checkpoint);
}

void
points_report (struct set *s)
{
  struct points *p = s->points;
  size_t i;

  /* The summary and the manifest name each image, not the socket
   * that served it.
   */
  for (i = 0; p && p->images && i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    char *image = p->images[i] ? strdup (p->images[i]) : NULL;
    if (image == NULL)
      continue;
    free (d->target);
    d->target = image;
    d->o.target = image;
  }
}

const struct repo *
points_repo (const struct set *s)
{
  return &s->points->r;
}

void
points_close (struct set *s)
{
  struct points *p = s->points;
  size_t i;

  if (p == NULL)
    return;
  points_undo (s);
  for (i = 0; p->images && i < s->n; ++i)
    free (p->images[i]);
  free (p->images);
  free (p->nbd);
  free (p->sums_dir);
  repo_names_free (p->stale, p->nstale);
  repo_point_free (&p->base);
  repo_close (&p->r);
  free (p);
  s->points = NULL;
}
