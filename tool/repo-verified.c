/* SPDX-License-Identifier: BSD-3-Clause */
/* repo-verified.c: what verify keeps in a repository (repo.h): each
 * point's result recorded in its record (whose "verified" field
 * repo-record.c reads and writes: the time, ok, and the ranges found
 * bad with the point whose image held them), the session
 * of a verify of every point (DIR/verify.json), and where each range
 * of a point's disk reads from (the images of its chain), which tells
 * the points that read through a bad cluster and what a backup heals.
 *
 * verify holds the repository's shared lock, as every reader does, and
 * yet rewrites records: each rewrite is atomic (repo_write_json: tmp,
 * fsync, rename, fsync the directory), so a reader sees the old record
 * or the new one; and every rewrite by a reader is one
 * read-modify-write under flock(2) on DIR/points, exclusive, so two
 * verifies never lose each other's result nor share a temporary file.
 * A backup runs beside (it holds DIR/lock shared too): it writes only
 * its new point's record, and removes what it finds left in DIR/points
 * under that same flock; a prune, which rewrites records too, holds
 * DIR/lock alone.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>

#include <json-c/json.h>

#include "dirtybitmap.h"
#include "qemu.h"
#include "repo.h"
#include "repo-impl.h"
#include "util.h"

#define SESSION "verify.json"

/*----------------------------------------------------------------------
 * Recording a result.
 */

void
repo_time_now (char *buf, size_t n)
{
  const int64_t ns = clock_ns (CLOCK_REALTIME);
  const time_t secs = ns / 1000000000;
  struct tm tm;
  size_t len;

  gmtime_r (&secs, &tm);
  len = strftime (buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf (buf + len, n - len, ".%06ldZ",
            (long) (ns % 1000000000 / 1000));
}

/* bad (n ranges) into p.  Past REPO_MAX_BAD ranges, each disk's are
 * folded into one, from its first to the end of its last, held (for
 * all that is known) by the point itself: more is healed, never less.
 */
static int
keep_bad (struct repo_point *p, const struct repo_bad *bad, size_t n)
{
  const bool fold = n > REPO_MAX_BAD;
  struct repo_bad *b;
  uint64_t end;
  size_t i, k;

  if (n && (p->bad = calloc (n, sizeof *p->bad)) == NULL)
    return -1;
  for (i = 0; i < n; ++i) {
    for (b = NULL, k = 0; fold && k < p->nbad && b == NULL; ++k)
      if (strcmp (p->bad[k].disk, bad[i].disk) == 0)
        b = &p->bad[k];
    if (b) {
      end = MAX (b->offset + b->length, bad[i].offset + bad[i].length);
      b->offset = MIN (b->offset, bad[i].offset);
      b->length = end - b->offset;
      continue;
    }
    b = &p->bad[p->nbad++];
    b->offset = bad[i].offset;
    b->length = bad[i].length;
    if ((b->disk = strdup (bad[i].disk)) == NULL ||
        ((fold || bad[i].in) &&
         (b->in = strdup (fold ? p->name : bad[i].in)) == NULL))
      return -1;
  }
  return 0;
}

int
repo_record_verified (const struct repo *r, const char *point,
                      const char *time, bool ok,
                      const struct repo_bad *bad, size_t nbad,
                      struct bmerr *err)
{
  struct repo_point p;
  int fd = repo_lock_records (r, err), ret = -1;

  if (fd == -1)
    return -1;
  if (repo_choose (r, point, &p, err) == 0) {
    repo_verified_free (&p);
    p.verified = true;
    p.verified_ok = ok;
    if ((p.verified_time = strdup (time)) == NULL ||
        keep_bad (&p, ok ? NULL : bad, ok ? 0 : nbad) == -1)
      bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    else
      ret = repo_point_write (r, &p, err);
    repo_point_free (&p);
  }
  close (fd);
  return ret;
}

/*----------------------------------------------------------------------
 * The session of a verify of every point.
 */

/* The start of the session in DIR/verify.json, or NULL: errnum ENOENT
 * if there is none.
 */
static char *
session_start (const struct repo *r, struct bmerr *err)
{
  char *path = repo_path (r, SESSION), *since = NULL;
  json_object *j = NULL;
  const char *t;

  if (path == NULL)
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  else if ((j = repo_read_json (path, err)) != NULL) {
    t = repo_json_str (j, "started");
    if (!repo_valid_time (t))
      bmerr_set (err, EINVAL, "%s: damaged: \"started\" is not a time",
                 path);
    else if ((since = strdup (t)) == NULL)
      bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  }
  json_object_put (j);
  free (path);
  return since;
}

int
repo_session_begin (const struct repo *r, bool resume, char **since,
                    struct bmerr *err)
{
  int fd = repo_lock_records (r, err), ret = -1;
  json_object *j;
  char now[64];

  *since = NULL;
  if (fd == -1)
    return -1;
  if (resume && (*since = session_start (r, err)) != NULL)
    ret = 0;
  else if (!resume || err->errnum == ENOENT) {
    repo_time_now (now, sizeof now);
    j = json_object_new_object ();
    json_object_object_add (j, "started", json_object_new_string (now));
    ret = repo_write_json (r, SESSION, ".", j, err);
    json_object_put (j);
  }
  close (fd);
  return ret;
}

int
repo_session_end (const struct repo *r, struct bmerr *err)
{
  char *path = repo_path (r, SESSION);
  int fd = repo_lock_records (r, err), ret = -1;

  if (fd >= 0 && path && unlink (path) == -1 && errno != ENOENT)
    bmerr_set (err, errno, "%s: %s", path, strerror (errno));
  else if (fd >= 0 && path)
    ret = repo_sync_dir (r, ".", err);
  if (fd >= 0)
    close (fd);
  free (path);
  return ret;
}

/*----------------------------------------------------------------------
 * Where a point's disk reads from.
 */

/* The point that image (DIR/disks/NAME/POINT.qcow2) is of: POINT,
 * malloced; NULL on ENOMEM.
 */
static char *
image_point (const char *image)
{
  const char *slash = strrchr (image, '/'), *f = slash ? slash + 1 : image;
  size_t len = strlen (f);

  if (len > 6 && strcmp (f + len - 6, ".qcow2") == 0)
    len -= 6;
  return strndup (f, len);
}

/* The points of image's chain, image first: *names (*n of them). */
static int
chain_points (const char *image, char ***names, size_t *n,
              struct bmerr *err)
{
  char *link = strdup (image), **more;
  json_object *info;
  const char *full, *backing;

  *names = NULL;
  *n = 0;
  while (link) {
    if ((more = realloc (*names, (*n + 1) * sizeof *more)) == NULL ||
        (more[*n] = image_point (link)) == NULL) {
      *names = more ? more : *names;
      bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
      free (link);
      return -1;
    }
    *names = more;
    ++*n;
    if ((info = qemu_img_info (link, "qcow2", err)) == NULL) {
      free (link);
      return -1;
    }
    full = json_object_get_string (json_object_object_get (
      info, "full-backing-filename"));
    backing = json_object_get_string (json_object_object_get (
      info, "backing-filename"));
    free (link);
    link = full || backing ? strdup (full ? full : backing) : NULL;
    json_object_put (info);
  }
  return 0;
}

/* qemu-img map's extents e (of image, whose chain is names) as
 * sources.
 */
static int
map_sources (json_object *map, char **names, size_t nnames,
             struct repo_source **out, size_t *n)
{
  size_t i, len = json_object_array_length (map);
  json_object *e;

  if ((*out = calloc (len ? len : 1, sizeof **out)) == NULL)
    return -1;
  for (i = 0; i < len; ++i) {
    struct repo_source *s = &(*out)[i];
    int64_t depth;
    e = json_object_array_get_idx (map, i);
    s->offset = json_object_get_int64 (json_object_object_get (e, "start"));
    s->length = json_object_get_int64 (json_object_object_get (e, "length"));
    depth = json_object_get_int64 (json_object_object_get (e, "depth"));
    *n = i + 1;
    if (json_object_get_boolean (json_object_object_get (e, "present")) &&
        depth >= 0 && (size_t) depth < nnames &&
        (s->point = strdup (names[depth])) == NULL)
      return -1;
  }
  return 0;
}

int
repo_sources (const struct repo *r, const struct repo_disk *d,
              struct repo_source **out, size_t *n, struct bmerr *err)
{
  char *image = repo_path (r, d->image), *text = NULL, **names = NULL;
  char *argv[] = { (char *) "qemu-img", (char *) "map", (char *) "-f",
                   (char *) "qcow2", (char *) "--output=json", (char *) "--",
                   image, NULL };
  json_object *map = NULL;
  size_t nnames = 0, i;
  int ret = -1;

  *out = NULL;
  *n = 0;
  if (image == NULL)
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  else if (qemu_check_chain (image, err) == 0 &&
           chain_points (image, &names, &nnames, err) == 0 &&
           repo_run_qemu (argv, &text, err) == 0) {
    map = json_tokener_parse (text ? text : "");
    if (map == NULL || !json_object_is_type (map, json_type_array))
      bmerr_set (err, EINVAL, "%s: qemu-img map gave no JSON list", image);
    else if (map_sources (map, names, nnames, out, n) == -1)
      bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    else
      ret = 0;
  }
  if (ret == -1) {
    repo_sources_free (*out, *n);
    *out = NULL;
    *n = 0;
  }
  json_object_put (map);
  for (i = 0; i < nnames; ++i)
    free (names[i]);
  free (names);
  free (text);
  free (image);
  return ret;
}

const struct repo_source *
repo_source_at (const struct repo_source *s, size_t n, uint64_t offset)
{
  size_t i;

  for (i = 0; i < n; ++i)
    if (offset >= s[i].offset && offset - s[i].offset < s[i].length)
      return &s[i];
  return NULL;
}

void
repo_sources_free (struct repo_source *s, size_t n)
{
  size_t i;

  for (i = 0; s && i < n; ++i)
    free (s[i].point);
  free (s);
}
