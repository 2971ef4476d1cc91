/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/places.c: no two disks of a set in one place.  Before
 * anything changes on any server, every pair of disks is compared by
 * what their places are, not by how they are spelled: their names,
 * control sockets, targets, and the files of their checksums.  Two
 * disks copied into one target leave a file that is neither; two with
 * one name, or one place for their checksums, write one set of
 * checksums for both; two with one control socket are one server.
 *
 * A file is its absolute path with symlinks, "." and ".." resolved
 * (also when it does not exist yet: its directory resolved and its name
 * appended, a dangling symlink followed), and, when it exists, its
 * device and inode (a hard link is the same file).  An NBD target is
 * its server (its Unix socket, as a file; or its host and port) and
 * its export name.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <unistd.h>
#include <sys/stat.h>

#include "internal.h"

#define NBD_DEFAULT_PORT "10809"
#define MAX_SYMLINKS 40

/* One place of a disk. */
struct place {
  bool nbd;                     /* an NBD export (export is set) */
  char *where;                  /* the file or socket, canonical; or
                                 * "tcp:HOST:PORT", "vsock:CID:PORT" */
  bool exists;                  /* where is a file that exists */
  dev_t dev;
  ino_t ino;
  char *export;
};

/* path absolute, with symlinks, "." and ".." resolved, also where it
 * does not exist; NULL when out of memory.
 */
static char *
canonical (const char *path, unsigned depth)
{
  char *r = realpath (path, NULL), *dcopy, *bcopy, *dir, *out = NULL;
  char link[PATH_MAX];
  ssize_t n;

  if (r != NULL || errno == ENOMEM)
    return r;
  dcopy = strdup (path);
  bcopy = strdup (path);
  if (dcopy == NULL || bcopy == NULL)
    goto out;
  dir = dirname (dcopy);
  n = readlink (path, link, sizeof link - 1);
  if (n > 0 && depth < MAX_SYMLINKS) {
    /* A dangling symlink: where it points, from its directory. */
    link[n] = '\0';
    if (link[0] == '/')
      out = canonical (link, depth + 1);
    else if (asprintf (&r, "%s/%s", dir, link) != -1) {
      out = canonical (r, depth + 1);
      free (r);
    }
    goto out;
  }
  /* Missing: its directory resolved, its name appended (a missing
   * directory is no symlink: its "." and ".." are read as written).
   */
  if (strcmp (dir, path) == 0)
    out = strdup (path);
  else if ((r = canonical (dir, depth)) != NULL) {
    const char *base = basename (bcopy);
    if (strcmp (base, ".") == 0)
      out = strdup (r);
    else if (strcmp (base, "..") == 0)
      out = strdup (dirname (r));
    else if (asprintf (&out, "%s/%s", strcmp (r, "/") == 0 ? "" : r,
                       base) == -1)
      out = NULL;
    free (r);
  }

 out:
  free (dcopy);
  free (bcopy);
  return out;
}

/* A file (or socket) at path: -1 when out of memory. */
static int
file_place (const char *path, struct place *p)
{
  struct stat sb;

  p->where = canonical (path, 0);
  if (p->where == NULL)
    return -1;
  if (stat (p->where, &sb) == 0) {
    p->exists = true;
    p->dev = sb.st_dev;
    p->ino = sb.st_ino;
  }
  return 0;
}

static int
hex (char c)
{
  return isdigit ((unsigned char) c) ? c - '0'
    : tolower ((unsigned char) c) - 'a' + 10;
}

/* The n bytes at s, percent-decoded, malloced. */
static char *
decode (const char *s, size_t n)
{
  char *out = malloc (n + 1);
  size_t i, j = 0;

  if (out == NULL)
    return NULL;
  for (i = 0; i < n; ++i) {
    if (s[i] == '%' && i + 2 < n &&
        isxdigit ((unsigned char) s[i + 1]) &&
        isxdigit ((unsigned char) s[i + 2])) {
      out[j++] = hex (s[i + 1]) << 4 | hex (s[i + 2]);
      i += 2;
    }
    else
      out[j++] = s[i];
  }
  out[j] = '\0';
  return out;
}

/* The value of key in the query of uri (after '?'), malloced, or NULL
 * (errno 0: there is none).
 */
static char *
query_value (const char *uri, const char *key)
{
  const char *q = strchr (uri, '?');
  const size_t klen = strlen (key);

  errno = 0;
  while (q != NULL && *q && *q != '#') {
    size_t len;
    q++;
    len = strcspn (q, "&;#");
    if (len > klen && strncmp (q, key, klen) == 0 && q[klen] == '=')
      return decode (q + klen + 1, len - klen - 1);
    q += len;
  }
  return NULL;
}

/* Whether host (a URI's authority) gives its port ([IPV6] has colons
 * of its own).
 */
static bool
has_port (const char *host)
{
  const char *end = host[0] == '[' ? strchr (host, ']') : host;

  return end != NULL && strchr (end, ':') != NULL;
}

/* An NBD URI's server and export: -1 when out of memory. */
static int
nbd_place (const char *uri, struct place *p)
{
  const char *scheme = strstr (uri, "://");
  const char *auth = scheme ? scheme + 3 : uri;
  const char *path = auth + strcspn (auth, "/?#");
  const size_t plen = strcspn (path, "?#");
  const size_t slen = scheme ? (size_t) (scheme - uri) : 0;
  char *socket, *host;
  size_t i;
  int r;

  p->nbd = true;
  p->export = *path == '/' ? decode (path + 1, plen - 1) : strdup ("");
  if (p->export == NULL)
    return -1;
  if (memmem (uri, slen, "+unix", 5) != NULL) {
    socket = query_value (uri, "socket");
    if (socket == NULL && errno == 0)
      socket = strdup (uri);    /* no socket: libnbd refuses it later */
    if (socket == NULL)
      return -1;
    r = file_place (socket, p);
    free (socket);
    return r;
  }
  host = strndup (auth, path - auth);
  if (host == NULL)
    return -1;
  for (i = 0; host[i]; ++i)
    host[i] = tolower ((unsigned char) host[i]);
  r = asprintf (&p->where, "%s:%s%s",
                memmem (uri, slen, "+vsock", 6) ? "vsock" : "tcp", host,
                has_port (host) ? "" : ":" NBD_DEFAULT_PORT);
  free (host);
  if (r == -1) {
    p->where = NULL;
    return -1;
  }
  return 0;
}

static int
target_place (const char *target, struct place *p)
{
  return is_nbd_uri (target) ? nbd_place (target, p)
    : file_place (target, p);
}

static bool
same_place (const struct place *a, const struct place *b)
{
  if (a->where == NULL || b->where == NULL || a->nbd != b->nbd)
    return false;
  if (a->nbd && strcmp (a->export, b->export) != 0)
    return false;
  return strcmp (a->where, b->where) == 0 ||
    (a->exists && b->exists && a->dev == b->dev && a->ino == b->ino);
}

static void
place_free (struct place *p)
{
  free (p->where);
  free (p->export);
}

/* What a place is, in a message: malloced. */
static char *
place_name (const struct place *p)
{
  char *out;

  if (!p->nbd)
    return strdup (p->where);
  if (asprintf (&out, "export \"%s\" of %s%s", p->export,
                p->where[0] == '/' ? "the server at " : "", p->where) == -1)
    return NULL;
  return out;
}

/* Each disk's places. */
struct places {
  struct place control, target, sums;
  char *sums_path;              /* as the disk would name it, or NULL */
};

static int
places_of (const struct set *s, const struct disk *d, struct places *p)
{
  if (file_place (d->control, &p->control) == -1 ||
      target_place (d->target, &p->target) == -1)
    return -1;
  p->sums_path = checksums_path (s, d, s->checkpoint);
  return p->sums_path == NULL ? 0 : file_place (p->sums_path, &p->sums);
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

/* What disks a and b (the i-th and j-th --disk) share, said in *error:
 * -1, or 0 if nothing.
 */
static int
clash (const struct disk *a, const struct disk *b, size_t i, size_t j,
       const struct places *pa, const struct places *pb, char **error)
{
  char *what = NULL, *given = NULL;
  int r;

  if (strcmp (a->name, b->name) == 0)
    r = asprintf (error, "--disk %zu and --disk %zu: both disks are "
                  "named %s%s: each disk needs a name of its own (it "
                  "names the disk's checksums, and the disk in messages "
                  "and the manifest)", i + 1, j + 1, a->name,
                  a->named && b->named ? "" : " (name= or by default)");
  else if (same_place (&pa->control, &pb->control)) {
    given = given_as (a->control, b->control);
    r = given == NULL ? -1
      : asprintf (error, "disks %s and %s have one control socket, "
                  "%s%s: one server is one disk", a->name, b->name,
                  pa->control.where, given);
  }
  else if (same_place (&pa->target, &pb->target)) {
    what = place_name (&pa->target);
    given = given_as (a->target, b->target);
    r = what == NULL || given == NULL ? -1
      : asprintf (error, "disks %s and %s have one target, %s%s: each "
                  "disk needs a target of its own", a->name, b->name,
                  what, given);
  }
  else if (pa->sums_path && pb->sums_path &&
           same_place (&pa->sums, &pb->sums))
    r = asprintf (error, "disks %s and %s: their checksums would both "
                  "be %s: give each disk a name= of its own (it names "
                  "them), or targets of different names", a->name,
                  b->name, pa->sums.where);
  else
    return 0;
  free (what);
  free (given);
  if (r == -1)
    *error = NULL;
  return -1;
}

int
set_check_disks (const struct set *s, char **error)
{
  struct places *p = calloc (s->n, sizeof *p);
  size_t i, j;
  int r = -1;

  *error = NULL;
  if (p == NULL)
    goto out;
  for (i = 0; i < s->n; ++i)
    if (places_of (s, &s->disks[i], &p[i]) == -1)
      goto out;
  for (i = 0; i < s->n; ++i)
    for (j = i + 1; j < s->n; ++j)
      if (clash (&s->disks[i], &s->disks[j], i, j, &p[i], &p[j],
                 error) == -1)
        goto out;
  r = 0;

 out:
  if (r == -1 && *error == NULL)
    *error = strdup (strerror (ENOMEM));
  for (i = 0; p && i < s->n; ++i) {
    place_free (&p[i].control);
    place_free (&p[i].target);
    place_free (&p[i].sums);
    free (p[i].sums_path);
  }
  free (p);
  return r;
}
