/* SPDX-License-Identifier: BSD-3-Clause */
/* dirtybitmap.c: the nbdkit filter: parameters, lifecycle and
 * callbacks.  Every pwrite, zero and trim sets the bits of the
 * granules it touches in every recording bitmap before it is passed
 * down (store.c); extents are answered from bitmap= (extents.c).
 * See nbdkit-dirtybitmap-filter(1).
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>

#include <nbdkit-filter.h>

#include "actions.h"
#include "bmfile.h"
#include "extents.h"
#include "msg.h"
#include "store.h"
#include "util.h"

/* -D dirtybitmap.verbose=1: trace the write path. */
NBDKIT_DLL_PUBLIC int dirtybitmap_debug_verbose = 0;

static const char *bitmap;              /* bitmap= */
static struct action *actions;          /* action=, in order */
static size_t nr_actions;
static unsigned gbits = BMF_DEFAULT_GBITS;
static bool granularity_given;
static char *bitmap_file;               /* bitmap-file=, absolute */
static char *merge_file;                /* merge-file=, absolute */
static const char *plugin_file;         /* the plugin's file= */
static enum extents_mode extents_mode = EXTENTS_DEFAULT;
static enum bmf_durability durability = BMF_FLUSH;

/* Index of bitmap= in the current set, or -1: extents pass through. */
static int selected = -1;

/* The export name of the first connection; all must use it. */
static pthread_mutex_t export_lock = PTHREAD_MUTEX_INITIALIZER;
static char *export_name;

/* lib/ reports through these. */
void
bm_error (const char *fs, ...)
{
  va_list args;
  char *msg;

  va_start (args, fs);
  if (vasprintf (&msg, fs, args) == -1)
    msg = NULL;
  va_end (args);
  nbdkit_error ("dirtybitmap: %s", msg ? msg : fs);
  free (msg);
}

void
bm_debug (const char *fs, ...)
{
  va_list args;
  char *msg;

  va_start (args, fs);
  if (vasprintf (&msg, fs, args) == -1)
    msg = NULL;
  va_end (args);
  nbdkit_debug ("dirtybitmap: %s", msg ? msg : fs);
  free (msg);
}

static void
dirtybitmap_unload (void)
{
  free (actions);
  free (bitmap_file);
  free (merge_file);
  free (export_name);
}

static int
parse_action (const char *value)
{
  struct action *a;
  const char *why;

  a = realloc (actions, (nr_actions + 1) * sizeof *a);
  if (a == NULL) {
    nbdkit_error ("dirtybitmap: realloc: %m");
    return -1;
  }
  actions = a;
  if (act_parse (value, &a[nr_actions], &why) == -1) {
    nbdkit_error ("dirtybitmap: action=%s: %s", value, why);
    return -1;
  }
  nr_actions++;
  return 0;
}

static int
parse_granularity (const char *value)
{
  int64_t r = nbdkit_parse_size (value);

  if (r == -1 || r < 512 || r > (INT64_C (1) << BMF_MAX_GBITS) ||
      !is_power_of_2 (r)) {
    nbdkit_error ("dirtybitmap: granularity=%s: must be a power of 2 "
                  "from 512 to 2G", value);
    return -1;
  }
  gbits = log_2 (r);
  granularity_given = true;
  return 0;
}

static int
dirtybitmap_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                    const char *key, const char *value)
{
  if (strcmp (key, "bitmap") == 0) {
    size_t len = strlen (value);
    if (bitmap) {
      nbdkit_error ("dirtybitmap: bitmap= given more than once");
      return -1;
    }
    if (len == 0 || len > BMF_MAX_NAME) {
      nbdkit_error ("dirtybitmap: bitmap=: the name must be 1 to %d bytes",
                    BMF_MAX_NAME);
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
    if (strcmp (value, "bitmap") == 0)
      extents_mode = EXTENTS_BITMAP;
    else if (strcmp (value, "passthrough") == 0)
      extents_mode = EXTENTS_PASSTHROUGH;
    else {
      nbdkit_error ("dirtybitmap: extents=%s: must be bitmap or "
                    "passthrough", value);
      return -1;
    }
    return 0;
  }
  else if (strcmp (key, "durability") == 0) {
    if (strcmp (value, "flush") == 0)
      durability = BMF_FLUSH;
    else if (strcmp (value, "strict") == 0)
      durability = BMF_STRICT;
    else {
      nbdkit_error ("dirtybitmap: durability=%s: must be flush or strict",
                    value);
      return -1;
    }
    return 0;
  }
  else if (strcmp (key, "file") == 0) {
    plugin_file = value;        /* valid for the process lifetime */
    return next (nxdata, key, value);
  }
  else
    return next (nxdata, key, value);
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

/* FILE.bitmaps next to the plugin's file=FILE, if it is a regular
 * file.
 */
static int
default_bitmap_file (void)
{
  struct stat sb;
  char *rp;

  if (plugin_file == NULL || (rp = nbdkit_realpath (plugin_file)) == NULL ||
      stat (rp, &sb) == -1 || !S_ISREG (sb.st_mode)) {
    if (plugin_file)
      nbdkit_error ("dirtybitmap: file=%s is not a regular file, so there "
                    "is no default place for the bitmaps: give "
                    "bitmap-file=PATH", plugin_file);
    else
      nbdkit_error ("dirtybitmap: the plugin was given no file=FILE to keep "
                    "the bitmaps next to: give bitmap-file=PATH");
    return -1;
  }
  if (asprintf (&bitmap_file, "%s.bitmaps", rp) == -1) {
    nbdkit_error ("dirtybitmap: asprintf: %m");
    bitmap_file = NULL;
  }
  free (rp);
  return bitmap_file ? 0 : -1;
}

static int
dirtybitmap_config_complete (nbdkit_next_config_complete *next,
                             nbdkit_backend *nxdata)
{
  if (nr_actions > 0 && bitmap == NULL) {
    nbdkit_error ("dirtybitmap: action= needs bitmap=NAME: the bitmap "
                  "to act on");
    return -1;
  }
  if (granularity_given && !have_action (ACT_ADD)) {
    nbdkit_error ("dirtybitmap: granularity= can only be used with "
                  "action=add");
    return -1;
  }
  if (merge_file && !have_action (ACT_MERGE)) {
    nbdkit_error ("dirtybitmap: merge-file= can only be used with "
                  "action=merge:SRC");
    return -1;
  }
  if (extents_mode == EXTENTS_BITMAP && bitmap == NULL) {
    nbdkit_error ("dirtybitmap: extents=bitmap needs bitmap=NAME");
    return -1;
  }
  if (bitmap_file == NULL && default_bitmap_file () == -1)
    return -1;
  return next (nxdata);
}

#define dirtybitmap_config_help \
  "bitmap=NAME              The bitmap to act on and to answer extents.\n" \
  "action=ACTION            add|remove|clear|enable|disable|merge:SRC\n" \
  "                         (repeatable, applied in order at startup).\n" \
  "granularity=SIZE         Granularity of a new bitmap (default 64K).\n" \
  "bitmap-file=PATH         Where bitmaps persist (default FILE.bitmaps).\n" \
  "merge-file=PATH          Take merge sources from this bitmap file.\n" \
  "extents=bitmap|passthrough  Answer extents from bitmap= or from below.\n" \
  "durability=flush|strict  When bits reach stable storage (default flush)."

/* Open and lock the bitmap file and apply the actions: before
 * nbdkit forks, so that errors reach the user and nbdkit exits.
 */
static int
dirtybitmap_get_ready (int thread_model)
{
  const struct store_config cfg = {
    .path = bitmap_file, .bitmap = bitmap,
    .actions = actions, .nr_actions = nr_actions, .gbits = gbits,
    .merge_file = merge_file, .durability = durability,
    .extents = extents_mode,
  };

  return store_open (&cfg, &selected);
}

static void
dirtybitmap_cleanup (nbdkit_backend *backend)
{
  store_close ();
}

/* One bitmap file describes one disk: refuse a second export name. */
static void *
dirtybitmap_open (nbdkit_next_open *next, nbdkit_context *nxdata,
                  int readonly, const char *exportname, int is_tls)
{
  {
    SCOPED_LOCK (&export_lock);
    if (export_name == NULL) {
      export_name = strdup (exportname);
      if (export_name == NULL) {
        nbdkit_error ("dirtybitmap: strdup: %m");
        return NULL;
      }
    }
    else if (strcmp (export_name, exportname) != 0) {
      nbdkit_error ("dirtybitmap: export \"%s\" refused: the bitmaps in %s "
                    "track export \"%s\" (one bitmap file describes one "
                    "disk)", exportname, bitmap_file, export_name);
      return NULL;
    }
  }
  if (next (nxdata, readonly, exportname) == -1)
    return NULL;
  return NBDKIT_HANDLE_NOT_NEEDED;
}

/* The disk size is known per connection: make the bitmaps cover it. */
static int
dirtybitmap_prepare (nbdkit_next *next, void *handle, int readonly)
{
  int64_t size = next->get_size (next);

  if (size == -1)
    return -1;
  return store_resize (size);
}

static int
dirtybitmap_can_extents (nbdkit_next *next, void *handle)
{
  int r = next->can_extents (next);

  if (r == -1)
    return -1;
  return selected >= 0 ? 1 : r;
}

static int
dirtybitmap_pwrite (nbdkit_next *next, void *handle,
                    const void *buf, uint32_t count, uint64_t offset,
                    uint32_t flags, int *err)
{
  if (store_track (offset, count, flags & NBDKIT_FLAG_FUA, err) == -1)
    return -1;
  return next->pwrite (next, buf, count, offset, flags, err);
}

static int
dirtybitmap_zero (nbdkit_next *next, void *handle,
                  uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  if (store_track (offset, count, flags & NBDKIT_FLAG_FUA, err) == -1)
    return -1;
  return next->zero (next, count, offset, flags, err);
}

static int
dirtybitmap_trim (nbdkit_next *next, void *handle,
                  uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  if (store_track (offset, count, flags & NBDKIT_FLAG_FUA, err) == -1)
    return -1;
  return next->trim (next, count, offset, flags, err);
}

/* Bits first: after a flush, every completed write's bits are on
 * stable storage, whatever happens to the disk below.
 */
static int
dirtybitmap_flush (nbdkit_next *next, void *handle, uint32_t flags,
                   int *err)
{
  if (store_flush (err) == -1)
    return -1;
  return next->flush (next, flags, err);
}

static int
dirtybitmap_extents (nbdkit_next *next, void *handle,
                     uint32_t count, uint64_t offset, uint32_t flags,
                     struct nbdkit_extents *extents, int *err)
{
  const struct bitmap_set *s;

  if (selected < 0)
    return next->extents (next, count, offset, flags, extents, err);
  s = store_current ();
  return bitmap_extents (next, s, &s->bm[selected], count, offset, flags,
                         extents, err);
}

static struct nbdkit_filter filter = {
  .name              = "dirtybitmap",
  .longname          = "nbdkit dirty bitmap (changed block tracking) filter",
  .unload            = dirtybitmap_unload,
  .config            = dirtybitmap_config,
  .config_complete   = dirtybitmap_config_complete,
  .config_help       = dirtybitmap_config_help,
  .get_ready         = dirtybitmap_get_ready,
  .cleanup           = dirtybitmap_cleanup,
  .open              = dirtybitmap_open,
  .prepare           = dirtybitmap_prepare,
  .can_extents       = dirtybitmap_can_extents,
  .pwrite            = dirtybitmap_pwrite,
  .zero              = dirtybitmap_zero,
  .trim              = dirtybitmap_trim,
  .flush             = dirtybitmap_flush,
  .extents           = dirtybitmap_extents,
};

NBDKIT_REGISTER_FILTER (filter)
