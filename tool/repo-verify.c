/* SPDX-License-Identifier: BSD-3-Clause */
/* repo-verify.c: dirtybitmap verify DIR[@POINT], the repository form
 * of verify (verify.c reads the command line and chooses the form):
 * each disk of the point, or of every point, read whole and checked
 * against the point's checksums, and the result kept in the point's
 * record for list and for the next backup (repo-verified.c).
 *
 * Each disk's image is served read-only with its chain by qemu-nbd and
 * hashed by the copy engine, several requests in flight (image_hash,
 * copy/image.h); the digests are compared with the checksums and the
 * ranges that differ named.  A disk that cannot be read at all (its
 * image or checksums missing or damaged) is bad as a whole.  Each bad
 * range is attributed to the point whose own image holds it (the
 * point's, or one it reads through: qemu-img map), and the points
 * after it that read those clusters through the same image are named:
 * they are bad there too.  The result and its time are recorded once
 * every disk of the point was read; an interrupted point records
 * nothing.
 *
 * A verify of every point keeps a session (DIR/verify.json) until it
 * ends; with --resume, a run after an interrupted one skips the points
 * whose result was recorded since that session began, and counts their
 * recorded results in its own.
 */

#include <config.h>

#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include <json-c/json.h>

#include "copy/copy.h"
#include "copy/image.h"
#include "dirtybitmap.h"
#include "msg.h"
#include "repo.h"
#include "sums.h"
#include "util.h"

/* One disk of the point being verified. */
struct vdisk {
  const struct repo_disk *d;
  char *image, *sums_path;
  struct sums *sums;
  uint8_t *digests;
  bool hashed;                  /* every chunk read and compared */
  struct bmerr error;           /* why it could not be, if it failed */
  uint64_t differing;           /* chunks */
  struct repo_source *src;      /* with differing: where it read from */
  size_t nsrc;
};

/* The sources of a later point's disk, kept for the run. */
struct cached {
  const struct repo_point *p;
  const char *disk;
  struct repo_source *src;
  size_t n;
  bool failed;
};

struct vrun {
  struct repo repo;
  struct repo_points all;       /* oldest first */
  bool progress, json, resume;
  char *since;                  /* the resumed session's start, or NULL */
  struct cached *cache;
  size_t ncache;
  json_object *points;          /* JSON: each point's result */
  size_t bad;                   /* points found (or recorded) bad */
  bool ran;                     /* the points were gone through */
  bool interrupted;
};

static void __attribute__ ((format (printf, 2, 3)))
fail (struct vdisk *v, const char *fs, ...)
{
  va_list args;

  va_start (args, fs);
  bmerr_vfirst (&v->error, 0, fs, args);
  va_end (args);
}

/*----------------------------------------------------------------------
 * Reading one disk of a point.
 */

/* Its checksums, which must describe its image at the point. */
static int
load_sums (const struct vrun *run, const struct repo_point *p,
           struct vdisk *v)
{
  const struct sums *s;

  if ((v->sums_path = repo_path (&run->repo, v->d->sums)) == NULL ||
      (v->image = repo_path (&run->repo, v->d->image)) == NULL) {
    fail (v, "%s", strerror (ENOMEM));
    return -1;
  }
  if (sums_load (v->sums_path, &v->sums, &v->error) == -1)
    return -1;
  s = v->sums;
  if (s->disk_size != v->d->size || s->chunk != v->d->chunk ||
      strcmp (s->checkpoint, p->name) != 0) {
    fail (v, "%s: damaged: the checksums of a disk of %" PRIu64 " bytes "
          "at %s, in chunks of %" PRIu64 ", but the point's record says %"
          PRIu64 " bytes at %s, chunks of %" PRIu64, v->sums_path,
          s->disk_size, s->checkpoint, s->chunk, v->d->size, p->name,
          v->d->chunk);
    return -1;
  }
  return 0;
}

/* Read disk v of point p whole and compare: -1 if interrupted. */
static int
read_disk (struct vrun *run, const struct repo_point *p, struct vdisk *v)
{
  struct image_result r;
  struct bmerr err = { 0 };

  if (load_sums (run, p, v) == -1)
    return 0;
  if (access (v->image, F_OK) == -1) {
    fail (v, "%s: %s", v->image, strerror (errno));
    return 0;
  }
  if ((v->digests = malloc (v->sums->n * SUMS_DIGEST + 1)) == NULL) {
    fail (v, "%s", strerror (ENOMEM));
    return 0;
  }
  if (image_hash (v->image, IMAGE_QCOW2, v->sums, v->sums->chunk,
                  v->sums->disk_size, v->digests, run->progress, &r) == 0) {
    v->hashed = true;
    v->differing = r.differing;
  }
  else if (r.wrong_size)
    fail (v, "%s is %" PRIu64 " bytes, but its record and checksums say %"
          PRIu64, v->image, r.size, v->d->size);
  else if (!r.interrupted)
    fail (v, "%s", bmerr_failed (&r.error) ? r.error.msg
          : "not read to the end");
  if (r.interrupted)
    return -1;
  if (v->differing && repo_sources (&run->repo, v->d, &v->src, &v->nsrc,
                                    &err) == -1)
    bm_debug ("verify: %s: where it reads from is not known: %s",
              v->image, err.msg);
  return 0;
}

static void
free_vdisk (struct vdisk *v)
{
  free (v->image);
  free (v->sums_path);
  sums_free (v->sums);
  free (v->digests);
  repo_sources_free (v->src, v->nsrc);
}

/*----------------------------------------------------------------------
 * The ranges found bad.
 */

static bool
differs (const struct vdisk *v, uint64_t i)
{
  return memcmp (v->digests + i * SUMS_DIGEST,
                 v->sums->digests + i * SUMS_DIGEST, SUMS_DIGEST) != 0;
}

/* The point whose image holds chunk i of v (NULL: none), or, when
 * qemu-img map could not say, the point p itself.
 */
static const char *
chunk_in (const struct repo_point *p, const struct vdisk *v, uint64_t i)
{
  const struct repo_source *s;

  if (v->src == NULL)
    return p->name;
  s = repo_source_at (v->src, v->nsrc, i * v->sums->chunk);
  return s ? s->point : NULL;
}

static bool
same_name (const char *a, const char *b)
{
  return a == b || (a && b && strcmp (a, b) == 0);
}

static int
add_bad (struct repo_bad **bad, size_t *n, const char *disk,
         uint64_t offset, uint64_t length, const char *in)
{
  struct repo_bad *more = realloc (*bad, (*n + 1) * sizeof *more);

  if (more == NULL)
    return -1;
  *bad = more;
  more[(*n)++] = (struct repo_bad) { (char *) disk, offset, length,
                                     (char *) in };
  return 0;
}

/* v's bad ranges (names borrowed from v and p), each of one holder.
 * A disk not read is bad whole, held by the point itself; so is a
 * chunk whose holder is not known.
 */
static int
bad_ranges (const struct repo_point *p, const struct vdisk *v,
            struct repo_bad **bad, size_t *n)
{
  const struct sums *s = v->sums;
  uint64_t i, start;
  const char *in;

  if (!v->hashed)
    return add_bad (bad, n, v->d->name, 0, v->d->size, p->name);
  for (i = 0; i < s->n; ++i) {
    if (!differs (v, i))
      continue;
    in = chunk_in (p, v, i);
    for (start = i; i + 1 < s->n && differs (v, i + 1) &&
           same_name (chunk_in (p, v, i + 1), in); ++i)
      ;
    if (add_bad (bad, n, v->d->name, start * s->chunk,
                 MIN ((i + 1) * s->chunk, s->disk_size) - start * s->chunk,
                 in) == -1)
      return -1;
  }
  return 0;
}

/* The sources of point p's disk (cached), or NULL if not known. */
static const struct cached *
sources_of (struct vrun *run, const struct repo_point *p, const char *disk)
{
  const struct repo_disk *d = repo_point_disk (p, disk);
  struct bmerr err = { 0 };
  struct cached *c;
  size_t i;

  for (i = 0; i < run->ncache; ++i)
    if (run->cache[i].p == p && strcmp (run->cache[i].disk, disk) == 0)
      return run->cache[i].failed ? NULL : &run->cache[i];
  if (d == NULL ||
      (c = realloc (run->cache, (run->ncache + 1) * sizeof *c)) == NULL)
    return NULL;
  run->cache = c;
  c = &c[run->ncache++];
  *c = (struct cached) { .p = p, .disk = d->name };
  c->failed = repo_sources (&run->repo, d, &c->src, &c->n, &err) == -1;
  if (c->failed)
    bm_debug ("verify: point %s, disk %s: %s", p->name, disk, err.msg);
  return c->failed ? NULL : c;
}

/* Does point r read a cluster of b through b->in's image? */
static bool
reads_through (struct vrun *run, const struct repo_point *r,
               const struct repo_bad *b, uint64_t chunk)
{
  const struct cached *c = sources_of (run, r, b->disk);
  const struct repo_source *s;
  uint64_t off;

  if (c == NULL || b->in == NULL)
    return false;
  for (off = b->offset; off < b->offset + b->length; off += chunk)
    if ((s = repo_source_at (c->src, c->n, off)) != NULL &&
        same_name (s->point, b->in))
      return true;
  return false;
}

/* The points after point k that read b through its image: an array
 * of their names.
 */
static json_object *
dependents (struct vrun *run, size_t k, const struct repo_bad *b,
            uint64_t chunk)
{
  json_object *a = json_object_new_array ();
  size_t i;

  for (i = k + 1; i < run->all.n; ++i)
    if (reads_through (run, &run->all.p[i], b, chunk))
      json_object_array_add (a, json_object_new_string (run->all.p[i].name));
  return a;
}

/* "c3, c4", malloced (NULL: out of memory). */
static char *
joined (json_object *a)
{
  char *out = NULL;
  size_t len = 0, i;
  FILE *fp = open_memstream (&out, &len);

  if (fp == NULL)
    return NULL;
  for (i = 0; i < json_object_array_length (a); ++i)
    fprintf (fp, "%s%s", i ? ", " : "",
             json_object_get_string (json_object_array_get_idx (a, i)));
  fclose (fp);
  return out;
}

/*----------------------------------------------------------------------
 * Saying it.
 */

static void
say_bad (struct vrun *run, size_t k, const struct repo_bad *b,
         uint64_t chunk, json_object *list)
{
  const struct repo_point *p = &run->all.p[k];
  json_object *deps = dependents (run, k, b, chunk), *o;
  const size_t n = json_object_array_length (deps);
  char *names = n ? joined (deps) : NULL;

  if (!run->json)
    bm_error ("verify: point %s, disk %s: differs: offset %" PRIu64 ", %"
              PRIu64 " bytes (%s%s%s%s%s)", p->name, b->disk, b->offset,
              b->length, b->in ? "held by the image of point " : "read as "
              "zeroes: no image holds it", b->in ? b->in : "",
              names ? n > 1 ? "; points " : "; point " : "",
              names ? names : "", names ? n > 1 ? " read it through that "
              "image, and are bad there too" : " reads it through that "
              "image, and is bad there too" : "");
  else {
    o = json_object_new_object ();
    json_object_object_add (o, "disk", json_object_new_string (b->disk));
    json_object_object_add (o, "offset", json_object_new_uint64 (b->offset));
    json_object_object_add (o, "length", json_object_new_uint64 (b->length));
    json_object_object_add (o, "in", b->in ? json_object_new_string (b->in)
                            : NULL);
    json_object_object_add (o, "read-through-by", json_object_get (deps));
    json_object_array_add (list, o);
  }
  json_object_put (deps);
  free (names);
}

static void
say_disk (const struct vrun *run, const struct repo_point *p,
          const struct vdisk *v)
{
  if (bmerr_failed (&v->error))
    bm_error ("verify: point %s, disk %s: %s", p->name, v->d->name,
              v->error.msg);
  else if (v->differing)
    bm_error ("verify: point %s, disk %s: %" PRIu64 " of %" PRIu64
              " chunks read from %s differ from its checksums %s:",
              p->name, v->d->name, v->differing, v->sums->n, v->image,
              v->sums_path);
  else if (!run->json)
    printf ("point %s, disk %s: verified: all %" PRIu64 " chunks match "
            "its checksums\n", p->name, v->d->name, v->sums->n);
}

/* The point's result: for JSON, an object added to run->points. */
static json_object *
point_json (struct vrun *run, const struct repo_point *p, const char *result,
            const char *time, bool ok)
{
  json_object *o = json_object_new_object ();

  json_object_object_add (o, "name", json_object_new_string (p->name));
  json_object_object_add (o, "result", json_object_new_string (result));
  json_object_object_add (o, "time", time ? json_object_new_string (time)
                          : NULL);
  json_object_object_add (o, "ok", json_object_new_boolean (ok));
  json_object_array_add (run->points, o);
  return o;
}

/*----------------------------------------------------------------------
 * A point.
 */

/* Say, record and count the result of point k, its n disks read. */
static void
conclude (struct vrun *run, size_t k, struct vdisk *v, size_t n)
{
  const struct repo_point *p = &run->all.p[k];
  struct repo_bad *bad = NULL;
  struct bmerr err = { 0 };
  json_object *o, *list = json_object_new_array ();
  json_object *errors = json_object_new_array ();
  size_t nbad = 0, i, from;
  char now[64];
  bool nomem = false, read_bad = false;

  repo_time_now (now, sizeof now);
  for (i = 0; i < n; ++i) {
    say_disk (run, p, &v[i]);
    from = nbad;
    if (!bmerr_failed (&v[i].error) && !v[i].differing)
      continue;
    nomem |= bad_ranges (p, &v[i], &bad, &nbad) == -1;
    read_bad |= v[i].hashed;
    for (; from < nbad; ++from)
      if (v[i].hashed || run->json)
        say_bad (run, k, &bad[from], v[i].d->chunk, list);
    if (bmerr_failed (&v[i].error) && run->json)
      json_object_array_add (errors,
                             json_object_new_string (v[i].error.msg));
  }
  if (nomem)
    bmerr_set (&err, ENOMEM, "%s", strerror (ENOMEM));
  if (nomem || repo_record_verified (&run->repo, p->name, now, nbad == 0,
                                     bad, nbad, &err) == -1)
    bm_error ("verify: point %s: its result could not be recorded: %s",
              p->name, err.msg);
  run->bad += nbad > 0;
  if (!run->json && nbad)
    bm_error ("verify: point %s: BAD, recorded at %s", p->name, now);
  else if (!run->json)
    printf ("point %s: verified ok at %s\n", p->name, now);
  else {
    o = point_json (run, p, nbad ? "bad" : "ok", now, nbad == 0);
    json_object_object_add (o, "differing", list);
    json_object_object_add (o, "errors", errors);
    list = errors = NULL;
  }
  if (read_bad && k == run->all.n - 1)
    bm_error ("verify: point %s is the newest: the next backup into %s "
              "copies what is bad in it again", p->name, run->repo.dir);
  json_object_put (list);
  json_object_put (errors);
  free (bad);
}

/* Verify point k: -1 if interrupted (nothing recorded). */
static int
verify_point (struct vrun *run, size_t k)
{
  const struct repo_point *p = &run->all.p[k];
  struct vdisk *v = calloc (p->n ? p->n : 1, sizeof *v);
  size_t i;
  int r = 0;

  if (v == NULL) {
    bm_error ("verify: %s", strerror (ENOMEM));
    run->bad++;
    return 0;
  }
  for (i = 0; i < p->n && r == 0; ++i) {
    v[i].d = &p->disks[i];
    r = read_disk (run, p, &v[i]);
  }
  if (r == 0)
    conclude (run, k, v, p->n);
  for (i = 0; i < p->n; ++i)
    free_vdisk (&v[i]);
  free (v);
  return r;
}

/* Skip point p (--resume): its result was recorded in this session. */
static bool
skip (struct vrun *run, const struct repo_point *p)
{
  if (run->since == NULL || !p->verified ||
      strcmp (p->verified_time, run->since) < 0)
    return false;
  run->bad += !p->verified_ok;
  if (run->json)
    point_json (run, p, "skipped", p->verified_time, p->verified_ok);
  else if (p->verified_ok)
    printf ("point %s: skipped: verified ok at %s, since this verify "
            "began (at %s)\n", p->name, p->verified_time, run->since);
  else
    bm_error ("verify: point %s: skipped: found BAD at %s, since this "
              "verify began (at %s)", p->name, p->verified_time,
              run->since);
  return true;
}

/*----------------------------------------------------------------------
 * The run.
 */

/* DIR[@POINT] opened: every point loaded; *only the index of POINT,
 * or run->all.n for every point.
 */
static int
open_repo (struct vrun *run, const char *spec, size_t *only)
{
  struct repo_point chosen = { 0 };
  struct bmerr err = { 0 };
  char *dir = NULL, *point = NULL;
  int r = -1;

  if (repo_parse_spec (spec, &dir, &point) == -1)
    bmerr_set (&err, ENOMEM, "%s", strerror (ENOMEM));
  else if (repo_open (dir, false, &run->repo, &err) == -1) {
    if (err.errnum == ENOTDIR || err.errnum == ENOENT)
      bmerr_prefix (&err, "DIR[@POINT] must be a repository (to verify an "
                    "image against its checksums, give both: IMAGE SUMS)");
  }
  else if ((point == NULL || repo_choose (&run->repo, point, &chosen,
                                          &err) == 0) &&
           repo_load (&run->repo, &run->all, &err) == 0)
    r = 0;
  /* POINT's index (it is there: the lock keeps writers out). */
  for (*only = 0; r == 0 && point && *only < run->all.n; ++*only)
    if (strcmp (run->all.p[*only].name, point) == 0)
      break;
  if (point == NULL)
    *only = run->all.n;
  if (r == -1)
    bm_error ("verify: %s", err.msg);
  else if (run->all.n == 0) {
    bm_error ("verify: %s has no points yet", run->repo.dir);
    r = -1;
  }
  repo_point_free (&chosen);
  free (dir);
  free (point);
  return r;
}

/* Every point (only == run->all.n), or one, in turn. */
static void
verify_all (struct vrun *run, size_t only)
{
  size_t k;

  for (k = 0; k < run->all.n && !run->interrupted; ++k) {
    if (only < run->all.n && k != only)
      continue;
    if (copy_interrupted () || (!skip (run, &run->all.p[k]) &&
                                verify_point (run, k) == -1))
      run->interrupted = true;
  }
}

static void
print_json (const struct vrun *run)
{
  json_object *j = json_object_new_object ();

  json_object_object_add (j, "repository",
                          json_object_new_string (run->repo.dir));
  json_object_object_add (j, "result", json_object_new_string (
    run->interrupted ? "interrupted" : run->bad ? "bad" : "ok"));
  json_object_object_add (j, "points", json_object_get (run->points));
  copy_print_json (stdout, j);
  json_object_put (j);
}

/* The session of a verify of every point: begun, or resumed. */
static int
begin (struct vrun *run)
{
  struct bmerr err = { 0 };

  if (repo_session_begin (&run->repo, run->resume, &run->since, &err)
      == -1) {
    bm_error ("verify: %s", err.msg);
    return -1;
  }
  if (run->resume && run->since == NULL)
    bm_error ("verify: --resume: %s has no verify of every point to "
              "resume: verifying every point", run->repo.dir);
  return 0;
}

static void
free_run (struct vrun *run)
{
  size_t i;

  for (i = 0; i < run->ncache; ++i)
    repo_sources_free (run->cache[i].src, run->cache[i].n);
  free (run->cache);
  free (run->since);
  json_object_put (run->points);
  repo_points_free (&run->all);
  repo_close (&run->repo);
}

int
verify_repo (const char *spec, bool progress, bool json, bool resume)
{
  struct vrun run = { .repo = { .lock_fd = -1, .add_fd = -1 },
                      .progress = progress,
                      .json = json, .resume = resume,
                      .points = json_object_new_array () };
  struct bmerr err = { 0 };
  size_t only;
  int status = EXIT_FAILURE;

  if (open_repo (&run, spec, &only) == -1)
    goto out;
  if (resume && only < run.all.n) {
    bad_usage ("verify ", "--resume: it resumes a verify of every point "
               "(DIR, without @POINT)");
    goto out;
  }
  if (copy_signals_trap (&err) == -1) {
    bm_error ("verify: %s", err.msg);
    goto out;
  }
  if (only == run.all.n && begin (&run) == 0) {
    run.ran = true;
    verify_all (&run, only);
    if (!run.interrupted && repo_session_end (&run.repo, &err) == -1)
      bm_error ("verify: %s", err.msg);
  }
  else if (only < run.all.n) {
    run.ran = true;
    verify_all (&run, only);
  }
  copy_signals_release ();
  if (run.interrupted)
    bm_error ("verify: interrupted: %s", only < run.all.n ? "nothing "
              "recorded for the point" : "run it again with --resume to "
              "verify the points left");
  if (json)
    print_json (&run);
  if (run.ran && !run.interrupted && run.bad == 0)
    status = EXIT_SUCCESS;

 out:
  free_run (&run);
  if (fflush (stdout) == EOF)
    status = EXIT_FAILURE;
  return status;
}
