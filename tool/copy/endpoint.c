/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/endpoint.c: what a source or target is (see endpoint.h). */

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

#include "endpoint.h"

bool
is_nbd_uri (const char *s)
{
  static const char *const schemes[] = {
    "nbd://", "nbds://", "nbd+unix://", "nbds+unix://",
    "nbd+vsock://", "nbds+vsock://",
  };
  size_t i;

  for (i = 0; i < sizeof schemes / sizeof schemes[0]; ++i)
    if (strncmp (s, schemes[i], strlen (schemes[i])) == 0)
      return true;
  return false;
}

#define NBD_DEFAULT_PORT "10809"
#define MAX_SYMLINKS 40

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
file_place (const char *path, struct endpoint *p)
{
  struct stat sb;

  p->path = strdup (path);
  p->where = canonical (path, 0);
  if (p->path == NULL || p->where == NULL)
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
nbd_place (const char *uri, struct endpoint *p)
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

int
endpoint_of (const char *name, struct endpoint *e)
{
  *e = (struct endpoint) { .nbd = false };
  return is_nbd_uri (name) ? nbd_place (name, e) : file_place (name, e);
}

bool
endpoint_same (const struct endpoint *a, const struct endpoint *b)
{
  if (a->where == NULL || b->where == NULL || a->nbd != b->nbd)
    return false;
  if (a->nbd && strcmp (a->export, b->export) != 0)
    return false;
  return strcmp (a->where, b->where) == 0 ||
    (a->exists && b->exists && a->dev == b->dev && a->ino == b->ino);
}

void
endpoint_free (struct endpoint *p)
{
  free (p->path);
  free (p->where);
  free (p->export);
  *p = (struct endpoint) { .nbd = false };
}

char *
endpoint_name (const struct endpoint *p)
{
  char *out;

  if (!p->nbd)
    return strdup (p->where);
  if (asprintf (&out, "export \"%s\" of %s%s", p->export,
                p->where[0] == '/' ? "the server at " : "", p->where) == -1)
    return NULL;
  return out;
}

/* uri with its export name replaced by name: nbd+unix:///?socket=S
 * and export VIEW give nbd+unix:///VIEW?socket=S.
 */
char *
endpoint_with_export (const char *uri, const char *name)
{
  const char *p = strstr (uri, "://"), *slash, *end;
  char *out = NULL;
  size_t i;
  FILE *fp;
  size_t len;

  if (p == NULL)
    return NULL;
  slash = strchr (p + 3, '/');
  end = slash ? slash + strcspn (slash, "?#") : uri + strcspn (uri, "?#");
  fp = open_memstream (&out, &len);
  if (fp == NULL)
    return NULL;
  fwrite (uri, 1, (slash ? slash : end) - uri, fp);
  fputc ('/', fp);
  /* Percent-encode all but unreserved characters. */
  for (i = 0; name[i]; ++i) {
    unsigned char c = name[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9') || strchr ("-._~", c))
      fputc (c, fp);
    else
      fprintf (fp, "%%%02X", c);
  }
  fputs (end, fp);
  fclose (fp);
  return out;
}
