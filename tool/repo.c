/* SPDX-License-Identifier: BSD-3-Clause */
/* repo.c: the backup repository's layout (repo.h): opening and
 * locking DIR, the names of its files, reading and writing the
 * records of its points, and removing what a backup that did not
 * complete left.
 *
 * Every record is validated field by field before use, and must name
 * exactly the files that the layout gives its point: a damaged or
 * foreign record is an error naming the file and the field, never a
 * path followed.  Records and repository.json are written under a
 * temporary name, synced, renamed and the directory synced, so a
 * crash leaves the old state or the new one.  The lock is flock(2) on
 * DIR/lock, never waited for: a second writer, or a reader during a
 * backup, is told at once that DIR is in use.
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
#include <sys/file.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "dirtybitmap.h"
#include "qemu.h"
#include "repo.h"
#include "util.h"

#define MAX_RECORD (1 << 20)    /* bytes of a record read */

/*----------------------------------------------------------------------
 * Names and paths.
 */

static int
check_name (const char *what, const char *name, bool dots,
            struct bmerr *err)
{
  size_t len = strlen (name), i;

  if (len == 0 || len > REPO_MAX_NAME) {
    bmerr_set (err, EINVAL, "%s \"%s\": a name is 1 to %d bytes", what,
               name, REPO_MAX_NAME);
    return -1;
  }
  for (i = 0; i < len; ++i) {
    char c = name[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9') || strchr ("_+:-", c) || (dots && c == '.'))
      continue;
    bmerr_set (err, EINVAL, "%s \"%s\": a name of the repository is "
               "made of letters, digits and %s only", what, name,
               dots ? "_ + : - ." : "_ + : -");
    return -1;
  }
  if (name[0] == '.' || name[0] == '-') {
    bmerr_set (err, EINVAL, "%s \"%s\": a name must not begin with %c",
               what, name, name[0]);
    return -1;
  }
  return 0;
}

int
repo_check_point_name (const char *name, struct bmerr *err)
{
  return check_name ("point", name, true, err);
}

int
repo_check_disk_name (const char *name, struct bmerr *err)
{
  return check_name ("disk", name, false, err);
}

static char *
path_of (const char *fs, const char *a, const char *b, const char *c)
{
  char *p;

  if (asprintf (&p, fs, a, b, c) == -1)
    return NULL;
  return p;
}

char *
repo_path (const struct repo *r, const char *rel)
{
  return path_of ("%s/%s%s", r->dir, rel, "");
}

char *
repo_image_rel (const char *disk, const char *point)
{
  return path_of ("disks/%s/%s%s", disk, point, ".qcow2");
}

char *
repo_sums_rel (const char *disk, const char *point)
{
  return path_of ("sums/%s.%s%s", disk, point, ".sums");
}

char *
repo_sums_dir (const struct repo *r)
{
  return repo_path (r, "sums");
}

int
repo_parse_spec (const char *arg, char **dir, char **point)
{
  const char *at = strrchr (arg, '@');
  struct stat st;
  char *before;

  *dir = *point = NULL;
  if (at) {
    if ((before = strndup (arg, at - arg)) == NULL)
      return -1;
    if (*before && stat (before, &st) == 0 && S_ISDIR (st.st_mode)) {
      *dir = before;
      if ((*point = strdup (at + 1)) == NULL)
        return -1;
      return 0;
    }
    free (before);
  }
  return (*dir = strdup (arg)) == NULL ? -1 : 0;
}

/* Sync the directory DIR/rel. */
static int
sync_dir (const struct repo *r, const char *rel, struct bmerr *err)
{
  char *p = repo_path (r, rel);
  int fd = p ? open (p, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  int ret = 0;

  if (fd == -1 || fsync (fd) == -1) {
    bmerr_set (err, errno, "%s: %s", p ? p : rel, strerror (errno));
    ret = -1;
  }
  if (fd >= 0)
    close (fd);
  free (p);
  return ret;
}

/*----------------------------------------------------------------------
 * Small files: repository.json and the records.
 */

/* Read the JSON file path (at most MAX_RECORD bytes): NULL with err. */
static json_object *
read_json (const char *path, struct bmerr *err)
{
  char *buf = NULL;
  json_object *j = NULL;
  FILE *fp = fopen (path, "re");
  size_t len;

  if (fp == NULL) {
    bmerr_set (err, errno, "%s: %s", path, strerror (errno));
    return NULL;
  }
  buf = malloc (MAX_RECORD + 1);
  if (buf == NULL) {
    bmerr_set (err, errno, "%s", strerror (errno));
    fclose (fp);
    return NULL;
  }
  len = fread (buf, 1, MAX_RECORD + 1, fp);
  if (ferror (fp))
    bmerr_set (err, EIO, "%s: %s", path, strerror (errno));
  else if (len > MAX_RECORD)
    bmerr_set (err, EINVAL, "%s: damaged: more than %d bytes", path,
               MAX_RECORD);
  else {
    buf[len] = '\0';
    j = json_tokener_parse (buf);
    if (j == NULL || !json_object_is_type (j, json_type_object)) {
      bmerr_set (err, EINVAL, "%s: damaged: not a JSON object", path);
      json_object_put (j);
      j = NULL;
    }
  }
  free (buf);
  fclose (fp);
  return j;
}

/* Write j to DIR/rel atomically (rel.tmp, fsync, rename, fsync the
 * directory dirrel).
 */
static int
write_json (const struct repo *r, const char *rel, const char *dirrel,
            json_object *j, struct bmerr *err)
{
  char *path = repo_path (r, rel), *tmp = NULL;
  const char *text = json_object_to_json_string_ext (
    j, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
  FILE *fp = NULL;
  int ret = -1;

  if (path == NULL || asprintf (&tmp, "%s.tmp", path) == -1) {
    tmp = NULL;
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    goto out;
  }
  if ((fp = fopen (tmp, "we")) == NULL ||
      fprintf (fp, "%s\n", text) < 0 || fflush (fp) == EOF ||
      fsync (fileno (fp)) == -1) {
    bmerr_set (err, errno, "%s: %s", tmp, strerror (errno));
    goto out;
  }
  if (fclose (fp) == EOF) {
    fp = NULL;
    bmerr_set (err, errno, "%s: %s", tmp, strerror (errno));
    goto out;
  }
  fp = NULL;
  if (rename (tmp, path) == -1) {
    bmerr_set (err, errno, "%s: %s", path, strerror (errno));
    goto out;
  }
  ret = sync_dir (r, dirrel, err);

 out:
  if (fp)
    fclose (fp);
  if (ret == -1 && tmp)
    unlink (tmp);
  free (tmp);
  free (path);
  return ret;
}

/*----------------------------------------------------------------------
 * Opening, and the lock.
 */

/* Does dir/name hold nothing? */
static bool
empty_dir (int dfd, const char *name)
{
  int fd = openat (dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct dirent *e;
  DIR *dp;
  bool empty = true;

  if (fd == -1 || (dp = fdopendir (fd)) == NULL) {
    if (fd >= 0)
      close (fd);
    return false;
  }
  while (empty && (e = readdir (dp)) != NULL)
    empty = strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0;
  closedir (dp);
  return empty;
}

/* May a writer make DIR a repository?  Only if it holds nothing but
 * what an interrupted start of one leaves (the lock, empty folders).
 */
static int
may_create (const char *dir, struct bmerr *err)
{
  static const char *const ours[] = { "lock", "points", "disks", "sums" };
  struct dirent *e;
  DIR *dp = opendir (dir);
  size_t i;
  int ret = 0;

  if (dp == NULL) {
    bmerr_set (err, errno, "%s: %s", dir, strerror (errno));
    return -1;
  }
  while (ret == 0 && (e = readdir (dp)) != NULL) {
    if (strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0)
      continue;
    for (i = 0; i < sizeof ours / sizeof ours[0]; ++i)
      if (strcmp (e->d_name, ours[i]) == 0)
        break;
    if (i == sizeof ours / sizeof ours[0] ||
        (i > 0 && !empty_dir (dirfd (dp), e->d_name))) {
      bmerr_set (err, ENOTEMPTY, "%s is not a dirtybitmap repository (it "
                 "has no repository.json) and is not empty (it holds %s): "
                 "give backup --repo a new or empty directory", dir,
                 e->d_name);
      ret = -1;
    }
  }
  closedir (dp);
  return ret;
}

/* Check DIR/repository.json.  errnum ENOENT when it is missing. */
static int
check_marker (const struct repo *r, struct bmerr *err)
{
  char *path = repo_path (r, "repository.json");
  json_object *j, *v;
  int ret = -1;

  if (path == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  if (access (path, F_OK) == -1 && errno == ENOENT) {
    bmerr_set (err, ENOENT, "%s is not a dirtybitmap repository (it has "
               "no repository.json: backup --repo makes one)", r->dir);
    free (path);
    return -1;
  }
  j = read_json (path, err);
  if (j && (!json_object_object_get_ex (j, "format", &v) ||
            !json_object_is_type (v, json_type_int)))
    bmerr_set (err, EINVAL, "%s: damaged: no \"format\"", path);
  else if (j && json_object_get_int64 (v) != REPO_FORMAT)
    bmerr_set (err, ENOTSUP, "%s: format %" PRId64 ": this dirtybitmap "
               "knows format %d only", path, json_object_get_int64 (v),
               REPO_FORMAT);
  else if (j)
    ret = 0;
  json_object_put (j);
  free (path);
  return ret;
}

/* Make r->dir a repository (the lock is held). */
static int
create_repo (const struct repo *r, struct bmerr *err)
{
  static const char *const dirs[] = { "points", "disks", "sums" };
  json_object *j;
  size_t i;
  int ret;

  for (i = 0; i < sizeof dirs / sizeof dirs[0]; ++i) {
    char *p = repo_path (r, dirs[i]);
    if (p == NULL || (mkdir (p, 0755) == -1 && errno != EEXIST)) {
      bmerr_set (err, errno, "%s: %s", p ? p : dirs[i], strerror (errno));
      free (p);
      return -1;
    }
    free (p);
  }
  j = json_object_new_object ();
  json_object_object_add (j, "format", json_object_new_int (REPO_FORMAT));
  ret = write_json (r, "repository.json", ".", j, err);
  json_object_put (j);
  return ret;
}

static int
take_lock (struct repo *r, struct bmerr *err)
{
  char *path = repo_path (r, "lock");

  if (path == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  r->lock_fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (r->lock_fd == -1 && errno == ENOENT)
    r->lock_fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                       0600);
  if (r->lock_fd == -1)
    bmerr_set (err, errno, "%s: %s", path, strerror (errno));
  else if (flock (r->lock_fd, (r->writer ? LOCK_EX : LOCK_SH) | LOCK_NB)
           == -1) {
    if (errno == EWOULDBLOCK)
      bmerr_set (err, EBUSY, "%s is in use by another dirtybitmap (%s): "
                 "try again once it has ended", r->dir, r->writer
                 ? "a backup, or a list, restore or serve reading it"
                 : "a backup");
    else
      bmerr_set (err, errno, "%s: flock: %s", path, strerror (errno));
    close (r->lock_fd);
    r->lock_fd = -1;
  }
  free (path);
  return r->lock_fd == -1 ? -1 : 0;
}

/* For a writer: DIR made if missing, and checked that it may become a
 * repository if it is not one.
 */
static int
writer_prepare (const char *dir, struct bmerr *err)
{
  struct stat st;
  char *marker;
  bool is_repo;

  if (mkdir (dir, 0700) == -1 && errno != EEXIST) {
    bmerr_set (err, errno, "%s: %s", dir, strerror (errno));
    return -1;
  }
  if (stat (dir, &st) == -1 || !S_ISDIR (st.st_mode)) {
    bmerr_set (err, ENOTDIR, "%s: not a directory", dir);
    return -1;
  }
  if (asprintf (&marker, "%s/repository.json", dir) == -1) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  is_repo = access (marker, F_OK) == 0;
  free (marker);
  return is_repo ? 0 : may_create (dir, err);
}

int
repo_open (const char *dir, bool writer, struct repo *r, struct bmerr *err)
{
  struct stat st;

  *r = (struct repo) { .lock_fd = -1, .writer = writer };
  if (writer && writer_prepare (dir, err) == -1)
    return -1;
  if (!writer && stat (dir, &st) == -1) {
    bmerr_set (err, errno, "%s: %s", dir, strerror (errno));
    return -1;
  }
  if (!writer && !S_ISDIR (st.st_mode)) {
    bmerr_set (err, ENOTDIR, "%s: not a directory (a repository is one)",
               dir);
    return -1;
  }
  if ((r->dir = strdup (dir)) == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  if (!writer && check_marker (r, err) == -1)
    goto fail;
  if (take_lock (r, err) == -1)
    goto fail;
  if (check_marker (r, err) == 0)
    return 0;
  if (writer && err->errnum == ENOENT && create_repo (r, err) == 0)
    return 0;

 fail:
  repo_close (r);
  return -1;
}

void
repo_close (struct repo *r)
{
  if (r->lock_fd >= 0)
    close (r->lock_fd);
  r->lock_fd = -1;
  free (r->dir);
  r->dir = NULL;
}

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

static const char *
get_str (json_object *o, const char *key)
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
static bool
valid_time (const char *t)
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
  const char *v = get_str (o, key);

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
  const char *name = get_str (o, "name"), *mode = get_str (o, "mode");

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

static int
parse_verified (const char *path, json_object *v, struct repo_point *p,
                struct bmerr *err)
{
  json_object *ok;
  const char *t;

  if (v == NULL)
    return 0;
  t = get_str (v, "time");
  if (!json_object_is_type (v, json_type_object) || !valid_time (t) ||
      !json_object_object_get_ex (v, "ok", &ok) ||
      !json_object_is_type (ok, json_type_boolean)) {
    damaged (err, path, "\"verified\" is not null or {\"time\", \"ok\"}");
    return -1;
  }
  p->verified = true;
  p->verified_ok = json_object_get_boolean (ok);
  if ((p->verified_time = strdup (t)) == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  return 0;
}

/* The record j of point name (from its file's name, path). */
static int
parse_point (const char *path, const char *name, json_object *j,
             struct repo_point *p, struct bmerr *err)
{
  json_object *v = NULL, *base = NULL, *disks = NULL, *verified = NULL;
  const char *t = get_str (j, "time");

  memset (p, 0, sizeof *p);
  if (!json_object_object_get_ex (j, "format", &v) ||
      !json_object_is_type (v, json_type_int) ||
      json_object_get_int64 (v) != REPO_FORMAT)
    damaged (err, path, "\"format\" is not %d", REPO_FORMAT);
  else if (get_str (j, "name") == NULL ||
           strcmp (get_str (j, "name"), name) != 0)
    damaged (err, path, "\"name\" is not \"%s\", the name of its file",
             name);
  else if (!valid_time (t))
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
        parse_verified (path, verified, p, err) == 0)
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
  if ((j = read_json (path, err)) != NULL) {
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
  free (p->verified_time);
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
  json_object *v = NULL;
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
  if (p->verified) {
    v = json_object_new_object ();
    json_object_object_add (v, "time",
                            json_object_new_string (p->verified_time));
    json_object_object_add (v, "ok",
                            json_object_new_boolean (p->verified_ok));
  }
  json_object_object_add (j, "verified", v);
  return j;
}

int
repo_point_write (const struct repo *r, const struct repo_point *p,
                  struct bmerr *err)
{
  json_object *j = record_json (p);
  char *rel = path_of ("points/%s%s%s", p->name, ".json", "");
  int ret = -1;

  if (rel == NULL)
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  else
    ret = write_json (r, rel, "points", j, err);
  free (rel);
  json_object_put (j);
  return ret;
}

/*----------------------------------------------------------------------
 * The files of points: made, made durable, removed.
 */

/* The point that the file f of the folder where ("points", "sums" or
 * a disk's folder) belongs to, malloced, or NULL for none; *tmp if it
 * is a temporary file.
 */
static char *
file_point (const char *where, const char *f, bool *tmp)
{
  size_t len = strlen (f);
  const char *dot;

  *tmp = len > 4 && strcmp (f + len - 4, ".tmp") == 0;
  if (*tmp)
    len -= 4;
  if (strcmp (where, "points") == 0)
    return *tmp && len > 5 && strncmp (f + len - 5, ".json", 5) == 0
      ? strndup (f, len - 5) : NULL;
  if (strcmp (where, "sums") == 0) {
    /* NAME.POINT.sums: a disk's name has no dot. */
    dot = strchr (f, '.');
    return dot && len > 5 && strncmp (f + len - 5, ".sums", 5) == 0 &&
      f + len - 5 > dot + 1 ? strndup (dot + 1, f + len - 5 - dot - 1)
      : NULL;
  }
  return !*tmp && len > 6 && strcmp (f + len - 6, ".qcow2") == 0
    ? strndup (f, len - 6) : NULL;
}

/* Call fn for each file of a point in DIR/rel (a folder of the
 * layout, named where for file_point), until it returns -1.
 */
typedef int (*file_fn) (const struct repo *r, int dfd, const char *f,
                        const char *point, bool tmp, void *opaque);

static int
each_in (const struct repo *r, const char *rel, const char *where,
         file_fn fn, void *opaque, struct bmerr *err)
{
  char *dir = repo_path (r, rel), *point;
  DIR *dp = dir ? opendir (dir) : NULL;
  struct dirent *e;
  bool tmp;
  int ret = 0;

  if (dp == NULL) {
    bmerr_set (err, errno, "%s: %s", dir ? dir : rel, strerror (errno));
    free (dir);
    return -1;
  }
  while (ret == 0 && (e = readdir (dp)) != NULL) {
    if ((point = file_point (where, e->d_name, &tmp)) == NULL)
      continue;
    ret = fn (r, dirfd (dp), e->d_name, point, tmp, opaque);
    free (point);
  }
  if (ret == -1)
    bmerr_set (err, errno, "%s: %s", dir, strerror (errno));
  else if (r->writer && fsync (dirfd (dp)) == -1) {
    bmerr_set (err, errno, "%s: fsync: %s", dir, strerror (errno));
    ret = -1;
  }
  closedir (dp);
  free (dir);
  return ret;
}

/* each_in for every folder of the layout: points, sums and each
 * disk's.
 */
static int
each_file (const struct repo *r, file_fn fn, void *opaque,
           struct bmerr *err)
{
  char *disks = repo_path (r, "disks"), *rel;
  DIR *dp = disks ? opendir (disks) : NULL;
  struct dirent *e;
  int ret = 0;

  if (dp == NULL) {
    bmerr_set (err, errno, "%s: %s", disks ? disks : r->dir,
               strerror (errno));
    free (disks);
    return -1;
  }
  while (ret == 0 && (e = readdir (dp)) != NULL) {
    if (e->d_name[0] == '.' ||
        repo_check_disk_name (e->d_name, NULL) == -1)
      continue;
    if ((rel = path_of ("disks/%s%s%s", e->d_name, "", "")) == NULL) {
      bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
      ret = -1;
    }
    else
      ret = each_in (r, rel, "disk", fn, opaque, err);
    free (rel);
  }
  closedir (dp);
  free (disks);
  if (ret == 0)
    ret = each_in (r, "points", "points", fn, opaque, err);
  if (ret == 0)
    ret = each_in (r, "sums", "sums", fn, opaque, err);
  return ret;
}

static bool
has_record (const struct repo *r, const char *point)
{
  char *path = path_of ("%s/points/%s%s", r->dir, point, ".json");
  bool there = path && access (path, F_OK) == 0;

  free (path);
  return there;
}

struct leftovers {
  char **names;
  size_t n;
};

static int
clean_one (const struct repo *r, int dfd, const char *f, const char *point,
           bool tmp, void *opaque)
{
  struct leftovers *l = opaque;
  char **names;
  size_t i;

  if (!tmp && has_record (r, point))
    return 0;
  if (unlinkat (dfd, f, 0) == -1 && errno != ENOENT)
    return -1;
  if (has_record (r, point))
    return 0;                   /* a temporary file of a complete point */
  for (i = 0; i < l->n; ++i)
    if (strcmp (l->names[i], point) == 0)
      return 0;
  if ((names = realloc (l->names, (l->n + 1) * sizeof *names)) == NULL ||
      (names[l->n] = strdup (point)) == NULL) {
    if (names)
      l->names = names;
    errno = ENOMEM;
    return -1;
  }
  l->names = names;
  l->n++;
  return 0;
}

int
repo_clean (const struct repo *r, char ***names, size_t *n,
            struct bmerr *err)
{
  struct leftovers l = { NULL, 0 };
  int ret = each_file (r, clean_one, &l, err);

  *names = l.names;
  *n = l.n;
  return ret;
}

void
repo_names_free (char **names, size_t n)
{
  size_t i;

  for (i = 0; i < n; ++i)
    free (names[i]);
  free (names);
}

static int
discard_one (const struct repo *r, int dfd, const char *f,
             const char *point, bool tmp, void *opaque)
{
  (void) r;
  (void) tmp;
  if (strcmp (point, opaque) == 0)
    unlinkat (dfd, f, 0);
  return 0;
}

void
repo_discard (const struct repo *r, const char *point)
{
  struct bmerr err;

  if (!has_record (r, point))
    each_file (r, discard_one, (void *) point, &err);
}

/* Run a qemu program (argv), its output to *out if out is not NULL.
 * -1 with err (its words).
 */
static int
run_qemu (char *const argv[], char **out, struct bmerr *err)
{
  struct qemu_child c;
  char *text = NULL;
  int status;

  if (qemu_spawn (argv, out != NULL, -1, &c, err) == -1)
    return -1;
  status = qemu_finish (&c, out, &text);
  if (status != 0)
    qemu_error (err, argv[0], text, status);
  free (text);
  return status == 0 ? 0 : -1;
}

int
repo_image_create (const struct repo *r, const char *disk,
                   const char *point, const char *base, uint64_t size,
                   uint64_t cluster, struct bmerr *err)
{
  char *rel = repo_image_rel (disk, point), *image = NULL, *folder = NULL;
  char *backing = NULL, sizes[32], opts[64];
  char *argv[16];
  size_t k = 0;
  int ret = -1;

  if (rel == NULL || (image = repo_path (r, rel)) == NULL ||
      (folder = path_of ("%s/disks/%s%s", r->dir, disk, "")) == NULL ||
      (base && (backing = path_of ("%s%s%s", base, ".qcow2", "")) == NULL)) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    goto out;
  }
  if (mkdir (folder, 0755) == -1 && errno != EEXIST) {
    bmerr_set (err, errno, "%s: %s", folder, strerror (errno));
    goto out;
  }
  if (access (image, F_OK) == 0) {
    bmerr_set (err, EEXIST, "%s: exists already", image);
    goto out;
  }
  snprintf (sizes, sizeof sizes, "%" PRIu64, size);
  snprintf (opts, sizeof opts, "cluster_size=%" PRIu64, cluster);
  argv[k++] = (char *) "qemu-img"; argv[k++] = (char *) "create";
  argv[k++] = (char *) "-q"; argv[k++] = (char *) "-f";
  argv[k++] = (char *) "qcow2"; argv[k++] = (char *) "-o"; argv[k++] = opts;
  if (backing) {
    argv[k++] = (char *) "-b"; argv[k++] = backing;
    argv[k++] = (char *) "-F"; argv[k++] = (char *) "qcow2";
  }
  argv[k++] = (char *) "--"; argv[k++] = image; argv[k++] = sizes;
  argv[k] = NULL;
  ret = run_qemu (argv, NULL, err);

 out:
  free (rel);
  free (image);
  free (folder);
  free (backing);
  return ret;
}

/* The bytes allocated in image itself, as qemu-img map says: its
 * extents at depth 0 that are present (data, or zeroes recorded).
 */
static int
stored_bytes (const char *image, uint64_t *stored, struct bmerr *err)
{
  char *argv[] = { (char *) "qemu-img", (char *) "map", (char *) "-f",
                   (char *) "qcow2", (char *) "--output=json",
                   (char *) "--", (char *) image, NULL };
  char *out = NULL;
  json_object *map, *e, *v;
  size_t i;

  if (run_qemu (argv, &out, err) == -1) {
    free (out);
    return -1;
  }
  map = json_tokener_parse (out ? out : "");
  free (out);
  if (map == NULL || !json_object_is_type (map, json_type_array)) {
    bmerr_set (err, EINVAL, "%s: qemu-img map gave no JSON list", image);
    json_object_put (map);
    return -1;
  }
  *stored = 0;
  for (i = 0; i < json_object_array_length (map); ++i) {
    e = json_object_array_get_idx (map, i);
    if (json_object_object_get_ex (e, "depth", &v) &&
        json_object_get_int64 (v) == 0 &&
        json_object_object_get_ex (e, "present", &v) &&
        json_object_get_boolean (v) &&
        json_object_object_get_ex (e, "length", &v))
      *stored += json_object_get_uint64 (v);
  }
  json_object_put (map);
  return 0;
}

int
repo_image_done (const struct repo *r, const char *disk, const char *point,
                 uint64_t *stored, struct bmerr *err)
{
  char *rel = repo_image_rel (disk, point), *image = NULL, *folder = NULL;
  int fd = -1, ret = -1;

  if (rel == NULL || (image = repo_path (r, rel)) == NULL ||
      (folder = path_of ("disks/%s%s%s", disk, "", "")) == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    goto out;
  }
  if ((fd = open (image, O_RDONLY | O_CLOEXEC)) == -1 || fsync (fd) == -1)
    bmerr_set (err, errno, "%s: %s", image, strerror (errno));
  else if (sync_dir (r, folder, err) == 0)
    ret = stored_bytes (image, stored, err);

 out:
  if (fd >= 0)
    close (fd);
  free (rel);
  free (image);
  free (folder);
  return ret;
}
