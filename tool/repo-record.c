/* SPDX-License-Identifier: BSD-3-Clause */
/* repo-record.c: the records of a repository's points (repo.h):
 * read and checked field by field, chosen, written; "verified", the
 * result that verify records (repo-verified.c), among their fields.
 */

#include <config.h>

#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <unistd.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "dirtybitmap.h"
#include "repo.h"
#include "repo-impl.h"
#include "util.h"

/*----------------------------------------------------------------------
 * Records.
 */

static void __attribute__ ((format (printf, 3, 4)))
damaged (struct bmerr *err, const char *path, const char *fs, ...)
{
  char what[512];
  va_list args;

  va_start (args, fs);
  vsnprintf (what, sizeof what, fs, args);
  va_end (args);
  bmerr_set (err, EINVAL, "%s: damaged: %s", path, what);
}

const char *
repo_json_str (json_object *o, const char *key)
{
  json_object *v;

  if (json_object_object_get_ex (o, key, &v) &&
      json_object_is_type (v, json_type_string))
    return json_object_get_string (v);
  return NULL;
}

/* A number of at least min: -1 if missing, not a number, or less. */
static int
get_u64 (json_object *o, const char *key, uint64_t min, uint64_t *out)
{
  json_object *v;

  if (!json_object_object_get_ex (o, key, &v) ||
      !json_object_is_type (v, json_type_int))
    return -1;
  errno = 0;
  *out = json_object_get_uint64 (v);
  if (errno || json_object_get_int64 (v) < 0 || *out < min)
    return -1;
  return 0;
}

/* 2026-12-06T05:00:00.123456Z, as backup writes it (UTC). */
bool
repo_valid_time (const char *t)
{
  static const char pattern[] = "dddd-dd-ddTdd:dd:dd.ddddddZ";
  size_t i;

  if (t == NULL || strlen (t) != sizeof pattern - 1)
    return false;
  for (i = 0; pattern[i]; ++i)
    if (pattern[i] == 'd' ? (t[i] < '0' || t[i] > '9') : t[i] != pattern[i])
      return false;
  return true;
}

static bool
valid_mode (const char *m)
{
  return m && (strcmp (m, "full") == 0 || strcmp (m, "incremental") == 0 ||
               strcmp (m, "resync") == 0);
}

/* The file field key of disk i is exactly want (a record names its
 * own files only).
 */
static int
check_file (const char *path, json_object *o, size_t i, const char *key,
            const char *want, struct bmerr *err)
{
  const char *v = repo_json_str (o, key);

  if (want == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  if (v && strcmp (v, want) == 0)
    return 0;
  damaged (err, path, "disks[%zu].%s is %s%s%s, not %s (a point's record "
           "names its own files only)", i, key, v ? "\"" : "",
           v ? v : "missing", v ? "\"" : "", want);
  return -1;
}

static int
parse_disk (const char *path, const char *point, json_object *o, size_t i,
            struct repo_disk *d, struct bmerr *err)
{
  const char *name = repo_json_str (o, "name"), *mode = repo_json_str (o, "mode");

  if (!json_object_is_type (o, json_type_object))
    damaged (err, path, "disks[%zu] is not an object", i);
  else if (name == NULL || repo_check_disk_name (name, NULL) == -1)
    damaged (err, path, "disks[%zu].name is missing or not a disk's name",
             i);
  else if (get_u64 (o, "size", 1, &d->size) == -1)
    damaged (err, path, "disks[%zu].size is missing or not a size", i);
  else if (get_u64 (o, "chunk", 512, &d->chunk) == -1 ||
           !is_power_of_2 (d->chunk))
    damaged (err, path, "disks[%zu].chunk is missing or not a power of 2",
             i);
  else if (get_u64 (o, "stored-bytes", 0, &d->stored) == -1)
    damaged (err, path, "disks[%zu].stored-bytes is missing or not a "
             "number", i);
  else if (!valid_mode (mode))
    damaged (err, path, "disks[%zu].mode is not full, incremental or "
             "resync", i);
  else if ((d->name = strdup (name)) == NULL ||
           (d->mode = strdup (mode)) == NULL)
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  else if (check_file (path, o, i, "image",
                       d->image = repo_image_rel (name, point), err) == 0 &&
           check_file (path, o, i, "sums",
                       d->sums = repo_sums_rel (name, point), err) == 0)
    return 0;
  return -1;
}

static int
parse_disks (const char *path, json_object *list, struct repo_point *p,
             struct bmerr *err)
{
  size_t i, k, n;

  if (list == NULL || !json_object_is_type (list, json_type_array) ||
      (n = json_object_array_length (list)) == 0) {
    damaged (err, path, "\"disks\" is missing, or not a list of disks");
    return -1;
  }
  if ((p->disks = calloc (n, sizeof *p->disks)) == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  for (i = 0; i < n; ++i) {
    p->n = i + 1;
    if (parse_disk (path, p->name, json_object_array_get_idx (list, i), i,
                    &p->disks[i], err) == -1)
      return -1;
    for (k = 0; k < i; ++k)
      if (strcmp (p->disks[k].name, p->disks[i].name) == 0) {
        damaged (err, path, "disk %s is there twice", p->disks[i].name);
        return -1;
      }
  }
  return 0;
}

/* The record j of point name (from its file's name, path). */
static int
parse_point (const char *path, const char *name, json_object *j,
             struct repo_point *p, struct bmerr *err)
{
  json_object *v = NULL, *base = NULL, *disks = NULL, *verified = NULL;
  const char *t = repo_json_str (j, "time");

  memset (p, 0, sizeof *p);
  if (!json_object_object_get_ex (j, "format", &v) ||
      !json_object_is_type (v, json_type_int) ||
      json_object_get_int64 (v) != REPO_FORMAT)
    damaged (err, path, "\"format\" is not %d", REPO_FORMAT);
  else if (repo_json_str (j, "name") == NULL ||
           strcmp (repo_json_str (j, "name"), name) != 0)
    damaged (err, path, "\"name\" is not \"%s\", the name of its file",
             name);
  else if (!repo_valid_time (t))
    damaged (err, path, "\"time\" is missing or not a time "
             "(2026-12-06T05:00:00.123456Z)");
  else if (!json_object_object_get_ex (j, "base", &base) ||
           (base && (!json_object_is_type (base, json_type_string) ||
                     repo_check_point_name (json_object_get_string (base),
                                            NULL) == -1 ||
                     strcmp (json_object_get_string (base), name) == 0)))
    damaged (err, path, "\"base\" is not null or another point's name");
  else if (!json_object_object_get_ex (j, "verified", &verified))
    damaged (err, path, "\"verified\" is missing");
  else if ((p->name = strdup (name)) == NULL ||
           (p->time = strdup (t)) == NULL ||
           (base && (p->base = strdup (json_object_get_string (base)))
            == NULL))
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  else {
    json_object_object_get_ex (j, "disks", &disks);
    if (parse_disks (path, disks, p, err) == 0 &&
        repo_verified_parse (path, verified, p, err) == 0)
      return 0;
  }
  repo_point_free (p);
  return -1;
}

/* The record of point name: errnum ENOENT if there is none. */
static int
load_point (const struct repo *r, const char *name, struct repo_point *p,
            struct bmerr *err)
{
  char *path = NULL;
  json_object *j;
  int ret = -1;

  memset (p, 0, sizeof *p);
  if (asprintf (&path, "%s/points/%s.json", r->dir, name) == -1) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  if ((j = repo_read_json (path, err)) != NULL) {
    ret = parse_point (path, name, j, p, err);
    json_object_put (j);
  }
  free (path);
  return ret;
}

static int
compare_points (const void *a, const void *b)
{
  const struct repo_point *x = a, *y = b;
  int c = strcmp (x->time, y->time);

  return c ? c : strcmp (x->name, y->name);
}

/* The point a record's file name f (NAME.json) is of, malloced; NULL
 * if f is not a record's name.
 */
static char *
record_name (const char *f)
{
  size_t len = strlen (f);

  if (len <= 5 || strcmp (f + len - 5, ".json") != 0 || f[0] == '.')
    return NULL;
  return strndup (f, len - 5);
}

int
repo_load (const struct repo *r, struct repo_points *out,
           struct bmerr *err)
{
  char *dir = repo_path (r, "points"), *name;
  struct repo_point *p;
  struct dirent *e;
  DIR *dp = dir ? opendir (dir) : NULL;
  int ret = 0;

  memset (out, 0, sizeof *out);
  if (dp == NULL) {
    bmerr_set (err, errno, "%s: %s", dir ? dir : r->dir, strerror (errno));
    free (dir);
    return -1;
  }
  while (ret == 0 && (e = readdir (dp)) != NULL) {
    if ((name = record_name (e->d_name)) == NULL)
      continue;
    if (repo_check_point_name (name, err) == -1)
      bmerr_prefix (err, "%s/%s: not a point's record", dir, e->d_name);
    else if ((p = realloc (out->p, (out->n + 1) * sizeof *p)) == NULL)
      bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    else if ((out->p = p, load_point (r, name, &p[out->n], err)) == 0) {
      out->n++;
      free (name);
      continue;
    }
    free (name);
    ret = -1;
  }
  closedir (dp);
  free (dir);
  if (ret == -1)
    repo_points_free (out);
  else
    qsort (out->p, out->n, sizeof *out->p, compare_points);
  return ret;
}

/* "c1, c2, c3": the names of the records in DIR/points, by name. */
static char *
point_names (const struct repo *r)
{
  struct dirent **list = NULL;
  char *dir = repo_path (r, "points"), *out = NULL, *name;
  size_t len = 0;
  FILE *fp = open_memstream (&out, &len);
  int n, i, k = 0;

  n = dir ? scandir (dir, &list, NULL, alphasort) : -1;
  for (i = 0; i < n; ++i) {
    if (fp && (name = record_name (list[i]->d_name)) != NULL) {
      fprintf (fp, "%s%s", k++ ? ", " : "", name);
      free (name);
    }
    free (list[i]);
  }
  free (list);
  free (dir);
  if (fp)
    fclose (fp);
  return out;
}

int
repo_choose (const struct repo *r, const char *name, struct repo_point *out,
             struct bmerr *err)
{
  struct repo_points all;
  char *names;

  memset (out, 0, sizeof *out);
  if (name && repo_check_point_name (name, err) == -1)
    return -1;
  if (name && load_point (r, name, out, err) == -1) {
    if (err->errnum == ENOENT) {
      names = point_names (r);
      bmerr_set (err, ENOENT, "%s has no point %s (%s%s)", r->dir, name,
                 names && *names ? "its points: " : "it has none yet",
                 names ? names : "");
      free (names);
    }
    return -1;
  }
  if (name)
    return 0;
  if (repo_load (r, &all, err) == -1)
    return -1;
  if (all.n == 0) {
    bmerr_set (err, ENOENT, "%s has no points yet", r->dir);
    return -1;
  }
  *out = all.p[--all.n];
  repo_points_free (&all);
  return 0;
}

const struct repo_disk *
repo_point_disk (const struct repo_point *p, const char *disk)
{
  size_t i;

  for (i = 0; i < p->n; ++i)
    if (strcmp (p->disks[i].name, disk) == 0)
      return &p->disks[i];
  return NULL;
}

void
repo_point_free (struct repo_point *p)
{
  size_t i;

  for (i = 0; i < p->n; ++i) {
    free (p->disks[i].name);
    free (p->disks[i].image);
    free (p->disks[i].sums);
    free (p->disks[i].mode);
  }
  free (p->disks);
  free (p->name);
  free (p->time);
  free (p->base);
  repo_verified_free (p);
  memset (p, 0, sizeof *p);
}

void
repo_points_free (struct repo_points *ps)
{
  size_t i;

  for (i = 0; i < ps->n; ++i)
    repo_point_free (&ps->p[i]);
  free (ps->p);
  memset (ps, 0, sizeof *ps);
}

static json_object *
record_json (const struct repo_point *p)
{
  json_object *j = json_object_new_object ();
  json_object *disks = json_object_new_array ();
  size_t i;

  json_object_object_add (j, "format", json_object_new_int (REPO_FORMAT));
  json_object_object_add (j, "name", json_object_new_string (p->name));
  json_object_object_add (j, "time", json_object_new_string (p->time));
  json_object_object_add (j, "base",
                          p->base ? json_object_new_string (p->base) : NULL);
  for (i = 0; i < p->n; ++i) {
    const struct repo_disk *d = &p->disks[i];
    json_object *o = json_object_new_object ();
    json_object_object_add (o, "name", json_object_new_string (d->name));
    json_object_object_add (o, "size", json_object_new_uint64 (d->size));
    json_object_object_add (o, "chunk", json_object_new_uint64 (d->chunk));
    json_object_object_add (o, "image", json_object_new_string (d->image));
    json_object_object_add (o, "sums", json_object_new_string (d->sums));
    json_object_object_add (o, "mode", json_object_new_string (d->mode));
    json_object_object_add (o, "stored-bytes",
                            json_object_new_uint64 (d->stored));
    json_object_array_add (disks, o);
  }
  json_object_object_add (j, "disks", disks);
  json_object_object_add (j, "verified", repo_verified_json (p));
  return j;
}

int
repo_point_write (const struct repo *r, const struct repo_point *p,
                  struct bmerr *err)
{
  json_object *j = record_json (p);
  char *rel = repo_path_of ("points/%s%s%s", p->name, ".json", "");
  int ret = -1;

  if (rel == NULL)
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  else
    ret = repo_write_json (r, rel, "points", j, err);
  free (rel);
  json_object_put (j);
  return ret;
}

/*----------------------------------------------------------------------
 * "verified" in a record.
 */

/* Entry i of "differing": a range of one of p's disks. */
static int
parse_bad (const char *path, json_object *o, size_t i, struct repo_point *p,
           struct bmerr *err)
{
  struct repo_bad *b = &p->bad[i];
  const char *disk = repo_json_str (o, "disk"), *in = repo_json_str (o, "in");
  const struct repo_disk *d = disk ? repo_point_disk (p, disk) : NULL;
  json_object *v = NULL;

  if (!json_object_is_type (o, json_type_object) || d == NULL ||
      get_u64 (o, "offset", 0, &b->offset) == -1 ||
      get_u64 (o, "length", 0, &b->length) == -1 || b->length == 0 ||
      b->offset >= d->size || b->length > d->size - b->offset ||
      !json_object_object_get_ex (o, "in", &v) ||
      (v && (in == NULL || repo_check_point_name (in, NULL) == -1))) {
    bmerr_set (err, EINVAL, "%s: damaged: verified.differing[%zu] is not "
               "{\"disk\", \"offset\", \"length\", \"in\"} of a range of "
               "one of its disks", path, i);
    return -1;
  }
  if ((b->disk = strdup (disk)) == NULL || (in && (b->in = strdup (in))
                                            == NULL)) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  return 0;
}

static int
parse_differing (const char *path, json_object *list, struct repo_point *p,
                 struct bmerr *err)
{
  size_t i, n;

  if (list == NULL)
    return 0;
  if (!json_object_is_type (list, json_type_array) || p->verified_ok ||
      (n = json_object_array_length (list)) > REPO_MAX_BAD + p->n) {
    bmerr_set (err, EINVAL, "%s: damaged: verified.differing is not a list "
               "of at most %zu ranges of a point found bad", path,
               REPO_MAX_BAD + p->n);
    return -1;
  }
  if (n && (p->bad = calloc (n, sizeof *p->bad)) == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  for (i = 0; i < n; ++i) {
    p->nbad = i + 1;
    if (parse_bad (path, json_object_array_get_idx (list, i), i, p, err)
        == -1)
      return -1;
  }
  return 0;
}

int
repo_verified_parse (const char *path, json_object *v, struct repo_point *p,
                     struct bmerr *err)
{
  json_object *ok, *list = NULL;
  const char *t;

  if (v == NULL)
    return 0;
  t = repo_json_str (v, "time");
  if (!json_object_is_type (v, json_type_object) || !repo_valid_time (t) ||
      !json_object_object_get_ex (v, "ok", &ok) ||
      !json_object_is_type (ok, json_type_boolean)) {
    bmerr_set (err, EINVAL, "%s: damaged: \"verified\" is not null or "
               "{\"time\", \"ok\"}", path);
    return -1;
  }
  p->verified = true;
  p->verified_ok = json_object_get_boolean (ok);
  if ((p->verified_time = strdup (t)) == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  json_object_object_get_ex (v, "differing", &list);
  return parse_differing (path, list, p, err);
}

void
repo_verified_free (struct repo_point *p)
{
  size_t i;

  for (i = 0; i < p->nbad; ++i) {
    free (p->bad[i].disk);
    free (p->bad[i].in);
  }
  free (p->bad);
  free (p->verified_time);
  p->bad = NULL;
  p->nbad = 0;
  p->verified_time = NULL;
  p->verified = false;
}

json_object *
repo_verified_json (const struct repo_point *p)
{
  json_object *v, *list;
  size_t i;

  if (!p->verified)
    return NULL;
  v = json_object_new_object ();
  json_object_object_add (v, "time", json_object_new_string (p->verified_time));
  json_object_object_add (v, "ok", json_object_new_boolean (p->verified_ok));
  if (p->nbad == 0)
    return v;
  list = json_object_new_array ();
  for (i = 0; i < p->nbad; ++i) {
    const struct repo_bad *b = &p->bad[i];
    json_object *o = json_object_new_object ();
    json_object_object_add (o, "disk", json_object_new_string (b->disk));
    json_object_object_add (o, "offset", json_object_new_uint64 (b->offset));
    json_object_object_add (o, "length", json_object_new_uint64 (b->length));
    json_object_object_add (o, "in",
                            b->in ? json_object_new_string (b->in) : NULL);
    json_object_array_add (list, o);
  }
  json_object_object_add (v, "differing", list);
  return v;
}
