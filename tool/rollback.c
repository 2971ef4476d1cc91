/* SPDX-License-Identifier: BSD-3-Clause */
/* rollback.c: dirtybitmap rollback: the live disks of a machine, served
 * by nbdkit with nbdkit-dirtybitmap-filter, brought back in place to a
 * point of a backup repository, writing only what changed since it.
 *
 * A disk's tracking base is the newest point whose bitmap the disk
 * has, consistent and recording: the newest point's, as backup --repo
 * keeps it, or an older one's (a disk restored from that point with
 * restore-checkpoint=).  A chunk of the disk can differ from POINT
 * only if that bitmap has it dirty (written since the base) or if the
 * checksums of POINT and of the base differ there (it changed between
 * them): those chunks are written, read from POINT's image, nothing
 * else.  The bitmap is read as a backup reads it: a view begun with it
 * (no checkpoint added), its map read, the view ended.  With tracking
 * lost (no such bitmap, or no such point whose checksums can be
 * compared), the disk is read once instead, each chunk hashed, and the
 * chunks whose digests differ from POINT's checksums are the ones
 * written.
 *
 * The writes go through the server, so the filter records them: the
 * checkpoint stays exact, and the next backup into the repository is
 * an incremental.  The copies themselves, and their check against
 * POINT's checksums, are restore's (restore.h).
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <getopt.h>
#include <unistd.h>

#include <json-c/json.h>

#include "backup/internal.h"
#include "control-client.h"
#include "copy/copy.h"
#include "copy/image.h"
#include "dirtybitmap.h"
#include "msg.h"
#include "repo.h"
#include "restore.h"
#include "sums.h"
#include "util.h"

#define ROLLBACK_VIEW "rollback"

static void __attribute__ ((noreturn))
rollback_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s rollback [-p] [--output=human|json] [--requests N]\n"
"                   DIR[@POINT] --control SOCKET SOURCE_URI\n"
"       %s rollback [OPTIONS] DIR[@POINT]\n"
"                   --disk control=SOCKET,source=URI,name=NAME [--disk ...]\n"
"\n"
"Bring the live disks, served by nbdkit with nbdkit-dirtybitmap-filter,\n"
"back to POINT of the backup repository DIR (the newest by default), in\n"
"place, through their servers, writing only what changed since POINT:\n"
"what the disk's checkpoint bitmap (the newest point's, or an older\n"
"one's) recorded since its point, and the chunks whose checksums differ\n"
"between POINT and that point.\n"
"With tracking lost, each disk is read once and compared with POINT's\n"
"checksums.  No client may write the disks meanwhile (stop the\n"
"machine).  The writes are recorded by the filter: the next backup\n"
"into DIR is an incremental.\n"
"\n"
"  --control SOCKET      the filter's control socket (one disk)\n"
"  --disk control=SOCKET,source=URI,name=NAME\n"
"                        a disk of the point, and its server\n"
"  -p, --progress        show progress on stderr\n"
"  --output=human|json   the result as text (default) or JSON\n"
"  --requests N          requests in flight per connection (default %d)\n"
"\n"
"Example:\n"
"  %s rollback /backup/vm1@tue --control /run/os.ctl \\\n"
"      nbd+unix:///?socket=/run/os.sock\n",
           prog, prog, COPY_DEFAULT_REQUESTS, prog);
  exit (status);
}

/* A live disk: its server, and which job of st writes it. */
struct live {
  char *control;
  char *source;
  char *name;                   /* NULL: the point's one disk */
};

struct rollback {
  struct restore st;
  struct live *disks;
  size_t n;
  struct repo_points points;    /* to find the newest */
  const struct repo_point *newest;
};

/*----------------------------------------------------------------------
 * The command line.
 */

static int
add_live (struct rollback *rb, const char *control, const char *source,
          const char *name)
{
  struct live *disks = realloc (rb->disks, (rb->n + 1) * sizeof *disks);

  if (disks == NULL) {
    bm_error ("%m");
    return EXIT_FAILURE;
  }
  rb->disks = disks;
  rb->disks[rb->n] = (struct live) { 0 };
  if ((rb->disks[rb->n].control = strdup (control)) == NULL ||
      (rb->disks[rb->n].source = strdup (source)) == NULL ||
      (name && (rb->disks[rb->n].name = strdup (name)) == NULL)) {
    bm_error ("%m");
    rb->n++;
    return EXIT_FAILURE;
  }
  rb->n++;
  return 0;
}

/* One --disk value, read as backup reads it (backup/set.c). */
static int
add_spec (struct rollback *rb, const char *spec)
{
  struct disk d = { .fd = -1 };
  struct bmerr err = { 0 };
  int r;

  if (disk_parse (spec, true, &d, &err) == -1)
    r = bad_usage ("rollback ", "%s", err.msg);
  else if (d.scratch)
    r = bad_usage ("rollback ", "--disk %s: scratch= is not used by "
                   "rollback", spec);
  else if (d.name == NULL)
    r = bad_usage ("rollback ", "--disk %s: name=NAME (the disk's name in "
                   "the repository) is required", spec);
  else
    r = add_live (rb, d.control, d.source, d.name);
  disk_free (&d);
  return r;
}

/* After the options: DIR[@POINT], and SOURCE_URI with --control. */
static int
parse_operands (struct rollback *rb, int argc, char *argv[],
                const char *control)
{
  int want = control ? 2 : 1;

  if (argc - optind != want)
    return bad_usage ("rollback ", control
                      ? "expecting DIR[@POINT] and SOURCE_URI"
                      : "expecting DIR[@POINT] (and --disk, or --control "
                      "SOCKET SOURCE_URI)");
  if (control && rb->n)
    return bad_usage ("rollback ", "--control and --disk: use one form");
  if (!control && rb->n == 0)
    return bad_usage ("rollback ", "--control SOCKET or --disk is "
                      "required");
  if (control && !is_nbd_uri (argv[optind + 1]))
    return bad_usage ("rollback ", "%s: SOURCE_URI must be an NBD URI "
                      "(nbd://... or nbd+unix://...)", argv[optind + 1]);
  if (control && add_live (rb, control, argv[optind + 1], NULL) != 0)
    return EXIT_FAILURE;
  return restore_open_point (&rb->st, argv[optind]);
}

static int
parse_rollback (int argc, char *argv[], struct rollback *rb)
{
  enum { OUTPUT = 256, DISK, REQUESTS, CONTROL };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "progress", no_argument, NULL, 'p' },
    { "output", required_argument, NULL, OUTPUT },
    { "disk", required_argument, NULL, DISK },
    { "control", required_argument, NULL, CONTROL },
    { "requests", required_argument, NULL, REQUESTS },
    { NULL }
  };
  const char *control = NULL;
  int opt, r = 0, json;

  while (r == 0 &&
         (opt = getopt_long (argc, argv, "hp", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': rollback_usage (EXIT_SUCCESS);
    case 'p': rb->st.progress = true; break;
    case OUTPUT:
      if ((json = parse_output ("rollback ", optarg)) == -1)
        r = EXIT_FAILURE;
      rb->st.json = json == 1;
      break;
    case REQUESTS:
      if (parse_count ("rollback ", "--requests", optarg,
                       COPY_MAX_REQUESTS, &rb->st.requests) == -1)
        r = EXIT_FAILURE;
      break;
    case CONTROL: control = optarg; break;
    case DISK: r = add_spec (rb, optarg); break;
    default: r = try_help ("rollback ");
    }
  }
  return r ? r : parse_operands (rb, argc, argv, control);
}

/* Each live disk a job of st, writing its server. */
static int
add_jobs (struct rollback *rb)
{
  struct bmerr err = { 0 };
  size_t i;
  int r;

  if (repo_load (&rb->st.repo, &rb->points, &err) == -1) {
    bm_error ("rollback: %s", err.msg);
    return EXIT_FAILURE;
  }
  /* The point was found (restore_open_point): there is a newest. */
  rb->newest = &rb->points.p[rb->points.n - 1];
  if (rb->n == 1 && rb->disks[0].name == NULL && rb->st.point.n != 1)
    return bad_usage ("rollback ", "point %s has %zu disks: give each "
                      "with --disk control=SOCKET,source=URI,name=NAME",
                      rb->st.point.name, rb->st.point.n);
  for (i = 0; i < rb->n; ++i)
    if ((r = restore_add_job (&rb->st, rb->disks[i].name,
                              rb->disks[i].source)) != 0)
      return r;
  return 0;
}

/*----------------------------------------------------------------------
 * What to write.
 */

/* The server's query of disk i, which must have no view open nor a
 * restore running: its bitmaps in *bitmaps (a new reference).  -1
 * after saying why.
 */
static int
ask_server (const struct rollback *rb, size_t i, json_object **bitmaps)
{
  const char *name = rb->st.jobs[i].d->name;
  json_object *ret = NULL, *v;
  struct bmerr err = { 0 };
  int r;

  r = control_call (rb->disks[i].control, control_request ("query", NULL),
                    &ret, &err);
  if (r != 0) {
    if (r == 1)
      bm_error ("rollback: disk %s: %s: query: %s", name,
                rb->disks[i].control, err.msg);
    return -1;
  }
  if ((json_object_object_get_ex (ret, "backup", &v) && v) ||
      (json_object_object_get_ex (ret, "restore", &v) && v &&
       !json_object_get_boolean (json_object_object_get (v, "complete")))) {
    bm_error ("rollback: disk %s: %s: %s", name, rb->disks[i].control,
              json_object_object_get (ret, "backup")
              ? "a backup is running on it: wait for it to end"
              : "it is being restored (restore-from): wait for the restore "
                "to complete");
    json_object_put (ret);
    return -1;
  }
  *bitmaps = json_object_get (json_object_object_get (ret, "bitmaps"));
  json_object_put (ret);
  return 0;
}

/* Why bitmap name of the query's list cannot say what changed since
 * its point, or NULL if it can (consistent and recording).
 */
static const char *
untracked (json_object *bitmaps, const char *name)
{
  size_t k;

  for (k = 0; bitmaps && k < json_object_array_length (bitmaps); ++k) {
    json_object *b = json_object_array_get_idx (bitmaps, k);
    const char *bn = json_object_get_string (json_object_object_get (b,
                                                                     "name"));
    if (bn == NULL || strcmp (bn, name) != 0)
      continue;
    if (!json_object_get_boolean (json_object_object_get (b, "consistent")))
      return "is inconsistent";
    if (!json_object_get_boolean (json_object_object_get (b, "recording")))
      return "is not recording";
    return NULL;
  }
  return "is missing";
}

/* The chunks where the checksums of point base differ from POINT's:
 * 0, or 1 when they cannot be compared, why offered to why
 * (bmerr_first).
 */
static int
diff_sums (const struct rollback *rb, const struct repo_point *base,
           struct restore_job *j, struct bmerr *why)
{
  const struct repo_disk *nd = repo_point_disk (base, j->d->name);
  struct sums *ns = NULL;
  struct bmerr err = { 0 };
  char *path = NULL;
  uint64_t i;
  int r = 1;

  if (nd == NULL) {
    bmerr_first (why, ENOENT, "point %s has no disk %s", base->name,
                 j->d->name);
    return 1;
  }
  if ((path = repo_path (&rb->st.repo, nd->sums)) == NULL ||
      sums_load (path, &ns, &err) == -1)
    bmerr_first (why, err.errnum, "the checksums of point %s: %s",
                 base->name,
                 bmerr_failed (&err) ? err.msg : strerror (ENOMEM));
  else if (ns->disk_size != j->sums->disk_size ||
           ns->chunk != j->sums->chunk ||
           strcmp (ns->checkpoint, base->name) != 0)
    bmerr_first (why, EINVAL, "the checksums of point %s (%s) do not "
                 "describe the disk in the chunks of point %s", base->name,
                 path, rb->st.point.name);
  else {
    for (i = 0; i < ns->n; ++i)
      j->only[i] |= memcmp (ns->digests + i * SUMS_DIGEST,
                            j->sums->digests + i * SUMS_DIGEST,
                            SUMS_DIGEST) != 0;
    r = 0;
  }
  sums_free (ns);
  free (path);
  return r;
}

/* The point whose bitmap disk i has, consistent and recording, the
 * newest such one, whose checksums can be compared with POINT's (the
 * chunks that differ set in only): what changed since it is what the
 * bitmap has dirty.  NULL with why (about the newest point: the first
 * reason is kept) if none.
 */
static const struct repo_point *
choose_base (const struct rollback *rb, size_t i, json_object *bitmaps,
             struct bmerr *why)
{
  struct restore_job *j = &rb->st.jobs[i];
  const char *state;
  size_t k;

  for (k = rb->points.n; k-- > 0;) {
    const struct repo_point *p = &rb->points.p[k];
    if ((state = untracked (bitmaps, p->name)) != NULL) {
      bmerr_first (why, ENOENT, strcmp (state, "is missing") == 0
                   ? "the disk has no bitmap %s" : "bitmap %s %s",
                   p->name, state);
      continue;
    }
    if (diff_sums (rb, p, j, why) == 0)
      return p;
  }
  return NULL;
}

/* The chunks that the bitmap of point base has dirty, read from a
 * view: -1 after saying why.
 */
static int
bitmap_chunks (const struct rollback *rb, size_t i,
               const struct repo_point *base)
{
  struct restore_job *j = &rb->st.jobs[i];
  const char *ctl = rb->disks[i].control;
  json_object *args = json_object_new_object (), *ret = NULL;
  struct bmerr err = { 0 }, end = { 0 };
  char *uri = NULL;
  int fd, r;

  json_object_object_add (args, "name",
                          json_object_new_string (ROLLBACK_VIEW));
  json_object_object_add (args, "bitmap",
                          json_object_new_string (base->name));
  json_object_object_add (args, "end-on-disconnect",
                          json_object_new_boolean (true));
  if ((fd = control_connect (ctl)) == -1) {
    json_object_put (args);
    return -1;
  }
  r = control_call_on (fd, ctl, control_request ("backup-begin", args),
                       &ret, &err);
  json_object_put (ret);
  if (r == 0) {
    if ((uri = endpoint_with_export (rb->disks[i].source,
                                     ROLLBACK_VIEW)) == NULL)
      bmerr_set (&err, ENOMEM, "%s", strerror (ENOMEM));
    else
      copy_dirty_chunks (uri, j->d->size, j->sums->chunk, j->only, &err);
    if (bmerr_failed (&err))
      r = -1;
  }
  if (bmerr_failed (&err))
    bm_error ("rollback: disk %s: cannot read what bitmap %s recorded: %s",
              j->d->name, base->name, err.msg);
  /* Ended before anything is written (closing the connection would
   * end it too: end-on-disconnect).
   */
  if (r != -1 || bmerr_failed (&err)) {
    args = json_object_new_object ();
    json_object_object_add (args, "name",
                            json_object_new_string (ROLLBACK_VIEW));
    ret = NULL;
    if (control_call_on (fd, ctl, control_request ("backup-end", args),
                         &ret, &end) == 1)
      bm_error ("rollback: disk %s: backup-end: %s", j->d->name, end.msg);
    json_object_put (ret);
  }
  close (fd);
  free (uri);
  return r == 0 ? 0 : -1;
}

/* With tracking lost: the disk read once, and compared. */
static int
hash_chunks (const struct rollback *rb, size_t i)
{
  struct restore_job *j = &rb->st.jobs[i];
  uint8_t *digests = malloc (j->sums->n * SUMS_DIGEST + 1);
  struct image_result ir = { 0 };
  uint64_t k;
  int r = -1;

  if (digests == NULL) {
    bm_error ("%m");
    return -1;
  }
  if (image_hash (j->target, IMAGE_RAW, j->sums, j->sums->chunk,
                  j->d->size, digests, rb->st.progress, &ir) == 0) {
    for (k = 0; k < j->sums->n; ++k)
      j->only[k] = memcmp (digests + k * SUMS_DIGEST,
                           j->sums->digests + k * SUMS_DIGEST,
                           SUMS_DIGEST) != 0;
    r = 0;
  }
  else if (!ir.interrupted)
    bm_error ("rollback: disk %s: reading %s: %s", j->d->name, j->target,
              bmerr_failed (&ir.error) ? ir.error.msg
              : "it is not the disk's size");
  free (digests);
  return r;
}

/* Decide which chunks of disk i to write. */
static int
plan_one (struct rollback *rb, size_t i)
{
  struct restore_job *j = &rb->st.jobs[i];
  const struct repo_point *base;
  json_object *bitmaps = NULL;
  uint64_t k;
  int r;

  if ((j->only = calloc (j->sums->n, 1)) == NULL) {
    bm_error ("%m");
    return -1;
  }
  if (ask_server (rb, i, &bitmaps) == -1)
    return -1;
  base = choose_base (rb, i, bitmaps, &j->lost);
  json_object_put (bitmaps);
  if (base) {
    bmerr_clear (&j->lost);
    j->tracking = "bitmap";
    j->tracking_base = base->name;
    r = bitmap_chunks (rb, i, base);
  }
  else {
    j->tracking = "checksums";
    bm_error ("rollback: disk %s: tracking lost (%s): reading the whole "
              "disk to compare it with the checksums of point %s",
              j->d->name,
              bmerr_failed (&j->lost) ? j->lost.msg : "out of memory",
              rb->st.point.name);
    r = hash_chunks (rb, i);
  }
  for (k = 0; r == 0 && k < j->sums->n; ++k)
    j->nr_only += j->only[k];
  return r;
}

/*----------------------------------------------------------------------
 * The run.
 */

static void
free_rollback (struct rollback *rb)
{
  size_t i;

  for (i = 0; i < rb->n; ++i) {
    free (rb->disks[i].control);
    free (rb->disks[i].source);
    free (rb->disks[i].name);
  }
  free (rb->disks);
  repo_points_free (&rb->points);
  restore_free (&rb->st);
}

static void
print_json (const struct rollback *rb, size_t done, bool ok)
{
  json_object *j = restore_json (&rb->st, done, ok);

  json_object_object_add (j, "newest",
                          json_object_new_string (rb->newest->name));
  copy_print_json (stdout, j);
  json_object_put (j);
}

int
do_rollback (int argc, char *argv[])
{
  struct rollback rb = { .st = RESTORE_INIT ("rollback") };
  struct bmerr err = { 0 };
  int status;
  size_t i, done = 0;
  bool ok = false;

  if ((status = parse_rollback (argc, argv, &rb)) != 0 ||
      (status = add_jobs (&rb)) != 0)
    goto out;
  status = EXIT_FAILURE;
  rb.st.refuse_bad = true;
  if (restore_check_all (&rb.st) == -1)
    goto out;
  if (copy_signals_trap (&err) == -1) {
    bm_error ("rollback: %s", err.msg);
    goto out;
  }
  for (i = 0; i < rb.n && !copy_interrupted (); ++i)
    if (plan_one (&rb, i) == -1)
      break;
  if (i == rb.n && !copy_interrupted ())
    done = restore_run (&rb.st, &ok);
  if (copy_interrupted ())
    bm_error ("rollback: interrupted");
  copy_signals_release ();
  if (rb.st.json)
    print_json (&rb, done, ok);
  status = ok ? EXIT_SUCCESS : EXIT_FAILURE;

 out:
  free_rollback (&rb);
  if (fflush (stdout) == EOF)
    status = EXIT_FAILURE;
  return status;
}
