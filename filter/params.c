/* SPDX-License-Identifier: BSD-3-Clause */
/* params.c: the filter's parameters: parsed and checked in .config and
 * .config_complete, with the defaults that depend on the plugin's own
 * parameters (the disk's file, see find_disk_file).  Everything else
 * reads them from `params` once they are complete.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>

#include <nbdkit-filter.h>

#include "cmdline.h"
#include "params.h"
#include "report.h"
#include "restore-record.h"
#include "shadow.h"
#include "util.h"

struct params params;

static const char *bitmap;              /* bitmap= */
static struct action *actions;          /* action=, in order */
static size_t nr_actions;
static unsigned gbits = BMF_DEFAULT_GBITS;
static bool granularity_given;
static char *bitmap_file;               /* bitmap-file=, absolute */
static char *merge_file;                /* merge-file=, absolute */
static const char *plugin_file;         /* the plugin's file= */
static char *disk_file;                 /* its real path, if a regular file */
static mode_t disk_mode = 0600;         /* its permission bits */
static enum extents_mode extents_mode = EXTENTS_DEFAULT;
static enum bmf_durability durability = BMF_COARSE;
static unsigned cgbits = BMF_DEFAULT_CGBITS; /* coarse-granularity= */
static bool cgbits_given;
static const char *export_name = "";    /* export=: the tracked export */
static char *control_path;              /* control=, absolute */
static const char *restore_from;        /* restore-from= */
static const char *restore_checkpoint;  /* restore-checkpoint= */

void
params_free (void)
{
  free (actions);
  free (bitmap_file);
  free (merge_file);
  free (disk_file);
  free (control_path);
}

static int
parse_action (const char *value)
{
  struct action *a;
  const char *why;

  a = realloc (actions, (nr_actions + 1) * sizeof *a);
  if (a == NULL) {
    filter_error ("realloc: %m");
    return -1;
  }
  actions = a;
  if (act_parse (value, &a[nr_actions], &why) == -1) {
    filter_error ("action=%s: %s", value, why);
    return -1;
  }
  nr_actions++;
  return 0;
}

static int
parse_granularity (const char *value)
{
  int64_t r = nbdkit_parse_size (value);

  if (r == -1 || bmf_granularity_problem (r) != NULL) {
    filter_error ("granularity=%s: %s", value,
                  bmf_granularity_problem (0));
    return -1;
  }
  gbits = log_2 (r);
  granularity_given = true;
  return 0;
}

static int
parse_coarse_granularity (const char *value)
{
  int64_t r = nbdkit_parse_size (value);

  if (r == -1 || bmf_coarse_granularity_problem (r) != NULL) {
    filter_error ("coarse-granularity=%s: %s", value,
                  bmf_coarse_granularity_problem (0));
    return -1;
  }
  cgbits = log_2 (r);
  cgbits_given = true;
  return 0;
}

static int
parse_restore_from (const char *value)
{
  const char *why = bmf_source_problem (value);

  if (why) {
    filter_error ("restore-from=: the URI %s", why);
    return -1;
  }
  restore_from = value;
  return 0;
}

static int
parse_choice (const char *key, const char *value,
              const char *const *names, int *out)
{
  int i;

  for (i = 0; names[i]; ++i)
    if (strcmp (value, names[i]) == 0) {
      *out = i;
      return 0;
    }
  if (names[2] == NULL)
    filter_error ("%s=%s: must be %s or %s", key, value,
                  names[0], names[1]);
  else
    filter_error ("%s=%s: must be %s, %s or %s", key, value,
                  names[0], names[1], names[2]);
  return -1;
}

int
params_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                    const char *key, const char *value)
{
  static const char *const extents_names[] =
    { "bitmap", "passthrough", NULL };
  static const char *const durability_names[] =
    { [BMF_FLUSH] = "flush", [BMF_STRICT] = "strict",
      [BMF_COARSE] = "coarse", NULL };
  int i;

  if (strcmp (key, "bitmap") == 0) {
    const char *why = bmf_name_problem (value);
    if (bitmap) {
      filter_error ("bitmap= given more than once");
      return -1;
    }
    if (why) {
      filter_error ("bitmap=: the name %s", why);
      return -1;
    }
    bitmap = value;
    return 0;
  }
  else if (strcmp (key, "action") == 0)
    return parse_action (value);
  else if (strcmp (key, "granularity") == 0)
    return parse_granularity (value);
  else if (strcmp (key, "bitmap-file") == 0) {
    free (bitmap_file);
    bitmap_file = nbdkit_absolute_path (value);
    return bitmap_file ? 0 : -1;
  }
  else if (strcmp (key, "merge-file") == 0) {
    free (merge_file);
    merge_file = nbdkit_absolute_path (value);
    return merge_file ? 0 : -1;
  }
  else if (strcmp (key, "extents") == 0) {
    if (parse_choice (key, value, extents_names, &i) == -1)
      return -1;
    extents_mode = i == 0 ? EXTENTS_BITMAP : EXTENTS_PASSTHROUGH;
    return 0;
  }
  else if (strcmp (key, "durability") == 0) {
    if (parse_choice (key, value, durability_names, &i) == -1)
      return -1;
    durability = i;
    return 0;
  }
  else if (strcmp (key, "coarse-granularity") == 0)
    return parse_coarse_granularity (value);
  else if (strcmp (key, "export") == 0) {
    export_name = value;
    return 0;
  }
  else if (strcmp (key, "control") == 0) {
    free (control_path);
    control_path = nbdkit_absolute_path (value);
    return control_path ? 0 : -1;
  }
  else if (strcmp (key, "restore-from") == 0)
    return parse_restore_from (value);
  else if (strcmp (key, "restore-checkpoint") == 0) {
    const char *why = bmf_name_problem (value);
    if (why) {
      filter_error ("restore-checkpoint=: the name %s", why);
      return -1;
    }
    restore_checkpoint = value;
    return 0;
  }
  else if (strcmp (key, "file") == 0) {
    plugin_file = value;        /* valid for the process lifetime */
    return next (nxdata, key, value);
  }
  else
    return next (nxdata, key, value);
}

/* restore-from= writes the disk; restore-checkpoint= goes with it. */
static int
check_restore (void)
{
  if (restore_checkpoint && restore_from == NULL) {
    filter_error ("restore-checkpoint= can only be used with "
                  "restore-from=");
    return -1;
  }
  if (restore_from && cmdline_readonly ()) {
    filter_error ("restore-from=%s: a read-only server (-r) "
                  "cannot restore the disk: the restore writes it",
                  restore_from);
    return -1;
  }
  return 0;
}

static bool
have_action (enum act_kind kind)
{
  size_t i;

  for (i = 0; i < nr_actions; ++i)
    if (actions[i].kind == kind)
      return true;
  return false;
}

/* The plugin's file=FILE, if it is a regular file: the bitmaps persist
 * next to it by default, new bitmap files get its permission bits, and
 * its identity tells writes made without the filter.
 */
static void
find_disk_file (void)
{
  struct stat sb;
  char *rp;

  if (plugin_file == NULL || (rp = nbdkit_realpath (plugin_file)) == NULL)
    return;
  if (stat (rp, &sb) == 0 && S_ISREG (sb.st_mode)) {
    disk_file = rp;
    disk_mode = sb.st_mode & 0666;
  }
  else
    free (rp);
}

static int
default_bitmap_file (void)
{
  if (disk_file == NULL) {
    if (plugin_file)
      filter_error ("file=%s is not a regular file, so there "
                    "is no default place for the bitmaps: give "
                    "bitmap-file=PATH", plugin_file);
    else
      filter_error ("the plugin was given no file=FILE to keep "
                    "the bitmaps next to: give bitmap-file=PATH");
    return -1;
  }
  if (asprintf (&bitmap_file, "%s.bitmaps", disk_file) == -1) {
    filter_error ("asprintf: %m");
    bitmap_file = NULL;
    return -1;
  }
  return 0;
}

int
params_config_complete (nbdkit_next_config_complete *next,
                             nbdkit_backend *nxdata)
{
  size_t i;

  if (nr_actions > 0 && bitmap == NULL) {
    filter_error ("action= needs bitmap=NAME: the bitmap "
                  "to act on");
    return -1;
  }
  if (granularity_given && !have_action (ACT_ADD) && !restore_checkpoint) {
    filter_error ("granularity= can only be used with "
                  "action=add or restore-checkpoint=");
    return -1;
  }
  if (check_restore () == -1)
    return -1;
  if (merge_file && !have_action (ACT_MERGE)) {
    filter_error ("merge-file= can only be used with "
                  "action=merge:SRC");
    return -1;
  }
  if (cgbits_given && durability != BMF_COARSE) {
    filter_error ("coarse-granularity= can only be used "
                  "with durability=coarse");
    return -1;
  }
  if (extents_mode == EXTENTS_BITMAP && bitmap == NULL) {
    filter_error ("extents=bitmap needs bitmap=NAME");
    return -1;
  }
  find_disk_file ();
  if (bitmap_file == NULL && default_bitmap_file () == -1)
    return -1;
  for (i = 0; i < nr_actions; ++i) {
    actions[i].bitmap = bitmap;
    actions[i].gbits = gbits;
  }
  params = (struct params) {
    .bitmap = bitmap, .actions = actions, .nr_actions = nr_actions,
    .bitmap_file = bitmap_file, .merge_file = merge_file,
    .disk_file = disk_file, .disk_mode = disk_mode,
    .extents = extents_mode, .durability = durability, .cgbits = cgbits,
    .export_name = export_name, .control_path = control_path,
    .restore_from = restore_from, .restore_checkpoint = restore_checkpoint,
    .checkpoint_gbits = gbits,
  };
  return next (nxdata);
}
