/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/older.c: a backup into a repository from the checkpoint of
 * an older point than the newest (backup --repo --incremental P, for
 * disks that carry P's bitmap: restored from P with
 * restore-checkpoint=P).  The new point's images build on the newest
 * point's, N; the view holds what P's bitmap has dirty.  A chunk of a
 * disk can differ from N's image only where the disk changed since P
 * (the bitmap), or where P and N differ (their checksums): those
 * chunks are forced too (d->force: heal.c marks them in P on the
 * server, and the copy takes them whatever the view's map says).
 * Where the two sets cannot be compared (a disk resized between the
 * points, or N's set unreadable), the disk is copied in full.  Said.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>

#include "dirtybitmap.h"
#include "internal.h"
#include "repo.h"
#include "sums.h"

/* N's set of d, or NULL with why. */
static struct sums *
newest_sums (const struct set *s, const struct disk *d,
             const struct repo_point *n, struct bmerr *why)
{
  const struct repo_disk *nd = repo_point_disk (n, d->name);
  struct sums *ns = NULL;
  char *path;

  if (nd == NULL) {
    bmerr_set (why, ENOENT, "point %s has no disk %s", n->name, d->name);
    return NULL;
  }
  if ((path = repo_path (points_repo (s), nd->sums)) == NULL) {
    bmerr_set (why, ENOMEM, "out of memory");
    return NULL;
  }
  if (sums_load (path, &ns, why) == 0 &&
      (ns->disk_size != d->prev->disk_size || ns->chunk != d->prev->chunk)) {
    bmerr_set (why, EINVAL, "%s: a disk of %" PRIu64 " bytes in chunks of %"
               PRIu64 ", at %s %" PRIu64 " in chunks of %" PRIu64, path,
               ns->disk_size, ns->chunk, s->incremental,
               d->prev->disk_size, d->prev->chunk);
    sums_free (ns);
    ns = NULL;
  }
  free (path);
  return ns;
}

int
older_plan (struct set *s, struct disk *d, const struct repo_point *n)
{
  struct sums *ns;
  struct bmerr why = { 0 };
  uint64_t i, forced = 0;

  if (strcmp (s->incremental, n->name) == 0 || d->prev == NULL ||
      d->mode == MODE_FULL)
    return 0;                   /* nothing owed to N, or all copied */
  if ((ns = newest_sums (s, d, n, &why)) == NULL) {
    bm_error ("backup: disk %s: the changes between points %s "
              "and %s cannot be told (%s): a full copy", d->name,
              s->incremental, n->name, why.msg);
    d->mode = MODE_FULL;
    return 0;
  }
  if (d->force == NULL) {
    d->nforce = d->prev->n;
    if ((d->force = calloc (d->nforce, 1)) == NULL) {
      sums_free (ns);
      return -1;
    }
  }
  for (i = 0; i < ns->n; ++i)
    if (memcmp (ns->digests + i * SUMS_DIGEST,
                d->prev->digests + i * SUMS_DIGEST, SUMS_DIGEST) != 0) {
      forced += !d->force[i];
      d->force[i] = 1;
    }
  bm_error ("backup: disk %s: from checkpoint %s, older than "
            "the newest point %s: the %" PRIu64 " chunks that changed "
            "between them are copied too", d->name, s->incremental,
            n->name, forced);
  sums_free (ns);
  return 0;
}
