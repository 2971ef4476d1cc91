/* SPDX-License-Identifier: BSD-3-Clause */
/* list.c: dirtybitmap list: the points of a backup repository (see
 * repo.h), oldest first: a table, or the JSON of dirtybitmap(1), JSON
 * OUTPUT.  It reads the records only, under the repository's shared
 * lock.
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
#include "msg.h"
#include "repo.h"

static void __attribute__ ((noreturn))
list_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s list [--output=human|json] DIR\n"
"\n"
"List the points of the backup repository DIR (made by backup --repo),\n"
"oldest first: each point's time (UTC), the point it builds on, and per\n"
"disk its size and the bytes its own image holds, and whether it was\n"
"verified; last, the bytes all the images hold.\n"
"\n"
"  --output=human|json   a table (default) or JSON\n"
"\n"
"Example:\n"
"  %s list /backup/vm1\n",
           prog, prog);
  exit (status);
}

static json_object *
disk_json (const struct repo *r, const struct repo_disk *d)
{
  json_object *o = json_object_new_object ();
  json_object *files = json_object_new_array ();
  char *image = repo_path (r, d->image), *sums = repo_path (r, d->sums);

  json_object_object_add (o, "name", json_object_new_string (d->name));
  json_object_object_add (o, "size", json_object_new_uint64 (d->size));
  json_object_object_add (o, "stored-bytes",
                          json_object_new_uint64 (d->stored));
  json_object_array_add (files, json_object_new_string (image ? image : ""));
  json_object_array_add (files, json_object_new_string (sums ? sums : ""));
  json_object_object_add (o, "files", files);
  free (image);
  free (sums);
  return o;
}

static json_object *
point_json (const struct repo *r, const struct repo_point *p)
{
  json_object *o = json_object_new_object ();
  json_object *disks = json_object_new_array ();
  size_t i;

  json_object_object_add (o, "name", json_object_new_string (p->name));
  json_object_object_add (o, "time", json_object_new_string (p->time));
  json_object_object_add (o, "base",
                          p->base ? json_object_new_string (p->base) : NULL);
  for (i = 0; i < p->n; ++i)
    json_object_array_add (disks, disk_json (r, &p->disks[i]));
  json_object_object_add (o, "disks", disks);
  json_object_object_add (o, "verified", repo_verified_json (p));
  return o;
}

/* The bytes that the points' images hold, each its own. */
static uint64_t
total_stored (const struct repo_points *ps)
{
  uint64_t total = 0;
  size_t i, k;

  for (i = 0; i < ps->n; ++i)
    for (k = 0; k < ps->p[i].n; ++k)
      total += ps->p[i].disks[k].stored;
  return total;
}

static void
print_json (const struct repo *r, const struct repo_points *ps)
{
  json_object *j = json_object_new_object ();
  json_object *list = json_object_new_array ();
  size_t i;

  for (i = 0; i < ps->n; ++i)
    json_object_array_add (list, point_json (r, &ps->p[i]));
  json_object_object_add (j, "points", list);
  json_object_object_add (j, "stored-bytes",
                          json_object_new_uint64 (total_stored (ps)));
  copy_print_json (stdout, j);
  json_object_put (j);
}

/* One row of the table: a disk of a point. */
struct row {
  const char *cell[7];
  char size[16], stored[16], verified[48];
};

#define COLUMNS 7

static void
print_row (const struct row *w, const int width[COLUMNS])
{
  int c, last = COLUMNS - 1;

  while (last > 0 && *w->cell[last] == '\0')
    last--;                     /* no blanks at the end of a line */
  for (c = 0; c < last; ++c)
    printf ("%-*s  ", width[c], w->cell[c]);
  printf ("%s\n", w->cell[last]);
}

static void
fill_row (struct row *w, const struct repo_point *p, size_t i)
{
  const struct repo_disk *d = &p->disks[i];

  human_size (d->size, w->size, sizeof w->size);
  human_size (d->stored, w->stored, sizeof w->stored);
  if (!p->verified)
    strcpy (w->verified, "-");
  else
    snprintf (w->verified, sizeof w->verified, "%s %s",
              p->verified_ok ? "ok" : "BAD", p->verified_time);
  w->cell[0] = p->name;
  w->cell[1] = p->time;
  w->cell[2] = p->base ? p->base : "-";
  w->cell[3] = d->name;
  w->cell[4] = w->size;
  w->cell[5] = w->stored;
  w->cell[6] = w->verified;
}

/* The last row: what the points' images hold in all. */
static void
fill_total (struct row *w, const struct repo_points *ps)
{
  int c;

  for (c = 0; c < COLUMNS; ++c)
    w->cell[c] = "";
  w->cell[0] = "(total)";
  human_size (total_stored (ps), w->stored, sizeof w->stored);
  w->cell[5] = w->stored;
}

static int
print_table (const struct repo *r, const struct repo_points *ps)
{
  struct row head = { .cell = { "POINT", "TIME", "BASE", "DISK", "SIZE",
                                "STORED", "VERIFIED" } };
  struct row *rows;
  size_t n = 0, i, k;
  int width[COLUMNS] = { 0 }, c;

  if (ps->n == 0) {
    printf ("%s has no points yet\n", r->dir);
    return 0;
  }
  for (i = 0; i < ps->n; ++i)
    n += ps->p[i].n;
  if ((rows = calloc (n + 1, sizeof *rows)) == NULL) {
    bm_error ("%m");
    return -1;
  }
  for (i = 0, n = 0; i < ps->n; ++i)
    for (k = 0; k < ps->p[i].n; ++k)
      fill_row (&rows[n++], &ps->p[i], k);
  fill_total (&rows[n++], ps);
  for (c = 0; c < COLUMNS; ++c) {
    width[c] = strlen (head.cell[c]);
    for (i = 0; i < n; ++i)
      if ((int) strlen (rows[i].cell[c]) > width[c])
        width[c] = strlen (rows[i].cell[c]);
  }
  print_row (&head, width);
  for (i = 0; i < n; ++i)
    print_row (&rows[i], width);
  free (rows);
  return 0;
}

int
do_list (int argc, char *argv[])
{
  enum { OUTPUT = 256 };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "output", required_argument, NULL, OUTPUT },
    { NULL }
  };
  struct repo r;
  struct repo_points ps;
  struct bmerr err = { 0 };
  int opt, json = 0, status = EXIT_FAILURE;

  while ((opt = getopt_long (argc, argv, "h", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': list_usage (EXIT_SUCCESS);
    case OUTPUT:
      if ((json = parse_output ("list ", optarg)) == -1)
        return EXIT_FAILURE;
      break;
    default:
      return try_help ("list ");
    }
  }
  if (optind != argc - 1)
    return bad_usage ("list ", "expecting one DIR");
  if (repo_open (argv[optind], false, &r, &err) == -1) {
    bm_error ("list: %s", err.msg);
    return EXIT_FAILURE;
  }
  if (repo_load (&r, &ps, &err) == -1)
    bm_error ("list: %s", err.msg);
  else {
    if (json)
      print_json (&r, &ps);
    else if (print_table (&r, &ps) == -1)
      goto out;
    status = EXIT_SUCCESS;
  }
 out:
  repo_points_free (&ps);
  repo_close (&r);
  if (fflush (stdout) == EOF)
    status = EXIT_FAILURE;
  return status;
}
