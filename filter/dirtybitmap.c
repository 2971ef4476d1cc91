/* SPDX-License-Identifier: BSD-3-Clause */
/* dirtybitmap.c: the nbdkit filter: its registration and lifecycle
 * (open the bitmap file and the control socket at .get_ready, start
 * the control thread and a restore's fill at .after_fork, stop and
 * close them at .cleanup).  The
 * parameters are in params.c, the per-connection callbacks in
 * connections.c.  See nbdkit-dirtybitmap-filter(1).
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <libgen.h>

#include <nbdkit-filter.h>

#include "backup.h"
#include "cmdline.h"
#include "commands.h"
#include "connections.h"
#include "control.h"
#include "inflight.h"
#include "liveness.h"
#include "msg.h"
#include "params.h"
#include "report.h"
#include "restore.h"
#include "store.h"

/* -D dirtybitmap.verbose=1: trace the write path. */
NBDKIT_DLL_PUBLIC int dirtybitmap_debug_verbose = 0;

static nbdkit_backend *backend;         /* from .after_fork */

static int plugin_size (uint64_t *size, struct bmerr *err);

/* lib/ says what it does through this (msg.h); its errors come back
 * as values, reported with filter_error (report.h).
 */
void
bm_debug (const char *fs, ...)
{
  va_list args;
  char *msg;

  va_start (args, fs);
  if (vasprintf (&msg, fs, args) == -1)
    msg = NULL;
  va_end (args);
  filter_debug ("%s", msg ? msg : fs);
  free (msg);
}

/* nbdkit prints, on the filter's line of --version, the nbdkit
 * version the filter was built against (nbdkit 1.32 refuses a filter
 * whose _version is not its own, and filters have no other version
 * field): the filter's own version is said by --help (the
 * description) and by -v.
 */
#define DIRTYBITMAP_DESCRIPTION \
  "nbdkit-dirtybitmap-filter " PACKAGE_VERSION \
  ": persistent changed-block tracking for any plugin."

static void
dirtybitmap_load (void)
{
  filter_debug ("nbdkit-dirtybitmap-filter %s", PACKAGE_VERSION);
}

static void
dirtybitmap_unload (void)
{
  backup_unload ();
  params_free ();
}

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
  const bool readonly = cmdline_readonly () && params.nr_actions == 0;
  const struct store_config cfg = {
    .path = params.bitmap_file, .bitmap = params.bitmap,
    .actions = params.actions, .nr_actions = params.nr_actions,
    .merge_file = params.merge_file, .durability = params.durability,
    .cgbits = params.cgbits,
    .extents = params.extents, .readonly = readonly,
    .disk_file = params.disk_file,
    /* Never world-writable (bmf_create), never more open than the disk. */
    .create_mode = params.disk_mode,
    .restore_from = params.restore_from,
    .restore_checkpoint = params.restore_checkpoint,
    .checkpoint_gbits = params.checkpoint_gbits,
  };
  struct bmerr err;
  char *dir;

  /* The socket first: a start refused for it must leave the bitmap
   * file as it was, actions unapplied.
   */
  if (params.control_path &&
      control_open (params.control_path, &err) == -1) {
    filter_error ("%s", err.msg);
    return -1;
  }
  if (store_open (&cfg) == -1) {
    control_close ();
    return -1;
  }
  if (restore_init () == -1) {
    store_close ();
    control_close ();
    return -1;
  }
  /* Scratch stores go next to the bitmap file unless told otherwise. */
  dir = strdup (params.bitmap_file);
  if (dir == NULL) {
    filter_error ("strdup: %m");
    restore_stop ();
    store_close ();
    control_close ();
    return -1;
  }
  backup_init (params.export_name, dirname (dir), plugin_size);
  free (dir);
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

  next = nbdkit_next_context_open (backend, 0, params.export_name, 1);
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

/* The disk's size now (backup-begin, at its cut): through a context
 * of its own, opened for the occasion, since nbdkit keeps the size a
 * context read first for the context's whole life.
 */
static int
plugin_size (uint64_t *size, struct bmerr *err)
{
  nbdkit_next *next;
  int64_t r = -1;

  next = nbdkit_next_context_open (backend, 1, params.export_name, 1);
  if (next == NULL) {
    bmerr_set (err, EIO, "cannot open the layer below to read the disk's "
               "size");
    return -1;
  }
  if (next->prepare (next) == 0)
    r = next->get_size (next);
  next->finalize (next);
  nbdkit_next_context_close (next);
  if (r == -1) {
    bmerr_set (err, EIO, "cannot read the disk's size from the layer below");
    return -1;
  }
  *size = r;
  return 0;
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
    filter_error ("control=%s: %s", params.control_path,
                  err.msg);
    return -1;
  }
  if (liveness_start (store_alive) == -1) {
    filter_error ("cannot start the liveness thread: %m");
    return -1;
  }
  restore_start (give_up);
  return restore_fill_start (b, params.export_name);
}

static void
dirtybitmap_cleanup (nbdkit_backend *b)
{
  control_close ();
  liveness_stop ();
  restore_fill_stop ();
  restore_stop ();
  store_close ();
}

static struct nbdkit_filter filter = {
  .name              = "dirtybitmap",
  .longname          = "nbdkit dirty bitmap (changed block tracking) filter",
  .description       = DIRTYBITMAP_DESCRIPTION,
  .load              = dirtybitmap_load,
  .unload            = dirtybitmap_unload,
  .config            = params_config,
  .config_complete   = params_config_complete,
  .config_help       = PARAMS_HELP,
  .get_ready         = dirtybitmap_get_ready,
  .after_fork        = dirtybitmap_after_fork,
  .cleanup           = dirtybitmap_cleanup,
  .default_export    = conn_default_export,
  .list_exports      = conn_list_exports,
  .open              = conn_open,
  .close             = conn_close,
  .prepare           = conn_prepare,
  .get_size          = conn_get_size,
  .can_write         = conn_can_write,
  .can_trim          = conn_can_trim,
  .can_zero          = conn_can_zero,
  .can_fua           = conn_can_fua,
  .can_flush         = conn_can_flush,
  .can_cache         = conn_can_cache,
  .can_multi_conn    = conn_can_multi_conn,
  .can_extents       = conn_can_extents,
  .pread             = conn_pread,
  .pwrite            = conn_pwrite,
  .zero              = conn_zero,
  .trim              = conn_trim,
  .flush             = conn_flush,
  .extents           = conn_extents,
  .cache             = conn_cache,
};

NBDKIT_REGISTER_FILTER (filter)
