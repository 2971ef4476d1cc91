/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/heal.c: a backup into a repository heals what verify found
 * bad in the newest point, its base (repo.h, "verified"): each chunk
 * of a disk that the newest point reads from an image found bad there
 * is copied again, from the disk's view, whatever the base bitmap says
 * of it (copy_sums.force), so the new point is right even where its
 * base is not.
 *
 * Which chunks: every range recorded bad in the newest point itself;
 * and every range recorded bad in an older point whose clusters the
 * newest point still reads through the same image (qemu-img map of
 * the newest point's chain: the image that holds each cluster).  When
 * that map cannot be made, or the point whose image held a range is
 * gone (pruned: its data folded into another image), the range is
 * copied again whatever the newest point reads: more, never less,
 * until a verify records the points anew.  The chunks
 * are the new point's checksum chunks that meet those ranges.
 *
 * A forced chunk is also never "unchanged" in a resync (its digest in
 * the newest point's checksums is not trusted), and its digest in the
 * new checksums is that of what was read.  What was healed is said once
 * the point exists (heal_report).
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>

#include "dirtybitmap.h"
#include "internal.h"
#include "repo.h"
#include "sums.h"
#include "util.h"

/* A run of chunks copied again. */
struct healed {
  const char *disk;             /* the disk's name (the set's) */
  uint64_t offset, length;
  uint64_t chunks;
  char *point;                  /* where it was found bad */
};

struct heal {
  struct healed *h;
  size_t n;
};

static bool
same_name (const char *a, const char *b)
{
  return a == b || (a && b && strcmp (a, b) == 0);
}

/* Mark the chunks of d's new set that meet [off, off + len), each run
 * of them said later as bad in point.
 */
static int
force (struct set *s, struct disk *d, uint64_t off, uint64_t len,
       const char *point)
{
  const uint64_t chunk = d->prev->chunk, size = d->prev->disk_size;
  uint64_t first, end, i;
  struct healed *h;

  if (off >= size)
    return 0;
  end = DIV_ROUND_UP (MIN (off + len, size), chunk);
  first = off / chunk;
  for (i = first; i < end && d->force[i]; ++i)
    ;
  if (i == end)
    return 0;                   /* forced already */
  for (; i < end; ++i)
    d->force[i] = 1;
  h = realloc (s->heal->h, (s->heal->n + 1) * sizeof *h);
  if (h == NULL)
    return -1;
  s->heal->h = h;
  h[s->heal->n] = (struct healed) {
    d->name, first * chunk, MIN (end * chunk, size) - first * chunk,
    end - first, strdup (point),
  };
  return h[s->heal->n++].point ? 0 : -1;
}

/* Is name a point of all? */
static bool
exists (const struct repo_points *all, const char *name)
{
  size_t i;

  for (i = 0; i < all->n; ++i)
    if (strcmp (all->p[i].name, name) == 0)
      return true;
  return false;
}

/* Range b of point q: forced where the newest point (the last of all)
 * reads it through the image it was found bad in (src: the newest
 * point's sources, NULL if unknown).
 */
static int
heal_range (struct set *s, struct disk *d, const struct repo_points *all,
            const struct repo_point *q, const struct repo_bad *b,
            const struct repo_source *src, size_t nsrc, uint64_t step)
{
  const struct repo_point *n = &all->p[all->n - 1];
  const struct repo_source *at;
  uint64_t off;

  /* The newest point's own bad ranges; or where it cannot be told
   * whether the newest point reads through the bad image: no map, or
   * that image's point removed since (its data folded into another).
   */
  if (q == n || src == NULL || (b->in && !exists (all, b->in)))
    return force (s, d, b->offset, b->length, q->name);
  for (off = b->offset; off < b->offset + b->length; off += step) {
    at = repo_source_at (src, nsrc, off);
    if (at && same_name (at->point, b->in) &&
        force (s, d, off, MIN (step, b->offset + b->length - off),
               q->name) == -1)
      return -1;
  }
  return 0;
}

/* Is any range of disk recorded bad in a point of all? */
static bool
any_bad (const struct repo_points *all, const char *disk)
{
  size_t i, k;

  for (i = 0; i < all->n; ++i)
    for (k = 0; k < all->p[i].nbad; ++k)
      if (strcmp (all->p[i].bad[k].disk, disk) == 0)
        return true;
  return false;
}

/* Disk d, on the newest point n of all. */
static int
heal_disk (struct set *s, struct disk *d, const struct repo *r,
           const struct repo_points *all, const struct repo_point *n)
{
  const struct repo_disk *nd = repo_point_disk (n, d->name);
  struct repo_source *src = NULL;
  struct bmerr err = { 0 };
  size_t nsrc = 0, i, k;
  int ret = 0;

  if (nd == NULL || d->prev == NULL || !any_bad (all, d->name))
    return 0;                   /* a full copy heals everything */
  d->nforce = d->prev->n;
  if ((d->force = calloc (d->nforce, 1)) == NULL)
    return -1;
  if (repo_sources (r, nd, &src, &nsrc, &err) == -1)
    bm_error ("backup: disk %s: which image point %s reads "
              "each cluster from is not known (%s): every range found bad "
              "in any point is copied again", d->name, n->name,
              err.msg);
  for (i = 0; i < all->n && ret == 0; ++i)
    for (k = 0; k < all->p[i].nbad && ret == 0; ++k)
      if (strcmp (all->p[i].bad[k].disk, d->name) == 0)
        ret = heal_range (s, d, all, &all->p[i], &all->p[i].bad[k], src,
                          nsrc, nd->chunk);
  repo_sources_free (src, nsrc);
  return ret;
}

/* Make the forced chunks of d dirty in B on its server (an incremental
 * view holds nothing else), or else make d a resync.
 */
static void
mark (struct set *s, struct disk *d)
{
  uint64_t i;
  struct bmerr err = { 0 };

  for (i = 0; i < d->nforce && !d->force[i]; ++i)
    ;
  if (i == d->nforce || d->mode != MODE_INCREMENTAL ||
      heal_mark (s, d, d->prev->chunk, d->nforce, &err) == 0)
    return;
  bm_error ("backup: disk %s: the chunks to heal could not be "
            "marked in bitmap %s on its server (%s): a resync instead (the "
            "whole disk read, only what differs and those chunks written)",
            d->name, s->incremental,
            bmerr_failed (&err) ? err.msg : "out of memory");
  d->mode = MODE_RESYNC;
}

int
heal_plan (struct set *s)
{
  const struct repo *r = points_repo (s);
  struct repo_points all;
  struct bmerr err = { 0 };
  size_t i;
  int ret = 0;

  if (s->incremental == NULL)
    return 0;                   /* no base */
  if ((s->heal = calloc (1, sizeof *s->heal)) == NULL) {
    set_fail (s, "out of memory");
    return -1;
  }
  if (repo_load (r, &all, &err) == -1) {
    set_fail (s, "%s", err.msg);
    return -1;
  }
  for (i = 0; i < s->n && ret == 0 && all.n > 0; ++i)
    if ((ret = heal_disk (s, &s->disks[i], r, &all, &all.p[all.n - 1]))
        == -1 ||
        (ret = older_plan (s, &s->disks[i], &all.p[all.n - 1])) == -1)
      set_fail (s, "out of memory");
    else
      mark (s, &s->disks[i]);
  repo_points_free (&all);
  return ret;
}

void
heal_apply (struct set *s)
{
  size_t i;

  for (i = 0; i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    /* A disk resized at the cut: its copy is full, or an incremental
     * whose base bitmap has the chunks (mark).
     */
    if (d->force && d->sums && d->cs.n == d->nforce &&
        d->cs.chunk == d->prev->chunk)
      d->cs.force = d->force;
  }
}

void
heal_report (const struct set *s)
{
  const struct healed *h;
  size_t i;

  for (i = 0; s->heal && i < s->heal->n; ++i) {
    h = &s->heal->h[i];
    if (h->chunks == 1)
      bm_error ("backup: healed: chunk at offset %" PRIu64
                " of disk %s, bad in point %s", h->offset, h->disk,
                h->point);
    else
      bm_error ("backup: healed: %" PRIu64 " chunks at offset %"
                PRIu64 " (%" PRIu64 " bytes) of disk %s, bad in point %s",
                h->chunks, h->offset, h->length, h->disk, h->point);
  }
}

void
heal_free (struct set *s)
{
  size_t i;

  for (i = 0; s->heal && i < s->heal->n; ++i)
    free (s->heal->h[i].point);
  if (s->heal)
    free (s->heal->h);
  free (s->heal);
  s->heal = NULL;
}
