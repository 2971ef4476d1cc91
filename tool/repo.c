/* SPDX-License-Identifier: BSD-3-Clause */
/* repo.c: the backup repository's layout (repo.h): opening and
 * locking DIR and the names of its files.  The records of its points
 * are read and written by repo-record.c, their files made and removed
 * by repo-files.c (repo-impl.h: what the three share).
 *
 * Every record is validated field by field before use, and must name
 * exactly the files that the layout gives its point: a damaged or
 * foreign record is an error naming the file and the field, never a
 * path followed.  Records and repository.json are written under a
 * temporary name, synced, renamed and the directory synced, so a
 * crash leaves the old state or the new one.  The locks are flock(2)
 * on DIR/writer.lock (one writer at a time) and DIR/lock (shared by
 * backups and readers, exclusive for a prune), never waited for: a
 * second writer, a reader during a prune or a prune during a read is
 * told at once that DIR is in use.
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
#include "repo.h"
#include "repo-impl.h"
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

char *
repo_path_of (const char *fs, const char *a, const char *b, const char *c)
{
  char *p;

  if (asprintf (&p, fs, a, b, c) == -1)
    return NULL;
  return p;
}

char *
repo_path (const struct repo *r, const char *rel)
{
  return repo_path_of ("%s/%s%s", r->dir, rel, "");
}

char *
repo_image_rel (const char *disk, const char *point)
{
  return repo_path_of ("disks/%s/%s%s", disk, point, ".qcow2");
}

char *
repo_sums_rel (const char *disk, const char *point)
{
  return repo_path_of ("sums/%s.%s%s", disk, point, ".sums");
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

int
repo_sync_dir (const struct repo *r, const char *rel, struct bmerr *err)
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

json_object *
repo_read_json (const char *path, struct bmerr *err)
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

int
repo_write_json (const struct repo *r, const char *rel, const char *dirrel,
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
  ret = repo_sync_dir (r, dirrel, err);

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
  j = repo_read_json (path, err);
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
  ret = repo_write_json (r, "repository.json", ".", j, err);
  json_object_put (j);
  return ret;
}

/* Open DIR/name (made if missing) into *fd and flock it with op,
 * without waiting: EBUSY saying who (what holds it) on contention.
 */
static int
lock_file (const struct repo *r, const char *name, int op, int *fd,
           const char *who, struct bmerr *err)
{
  char *path = repo_path (r, name);

  if (path == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  *fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (*fd == -1 && errno == ENOENT)
    *fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (*fd == -1)
    bmerr_set (err, errno, "%s: %s", path, strerror (errno));
  else if (flock (*fd, op | LOCK_NB) == -1) {
    if (errno == EWOULDBLOCK)
      bmerr_set (err, EBUSY, "%s is in use by another dirtybitmap (%s): "
                 "try again once it has ended", r->dir, who);
    else
      bmerr_set (err, errno, "%s: flock: %s", path, strerror (errno));
    close (*fd);
    *fd = -1;
  }
  free (path);
  return *fd == -1 ? -1 : 0;
}

#define READERS "a list, restore, rollback, serve or verify reading it"

static int
take_lock (struct repo *r, struct bmerr *err)
{
  if (r->writer &&
      lock_file (r, "writer.lock", LOCK_EX, &r->add_fd, "a backup or a prune",
                 err) == -1)
    return -1;
  return lock_file (r, "lock", r->changer ? LOCK_EX : LOCK_SH, &r->lock_fd,
                    r->changer ? READERS : "a prune", err);
}

int
repo_exclude_readers (struct repo *r, struct bmerr *err)
{
  if (flock (r->lock_fd, LOCK_EX | LOCK_NB) == 0)
    return 0;
  if (errno == EWOULDBLOCK)
    bmerr_set (err, EBUSY, "%s is in use by another dirtybitmap (%s): "
               "try again once it has ended", r->dir, READERS);
  else
    bmerr_set (err, errno, "%s/lock: flock: %s", r->dir, strerror (errno));
  return -1;
}

void
repo_share (struct repo *r)
{
  /* (Made shared again: a prune cannot come between, as this writer
   * holds DIR/writer.lock.)
   */
  flock (r->lock_fd, LOCK_SH);
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

/* repo_open, and repo_open_existing when create is false. */
static int
open_repo (const char *dir, bool writer, bool create, struct repo *r,
           struct bmerr *err)
{
  struct stat st;

  *r = (struct repo) { .lock_fd = -1, .add_fd = -1, .writer = writer,
                       .changer = writer && !create };
  if (create && writer_prepare (dir, err) == -1)
    return -1;
  if (!create && stat (dir, &st) == -1) {
    bmerr_set (err, errno, "%s: %s", dir, strerror (errno));
    return -1;
  }
  if (!create && !S_ISDIR (st.st_mode)) {
    bmerr_set (err, ENOTDIR, "%s: not a directory (a repository is one)",
               dir);
    return -1;
  }
  if ((r->dir = strdup (dir)) == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  if (!create && check_marker (r, err) == -1)
    goto fail;
  if (take_lock (r, err) == -1)
    goto fail;
  if (check_marker (r, err) == 0)
    return 0;
  if (create && err->errnum == ENOENT && create_repo (r, err) == 0)
    return 0;

 fail:
  repo_close (r);
  return -1;
}

int
repo_open (const char *dir, bool writer, struct repo *r, struct bmerr *err)
{
  return open_repo (dir, writer, writer, r, err);
}

int
repo_open_existing (const char *dir, struct repo *r, struct bmerr *err)
{
  return open_repo (dir, true, false, r, err);
}

void
repo_close (struct repo *r)
{
  if (r->lock_fd >= 0)
    close (r->lock_fd);
  if (r->add_fd >= 0)
    close (r->add_fd);
  r->lock_fd = r->add_fd = -1;
  free (r->dir);
  r->dir = NULL;
}

/* flock(2) on DIR/points, exclusive: the descriptor to close, or -1. */
int
repo_lock_records (const struct repo *r, struct bmerr *err)
{
  char *dir = repo_path (r, "points");
  int fd = dir ? open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

  if (fd == -1 || flock (fd, LOCK_EX) == -1) {
    bmerr_set (err, errno, "%s: %s", dir ? dir : r->dir, strerror (errno));
    if (fd >= 0)
      close (fd);
    fd = -1;
  }
  free (dir);
  return fd;
}
