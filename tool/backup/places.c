/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/places.c: no two disks of a set in one place.  Before
 * anything changes on any server, every pair of disks is compared by
 * what their places are, not by how they are spelled: their names,
 * control sockets, targets, and the files of their checksums.  Two
 * disks copied into one target leave a file that is neither; two with
 * one name, or one place for their checksums, write one set of
 * checksums for both; two with one control socket are one server.
 * What a place is, and when two are the same: copy/endpoint.h.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#include "internal.h"

/* Each disk's places. */
struct places {
  struct endpoint control, target, sums;
  char *sums_path;              /* as the disk would name it, or NULL */
};

static int
places_of (const struct set *s, const struct disk *d, struct places *p)
{
  if (endpoint_of (d->control, &p->control) == -1 ||
      endpoint_of (d->target, &p->target) == -1)
    return -1;
  p->sums_path = checksums_path (s, d, s->checkpoint);
  return p->sums_path == NULL ? 0 : endpoint_of (p->sums_path, &p->sums);
}

/* "x" if x and y are spelled alike, else "x and y", after ", given
 * as": malloced.
 */
static char *
given_as (const char *x, const char *y)
{
  char *out;

  if (strcmp (x, y) == 0)
    return strdup ("");
  if (asprintf (&out, " (given as %s and %s)", x, y) == -1)
    return NULL;
  return out;
}

/* What disks a and b (the i-th and j-th --disk) share, said in err:
 * -1, or 0 if nothing.
 */
static int
clash (const struct disk *a, const struct disk *b, size_t i, size_t j,
       const struct places *pa, const struct places *pb, struct bmerr *err)
{
  char *what = NULL, *given = NULL;

  if (strcmp (a->name, b->name) == 0)
    bmerr_set (err, EEXIST, "--disk %zu and --disk %zu: both disks are "
               "named %s%s: each disk needs a name of its own (it "
               "names the disk's checksums, and the disk in messages "
               "and the manifest)", i + 1, j + 1, a->name,
               a->named && b->named ? "" : " (name= or by default)");
  else if (endpoint_same (&pa->control, &pb->control)) {
    if ((given = given_as (a->control, b->control)) != NULL)
      bmerr_set (err, EEXIST, "disks %s and %s have one control socket, "
                 "%s%s: one server is one disk", a->name, b->name,
                 pa->control.where, given);
  }
  else if (endpoint_same (&pa->target, &pb->target)) {
    what = endpoint_name (&pa->target);
    given = given_as (a->target, b->target);
    if (what && given)
      bmerr_set (err, EEXIST, "disks %s and %s have one target, %s%s: each "
                 "disk needs a target of its own", a->name, b->name,
                 what, given);
  }
  else if (pa->sums_path && pb->sums_path &&
           endpoint_same (&pa->sums, &pb->sums))
    bmerr_set (err, EEXIST, "disks %s and %s: their checksums would both "
               "be %s: give each disk a name= of its own (it names "
               "them), or targets of different names", a->name,
               b->name, pa->sums.where);
  else
    return 0;
  free (what);
  free (given);
  return -1;                    /* set_check_disks says ENOMEM if unset */
}

int
set_check_disks (const struct set *s, struct bmerr *err)
{
  struct places *p = calloc (s->n, sizeof *p);
  size_t i, j;
  int r = -1;

  bmerr_clear (err);
  if (p == NULL)
    goto out;
  for (i = 0; i < s->n; ++i)
    if (places_of (s, &s->disks[i], &p[i]) == -1)
      goto out;
  for (i = 0; i < s->n; ++i)
    for (j = i + 1; j < s->n; ++j)
      if (clash (&s->disks[i], &s->disks[j], i, j, &p[i], &p[j],
                 err) == -1)
        goto out;
  r = 0;

 out:
  if (r == -1 && !bmerr_failed (err))
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  for (i = 0; p && i < s->n; ++i) {
    endpoint_free (&p[i].control);
    endpoint_free (&p[i].target);
    endpoint_free (&p[i].sums);
    free (p[i].sums_path);
  }
  free (p);
  return r;
}
