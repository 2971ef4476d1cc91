/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/set.c: the set of disks of one backup: a --disk value read
 * (qemu's key=value,... syntax, ",," for a literal comma), each disk
 * made ready to copy, and errors recorded as values.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <errno.h>
#include <time.h>

#include "internal.h"

void
set_fail (struct set *s, const char *fs, ...)
{
  va_list args;

  va_start (args, fs);
  bmerr_vfirst (&s->error, 0, fs, args);
  va_end (args);
}

void
disk_fail (struct disk *d, const char *fs, ...)
{
  va_list args;

  va_start (args, fs);
  bmerr_vfirst (&d->error, 0, fs, args);
  va_end (args);
}

/* The next key or value of spec from *p, up to '=' (key) or ','
 * (value), with ",," read as ','.  NULL when out of memory.
 */
static char *
next_token (const char **p, char stop)
{
  const char *s = *p;
  char *out = malloc (strlen (s) + 1);
  size_t n = 0;

  if (out == NULL)
    return NULL;
  while (*s) {
    if (*s == ',' && s[1] == ',') {
      out[n++] = ',';
      s += 2;
      continue;
    }
    if (*s == ',' || *s == stop)
      break;
    out[n++] = *s++;
  }
  out[n] = '\0';
  *p = s;
  return out;
}

int
disk_parse (const char *spec, bool repo, struct disk *d, struct bmerr *err)
{
  static const char *const keys[] = {
    "control", "source", "target", "name", "scratch",
  };
  char **fields[] = { &d->control, &d->source, &d->target, &d->name,
                      &d->scratch };
  const char *p = spec;
  size_t i;

  while (*p) {
    char *key = next_token (&p, '='), *value;
    if (key == NULL)
      goto nomem;
    if (*p != '=') {
      bmerr_set (err, EINVAL, "--disk %s: \"%s\" is not key=value", spec,
                 key);
      free (key);
      return -1;
    }
    p++;
    value = next_token (&p, '\0');
    if (value == NULL) {
      free (key);
      goto nomem;
    }
    if (*p == ',')
      p++;
    for (i = 0; i < sizeof keys / sizeof keys[0]; ++i)
      if (strcmp (key, keys[i]) == 0)
        break;
    if (i == sizeof keys / sizeof keys[0] || *fields[i] != NULL ||
        *value == '\0') {
      bmerr_set (err, EINVAL, "--disk %s: %s \"%s\"", spec,
                 i == sizeof keys / sizeof keys[0] ? "unknown key"
                 : *fields[i] ? "repeated key" : "empty value for", key);
      free (key);
      free (value);
      return -1;
    }
    *fields[i] = value;
    free (key);
  }
  for (i = 0; i < 3; ++i)
    if ((*fields[i] == NULL) != (repo && i == 2)) {
      bmerr_set (err, EINVAL, *fields[i] == NULL
                 ? "--disk %s: %s=... is required"
                 : "--disk %s: no %s= with --repo: the repository holds "
                 "the disk's points", spec, keys[i]);
      return -1;
    }
  if (!is_nbd_uri (d->source)) {
    bmerr_set (err, EINVAL, "--disk %s: source %s must be an NBD URI "
               "(nbd://... or nbd+unix://...)", spec, d->source);
    return -1;
  }
  return 0;

 nomem:
  bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  return -1;
}

int
disk_prepare (struct disk *d, const char *view, const char *default_scratch,
              const struct copy_options *template, struct bmerr *err)
{
  const char *scratch = d->scratch ? d->scratch : default_scratch;
  char *abs = NULL;

  /* The server runs in "/": a relative scratch directory is ours. */
  if (scratch && (abs = realpath (scratch, NULL)) == NULL) {
    bmerr_set (err, errno, "disk %s: scratch %s: %s", d->name, scratch,
               strerror (errno));
    return -1;
  }
  free (d->scratch);
  d->scratch = abs;
  d->view_uri = endpoint_with_export (d->source, view);
  if (d->view_uri == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  d->o = *template;
  d->o.source = d->view_uri;
  d->o.target = d->target;
  return 0;
}

void
disk_free (struct disk *d)
{
  free (d->name);
  free (d->control);
  free (d->source);
  free (d->target);
  free (d->scratch);
  free (d->view_uri);
  copy_result_free (&d->r);
}
