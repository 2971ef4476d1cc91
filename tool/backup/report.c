/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/report.c: what a backup reports once it has ended: the
 * summary on stdout (a line per disk and one for the cut, or one JSON
 * object), and the manifest, the record of the set (dirtybitmap(1),
 * THE MANIFEST).  The manifest's place is checked before anything
 * changes: once the set is committed, a manifest that cannot be
 * written no longer makes the backup fail.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "dirtybitmap.h"
#include "internal.h"

static const char *
result_name (const struct set *s, bool ok)
{
  return ok ? "complete" : s->interrupted ? "interrupted" : "failed";
}

/* A number of milliseconds with three decimals, or null. */
static json_object *
ms_json (bool known, double ms)
{
  char buf[32];

  if (!known)
    return NULL;
  snprintf (buf, sizeof buf, "%.3f", ms);
  return json_object_new_double_s (ms, buf);
}

static json_object *
string_or_null (const char *s)
{
  return s ? json_object_new_string (s) : NULL;
}

const char *
backup_mode_name (enum copy_mode m)
{
  return m == MODE_FULL ? "full" : m == MODE_RESYNC ? "resync"
    : "incremental";
}

/* How the disk was copied, and where its checksums went. */
static void
add_mode (json_object *o, const struct disk *d)
{
  json_object_object_add (o, "mode", json_object_new_string (
                            backup_mode_name (d->mode)));
  json_object_object_add (o, "checksums", d->sums_written
                          ? json_object_new_string (d->sums_path) : NULL);
}

static void
print_json (FILE *fp, const struct set *s, bool ok)
{
  json_object *j = json_object_new_object ();
  json_object *disks = json_object_new_array ();
  uint64_t total = 0, copied = 0, zeroed = 0;
  bool totals_known = true;
  double seconds = 0;
  char secs[32];
  size_t i;

  for (i = 0; i < s->n; ++i) {
    const struct disk *d = &s->disks[i];
    json_object *c = copy_summary_json (&d->o, &d->r);
    json_object_object_add (c, "name", json_object_new_string (d->name));
    add_mode (c, d);
    if (bmerr_failed (&d->error))
      json_object_object_add (c, "error",
                              json_object_new_string (d->error.msg));
    json_object_array_add (disks, c);
    totals_known &= d->r.sizes_known;
    total += d->r.total;
    copied += d->r.copied;
    zeroed += d->r.zeroed;
    if (d->r.seconds > seconds)
      seconds = d->r.seconds;
  }
  snprintf (secs, sizeof secs, "%.3f", seconds);
  json_object_object_add (j, "result",
                          json_object_new_string (result_name (s, ok)));
  json_object_object_add (j, "checkpoint",
                          json_object_new_string (s->checkpoint));
  json_object_object_add (j, "incremental", string_or_null (s->incremental));
  json_object_object_add (j, "cut-ms", ms_json (s->cut_made, s->cut_ms));
  json_object_object_add (j, "frozen-ms",
                          ms_json (s->thawed, s->frozen_ms));
  /* One disk: its copy's keys, as dirtybitmap copy gives them. */
  if (s->n == 1) {
    json_object *c = json_object_array_get_idx (disks, 0);
    json_object_object_foreach (c, key, val)
      if (strcmp (key, "result") != 0 && strcmp (key, "name") != 0)
        json_object_object_add (j, key, json_object_get (val));
  }
  else {
    json_object_object_add (j, "bytes-total", totals_known
                            ? json_object_new_uint64 (total) : NULL);
    json_object_object_add (j, "bytes-copied",
                            json_object_new_uint64 (copied));
    json_object_object_add (j, "bytes-zeroed",
                            json_object_new_uint64 (zeroed));
    json_object_object_add (j, "seconds",
                            json_object_new_double_s (seconds, secs));
    json_object_object_add (j, "error", bmerr_failed (&s->error)
                            ? json_object_new_string (s->error.msg) : NULL);
  }
  json_object_object_add (j, "disks", disks);
  copy_print_json (fp, j);
  json_object_put (j);
}

void
report_summary (FILE *fp, const struct set *s, bool ok, bool json)
{
  size_t i;

  if (json) {
    print_json (fp, s, ok);
    return;
  }
  if (!ok)
    return;
  for (i = 0; i < s->n; ++i) {
    if (s->n > 1)
      fprintf (fp, "%s: ", s->disks[i].name);
    if (s->disks[i].mode == MODE_RESYNC)
      fprintf (fp, "resync: read %" PRIu64 " bytes, %" PRIu64 " of them "
               "unchanged; ", s->disks[i].r.read, s->disks[i].r.unchanged);
    else if (s->incremental && s->disks[i].mode == MODE_FULL)
      fprintf (fp, "full copy: ");
    copy_print_summary (fp, &s->disks[i].o, &s->disks[i].r, false);
  }
  fprintf (fp, "cut: %.3f ms (first pause to last resume)", s->cut_ms);
  if (s->thawed)
    fprintf (fp, ", guest frozen %.3f ms", s->frozen_ms);
  fprintf (fp, "\n");
}

void
report_time (double t, char *buf, size_t n)
{
  time_t secs = (time_t) t;
  struct tm tm;
  size_t len;

  gmtime_r (&secs, &tm);
  len = strftime (buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf (buf + len, n - len, ".%06ldZ",
            (long) ((t - (double) secs) * 1e6));
}

static json_object *
manifest_json (const struct set *s, bool ok)
{
  json_object *m = json_object_new_object ();
  json_object *cut = json_object_new_object ();
  json_object *disks = json_object_new_array ();
  char when[64];
  size_t i;

  json_object_object_add (m, "version", json_object_new_int (1));
  json_object_object_add (m, "result",
                          json_object_new_string (result_name (s, ok)));
  json_object_object_add (m, "checkpoint",
                          json_object_new_string (s->checkpoint));
  json_object_object_add (m, "base", string_or_null (s->incremental));
  if (s->cut_made) {
    report_time (s->cut_wall, when, sizeof when);
    json_object_object_add (cut, "time", json_object_new_string (when));
  }
  else
    json_object_object_add (cut, "time", NULL);
  json_object_object_add (cut, "ms", ms_json (s->cut_made, s->cut_ms));
  json_object_object_add (cut, "frozen", json_object_new_boolean (s->thawed));
  json_object_object_add (m, "cut", cut);
  for (i = 0; i < s->n; ++i) {
    const struct disk *d = &s->disks[i];
    json_object *o = json_object_new_object ();
    json_object_object_add (o, "name", json_object_new_string (d->name));
    json_object_object_add (o, "source", json_object_new_string (d->source));
    json_object_object_add (o, "target", json_object_new_string (d->target));
    json_object_object_add (o, "size", d->size
                            ? json_object_new_uint64 (d->size) : NULL);
    json_object_object_add (o, "granularity", d->granularity
                            ? json_object_new_uint64 (d->granularity)
                            : NULL);
    json_object_object_add (o, "bytes-copied",
                            json_object_new_uint64 (d->r.copied));
    json_object_object_add (o, "bytes-zeroed",
                            json_object_new_uint64 (d->r.zeroed));
    add_mode (o, d);
    json_object_object_add (o, "status", json_object_new_string (
      d->r.ok && ok ? "complete"
      : bmerr_failed (&d->r.error) || bmerr_failed (&d->error) ? "failed"
      : d->r.interrupted ? "interrupted" : "incomplete"));
    json_object_array_add (disks, o);
  }
  json_object_object_add (m, "disks", disks);
  return m;
}

int
report_manifest (const struct set *s, bool ok, const char *path)
{
  json_object *m = manifest_json (s, ok);
  char *tmp = NULL;
  FILE *fp = NULL;
  int r = -1;

  if (asprintf (&tmp, "%s.tmp", path) == -1) {
    tmp = NULL;
    goto out;
  }
  fp = fopen (tmp, "w");
  if (fp == NULL)
    goto out;
  copy_print_json (fp, m);
  if (fflush (fp) == EOF || fsync (fileno (fp)) == -1)
    goto out;
  if (fclose (fp) == EOF) {
    fp = NULL;
    goto out;
  }
  fp = NULL;
  if (rename (tmp, path) == -1)
    goto out;
  r = 0;

 out:
  if (r == -1) {
    bm_error ("backup: --manifest %s: %s", path,
              strerror (errno));
    if (fp)
      fclose (fp);
    if (tmp)
      unlink (tmp);
  }
  free (tmp);
  json_object_put (m);
  return r;
}

int
report_manifest_ready (const char *path, struct bmerr *err)
{
  struct stat sb, dsb;
  char *tmp = NULL, *dcopy = NULL;
  int fd, r = -1;

  bmerr_clear (err);
  if (asprintf (&tmp, "%s.tmp", path) == -1 ||
      (dcopy = strdup (path)) == NULL) {
    tmp = NULL;
    goto out;
  }
  /* It is written as FILE.tmp, then renamed over FILE. */
  if (lstat (path, &sb) == 0 && S_ISDIR (sb.st_mode)) {
    bmerr_set (err, EISDIR, "--manifest %s: is a directory", path);
    goto out;
  }
  fd = open (tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd == -1 && errno == EEXIST)
    fd = open (tmp, O_WRONLY | O_CLOEXEC);
  if (fd == -1) {
    bmerr_set (err, errno, "--manifest %s: cannot write %s: %s", path, tmp,
               strerror (errno));
    goto out;
  }
  close (fd);
  unlink (tmp);
  /* A sticky directory keeps another user's FILE from being replaced. */
  if (lstat (path, &sb) == 0 && stat (dirname (dcopy), &dsb) == 0 &&
      (dsb.st_mode & S_ISVTX) && geteuid () != 0 &&
      sb.st_uid != geteuid () && dsb.st_uid != geteuid ()) {
    bmerr_set (err, EPERM, "--manifest %s: cannot be replaced: it belongs "
               "to another user, in a sticky directory", path);
    goto out;
  }
  r = 0;

 out:
  if (r == -1 && !bmerr_failed (err))
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  free (tmp);
  free (dcopy);
  return r;
}
