/* SPDX-License-Identifier: BSD-3-Clause */
/* prune.c: dirtybitmap prune: the points of a backup repository that
 * the keep options do not keep (keep.h) removed, each folded into the
 * point that builds on it (repo.h, repo-fold.c), newest first: a run
 * of removed points before a kept one all fold into the kept one, so
 * each of their clusters is written at most once.
 *
 * A prune is a writer: it holds the repository's lock exclusively,
 * and first finishes a removal that a prune killed on the way left.
 * --dry-run is a reader: it changes nothing and says what a prune
 * would keep and why.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <getopt.h>

#include <json-c/json.h>

#include "copy/copy.h"
#include "dirtybitmap.h"
#include "keep.h"
#include "msg.h"
#include "repo.h"

static void __attribute__ ((noreturn))
prune_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s prune [--keep-last N] [--keep-hourly N] [--keep-daily N]\n"
"                [--keep-weekly N] [--keep-monthly N] [--keep-yearly N]\n"
"                [--dry-run] [--output=human|json] DIR\n"
"\n"
"Remove the points of the backup repository DIR that no keep option\n"
"keeps (Proxmox Backup Server's rules, periods in UTC).  The newest\n"
"point is always kept; with no keep option nothing is removed.  Every\n"
"point kept restores exactly as before; a removal costs one increment.\n"
"\n"
"  --keep-last N         the N newest points\n"
"  --keep-hourly N       the newest point of each of N hours\n"
"  --keep-daily N        ... of each of N days\n"
"  --keep-weekly N       ... of each of N ISO weeks\n"
"  --keep-monthly N      ... of each of N months\n"
"  --keep-yearly N       ... of each of N years\n"
"  --dry-run             change nothing: say what would be kept, and why\n"
"  --output=human|json   a table (default) or JSON\n"
"\n"
"Example:\n"
"  %s prune --keep-daily 7 --keep-weekly 4 --keep-monthly 6 /backup/vm1\n",
           prog, prog);
  exit (status);
}

struct prune {
  const char *dir;
  struct keep_options o;
  bool dry_run;
  bool json;
  struct repo r;
  struct repo_points ps;
  struct keep_mark *marks;      /* [ps.n] */
  size_t removed;
  uint64_t written, folded, freed;
};

static int
parse_keep (const char *opt, const char *value, uint64_t *out)
{
  char *end;

  errno = 0;
  *out = strtoull (value, &end, 10);
  if (errno || end == value || *end || value[0] == '-' ||
      *out > 1000000) {
    bm_error ("prune: --%s %s: not a count (0 to 1000000)", opt, value);
    return -1;
  }
  return 0;
}

static int
parse_prune (int argc, char *argv[], struct prune *st)
{
  enum { OUTPUT = 256, DRY_RUN, KEEP };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "output", required_argument, NULL, OUTPUT },
    { "dry-run", no_argument, NULL, DRY_RUN },
    { "keep-last", required_argument, NULL, KEEP + KEEP_LAST },
    { "keep-hourly", required_argument, NULL, KEEP + KEEP_HOURLY },
    { "keep-daily", required_argument, NULL, KEEP + KEEP_DAILY },
    { "keep-weekly", required_argument, NULL, KEEP + KEEP_WEEKLY },
    { "keep-monthly", required_argument, NULL, KEEP + KEEP_MONTHLY },
    { "keep-yearly", required_argument, NULL, KEEP + KEEP_YEARLY },
    { NULL }
  };
  int opt, json;

  while ((opt = getopt_long (argc, argv, "h", long_options, NULL)) != -1) {
    if (opt == 'h')
      prune_usage (EXIT_SUCCESS);
    else if (opt == OUTPUT) {
      if ((json = parse_output ("prune ", optarg)) == -1)
        return -1;
      st->json = json;
    }
    else if (opt == DRY_RUN)
      st->dry_run = true;
    else if (opt >= KEEP && opt < KEEP + KEEP_RULES) {
      if (parse_keep (keep_reason_name (opt - KEEP), optarg,
                       &st->o.n[opt - KEEP]) == -1)
        return -1;
    }
    else {
      try_help ("prune ");
      return -1;
    }
  }
  if (optind != argc - 1) {
    bad_usage ("prune ", "expecting one DIR");
    return -1;
  }
  st->dir = argv[optind];
  return 0;
}

/* Open DIR (a writer finishes an interrupted removal) and mark. */
static int
prepare (struct prune *st)
{
  struct bmerr err = { 0 };
  const char **times;
  char *finished = NULL;
  uint64_t mended = 0;
  char note[96];
  size_t i, bad;

  if ((st->dry_run ? repo_open (st->dir, false, &st->r, &err)
       : repo_open_existing (st->dir, &st->r, &err)) == -1 ||
      (!st->dry_run &&
       repo_finish_removal (&st->r, &finished, &mended, &err) == -1) ||
      repo_load (&st->r, &st->ps, &err) == -1) {
    bm_error ("prune: %s", err.msg);
    return -1;
  }
  if (finished)
    bm_error ("prune: %s: finished the removal of point %s, begun by a "
              "prune that did not complete%s", st->dir, finished,
              repo_mended_note (mended, note, sizeof note));
  free (finished);
  times = calloc (st->ps.n + 1, sizeof *times);
  st->marks = calloc (st->ps.n + 1, sizeof *st->marks);
  if (times == NULL || st->marks == NULL) {
    free (times);
    bm_error ("%m");
    return -1;
  }
  for (i = 0; i < st->ps.n; ++i)
    times[i] = st->ps.p[i].time;
  if (keep_select (times, st->ps.n, &st->o, st->marks, &bad) == -1) {
    if (errno == EINVAL)
      bm_error ("prune: point %s: its time %s is not a time",
                st->ps.p[bad].name, st->ps.p[bad].time);
    else
      bm_error ("%m");
    free (times);
    return -1;
  }
  free (times);
  return 0;
}

/* Remove the points not kept, newest first. */
static int
remove_points (struct prune *st)
{
  struct repo_fold f;
  struct bmerr err = { 0 };
  size_t i;

  for (i = st->ps.n; i-- > 0;) {
    if (st->marks[i].keep)
      continue;
    if (repo_remove_point (&st->r, st->ps.p[i].name, &f, &err) == -1) {
      bm_error ("prune: removing point %s: %s; %s%s", st->ps.p[i].name,
                err.msg, st->removed ? "the points removed before it stay "
                "removed; " : "", f.begun ? "the next prune or backup "
                "finishes its removal" : "it was left as it was");
      return -1;
    }
    bm_debug ("prune: removed point %s into %s: wrote %" PRIu64
              " bytes, freed %" PRIu64, st->ps.p[i].name, f.into,
              f.written, f.freed);
    free (f.into);
    st->removed++;
    st->written += f.written;
    st->folded += f.folded;
    st->freed += f.freed;
  }
  return 0;
}

static void
print_json (const struct prune *st)
{
  json_object *j = json_object_new_object ();
  json_object *list = json_object_new_array ();
  const char *reason;
  size_t i;

  for (i = 0; i < st->ps.n; ++i) {
    json_object *o = json_object_new_object ();
    json_object_object_add (o, "name",
                            json_object_new_string (st->ps.p[i].name));
    json_object_object_add (o, "time",
                            json_object_new_string (st->ps.p[i].time));
    json_object_object_add (o, "keep",
                            json_object_new_boolean (st->marks[i].keep));
    reason = keep_reason_name (st->marks[i].reason);
    json_object_object_add (o, "reason",
                            reason ? json_object_new_string (reason) : NULL);
    json_object_array_add (list, o);
  }
  json_object_object_add (j, "points", list);
  json_object_object_add (j, "dry-run",
                          json_object_new_boolean (st->dry_run));
  if (!st->dry_run) {
    json_object_object_add (j, "removed",
                            json_object_new_uint64 (st->removed));
    json_object_object_add (j, "written-bytes",
                            json_object_new_uint64 (st->written));
    json_object_object_add (j, "folded-bytes",
                            json_object_new_uint64 (st->folded));
    json_object_object_add (j, "freed-bytes",
                            json_object_new_uint64 (st->freed));
  }
  copy_print_json (stdout, j);
  json_object_put (j);
}

static void
print_text (const struct prune *st)
{
  const char *reason;
  char written[16], folded[16], freed[16];
  size_t i, w = strlen ("POINT");

  for (i = 0; i < st->ps.n; ++i)
    if (strlen (st->ps.p[i].name) > w)
      w = strlen (st->ps.p[i].name);
  printf ("%-*s  %-27s  %-7s  %s\n", (int) w, "POINT", "TIME",
          st->dry_run ? "ACTION" : "DONE", "KEPT BY");
  for (i = 0; i < st->ps.n; ++i) {
    reason = keep_reason_name (st->marks[i].reason);
    printf ("%-*s  %-27s  %-7s  %s\n", (int) w, st->ps.p[i].name,
            st->ps.p[i].time, st->marks[i].keep ? "keep"
            : st->dry_run ? "remove" : "removed", reason ? reason : "-");
  }
  if (st->dry_run)
    return;
  human_size (st->written, written, sizeof written);
  human_size (st->folded, folded, sizeof folded);
  human_size (st->freed, freed, sizeof freed);
  printf ("removed %zu of %zu points: freed %s; wrote %s into the points "
          "that built on them (the increments folded: %s)\n", st->removed,
          st->ps.n, freed, written, folded);
}

int
do_prune (int argc, char *argv[])
{
  struct prune st = { 0 };
  int status = EXIT_FAILURE;

  st.r.lock_fd = st.r.add_fd = -1;
  if (parse_prune (argc, argv, &st) == -1)
    return EXIT_FAILURE;
  if (prepare (&st) == 0 && (st.dry_run || remove_points (&st) == 0)) {
    if (st.json)
      print_json (&st);
    else
      print_text (&st);
    status = EXIT_SUCCESS;
  }
  free (st.marks);
  repo_points_free (&st.ps);
  repo_close (&st.r);
  if (fflush (stdout) == EOF)
    status = EXIT_FAILURE;
  return status;
}
