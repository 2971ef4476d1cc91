/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/main.c: dirtybitmap backup: a whole consistent backup of a
 * live machine (one disk or several) in one command.  This file reads
 * the command line and runs the steps; the rest of backup/ holds them
 * (see backup/internal.h):
 *
 *   read the command line: no two disks in one place, the manifest's
 *   place writable
 *   connect to every disk's control socket
 *   check (B on every disk, no view open, leftovers of a killed run)
 *   the cut: freeze the guest, pause all, begin all, resume all, thaw
 *   copy every view to its target, in parallel
 *   end every view (and remove B, with --remove-incremental)
 *   report: the summary, the manifest
 *
 * On any failure (including SIGINT or SIGTERM) every server is
 * resumed, the guest thawed, every view ended and NEW removed, so that
 * the next run starts again from the same bitmap on every disk and
 * nothing is lost; the views are begun with end-on-disconnect, so the
 * servers end them if this process dies before it can.
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

#include "backup/internal.h"
#include "dirtybitmap.h"
#include "util.h"

static void __attribute__ ((noreturn))
backup_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s backup --control SOCKET [OPTIONS] SOURCE_URI TARGET\n"
"       %s backup --disk control=SOCKET,source=URI,target=TARGET\n"
"                        [--disk ...]... [OPTIONS]\n"
"       %s backup --repo DIR --control SOCKET [OPTIONS] SOURCE_URI\n"
"       %s backup --repo DIR --disk control=SOCKET,source=URI,name=NAME\n"
"                        [--disk ...]... [OPTIONS]\n"
"Options: --checkpoint NEW [--incremental BITMAP] [--remove-incremental]\n"
"         [--guest-agent SOCKET | --freeze-command CMD --thaw-command CMD]\n"
"         [--freeze-timeout SECONDS] [--cut-timeout SECONDS]\n"
"         [--manifest FILE] [--sums-dir DIR] [--name VIEW]\n"
"         [--scratch DIR] [-p]\n"
"         [--output=human|json] [--requests N] [--connections N]\n"
"         [--request-size SIZE]\n"
"\n"
"Back up a machine's disks, each served by nbdkit-dirtybitmap-filter\n"
"with a control socket, at one point in time while they go on being\n"
"written: pause every server, freeze a view of each disk and add the\n"
"bitmap NEW to each at one cut, resume, copy each view to its TARGET\n"
"(in parallel), and end the views.  With --incremental, only what\n"
"BITMAP recorded is copied, to a TARGET that holds the previous\n"
"backup; without it, everything, and a missing TARGET file is created.\n"
"On failure, every disk is left as it was: the next run starts again\n"
"from BITMAP.\n"
"\n"
"  --repo DIR            into the backup repository DIR (made if it is\n"
"                        new or empty): each disk's point NEW a qcow2\n"
"                        image of its own, on the newest point's (the\n"
"                        default BITMAP; the first backup is full)\n"
"  --disk control=SOCKET,source=URI,target=TARGET[,name=NAME]\n"
"         [,scratch=DIR]  one disk of the set (\",,\" is a comma); the\n"
"                        first form is one --disk\n"
"  --incremental BITMAP  copy only what BITMAP says changed\n"
"  --checkpoint NEW      the bitmap that records from the cut on: the\n"
"                        next incremental starts from it\n"
"  --remove-incremental  after success, remove BITMAP\n"
"  --guest-agent SOCKET  freeze the guest's file systems for the cut\n"
"                        through qemu-guest-agent (the host side of\n"
"                        its channel)\n"
"  --freeze-command CMD, --thaw-command CMD\n"
"                        or with these commands (sh -c)\n"
"  --freeze-timeout S    longest freeze, and thaw (default %g)\n"
"  --cut-timeout S       longest the disks may be paused (default %g)\n"
"  --manifest FILE       write the record of the set, as JSON\n"
"  --sums-dir DIR        where the checksums of each backup are kept\n"
"                        (default: beside each target)\n"
"  --name VIEW           the views' export name (default " BACKUP_DEFAULT_VIEW ")\n"
"  --scratch DIR         where the servers keep what the views need\n"
"  -p, --output, --requests, --connections, --request-size\n"
"                        as for copy (for each disk)\n"
"\n"
"Examples:\n"
"  %s backup --repo /backup/vm1 --checkpoint mon \\\n"
"      --disk control=/run/vm1-os.ctl,source=nbd+unix:///?socket=/run/vm1-os.sock,name=os\n"
"  %s backup --guest-agent /run/vm1-qga.sock --incremental b3 \\\n"
"      --checkpoint b4 --remove-incremental \\\n"
"      --disk control=/run/vm1-os.ctl,source=nbd+unix:///?socket=/run/vm1-os.sock,target=/backup/vm1-os.img \\\n"
"      --disk control=/run/vm1-db.ctl,source=nbd+unix:///?socket=/run/vm1-db.sock,target=/backup/vm1-db.img\n",
           prog, prog, prog, prog, BACKUP_DEFAULT_FREEZE_TIMEOUT,
           BACKUP_DEFAULT_CUT_TIMEOUT, prog, prog);
  exit (status);
}

/* A number of seconds, more than 0 and at most a day. */
static int
parse_seconds (const char *opt, const char *s, double *out)
{
  char *end;
  double v;

  errno = 0;
  v = strtod (s, &end);
  if (errno || end == s || *end || !(v > 0 && v <= 86400))
    return bad_usage ("backup ", "%s %s: must be a number of seconds, "
                      "more than 0", opt, s);
  *out = v;
  return 0;
}

/* Add one disk to the set from a --disk value (in a repository: no
 * target=).
 */
static int
add_disk (struct set *s, const char *spec, bool repo)
{
  struct disk *disks = realloc (s->disks, (s->n + 1) * sizeof *disks);
  struct disk *d;
  struct bmerr err = { 0 };

  if (disks == NULL) {
    bm_error ("%m");
    return EXIT_FAILURE;
  }
  s->disks = disks;
  d = &s->disks[s->n++];
  *d = (struct disk) { .fd = -1 };
  if (disk_parse (spec, repo, d, &err) == -1)
    return bad_usage ("backup ", "%s", err.msg);
  d->named = d->name != NULL;
  if (d->name == NULL &&
      asprintf (&d->name, "disk%zu", s->n - 1) == -1) {
    d->name = NULL;
    bm_error ("%m");
    return EXIT_FAILURE;
  }
  return 0;
}

/* The one-disk form: --control SOCKET SOURCE_URI TARGET (TARGET NULL
 * in a repository).
 */
static int
add_control_disk (struct set *s, const char *control, const char *source,
                  const char *target)
{
  char *spec = NULL;
  FILE *fp;
  size_t len, i;
  const char *values[3] = { control, source, target };
  static const char *const keys[3] = { "control", "source", "target" };
  int r;

  if (!is_nbd_uri (source))
    return bad_usage ("backup ", "%s: SOURCE_URI must be an NBD URI "
                      "(nbd://... or nbd+unix://...)", source);
  fp = open_memstream (&spec, &len);
  if (fp == NULL) {
    bm_error ("%m");
    return EXIT_FAILURE;
  }
  for (i = 0; i < 3 && values[i]; ++i) {
    const char *v;
    fprintf (fp, "%s%s=", i ? "," : "", keys[i]);
    for (v = values[i]; *v; ++v)
      fputs (*v == ',' ? ",," : (char[]) { *v, '\0' }, fp);
  }
  fclose (fp);
  r = add_disk (s, spec, target == NULL);
  free (spec);
  return r;
}

struct options {
  struct copy_options o;        /* the template of each disk's copy */
  const char *control;          /* the one-disk form */
  const char *repo;             /* --repo DIR */
  const char **specs;           /* the --disk values, read once every */
  size_t nspecs;                /*   option is known */
  const char *scratch;
  const char *manifest;
  int json;
};

enum { CONTROL = 256, INCREMENTAL, CHECKPOINT, REMOVE, NAME, SCRATCH,
       OUTPUT, REQUESTS, CONNECTIONS, REQUEST_SIZE, DISK, AGENT,
       FREEZE_COMMAND, THAW_COMMAND, FREEZE_TIMEOUT, CUT_TIMEOUT,
       MANIFEST, SUMS_DIR, REPO };

/* What the options of copy's do for each disk's copy. */
static int
parse_copy_option (int opt, struct copy_options *o)
{
  int64_t v;

  switch (opt) {
  case 'p': o->progress = true; return 0;
  case REQUESTS:
    return parse_count ("backup ", "--requests", optarg,
                        COPY_MAX_REQUESTS, &o->requests) == -1
      ? EXIT_FAILURE : 0;
  case CONNECTIONS:
    return parse_count ("backup ", "--connections", optarg,
                        COPY_MAX_CONNECTIONS, &o->connections) == -1
      ? EXIT_FAILURE : 0;
  case REQUEST_SIZE:
    v = parse_size (optarg);
    if (v < COPY_MIN_REQUEST_SIZE || v > COPY_MAX_REQUEST_SIZE ||
        !is_power_of_2 (v))
      return bad_usage ("backup ", "--request-size %s: must be a power "
                        "of 2 from 512 to 32M", optarg);
    o->request_size = v;
    return 0;
  default:
    return try_help ("backup ");
  }
}

static int
add_spec (struct options *opts, const char *spec)
{
  const char **specs = realloc (opts->specs,
                                (opts->nspecs + 1) * sizeof *specs);

  if (specs == NULL) {
    bm_error ("%m");
    return EXIT_FAILURE;
  }
  opts->specs = specs;
  specs[opts->nspecs++] = spec;
  return 0;
}

/* One option (optarg its value) into s and opts: 0, or the exit
 * status (the problem said).
 */
static int
parse_option (int opt, struct set *s, struct options *opts)
{
  switch (opt) {
  case 'h': backup_usage (EXIT_SUCCESS);
  case CONTROL: opts->control = optarg; return 0;
  case DISK: return add_spec (opts, optarg);
  case REPO: opts->repo = optarg; return 0;
  case INCREMENTAL: s->incremental = optarg; return 0;
  case CHECKPOINT: s->checkpoint = optarg; return 0;
  case REMOVE: s->remove_incremental = true; return 0;
  case AGENT: s->agent = optarg; return 0;
  case FREEZE_COMMAND: s->freeze_command = optarg; return 0;
  case THAW_COMMAND: s->thaw_command = optarg; return 0;
  case FREEZE_TIMEOUT:
    return parse_seconds ("--freeze-timeout", optarg,
                          &s->freeze_timeout) != 0 ? EXIT_FAILURE : 0;
  case CUT_TIMEOUT:
    return parse_seconds ("--cut-timeout", optarg,
                          &s->cut_timeout) != 0 ? EXIT_FAILURE : 0;
  case MANIFEST: opts->manifest = optarg; return 0;
  case SUMS_DIR: s->sums_dir = optarg; return 0;
  case NAME: s->view = optarg; return 0;
  case SCRATCH: opts->scratch = optarg; return 0;
  case OUTPUT:
    return (opts->json = parse_output ("backup ", optarg)) == -1
      ? EXIT_FAILURE : 0;
  default:
    return parse_copy_option (opt, &opts->o);
  }
}

/* Every option, in order: 0, or the exit status. */
static int
parse_options (int argc, char *argv[], struct set *s, struct options *opts)
{
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "control", required_argument, NULL, CONTROL },
    { "disk", required_argument, NULL, DISK },
    { "repo", required_argument, NULL, REPO },
    { "incremental", required_argument, NULL, INCREMENTAL },
    { "checkpoint", required_argument, NULL, CHECKPOINT },
    { "remove-incremental", no_argument, NULL, REMOVE },
    { "guest-agent", required_argument, NULL, AGENT },
    { "freeze-command", required_argument, NULL, FREEZE_COMMAND },
    { "thaw-command", required_argument, NULL, THAW_COMMAND },
    { "freeze-timeout", required_argument, NULL, FREEZE_TIMEOUT },
    { "cut-timeout", required_argument, NULL, CUT_TIMEOUT },
    { "manifest", required_argument, NULL, MANIFEST },
    { "sums-dir", required_argument, NULL, SUMS_DIR },
    { "name", required_argument, NULL, NAME },
    { "scratch", required_argument, NULL, SCRATCH },
    { "progress", no_argument, NULL, 'p' },
    { "output", required_argument, NULL, OUTPUT },
    { "requests", required_argument, NULL, REQUESTS },
    { "connections", required_argument, NULL, CONNECTIONS },
    { "request-size", required_argument, NULL, REQUEST_SIZE },
    { NULL }
  };
  int opt, r;

  while ((opt = getopt_long (argc, argv, "hp", long_options, NULL)) != -1)
    if ((r = parse_option (opt, s, opts)) != 0)
      return r;
  return 0;
}

/* The disks: the one-disk form's operands, or the --disk options. */
static int
parse_disks (int argc, char *argv[], struct set *s,
             const struct options *opts)
{
  const int operands = opts->repo ? 1 : 2;
  size_t i;
  int r;

  if (opts->control) {
    if (opts->nspecs > 0)
      return bad_usage ("backup ", "--control and --disk: use one form "
                        "(--control SOCKET SOURCE_URI TARGET is one "
                        "--disk)");
    if (optind != argc - operands)
      return bad_usage ("backup ", opts->repo ? "expecting SOURCE_URI (the "
                        "repository holds the disk's points)"
                        : "expecting SOURCE_URI and TARGET");
    return add_control_disk (s, opts->control, argv[optind],
                             opts->repo ? NULL : argv[optind + 1]);
  }
  if (opts->nspecs == 0)
    return bad_usage ("backup ", "--control SOCKET or --disk is required");
  if (optind != argc)
    return bad_usage ("backup ", "%s: with --disk, the sources and targets "
                      "are in the --disk options", argv[optind]);
  for (i = 0; i < opts->nspecs; ++i) {
    if ((r = add_disk (s, opts->specs[i], opts->repo != NULL)) != 0)
      return r;
    if (opts->repo && !s->disks[i].named)
      return bad_usage ("backup ", "--disk %s: name=NAME is required with "
                        "--repo: it names the disk's points", opts->specs[i]);
  }
  return 0;
}

/* What the options say together, and the freeze they choose. */
static int
check_options (struct set *s)
{
  if (s->checkpoint == NULL)
    return bad_usage ("backup ", "--checkpoint NEW is required: the bitmap "
                      "the next incremental backup starts from");
  if (s->incremental && strcmp (s->incremental, s->checkpoint) == 0)
    return bad_usage ("backup ", "--checkpoint %s: it must differ from "
                      "--incremental", s->checkpoint);
  if (s->remove_incremental && s->incremental == NULL)
    return bad_usage ("backup ", "--remove-incremental needs --incremental");
  if (s->agent && (s->freeze_command || s->thaw_command))
    return bad_usage ("backup ", "--guest-agent, or --freeze-command and "
                      "--thaw-command: not both");
  if (!s->freeze_command != !s->thaw_command)
    return bad_usage ("backup ", "--freeze-command and --thaw-command go "
                      "together: a freeze needs its thaw");
  s->freeze = s->agent ? FREEZE_AGENT
    : s->freeze_command ? FREEZE_COMMANDS : FREEZE_NONE;
  return 0;
}

/* No two disks in one place (backup/places.c). */
static int
check_disks (const struct set *s)
{
  struct bmerr err = { 0 };

  if (set_check_disks (s, &err) == 0)
    return 0;
  return bad_usage ("backup ", "%s", err.msg);
}

/* The manifest's place, before anything changes: a manifest that
 * cannot be written is said now, while every disk is still at B.
 */
static int
check_manifest (const struct options *opts)
{
  struct bmerr err = { 0 };

  if (opts->manifest == NULL ||
      report_manifest_ready (opts->manifest, &err) == 0)
    return 0;
  bm_error ("backup: %s", err.msg);
  return EXIT_FAILURE;
}

/* The options and arguments, into s and opts: 0, or the exit status
 * (the problem said).
 */
static int
parse_backup (int argc, char *argv[], struct set *s, struct options *opts)
{
  int r;

  if ((r = parse_options (argc, argv, s, opts)) != 0 ||
      (r = parse_disks (argc, argv, s, opts)) != 0 ||
      (r = check_options (s)) != 0 ||
      (opts->repo == NULL && (r = check_disks (s)) != 0) ||
      (r = check_manifest (opts)) != 0)
    return r;
  return 0;
}

/* What went wrong, on stderr: each disk's problem, the set's, and the
 * last line that says what is left.
 */
static void
say_failure (const struct set *s)
{
  size_t i;

  if (bmerr_failed (&s->error))
    bm_error ("backup: %s", s->error.msg);
  for (i = 0; i < s->n; ++i) {
    const struct disk *d = &s->disks[i];
    const char *who = s->n > 1 ? d->name : NULL;
    if (bmerr_failed (&d->error))
      bm_error ("backup: %s%s%s%s", who ? "disk " : "",
                who ? who : "", who ? ": " : "", d->error.msg);
    if (bmerr_failed (&d->r.error) || (d->r.interrupted && s->interrupted)) {
      if (who)
        bm_error ("backup: disk %s:", who);
      copy_print_failure (&d->o, &d->r);
    }
  }
  if (s->interrupted)
    bm_error ("backup: interrupted");
  for (i = 0; s->cut_made && s->incremental && i < s->n; ++i)
    if (s->disks[i].commit_failed)
      bm_error ("backup: %s%s%sthe server's bitmap file failed a commit: "
                "its bitmaps, %s too, can no longer be trusted, and the "
                "next backup from %s reads the whole disk",
                s->n > 1 ? "disk " : "", s->n > 1 ? s->disks[i].name : "",
                s->n > 1 ? ": " : "", s->incremental, s->incremental);
  if (!s->cut_made)
    bm_error ("backup incomplete: nothing was changed");
  else
    bm_error ("backup incomplete: the view%s ended and the "
              "checkpoint %s removed: the next backup starts again from "
              "%s", s->n > 1 ? "s are" : " is", s->checkpoint,
              s->incremental ? s->incremental : "scratch (a full backup)");
}

static int
prepare_checksums (struct set *s)
{
  size_t i;

  for (i = 0; i < s->n; ++i)
    if (checksums_prepare (s, &s->disks[i]) == -1)
      return -1;
  heal_apply (s);
  return 0;
}

/* In a repository: DIR opened, the base chosen, each disk's target
 * made (before the checks that compare the disks' places).
 */
static int
open_repo (struct set *s, const struct options *opts)
{
  if (opts->repo == NULL)
    return 0;
  if (s->sums_dir)
    return bad_usage ("backup ", "--sums-dir %s: not with --repo: a "
                      "repository keeps its points' checksums", s->sums_dir);
  s->remove_incremental = false;        /* B goes once the point exists */
  if (points_open (s, opts->repo) == -1) {
    bm_error ("backup: %s", bmerr_failed (&s->error) ? s->error.msg
              : strerror (ENOMEM));
    return EXIT_FAILURE;
  }
  return check_disks (s);
}

/* Each disk ready to copy, and the signals caught: 0, or the exit
 * status (said).
 */
static int
prepare (struct set *s, struct options *opts)
{
  struct bmerr err = { 0 };
  size_t i;

  opts->o.full = s->incremental == NULL;
  for (i = 0; i < s->n; ++i)
    if (disk_prepare (&s->disks[i], s->view, opts->scratch, &opts->o,
                      &err) == -1)
      break;
  if (i < s->n || copy_signals_trap (&err) == -1) {
    bm_error ("backup: %s", err.msg);
    return EXIT_FAILURE;
  }
  return 0;
}

/* The backup's steps, and their undo on failure: whether it is
 * complete.
 */
static bool
run (struct set *s, const struct options *opts)
{
  const bool repo = s->points != NULL;

  if (servers_connect (s) == 0 && (!repo || points_servers (s) == 0) &&
      cut_check (s) == 0 && (!repo || heal_plan (s) == 0) &&
      cut_make (s) == 0 && prepare_checksums (s) == 0 &&
      (!repo || points_images (s) == 0) &&
      copies_run (s, opts->o.progress) == 0 && cut_views_ok (s) == 0 &&
      checksums_write (s) == 0 && cut_end (s) == 0) {
    checksums_publish (s);
    if (!repo || points_commit (s) == 0) {
      heal_report (s);
      return true;
    }
    /* The servers have NEW, but there is no point: NEW goes. */
    cut_forget (s);
    points_undo (s);
    return false;
  }
  checksums_undo (s);
  cut_undo (s);
  if (repo)
    points_undo (s);
  return false;
}

int
do_backup (int argc, char *argv[])
{
  struct set s = {
    .view = BACKUP_DEFAULT_VIEW,
    .cut_timeout = BACKUP_DEFAULT_CUT_TIMEOUT,
    .freeze_timeout = BACKUP_DEFAULT_FREEZE_TIMEOUT,
    .agent_fd = -1,
  };
  struct options opts = {
    .o = { .requests = COPY_DEFAULT_REQUESTS, .trim_source = true },
  };
  bool ok;
  size_t i;
  int status;

  if ((status = parse_backup (argc, argv, &s, &opts)) != 0 ||
      (status = open_repo (&s, &opts)) != 0 ||
      (status = prepare (&s, &opts)) != 0)
    goto out;

  ok = run (&s, &opts);
  copy_signals_release ();

  if (!ok)
    say_failure (&s);
  points_report (&s);
  report_summary (stdout, &s, ok, opts.json);
  /* A committed set is a success, manifest or not. */
  if (opts.manifest && report_manifest (&s, ok, opts.manifest) == -1 && ok)
    bm_error ("backup: NO MANIFEST: the backup is complete "
              "(checkpoint %s on every disk), but its manifest %s could not "
              "be written", s.checkpoint, opts.manifest);
  status = ok ? EXIT_SUCCESS : EXIT_FAILURE;

 out:
  points_close (&s);
  heal_free (&s);
  for (i = 0; i < s.n; ++i) {
    if (s.disks[i].fd >= 0)
      close (s.disks[i].fd);
    checksums_free (&s.disks[i]);
    disk_free (&s.disks[i]);
  }
  free (s.disks);
  free (opts.specs);
  if (s.agent_fd >= 0)
    close (s.agent_fd);
  if (fflush (stdout) == EOF)
    status = EXIT_FAILURE;
  return status;
}
