/* SPDX-License-Identifier: BSD-3-Clause */
/* restore-point.c: a point of a backup repository written to targets
 * (restore.h): what dirtybitmap restore and rollback share.
 *
 * Everything that can be known before a byte is written is checked
 * first, for every disk: the point and its record, each disk's
 * checksums (they must describe its image: size, chunk, point), its
 * image's backing chain (every link declares its format: qemu.h), and
 * each target's size (a file that does not exist is created).  Then
 * each disk in turn: its image served read-only by qemu-nbd with its
 * chain, and copied by the copy engine (copy.h: one pass, each byte
 * written once, zeroes as zero operations or holes, several requests
 * in flight), whole or only the chunks asked for, hashing every chunk
 * it reads; the digests are then compared with the checksums, and the
 * ranges that differ named.
 *
 * A target that is an NBD URI is written through its server: one with
 * nbdkit-dirtybitmap-filter records the writes, so the next backup of
 * that disk into the repository is an incremental.
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
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/fs.h>

#include <json-c/json.h>

#include "copy/copy.h"
#include "dirtybitmap.h"
#include "msg.h"
#include "qemu.h"
#include "repo.h"
#include "restore.h"
#include "sums.h"
#include "util.h"

/* Are a and b one place, however spelled? */
static bool
same_place (const char *a, const char *b)
{
  struct endpoint x, y;
  bool same = true;             /* out of memory: the safe answer */

  if (endpoint_of (a, &x) == 0) {
    if (endpoint_of (b, &y) == 0) {
      same = endpoint_same (&x, &y);
      endpoint_free (&y);
    }
    endpoint_free (&x);
  }
  return same;
}

/* --disk NAME=TARGET, or the one TARGET (name NULL). */
int
restore_add_job (struct restore *st, const char *name, const char *target)
{
  const struct repo_disk *d = NULL;
  struct restore_job *jobs;
  size_t i;

  if (name == NULL && st->point.n != 1)
    return bad_usage (st->sub, "point %s has %zu disks: name the target "
                      "of each with --disk NAME=TARGET", st->point.name,
                      st->point.n);
  d = name ? repo_point_disk (&st->point, name) : &st->point.disks[0];
  if (d == NULL) {
    bm_error ("%s: point %s has no disk %s", st->cmd, st->point.name, name);
    return EXIT_FAILURE;
  }
  for (i = 0; i < st->n; ++i) {
    if (st->jobs[i].d == d)
      return bad_usage (st->sub, "--disk %s: given twice", name);
    if (same_place (st->jobs[i].target, target))
      return bad_usage (st->sub, "disks %s and %s have one target (%s, "
                        "%s): each disk needs a target of its own",
                        st->jobs[i].d->name, name, st->jobs[i].target,
                        target);
  }
  jobs = realloc (st->jobs, (st->n + 1) * sizeof *jobs);
  if (jobs == NULL) {
    bm_error ("%m");
    return EXIT_FAILURE;
  }
  st->jobs = jobs;
  st->jobs[st->n++] = (struct restore_job) { .d = d, .target = target };
  return 0;
}

/* DIR[@POINT] opened, its point read. */
int
restore_open_point (struct restore *st, const char *spec)
{
  struct bmerr err = { 0 };
  char *dir, *point;
  int r = 0;

  if (repo_parse_spec (spec, &dir, &point) == -1) {
    bm_error ("%m");
    return EXIT_FAILURE;
  }
  if (repo_open (dir, false, &st->repo, &err) == -1 ||
      repo_choose (&st->repo, point, &st->point, &err) == -1) {
    bm_error ("%s: %s", st->cmd, err.msg);
    r = EXIT_FAILURE;
  }
  free (dir);
  free (point);
  return r;
}

/* The size of a target: 0 and *exists false for a file that is not
 * there; -1 with err.
 */
static int
target_size (const char *target, uint64_t *size, bool *exists,
             struct bmerr *err)
{
  struct stat st;
  int64_t v;
  int fd;

  *exists = true;
  if (is_nbd_uri (target)) {
    if ((v = copy_export_size (target, err)) == -1)
      return -1;
    *size = v;
    return 0;
  }
  if (stat (target, &st) == -1) {
    *exists = false;
    if (errno == ENOENT)
      return 0;
    bmerr_set (err, errno, "%s: %s", target, strerror (errno));
    return -1;
  }
  if (S_ISREG (st.st_mode)) {
    *size = st.st_size;
    return 0;
  }
  if (!S_ISBLK (st.st_mode)) {
    bmerr_set (err, EINVAL, "%s: not a regular file, a block device or an "
               "NBD URI", target);
    return -1;
  }
  if ((fd = open (target, O_RDONLY | O_CLOEXEC)) == -1 ||
      ioctl (fd, BLKGETSIZE64, size) == -1) {
    bmerr_set (err, errno, "%s: %s", target, strerror (errno));
    if (fd >= 0)
      close (fd);
    return -1;
  }
  close (fd);
  return 0;
}

/* The target is not a file of the repository itself. */
static int
check_outside (const struct restore *st, const struct restore_job *j)
{
  char *dir = realpath (st->repo.dir, NULL);
  struct endpoint e;
  int r = 0;

  if (dir && endpoint_of (j->target, &e) == 0) {
    size_t len = strlen (dir);
    if (!e.nbd && e.where && strncmp (e.where, dir, len) == 0 &&
        e.where[len] == '/') {
      bm_error ("%s: %s: it is inside the repository %s", st->cmd, j->target,
                st->repo.dir);
      r = -1;
    }
    endpoint_free (&e);
  }
  free (dir);
  return r;
}

static int
check_target (const struct restore *st, const struct restore_job *j)
{
  struct bmerr err = { 0 };
  uint64_t size = 0;
  bool exists;

  if (check_outside (st, j) == -1)
    return -1;
  if (target_size (j->target, &size, &exists, &err) == -1) {
    bm_error ("%s: %s", st->cmd, err.msg);
    return -1;
  }
  if (exists && size != j->d->size) {
    bm_error ("%s: %s is %" PRIu64 " bytes, but disk %s at point %s "
              "is %" PRIu64 " bytes: a %s writes a target of the "
              "disk's size (nothing was written)", st->cmd, j->target, size,
              j->d->name, st->point.name, j->d->size, st->cmd);
    return -1;
  }
  return 0;
}

/* The disk's checksums, which must describe its image at the point. */
static int
check_sums (const struct restore *st, struct restore_job *j)
{
  struct bmerr err = { 0 };
  struct sums *s;

  if ((j->sums_path = repo_path (&st->repo, j->d->sums)) == NULL ||
      (j->image = repo_path (&st->repo, j->d->image)) == NULL) {
    bm_error ("%m");
    return -1;
  }
  if (sums_load (j->sums_path, &j->sums, &err) == -1) {
    bm_error ("%s: point %s, disk %s: %s", st->cmd, st->point.name, j->d->name,
              err.msg);
    return -1;
  }
  s = j->sums;
  if (s->disk_size != j->d->size || s->chunk != j->d->chunk ||
      strcmp (s->checkpoint, st->point.name) != 0) {
    bm_error ("%s: %s: damaged: the checksums of a disk of %" PRIu64
              " bytes at %s, in chunks of %" PRIu64 ", but the point's "
              "record says %" PRIu64 " bytes at %s, chunks of %" PRIu64,
              st->cmd, j->sums_path, s->disk_size, s->checkpoint, s->chunk,
              j->d->size, st->point.name, j->d->chunk);
    return -1;
  }
  return 0;
}

/* What verify recorded bad in j's disk at the point, said: a rollback
 * (refuse_bad) would write it into the live disk, so it refuses; a
 * restore warns, and goes on (its own check names what differs).
 */
static int
check_recorded (const struct restore *st, const struct restore_job *j)
{
  const struct repo_point *p = &st->point;
  size_t k, n = 0;

  if (!p->verified || p->verified_ok)
    return 0;
  for (k = 0; k < p->nbad; ++k) {
    const struct repo_bad *b = &p->bad[k];
    if (strcmp (b->disk, j->d->name) != 0)
      continue;
    if (n++ == 0)
      bm_error ("%s: point %s, disk %s: verify found it bad on %s%s",
                st->cmd, p->name, j->d->name, p->verified_time,
                st->refuse_bad ? ": nothing was written (roll back to "
                "another point, or verify this one again)" : "");
    bm_error ("%s: disk %s: bad: offset %" PRIu64 ", %" PRIu64 " bytes",
              st->cmd, j->d->name, b->offset, b->length);
  }
  return n && st->refuse_bad ? -1 : 0;
}

int
restore_check_all (struct restore *st)
{
  struct bmerr err = { 0 };
  size_t i;

  for (i = 0; i < st->n; ++i) {
    struct restore_job *j = &st->jobs[i];
    if (check_sums (st, j) == -1)
      return -1;
    if (access (j->image, F_OK) == -1) {
      bm_error ("%s: point %s, disk %s: %s: %s", st->cmd, st->point.name,
                j->d->name, j->image, strerror (errno));
      return -1;
    }
    if (qemu_check_chain (j->image, &err) == -1) {
      bm_error ("%s: point %s, disk %s: %s", st->cmd, st->point.name,
                j->d->name, err.msg);
      return -1;
    }
    if (check_target (st, j) == -1 || check_recorded (st, j) == -1)
      return -1;
  }
  return 0;
}

/* Does chunk i differ from its checksum? */
static bool
differs (const struct restore_job *j, uint64_t i)
{
  return memcmp (j->digests + i * SUMS_DIGEST,
                 j->sums->digests + i * SUMS_DIGEST, SUMS_DIGEST) != 0;
}

/* Call fn for each run of chunks that differ: offset and length. */
static void
each_differing (const struct restore_job *j,
                void (*fn) (uint64_t off, uint64_t len, void *opaque),
                void *opaque)
{
  const struct sums *s = j->sums;
  uint64_t i, start;

  for (i = 0; i < s->n; ++i) {
    if (!differs (j, i))
      continue;
    for (start = i; i + 1 < s->n && differs (j, i + 1); ++i)
      ;
    fn (start * s->chunk, MIN ((i + 1) * s->chunk, s->disk_size)
        - start * s->chunk, opaque);
  }
}

/* Copy disk j's image, served with its chain, to its target. */
int
restore_copy (struct restore *st, struct restore_job *j)
{
  struct copy_sums cs = { .chunk = j->sums->chunk, .n = j->sums->n };
  const char *serve_args[] = { QEMU_NBD_READ_ONLY_ARGS, j->image, NULL };
  struct qemu_nbd q;
  struct bmerr err = { 0 };
  char *name = NULL;
  uint64_t i;

  /* A chunk the copy does not hash stays unlike its checksum; one
   * it is not to write (j->only) stays like it.
   */
  if ((j->digests = malloc (j->sums->n * SUMS_DIGEST + 1)) == NULL ||
      asprintf (&name, "%s (point %s of disk %s)", j->image,
                st->point.name, j->d->name) == -1) {
    bm_error ("%m");
    return -1;
  }
  for (i = 0; i < j->sums->n * SUMS_DIGEST; ++i)
    j->digests[i] = j->only && !j->only[i / SUMS_DIGEST]
      ? j->sums->digests[i] : ~j->sums->digests[i];
  cs.digests = j->digests;
  /* The chain was checked (check_all), and nothing writes it while the
   * repository's lock is held.
   */
  if (qemu_nbd_start (serve_args, &q, &err) == -1) {
    bm_error ("%s: %s", st->cmd, err.msg);
    free (name);
    return -1;
  }
  j->o = (struct copy_options) {
    .source = q.uri, .source_name = name, .target = j->target,
    .full = true, .progress = st->progress, .requests = st->requests,
    .request_size = QEMU_NBD_READ_SIZE, .sums = &cs, .only = j->only,
    .label = st->n > 1 ? j->d->name : NULL,
  };
  copy_run (&j->o, &j->r);
  qemu_nbd_stop (&q, NULL);
  j->o.source = j->image;       /* for the summary: q's URI is gone */
  j->o.source_name = NULL;
  free (name);
  j->copied = j->r.ok;
  for (i = 0; j->copied && i < j->sums->n; ++i)
    j->differing += differs (j, i);
  return j->copied ? 0 : -1;
}

/* Who says a range differs: the subcommand, of which disk. */
struct teller {
  const char *cmd;
  const char *disk;
};

static void
say_range (uint64_t off, uint64_t len, void *opaque)
{
  const struct teller *t = opaque;

  bm_error ("%s: disk %s: differs: offset %" PRIu64 ", %" PRIu64
            " bytes", t->cmd, t->disk, off, len);
}

/* What went wrong with disk j, on stderr. */
static void
restore_say_failure (const struct restore *st, const struct restore_job *j)
{
  struct teller teller = { st->cmd, j->d->name };

  if (!j->copied) {
    copy_print_failure (&j->o, &j->r);
    bm_error ("%s: disk %s: %s does not hold point %s", st->cmd, j->d->name,
              j->target, st->point.name);
    return;
  }
  bm_error ("%s: disk %s: %s does not hold a verified copy of point "
            "%s: %" PRIu64 " of %" PRIu64 " chunks read from %s differ from "
            "its checksums %s:", st->cmd, j->d->name, j->target, st->point.name,
            j->differing, j->sums->n, j->image, j->sums_path);
  each_differing (j, say_range, &teller);
}

static void
add_range (uint64_t off, uint64_t len, void *opaque)
{
  json_object *o = json_object_new_object ();

  json_object_object_add (o, "offset", json_object_new_uint64 (off));
  json_object_object_add (o, "length", json_object_new_uint64 (len));
  json_object_array_add (opaque, o);
}

static json_object *
restore_job_json (const struct restore_job *j)
{
  json_object *o = copy_summary_json (&j->o, &j->r);
  json_object *list = json_object_new_array ();

  json_object_object_add (o, "name", json_object_new_string (j->d->name));
  json_object_object_add (o, "checksums",
                          json_object_new_string (j->sums_path));
  json_object_object_add (o, "verified", json_object_new_boolean (
                            j->copied && j->differing == 0));
  json_object_object_add (o, "chunks", json_object_new_uint64 (j->sums->n));
  json_object_object_add (o, "chunks-differing",
                          json_object_new_uint64 (j->differing));
  if (j->copied)
    each_differing (j, add_range, list);
  json_object_object_add (o, "differing", list);
  if (j->tracking) {
    json_object_object_add (o, "tracking",
                            json_object_new_string (j->tracking));
    json_object_object_add (o, "tracking-base", j->tracking_base ?
                            json_object_new_string (j->tracking_base)
                            : NULL);
    json_object_object_add (o, "tracking-lost", bmerr_failed (&j->lost) ?
                            json_object_new_string (j->lost.msg) : NULL);
    json_object_object_add (o, "chunks-written",
                            json_object_new_uint64 (j->nr_only));
  }
  return o;
}

json_object *
restore_json (const struct restore *st, size_t done, bool ok)
{
  json_object *j = json_object_new_object ();
  json_object *disks = json_object_new_array ();
  size_t i;
  bool interrupted = false;

  for (i = 0; i < done; ++i) {
    json_object_array_add (disks, restore_job_json (&st->jobs[i]));
    interrupted |= st->jobs[i].r.interrupted;
  }
  json_object_object_add (j, "result", json_object_new_string (
    ok ? "complete" : interrupted ? "interrupted" : "failed"));
  json_object_object_add (j, "repository",
                          json_object_new_string (st->repo.dir));
  json_object_object_add (j, "point", json_object_new_string (st->point.name));
  json_object_object_add (j, "time", json_object_new_string (st->point.time));
  json_object_object_add (j, "disks", disks);
  return j;
}

static void
print_text (const struct restore *st, const struct restore_job *j)
{
  const char *who = st->n > 1 ? j->d->name : "";
  const char *colon = st->n > 1 ? ": " : "";

  printf ("%s%s", who, colon);
  copy_print_summary (stdout, &j->o, &j->r, false);
  if (j->only)
    printf ("%s%sverified: the %" PRIu64 " chunks written match the "
            "checksums of point %s\n", who, colon, j->nr_only,
            st->point.name);
  else
    printf ("%s%sverified: all %" PRIu64 " chunks match the checksums of "
            "point %s\n", who, colon, j->sums->n, st->point.name);
}

size_t
restore_run (struct restore *st, bool *ok)
{
  size_t i;

  *ok = true;
  for (i = 0; i < st->n && *ok; ++i) {
    struct restore_job *j = &st->jobs[i];
    if (copy_interrupted ())
      break;
    *ok = restore_copy (st, j) == 0 && j->differing == 0;
    if (!*ok && j->digests)
      restore_say_failure (st, j);
    else if (*ok && !st->json)
      print_text (st, j);
  }
  *ok = *ok && i == st->n;
  return i;
}

void
restore_free (struct restore *st)
{
  size_t i;

  for (i = 0; i < st->n; ++i) {
    struct restore_job *j = &st->jobs[i];
    free (j->image);
    free (j->sums_path);
    free (j->digests);
    free (j->only);
    sums_free (j->sums);
    copy_result_free (&j->r);
  }
  free (st->jobs);
  repo_point_free (&st->point);
  repo_close (&st->repo);
}
