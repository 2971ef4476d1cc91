/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/checksums.c: the checksums of each disk's backup (sums.h),
 * and what they allow: how each disk is copied.
 *
 * Where they live: DIR/BASE.CHECKPOINT.sums, DIR being --sums-dir, or
 * the directory of the target file, or of the Unix socket of an NBD
 * target (qemu-nbd serving an overlay); BASE the disk's name= if given,
 * else the target file's (or socket's) name.  So a chain kept in one
 * directory finds the set of its base checkpoint by itself: under its
 * own name, or else the one set in DIR at B that describes this disk
 * (its source URI), whatever the name of the target it was made for.
 *
 * How a disk is copied (struct disk.mode):
 *   full          no --incremental, or the base cannot be trusted and
 *                 there are no usable checksums of the previous backup;
 *   incremental   the base bitmap is there and consistent: its ranges
 *                 only; the previous checksums, if usable, are updated
 *                 (unchanged chunks keep theirs), else none are written;
 *   resync        the base cannot be trusted (missing, inconsistent)
 *                 but the previous checksums can: the whole view is
 *                 read, and only the chunks whose digest differs are
 *                 written.
 * Never less than what changed: checksums that do not describe this
 * disk at this base exactly (another size, chunk size, checkpoint or
 * source, damaged, missing) are not used.
 *
 * A file target is written in place, so once its copy starts the
 * previous checksums made for that same file no longer describe it:
 * they are removed then, and the new ones written when the set is
 * complete.
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

#include "dirtybitmap.h"
#include "internal.h"
#include "sums.h"

/* The Unix socket of an nbd+unix URI, malloced, or NULL. */
static char *
uri_socket (const char *uri)
{
  const char *p = strstr (uri, "socket=");
  size_t len;

  if (strncmp (uri, "nbd+unix:", 9) != 0 || p == NULL)
    return NULL;
  p += 7;
  len = strcspn (p, "&#");
  return strndup (p, len);
}

/* DIR/BASE.CHECKPOINT.sums for d, or NULL when it has no place; its
 * DIR in *dirp if dirp is not NULL.
 */
static char *
sums_path (const struct set *s, const struct disk *d,
           const char *checkpoint, char **dirp)
{
  char *where = is_nbd_uri (d->target) ? uri_socket (d->target)
    : strdup (d->target);
  char *dcopy = NULL, *bcopy = NULL, *path = NULL;
  const char *dir, *base;

  if (where == NULL)
    return NULL;
  dcopy = strdup (where);
  bcopy = strdup (where);
  if (dcopy && bcopy) {
    dir = s->sums_dir ? s->sums_dir : dirname (dcopy);
    base = d->named ? d->name : basename (bcopy);
    if (asprintf (&path, "%s/%s.%s.sums", dir, base, checkpoint) == -1)
      path = NULL;
    if (path && dirp && (*dirp = strdup (dir)) == NULL) {
      free (path);
      path = NULL;
    }
  }
  free (where);
  free (dcopy);
  free (bcopy);
  return path;
}

/* Do the checksums describe d at B exactly?  With B there, their
 * chunks must also be the ones its granularity gives.
 */
static bool
describes (const struct set *s, const struct disk *d, const struct sums *p)
{
  return strcmp (p->checkpoint, s->incremental) == 0 &&
    strcmp (p->source, d->source) == 0 &&
    (d->size_before == 0 || p->disk_size == d->size_before) &&
    (d->base_granularity == 0 ||
     p->chunk == sums_chunk_for (d->base_granularity));
}

/* The one set in dir at B that describes d, under any name (the
 * previous backup went to a target of another name): its path, or
 * NULL with *why.
 */
static char *
search_dir (const struct set *s, const struct disk *d, const char *dir,
            char **why)
{
  char suffix[SUMS_MAX_CHECKPOINT + 8], *found = NULL, *path, *error;
  size_t slen, found_n = 0;
  struct dirent *e;
  struct sums *p;
  DIR *dp;

  snprintf (suffix, sizeof suffix, ".%s.sums", s->incremental);
  slen = strlen (suffix);
  if ((dp = opendir (dir)) == NULL)
    return NULL;
  while ((e = readdir (dp)) != NULL) {
    size_t len = strlen (e->d_name);
    if (len <= slen || strcmp (e->d_name + len - slen, suffix) != 0 ||
        asprintf (&path, "%s/%s", dir, e->d_name) == -1)
      continue;
    if (sums_read (path, &p, &error) == 0 && describes (s, d, p)) {
      found_n++;
      free (found);
      found = path;
      path = NULL;
    }
    sums_free (p);
    free (error);
    free (path);
  }
  closedir (dp);
  if (found_n > 1) {
    free (*why);
    if (asprintf (why, "%s: several sets of checksums at %s for this "
                  "disk: name the disk (name=) to choose", dir,
                  s->incremental) == -1)
      *why = NULL;
    free (found);
    return NULL;
  }
  return found;
}

/* The previous checksums of d, if they describe it at B exactly. */
static struct sums *
previous (const struct set *s, struct disk *d, char **why)
{
  struct sums *prev;
  char *dir = NULL, *other;
  char *path = sums_path (s, d, s->incremental, &dir), *error = NULL;

  *why = NULL;
  if (path == NULL) {
    *why = strdup ("no place for checksums (--sums-dir)");
    return NULL;
  }
  if (sums_read (path, &prev, &error) == -1) {
    *why = error;
    other = search_dir (s, d, dir, why);
    free (dir);
    if (other == NULL) {
      free (path);
      return NULL;
    }
    free (path);
    free (*why);
    *why = NULL;
    path = other;
    if (sums_read (path, &prev, why) == -1) {
      free (path);
      return NULL;
    }
  }
  else {
    d->prev_in_place = !is_nbd_uri (d->target);
    free (dir);
  }
  if (!describes (s, d, prev)) {
    if (asprintf (why, "%s: the checksums of another disk, checkpoint, "
                  "size or chunk size (%s at %s, %" PRIu64 " bytes in "
                  "chunks of %" PRIu64 ")", path, prev->source,
                  prev->checkpoint, prev->disk_size, prev->chunk) == -1)
      *why = NULL;
    sums_free (prev);
    free (path);
    d->prev_in_place = false;
    return NULL;
  }
  d->prev_sums_path = path;
  return prev;
}

void
checksums_find (struct set *s, struct disk *d)
{
  if (s->incremental)
    d->prev = previous (s, d, &d->prev_why);
}

void
checksums_plan (struct set *s, struct disk *d, bool base_there,
                bool base_consistent)
{
  const char *why = d->prev_why ? d->prev_why : strerror (ENOMEM);

  d->mode = MODE_FULL;
  if (s->incremental == NULL)
    return;
  if (base_there && base_consistent)
    d->mode = MODE_INCREMENTAL;
  else if (d->prev)
    d->mode = MODE_RESYNC;
  if (d->mode == MODE_RESYNC)
    fprintf (stderr, "%s: backup: disk %s: bitmap %s %s: a resync (the "
             "whole disk read, only what differs from %s written)\n",
             prog, d->name, s->incremental,
             base_there ? "is inconsistent" : "is missing",
             d->prev_sums_path);
  else if (d->mode == MODE_FULL)
    fprintf (stderr, "%s: backup: disk %s: bitmap %s %s and there are no "
             "usable checksums of the previous backup (%s): a full copy\n",
             prog, d->name, s->incremental,
             base_there ? "is inconsistent" : "is missing", why);
  else if (d->prev == NULL)
    fprintf (stderr, "%s: backup: disk %s: no checksums will be written "
             "for this backup: those of the previous one are not usable "
             "(%s)\n", prog, d->name, why);
}

int
checksums_prepare (struct set *s, struct disk *d)
{
  uint64_t chunk;
  char *error;

  d->o.full = d->mode != MODE_INCREMENTAL;
  if (d->mode == MODE_INCREMENTAL && d->prev == NULL)
    return 0;
  if (d->mode == MODE_INCREMENTAL &&
      d->prev->chunk > d->base_granularity) {
    /* A chunk would take in clean granules, which an incremental view
     * does not hold: nothing to hash them from.
     */
    fprintf (stderr, "%s: backup: disk %s: no checksums will be written "
             "for this backup: bitmap %s's granularity (%" PRIu64 ") is "
             "smaller than a checksum chunk (%" PRIu64 ")\n", prog,
             d->name, s->incremental, d->base_granularity, d->prev->chunk);
    return 0;
  }
  d->sums_path = sums_path (s, d, s->checkpoint, NULL);
  if (d->sums_path == NULL)
    return 0;
  chunk = d->prev ? d->prev->chunk : sums_chunk_for (d->granularity);
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
  d->cs = (struct copy_sums) {
    .chunk = chunk, .n = d->sums->n, .digests = d->sums->digests,
    .compare = d->mode == MODE_RESYNC,
  };
  d->o.sums = &d->cs;
  d->o.full = d->mode != MODE_INCREMENTAL;
  /* In place: from now on the old set does not describe the file. */
  if (d->prev_in_place &&
      unlink (d->prev_sums_path) == -1 && errno != ENOENT) {
    error = strerror (errno);
    disk_fail (d, "%s: %s", d->prev_sums_path, error);
    return -1;
  }
  return 0;
}

int
checksums_write (struct set *s)
{
  size_t i;
  char *error;

  for (i = 0; i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    if (d->sums == NULL)
      continue;
    if (sums_write (d->sums_path, d->sums, &error) == -1) {
      disk_fail (d, "checksums: %s", error ? error : strerror (ENOMEM));
      free (error);
      return -1;
    }
    d->sums_written = true;
  }
  return 0;
}

void
checksums_undo (struct set *s)
{
  size_t i;

  for (i = 0; i < s->n; ++i)
    if (s->disks[i].sums_written) {
      unlink (s->disks[i].sums_path);
      s->disks[i].sums_written = false;
    }
}

void
checksums_free (struct disk *d)
{
  sums_free (d->prev);
  sums_free (d->sums);
  free (d->sums_path);
  free (d->prev_sums_path);
  free (d->prev_why);
}

char *
checksums_path (const struct set *s, const struct disk *d,
                const char *checkpoint)
{
  return sums_path (s, d, checkpoint, NULL);
}
