/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/checksums.c: the checksums of each disk's backup (sums.h),
 * and what they allow: how each disk is copied.  The one owner of the
 * rule (dirtybitmap(1), CHECKSUMS):
 *
 *   A set describes one image.  A resync or an incremental trusts it
 *   only where the target provably holds that image (sums_holds: a
 *   file with the identity the set recorded); anywhere else the target
 *   is read first.  And a run that will write a target first makes
 *   every set describing that target unusable, durably, before its
 *   first write; its own set is put in place only once the servers
 *   have committed NEW.
 *
 * Where they live: DIR/BASE.CHECKPOINT.sums, DIR being --sums-dir, or
 * the directory of the target file, or of the Unix socket of an NBD
 * target (qemu-nbd serving an overlay); BASE the disk's name= if given,
 * else the target file's (or socket's) name.  An NBD target over TCP
 * has no directory: only with --sums-dir, BASE then the disk's name.  So a chain kept in one
 * directory finds the set of its base checkpoint by itself: under its
 * own name, or else the one set in DIR at B that describes this disk
 * (its source URI), whatever the name of the target it was made for.
 *
 * How a disk is copied (struct disk.mode):
 *   full          no --incremental, or the base cannot be trusted and
 *                 there are no usable checksums of the previous backup
 *                 (or the target does not exist);
 *   incremental   the base bitmap is there and consistent: its ranges
 *                 only; the previous checksums, if usable, are updated
 *                 (unchanged chunks keep theirs), else none are written;
 *   resync        the base cannot be trusted (missing, inconsistent)
 *                 but the previous checksums can: the whole view is
 *                 read, and only the chunks that differ from what the
 *                 target holds are written.  What it holds is the
 *                 previous set where the target provably holds its
 *                 image; anywhere else the copy reads the target's
 *                 chunk before it decides (copy_sums.held).  A file
 *                 target that is not there gets a full copy.
 * Never less than what changed: checksums that do not describe this
 * disk at this base exactly (another size, chunk size, checkpoint or
 * source, damaged, missing) are not used.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include <errno.h>
#include <libgen.h>
#include <dirent.h>
#include <unistd.h>
#include <fcntl.h>

#include "dirtybitmap.h"
#include "msg.h"
#include "internal.h"
#include "sums.h"

/* Where d's sets live: DIR and BASE (see above), malloced; -1 when d's
 * sets have no place (an NBD target over TCP without --sums-dir).
 */
static int
sums_place (const struct set *s, const struct disk *d, char **dirp,
            char **basep)
{
  struct endpoint e;
  char *dcopy = NULL, *bcopy = NULL;
  int r = -1;

  *dirp = *basep = NULL;
  /* A file's place, or a Unix socket's, as given. */
  if (endpoint_of (d->target, &e) == 0 && (e.path || s->sums_dir) &&
      (e.path == NULL ||
       ((dcopy = strdup (e.path)) && (bcopy = strdup (e.path))))) {
    *dirp = strdup (s->sums_dir ? s->sums_dir : dirname (dcopy));
    *basep = strdup (d->named || bcopy == NULL ? d->name : basename (bcopy));
    if (*dirp && *basep)
      r = 0;
    else {
      free (*dirp);
      free (*basep);
    }
  }
  endpoint_free (&e);
  free (dcopy);
  free (bcopy);
  return r;
}

/* DIR/BASE.CHECKPOINT.sums for d, or NULL when it has no place; its
 * DIR in *dirp if dirp is not NULL.
 */
static char *
sums_path (const struct set *s, const struct disk *d,
           const char *checkpoint, char **dirp)
{
  char *dir, *base, *path;

  if (sums_place (s, d, &dir, &base) == -1)
    return NULL;
  if (asprintf (&path, "%s/%s.%s.sums", dir, base, checkpoint) == -1)
    path = NULL;
  if (path && dirp)
    *dirp = dir;
  else
    free (dir);
  free (base);
  return path;
}
/* Do the checksums describe d at B exactly?  With B there, their
 * chunks must also be the ones its granularity gives.  A disk is its
 * source URI, but in a repository its name (its sets are filed under
 * it): a disk restored into a new file, or served at a new socket, is
 * the same disk there.
 */
static bool
describes (const struct set *s, const struct disk *d, const struct sums *p)
{
  return strcmp (p->checkpoint, s->incremental) == 0 &&
    (s->points || strcmp (p->source, d->source) == 0) &&
    (d->size_before == 0 || p->disk_size == d->size_before) &&
    (d->base_granularity == 0 ||
     p->chunk == sums_chunk_for (d->base_granularity));
}

/* Each set in dir (by its header), with its file name: fn's return
 * value is summed.  -1 with errno when dir cannot be read.
 */
static int
each_set (const char *dir,
          int (*fn) (const char *path, const char *name,
                     const struct sums *x, void *opaque),
          void *opaque, int *sum)
{
  struct dirent *e;
  struct sums *x;
  struct bmerr err = { 0 };
  char *path;
  size_t len;
  DIR *dp;

  *sum = 0;
  if ((dp = opendir (dir)) == NULL)
    return -1;
  while ((e = readdir (dp)) != NULL) {
    len = strlen (e->d_name);
    if (len <= 5 || strcmp (e->d_name + len - 5, ".sums") != 0 ||
        asprintf (&path, "%s/%s", dir, e->d_name) == -1)
      continue;
    if (sums_load_header (path, &x, &err) == 0)
      *sum += fn (path, e->d_name, x, opaque);
    sums_free (x);
    free (path);
  }
  closedir (dp);
  return 0;
}

/* What search_one (and claim_one) look at. */
struct search {
  const struct set *s;
  const struct disk *d;
  char *found;                  /* search_one: the set found */
};

static int
search_one (const char *path, const char *name, const struct sums *x,
            void *opaque)
{
  struct search *k = opaque;
  (void) name;

  if (!describes (k->s, k->d, x))
    return 0;
  free (k->found);
  k->found = strdup (path);
  return 1;
}

/* The one set in dir at B that describes d, under any name (the
 * previous backup went to a target of another name): its path, or
 * NULL with why (left as it is when there is none).
 */
static char *
search_dir (const struct set *s, const struct disk *d, const char *dir,
            struct bmerr *why)
{
  struct search k = { .s = s, .d = d };
  int n;

  if (each_set (dir, search_one, &k, &n) == -1 || n == 0) {
    free (k.found);
    return NULL;
  }
  if (n > 1) {
    bmerr_set (why, EEXIST, "%s: several sets of checksums at %s for this "
               "disk: name the disk (name=) to choose", dir, s->incremental);
    free (k.found);
    return NULL;
  }
  return k.found;
}

/* The previous checksums of d, if they describe it at B exactly:
 * under d's own name, or else the one such set in DIR.
 */
static struct sums *
previous (const struct set *s, struct disk *d, struct bmerr *why)
{
  struct sums *prev = NULL;
  char *dir = NULL, *other;
  char *path = sums_path (s, d, s->incremental, &dir);

  bmerr_clear (why);
  if (path == NULL) {
    bmerr_set (why, ENOENT, "no place for checksums (--sums-dir)");
    return NULL;
  }
  /* (In a repository, the set under d's name or none.) */
  if (sums_load (path, &prev, why) == -1 && !s->points &&
      (other = search_dir (s, d, dir, why)) != NULL) {
    free (path);
    path = other;
    if (sums_load (path, &prev, why) == -1)
      prev = NULL;
  }
  free (dir);
  if (prev && !describes (s, d, prev)) {
    bmerr_set (why, EINVAL, "%s: the checksums of another disk, checkpoint, "
               "size or chunk size (%s at %s, %" PRIu64 " bytes in "
               "chunks of %" PRIu64 ")", path, prev->source,
               prev->checkpoint, prev->disk_size, prev->chunk);
    sums_free (prev);
    prev = NULL;
  }
  if (prev == NULL) {
    free (path);
    return NULL;
  }
  d->prev_sums_path = path;
  d->prev_holds = sums_holds (prev, d->target);
  return prev;
}

void
checksums_find (struct set *s, struct disk *d)
{
  if (s->incremental)
    d->prev = previous (s, d, &d->prev_why);
}

/* Can d's target be read to compare with, where it is not known to
 * hold prev's image?  An NBD target is read by the copy; a file must
 * be there.  -1 with why.
 */
static int
target_readable (const struct disk *d, struct bmerr *why)
{
  if (is_nbd_uri (d->target) || access (d->target, F_OK) == 0)
    return 0;
  bmerr_set (why, errno, "%s: %s", d->target, strerror (errno));
  return -1;
}

/* A resync, said: from the previous set, or from what the target was
 * read to hold.
 */
static void
say_resync (const struct set *s, const struct disk *d, bool base_there)
{
  if (d->prev_holds)
    bm_error ("backup: disk %s: bitmap %s %s: a resync (the "
              "whole disk read, only what differs from %s written)",
              d->name, s->incremental,
              base_there ? "is inconsistent" : "is missing",
              d->prev_sums_path);
  else
    bm_error ("backup: disk %s: bitmap %s %s: a resync (the "
              "whole disk read, only what differs from what %s holds "
              "written, as nothing shows that it holds the image of %s)",
              d->name, s->incremental,
              base_there ? "is inconsistent" : "is missing", d->target,
              d->prev_sums_path);
}

/* In a repository every point has its checksums: an incremental that
 * could not write them (no usable previous set, or chunks larger than
 * B's granules) is a full copy instead.  Said.
 */
static bool
needs_sums (const struct set *s, const struct disk *d)
{
  const char *why = bmerr_failed (&d->prev_why) ? d->prev_why.msg
                    : strerror (ENOMEM);

  if (!s->sums_required)
    return false;
  if (d->prev == NULL)
    bm_error ("backup: disk %s: the checksums of point %s are "
              "not usable (%s): a full copy, as every point of a repository "
              "has its checksums", d->name, s->incremental, why);
  else if (d->prev->chunk > d->base_granularity)
    bm_error ("backup: disk %s: bitmap %s's granularity (%"
              PRIu64 ") is smaller than a checksum chunk (%" PRIu64 "): a "
              "full copy, as every point of a repository has its "
              "checksums", d->name, s->incremental,
              d->base_granularity, d->prev->chunk);
  else
    return false;
  return true;
}

void
checksums_plan (struct set *s, struct disk *d, bool base_there,
                bool base_consistent)
{
  struct bmerr unread = { 0 };
  const char *why = bmerr_failed (&d->prev_why) ? d->prev_why.msg
                    : strerror (ENOMEM);

  d->mode = MODE_FULL;
  if (s->incremental == NULL)
    return;
  if (base_there && base_consistent) {
    if (needs_sums (s, d))
      return;                   /* a full copy, said */
    d->mode = MODE_INCREMENTAL;
  }
  else if (d->prev && (d->prev_holds || target_readable (d, &unread) == 0))
    d->mode = MODE_RESYNC;
  if (d->mode == MODE_RESYNC)
    say_resync (s, d, base_there);
  else if (d->mode == MODE_FULL && bmerr_failed (&unread))
    bm_error ("backup: disk %s: bitmap %s %s, and the target "
              "cannot be read to compare with %s (%s): a full copy",
              d->name, s->incremental,
              base_there ? "is inconsistent" : "is missing",
              d->prev_sums_path, unread.msg);
  else if (d->mode == MODE_FULL)
    bm_error ("backup: disk %s: bitmap %s %s and there are no "
              "usable checksums of the previous backup (%s): a full copy",
              d->name, s->incremental,
              base_there ? "is inconsistent" : "is missing", why);
  else if (d->prev == NULL)
    bm_error ("backup: disk %s: no checksums will be written "
              "for this backup: those of the previous one are not usable "
              "(%s)", d->name, why);
}

/* Whether set x goes before d's target is written: a set that says
 * the target file holds its image (the only kind a resync trusts as
 * what a target holds), or an older set of NEW of this disk.  Any
 * other set describes the disk at its checkpoint, which stays true
 * whatever is written where.  1 if it had to go and could not.
 */
static int
claim_one (const char *path, const char *name, const struct sums *x,
           void *opaque)
{
  const struct set *s = ((struct search *) opaque)->s;
  const struct disk *d = ((struct search *) opaque)->d;
  (void) name;

  if ((x->target.held && sums_made_for (x, d->target)) ||
      (strcmp (x->checkpoint, s->checkpoint) == 0 &&
       strcmp (x->source, d->source) == 0)) {
    if (unlink (path) == -1 && errno != ENOENT)
      return 1;
    bm_debug ("backup: disk %s: %s no longer describes what is there: "
              "removed", d->name, path);
  }
  return 0;
}

/* Before d's target is written: every set in DIR that describes it,
 * or an older NEW of this disk, removed, and the removal made durable.
 */
static int
claim (struct set *s, struct disk *d)
{
  char *dir, *base, *tmp = NULL;
  struct search k = { .s = s, .d = d };
  int failed = 0, dfd = -1, r = -1;

  if (sums_place (s, d, &dir, &base) == -1)
    return 0;                   /* no place: no sets */
  if (asprintf (&tmp, "%s/%s.%s.sums.tmp", dir, base, s->checkpoint) == -1)
    tmp = NULL;
  if (tmp && unlink (tmp) == -1 && errno != ENOENT)
    disk_fail (d, "%s: %s", tmp, strerror (errno));
  else if (each_set (dir, claim_one, &k, &failed) == -1) {
    if (errno == ENOENT)
      r = 0;                    /* no directory: no sets */
    else
      disk_fail (d, "checksums: %s: %s", dir, strerror (errno));
  }
  else if (failed)
    disk_fail (d, "checksums: a set describing %s could not be removed "
               "from %s", d->target, dir);
  else if ((dfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
           fsync (dfd) == -1)
    disk_fail (d, "checksums: %s: fsync: %s", dir, strerror (errno));
  else
    r = 0;
  if (dfd >= 0)
    close (dfd);
  free (tmp);
  free (dir);
  free (base);
  return r;
}

/* d's new set, from the previous one's digests, or none. */
static int
new_set (struct set *s, struct disk *d)
{
  uint64_t chunk = d->prev ? d->prev->chunk : sums_chunk_for (d->granularity);

  if ((d->sums_path = sums_path (s, d, s->checkpoint, NULL)) == NULL)
    return 0;
  d->sums = sums_new (d->size, chunk, s->checkpoint, d->source);
  if (d->sums == NULL) {
    disk_fail (d, "checksums: %s", strerror (ENOMEM));
    return -1;
  }
  if (d->prev && d->prev->disk_size == d->size)
    sums_copy_digests (d->sums, d->prev);
  else if (d->prev && d->mode == MODE_RESYNC)
    d->mode = MODE_FULL;        /* resized: the old set is another disk's */
  else if (d->prev) {
    /* An incremental updates only what changed: without the old set
     * there is nothing to update.
     */
    sums_free (d->sums);
    d->sums = NULL;
    return 0;
  }
  /* A full copy or a resync leaves the target equal to the set; an
   * incremental only if it held the previous image.
   */
  d->sums_held = !is_nbd_uri (d->target) &&
    (d->mode != MODE_INCREMENTAL || d->prev_holds);
  d->cs = (struct copy_sums) {
    .chunk = chunk, .n = d->sums->n, .digests = d->sums->digests,
    .compare = d->mode == MODE_RESYNC,
    .held = d->mode == MODE_RESYNC && !d->prev_holds,
  };
  d->o.sums = &d->cs;
  return 0;
}

int
checksums_prepare (struct set *s, struct disk *d)
{
  /* In a repository the target is a new image, which no set describes,
   * and the sets there are its points' (what a backup that did not
   * complete left is gone already: backup/points.c).
   */
  if (s->points == NULL && claim (s, d) == -1)
    return -1;
  if (d->mode == MODE_INCREMENTAL && d->prev &&
      d->prev->chunk > d->base_granularity) {
    /* A chunk would take in clean granules, which an incremental view
     * does not hold: nothing to hash them from.
     */
    bm_error ("backup: disk %s: no checksums will be written "
              "for this backup: bitmap %s's granularity (%" PRIu64 ") is "
              "smaller than a checksum chunk (%" PRIu64 ")",
              d->name, s->incremental, d->base_granularity, d->prev->chunk);
  }
  else if ((d->mode != MODE_INCREMENTAL || d->prev) && new_set (s, d) == -1)
    return -1;
  d->o.full = d->mode != MODE_INCREMENTAL;
  return 0;
}

int
checksums_write (struct set *s)
{
  size_t i;
  struct bmerr err = { 0 };

  for (i = 0; i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    if (d->sums == NULL)
      continue;
    if (sums_bind (d->sums, d->target, d->sums_held) == -1) {
      disk_fail (d, "checksums: %s", strerror (ENOMEM));
      return -1;
    }
    if (sums_stage (d->sums_path, d->sums, &err) == -1) {
      disk_fail (d, "checksums: %s", err.msg);
      return -1;
    }
    d->sums_staged = true;
  }
  return 0;
}

void
checksums_publish (struct set *s)
{
  size_t i;
  struct bmerr err = { 0 };

  for (i = 0; i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    if (!d->sums_staged)
      continue;
    if (sums_publish (d->sums_path, &err) == 0)
      d->sums_written = true;
    else
      bm_error ("backup: disk %s: the backup is complete, but "
                "its checksums could not be put in place (%s): the next "
                "backup of this disk will have none to build on",
                d->name, err.msg);
  }
}

void
checksums_undo (struct set *s)
{
  size_t i;
  char *tmp;

  for (i = 0; i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    if (d->sums_staged && asprintf (&tmp, "%s.tmp", d->sums_path) != -1) {
      unlink (tmp);
      free (tmp);
    }
    d->sums_staged = false;
  }
}

void
checksums_free (struct disk *d)
{
  sums_free (d->prev);
  sums_free (d->sums);
  free (d->sums_path);
  free (d->prev_sums_path);
  free (d->force);
}

char *
checksums_path (const struct set *s, const struct disk *d,
                const char *checkpoint)
{
  return sums_path (s, d, checkpoint, NULL);
}
