/* SPDX-License-Identifier: BSD-3-Clause */
/* repo-files.c: the files of a repository's points (repo.h): made,
 * made durable, and removed when no record names them. */

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
#include "qemu.h"
#include "repo.h"
#include "repo-impl.h"
#include "util.h"

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
    if ((rel = repo_path_of ("disks/%s%s%s", e->d_name, "", "")) == NULL) {
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
  char *path = repo_path_of ("%s/points/%s%s", r->dir, point, ".json");
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
  /* (A verify may be rewriting a record beside: its temporary file is
   * not a leftover.)
   */
  int fd = repo_lock_records (r, err);
  int ret = fd == -1 ? -1 : each_file (r, clean_one, &l, err);

  if (fd >= 0)
    close (fd);

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

int
repo_run_qemu (char *const argv[], char **out, struct bmerr *err)
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
      (folder = repo_path_of ("%s/disks/%s%s", r->dir, disk, "")) == NULL ||
      (base && (backing = repo_path_of ("%s%s%s", base, ".qcow2", "")) == NULL)) {
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
  ret = repo_run_qemu (argv, NULL, err);

 out:
  free (rel);
  free (image);
  free (folder);
  free (backing);
  return ret;
}

int
repo_own_extents (const char *image,
                  void (*fn) (uint64_t start, uint64_t length, void *opaque),
                  void *opaque, struct bmerr *err)
{
  char *argv[] = { (char *) "qemu-img", (char *) "map", (char *) "-f",
                   (char *) "qcow2", (char *) "--output=json",
                   (char *) "--", (char *) image, NULL };
  char *out = NULL;
  json_object *map, *e, *v, *s, *l;
  size_t i;

  if (repo_run_qemu (argv, &out, err) == -1) {
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
  for (i = 0; i < json_object_array_length (map); ++i) {
    e = json_object_array_get_idx (map, i);
    if (json_object_object_get_ex (e, "depth", &v) &&
        json_object_get_int64 (v) == 0 &&
        json_object_object_get_ex (e, "present", &v) &&
        json_object_get_boolean (v) &&
        json_object_object_get_ex (e, "start", &s) &&
        json_object_object_get_ex (e, "length", &l))
      fn (json_object_get_uint64 (s), json_object_get_uint64 (l), opaque);
  }
  json_object_put (map);
  return 0;
}

static void
add_length (uint64_t start, uint64_t length, void *opaque)
{
  (void) start;
  *(uint64_t *) opaque += length;
}

int
repo_stored_bytes (const char *image, uint64_t *stored, struct bmerr *err)
{
  *stored = 0;
  return repo_own_extents (image, add_length, stored, err);
}

int
repo_image_done (const struct repo *r, const char *disk, const char *point,
                 uint64_t *stored, struct bmerr *err)
{
  char *rel = repo_image_rel (disk, point), *image = NULL, *folder = NULL;
  int fd = -1, ret = -1;

  if (rel == NULL || (image = repo_path (r, rel)) == NULL ||
      (folder = repo_path_of ("disks/%s%s%s", disk, "", "")) == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    goto out;
  }
  if ((fd = open (image, O_RDONLY | O_CLOEXEC)) == -1 || fsync (fd) == -1)
    bmerr_set (err, errno, "%s: %s", image, strerror (errno));
  else if (repo_sync_dir (r, folder, err) == 0)
    ret = repo_stored_bytes (image, stored, err);

 out:
  if (fd >= 0)
    close (fd);
  free (rel);
  free (image);
  free (folder);
  return ret;
}

static int
size_one (const struct repo *r, int dfd, const char *f, const char *point,
          bool tmp, void *opaque)
{
  uint64_t *total = opaque;
  struct stat st;

  (void) r;
  (void) point;
  (void) tmp;
  if (fstatat (dfd, f, &st, AT_SYMLINK_NOFOLLOW) == -1)
    return errno == ENOENT ? 0 : -1;
  *total += (uint64_t) st.st_blocks * 512;
  return 0;
}

int
repo_size (const struct repo *r, uint64_t *total, struct bmerr *err)
{
  *total = 0;
  return each_file (r, size_one, total, err);
}
