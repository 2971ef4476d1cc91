/* SPDX-License-Identifier: BSD-3-Clause */
/* dirtybitmap.c: the nbdkit filter's glue: parameters, lifecycle and
 * callbacks, each delegating to the engine.  Every pwrite, zero and
 * trim sets the bits of the granules it touches in every recording
 * bitmap before it is passed down (tracker.c); extents are answered
 * from the connection's bitmap (extents.c); every data request is
 * counted in flight (inflight.c) so that bitmap changes can cut
 * through the writes exactly (store.c).  See
 * nbdkit-dirtybitmap-filter(1).
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>

#include <nbdkit-filter.h>

#include "actions.h"
#include "cmdline.h"
#include "commands.h"
#include "control.h"
#include "durability.h"
#include "extents.h"
#include "inflight.h"
#include "msg.h"
#include "store.h"
#include "tracker.h"
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
static char *disk_file;                 /* its real path, if a regular file */
static mode_t disk_mode = 0600;         /* its permission bits */
static enum extents_mode extents_mode = EXTENTS_DEFAULT;
static enum bmf_durability durability = BMF_FLUSH;
static const char *export_name = "";    /* export=: the tracked export */
static char *control_path;              /* control=, absolute */
static nbdkit_backend *backend;         /* from .after_fork */

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
  free (disk_file);
  free (control_path);
}

/*----------------------------------------------------------------------
 * Parameters.
 */

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

  if (r == -1 || bmf_granularity_problem (r) != NULL) {
    nbdkit_error ("dirtybitmap: granularity=%s: %s", value,
                  bmf_granularity_problem (0));
    return -1;
  }
  gbits = log_2 (r);
  granularity_given = true;
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
  nbdkit_error ("dirtybitmap: %s=%s: must be %s or %s", key, value,
                names[0], names[1]);
  return -1;
}

static int
dirtybitmap_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                    const char *key, const char *value)
{
  static const char *const extents_names[] =
    { "bitmap", "passthrough", NULL };
  static const char *const durability_names[] = { "flush", "strict", NULL };
  int i;

  if (strcmp (key, "bitmap") == 0) {
    const char *why = bmf_name_problem (value);
    if (bitmap) {
      nbdkit_error ("dirtybitmap: bitmap= given more than once");
      return -1;
    }
    if (why) {
      nbdkit_error ("dirtybitmap: bitmap=: the name %s", why);
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
    durability = i == 0 ? BMF_FLUSH : BMF_STRICT;
    return 0;
  }
  else if (strcmp (key, "export") == 0) {
    export_name = value;
    return 0;
  }
  else if (strcmp (key, "control") == 0) {
    free (control_path);
    control_path = nbdkit_absolute_path (value);
    return control_path ? 0 : -1;
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
      nbdkit_error ("dirtybitmap: file=%s is not a regular file, so there "
                    "is no default place for the bitmaps: give "
                    "bitmap-file=PATH", plugin_file);
    else
      nbdkit_error ("dirtybitmap: the plugin was given no file=FILE to keep "
                    "the bitmaps next to: give bitmap-file=PATH");
    return -1;
  }
  if (asprintf (&bitmap_file, "%s.bitmaps", disk_file) == -1) {
    nbdkit_error ("dirtybitmap: asprintf: %m");
    bitmap_file = NULL;
    return -1;
  }
  return 0;
}

static int
dirtybitmap_config_complete (nbdkit_next_config_complete *next,
                             nbdkit_backend *nxdata)
{
  size_t i;

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
  find_disk_file ();
  if (bitmap_file == NULL && default_bitmap_file () == -1)
    return -1;
  for (i = 0; i < nr_actions; ++i) {
    actions[i].bitmap = bitmap;
    actions[i].gbits = gbits;
  }
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
  "durability=flush|strict  When bits reach stable storage (default flush).\n" \
  "export=NAME              The export the bitmaps track (default \"\").\n" \
  "control=PATH             Serve the control channel on this socket."

/*----------------------------------------------------------------------
 * Lifecycle.
 */

/* Open and lock the bitmap file and apply the actions: before
 * nbdkit forks, so that errors reach the user and nbdkit exits.
 */
static int
dirtybitmap_get_ready (int thread_model)
{
  /* With actions, even a read-only server writes the file, once. */
  const bool readonly = nbdkit_started_readonly () && nr_actions == 0;
  const struct store_config cfg = {
    .path = bitmap_file, .bitmap = bitmap,
    .actions = actions, .nr_actions = nr_actions,
    .merge_file = merge_file, .durability = durability,
    .extents = extents_mode, .readonly = readonly,
    .disk_file = disk_file,
    /* Never world-writable (bmf_create), never more open than the disk. */
    .create_mode = disk_mode,
  };

  struct bmerr err;

  /* The socket first: a start refused for it must leave the bitmap
   * file as it was, actions unapplied.
   */
  if (control_path && control_open (control_path, &err) == -1) {
    nbdkit_error ("dirtybitmap: %s", err.msg);
    return -1;
  }
  if (store_open (&cfg) == -1) {
    control_close ();
    return -1;
  }
  return 0;
}

/* Flush the layer below from the control thread (pause): through a
 * context of its own, opened for the occasion.
 */
static int
flush_plugin (struct bmerr *err)
{
  nbdkit_next *next;
  int e = 0, r = 0;

  next = nbdkit_next_context_open (backend, 0, export_name, 1);
  if (next == NULL) {
    bmerr_set (err, EIO, "cannot open the layer below to flush it");
    return -1;
  }
  if (next->prepare (next) == -1)
    r = -1;
  else if (next->can_flush (next) == 1)
    r = next->flush (next, 0, &e);
  next->finalize (next);
  nbdkit_next_context_close (next);
  if (r == -1)
    bmerr_set (err, e ? e : EIO, "flushing the layer below failed: %s",
               strerror (e ? e : EIO));
  return r;
}

/* A request held by a pause stops waiting when nbdkit shuts down or
 * its client goes.
 */
static bool
give_up (void)
{
  return nbdkit_nanosleep (0, 0) == -1;
}

static int
dirtybitmap_after_fork (nbdkit_backend *b)
{
  struct bmerr err;

  backend = b;
  inflight_init (give_up);
  commands_init (flush_plugin);
  if (control_start (&err) == -1) {
    nbdkit_error ("dirtybitmap: control=%s: %s", control_path, err.msg);
    return -1;
  }
  return 0;
}

static void
dirtybitmap_cleanup (nbdkit_backend *b)
{
  control_close ();
  store_close ();
}

/*----------------------------------------------------------------------
 * Connections.
 */

struct handle {
  char *bitmap;                 /* answers block status; NULL: below does */
};

static const char *
dirtybitmap_default_export (nbdkit_next_default_export *next,
                            nbdkit_backend *nxdata, int readonly,
                            int is_tls)
{
  return export_name;
}

static int
dirtybitmap_list_exports (nbdkit_next_list_exports *next,
                          nbdkit_backend *nxdata, int readonly,
                          int is_tls, struct nbdkit_exports *exports)
{
  return nbdkit_add_export (exports, export_name, NULL);
}

/* One bitmap file describes one disk: the export named by export=
 * ("" asks for the default, which is the same).  Any other name is
 * refused before anything is touched.
 */
static void *
dirtybitmap_open (nbdkit_next_open *next, nbdkit_context *nxdata,
                  int readonly, const char *exportname, int is_tls)
{
  struct handle *h;

  if (exportname[0] != '\0' && strcmp (exportname, export_name) != 0) {
    nbdkit_error ("dirtybitmap: export \"%s\" refused: the bitmaps in %s "
                  "track export \"%s\" (export=)", exportname, bitmap_file,
                  export_name);
    return NULL;
  }
  if (next (nxdata, readonly, export_name) == -1)
    return NULL;
  h = calloc (1, sizeof *h);
  if (h == NULL) {
    nbdkit_error ("dirtybitmap: calloc: %m");
    return NULL;
  }
  if (store_connect (&h->bitmap) == -1) {
    free (h);
    return NULL;
  }
  return h;
}

static void
dirtybitmap_close (void *handle)
{
  struct handle *h = handle;

  store_disconnect (h->bitmap);
  free (h);
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
  struct handle *h = handle;
  int r = next->can_extents (next);

  if (r == -1)
    return -1;
  return h->bitmap ? 1 : r;
}

/*----------------------------------------------------------------------
 * Data.  Every request is counted in flight for its whole life.
 */

/* Enter, or fail the request: held by a pause, it had to give up. */
static bool
enter (unsigned *token, int *err)
{
  if (inflight_enter (token) == 0)
    return true;
  *err = ESHUTDOWN;
  return false;
}

static int
dirtybitmap_pread (nbdkit_next *next, void *handle,
                   void *buf, uint32_t count, uint64_t offset,
                   uint32_t flags, int *err)
{
  unsigned token;
  int r;

  if (!enter (&token, err))
    return -1;
  r = next->pread (next, buf, count, offset, flags, err);
  inflight_exit (token);
  return r;
}

static int
dirtybitmap_pwrite (nbdkit_next *next, void *handle,
                    const void *buf, uint32_t count, uint64_t offset,
                    uint32_t flags, int *err)
{
  unsigned token;
  int r;

  if (!enter (&token, err))
    return -1;
  r = tracker_track (offset, count, flags & NBDKIT_FLAG_FUA, err);
  if (r == 0)
    r = next->pwrite (next, buf, count, offset, flags, err);
  inflight_exit (token);
  return r;
}

static int
dirtybitmap_zero (nbdkit_next *next, void *handle,
                  uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  unsigned token;
  int r;

  if (!enter (&token, err))
    return -1;
  r = tracker_track (offset, count, flags & NBDKIT_FLAG_FUA, err);
  if (r == 0)
    r = next->zero (next, count, offset, flags, err);
  inflight_exit (token);
  return r;
}

static int
dirtybitmap_trim (nbdkit_next *next, void *handle,
                  uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  unsigned token;
  int r;

  if (!enter (&token, err))
    return -1;
  r = tracker_track (offset, count, flags & NBDKIT_FLAG_FUA, err);
  if (r == 0)
    r = next->trim (next, count, offset, flags, err);
  inflight_exit (token);
  return r;
}

/* Bits first: after a flush, every completed write's bits are on
 * stable storage, whatever happens to the disk below.
 */
static int
dirtybitmap_flush (nbdkit_next *next, void *handle, uint32_t flags,
                   int *err)
{
  unsigned token;
  int r;

  if (!enter (&token, err))
    return -1;
  r = dur_sync_to (dur_requested ());
  if (r == -1) {
    nbdkit_error ("dirtybitmap: the bitmaps cannot be made durable");
    *err = EIO;
  }
  else
    r = next->flush (next, flags, err);
  inflight_exit (token);
  return r;
}

static int
dirtybitmap_extents (nbdkit_next *next, void *handle,
                     uint32_t count, uint64_t offset, uint32_t flags,
                     struct nbdkit_extents *extents, int *err)
{
  struct handle *h = handle;
  const struct bitmap_set *s;
  const struct live_bitmap *lb;
  unsigned token;
  int r;

  if (h->bitmap == NULL)
    return next->extents (next, count, offset, flags, extents, err);
  if (!enter (&token, err))
    return -1;
  s = tracker_current ();
  lb = set_find (s, h->bitmap);
  if (lb == NULL) {
    nbdkit_error ("dirtybitmap: bitmap %s no longer exists", h->bitmap);
    *err = EIO;
    r = -1;
  }
  else
    r = bitmap_extents (next, s, lb, count, offset, flags, extents, err);
  inflight_exit (token);
  return r;
}

static int
dirtybitmap_cache (nbdkit_next *next, void *handle,
                   uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  unsigned token;
  int r;

  if (!enter (&token, err))
    return -1;
  r = next->cache (next, count, offset, flags, err);
  inflight_exit (token);
  return r;
}

static struct nbdkit_filter filter = {
  .name              = "dirtybitmap",
  .longname          = "nbdkit dirty bitmap (changed block tracking) filter",
  .unload            = dirtybitmap_unload,
  .config            = dirtybitmap_config,
  .config_complete   = dirtybitmap_config_complete,
  .config_help       = dirtybitmap_config_help,
  .get_ready         = dirtybitmap_get_ready,
  .after_fork        = dirtybitmap_after_fork,
  .cleanup           = dirtybitmap_cleanup,
  .default_export    = dirtybitmap_default_export,
  .list_exports      = dirtybitmap_list_exports,
  .open              = dirtybitmap_open,
  .close             = dirtybitmap_close,
  .prepare           = dirtybitmap_prepare,
  .can_extents       = dirtybitmap_can_extents,
  .pread             = dirtybitmap_pread,
  .pwrite            = dirtybitmap_pwrite,
  .zero              = dirtybitmap_zero,
  .trim              = dirtybitmap_trim,
  .flush             = dirtybitmap_flush,
  .extents           = dirtybitmap_extents,
  .cache             = dirtybitmap_cache,
};

NBDKIT_REGISTER_FILTER (filter)
