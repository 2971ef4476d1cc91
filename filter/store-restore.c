/* SPDX-License-Identifier: BSD-3-Clause */
/* store-restore.c: the restore record of the bitmap file while it is
 * served (restore.h is the engine that restores): what a start does
 * with restore-from= and the record, the restored bits handed to the
 * engine, and the commit that says the restore is complete.
 *
 * At the start, in the start's transaction (after its actions):
 *
 *   record          restore-from=      the start
 *   none            -                  nothing to do
 *   none, or the    URI                begins a restore from URI
 *   complete one    (another URI)      (the source must answer)
 *   of another URI
 *   complete, URI   URI                nothing: it is done
 *   running, URI    -, or another URI  refused: the disk is half
 *                                      restored
 *   running, URI    URI                resumes it (the source must
 *                                      answer, with the same size)
 *
 * A restore begins on a disk of the source's size: a disk file of
 * another size is refused before anything is written; the bitmaps are
 * brought to the source's size (the disk's, from then on) in the same
 * commit, and connections that see another size are refused
 * (restore.c).
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>

#include <nbdkit-filter.h>

#include "restore-record.h"
#include "source.h"
#include "store.h"
#include "store-impl.h"

/* The restored bits' region, reserved while the engine maps it
 * (meta_lock).
 */
static struct bmf_region mapped;

/* The source answers, and has the size the disk must have; a disk
 * file is checked now, other disks at each connection.
 */
static int
probe (const struct store_config *cfg, uint64_t *size)
{
  struct bmerr err;
  struct stat sb;

  if (source_probe (cfg->restore_from, size, &err) == -1) {
    nbdkit_error ("dirtybitmap: %s", err.msg);
    return -1;
  }
  if (cfg->disk_file && stat (cfg->disk_file, &sb) == 0 &&
      (uint64_t) sb.st_size != *size) {
    nbdkit_error ("dirtybitmap: restore-from=%s: the source is %" PRIu64
                  " bytes, but the disk %s is %" PRIu64 " bytes: a disk is "
                  "restored only from a source of its size (resize the "
                  "disk first)", cfg->restore_from, *size, cfg->disk_file,
                  (uint64_t) sb.st_size);
    return -1;
  }
  return 0;
}

/* A restore runs: resume it, or refuse the start. */
static int
resume (const struct store_config *cfg, const struct bmf_state *st)
{
  const char *from = st->restore.source;
  uint64_t size;

  if (cfg->restore_from == NULL || strcmp (cfg->restore_from, from) != 0) {
    nbdkit_error ("dirtybitmap: %s: the disk is being restored from %s, and "
                  "only part of it is restored: %s (give "
                  "restore-from=%s%s)", bmf_path (store.file), from,
                  cfg->restore_from ?
                  "a restore cannot change its source half way" :
                  "it cannot be served without its source",
                  from, store.readonly ? " to a writable server" : "");
    return -1;
  }
  if (probe (cfg, &size) == -1)
    return -1;
  if (size != st->disk_size) {
    nbdkit_error ("dirtybitmap: restore-from=%s: the source is now %" PRIu64
                  " bytes, but the disk being restored from it is %" PRIu64
                  " bytes", from, size, st->disk_size);
    return -1;
  }
  fprintf (stderr, "nbdkit: dirtybitmap: resuming the restore from %s\n",
           from);
  return 0;
}

/* How many bitmaps of st record. */
static size_t
recording (const struct bmf_state *st)
{
  size_t i, n = 0;

  for (i = 0; i < st->nr_bitmaps; ++i)
    if ((st->bitmaps[i].flags & BMF_ENABLED) &&
        !(st->bitmaps[i].flags & BMF_INCONSISTENT))
      n++;
  return n;
}

/* Begin a restore from restore-from=, and add its checkpoint. */
static int
begin (const struct store_config *cfg, struct bmf_txn *t)
{
  const size_t dirtied = recording (bmf_txn_state (t));
  struct bmerr err;
  uint64_t size;

  if (probe (cfg, &size) == -1)
    return -1;
  if (bmf_txn_resize (t, size, &err) == -1 ||
      bmf_txn_restore_begin (t, cfg->restore_from, BMF_DEFAULT_GBITS,
                             &err) == -1) {
    nbdkit_error ("dirtybitmap: restore-from=%s: %s", cfg->restore_from,
                  err.msg);
    return -1;
  }
  if (cfg->restore_checkpoint &&
      bmf_txn_add (t, cfg->restore_checkpoint, cfg->checkpoint_gbits,
                   &err) == -1) {
    nbdkit_error ("dirtybitmap: restore-checkpoint=%s: %s",
                  cfg->restore_checkpoint, err.msg);
    return -1;
  }
  fprintf (stderr, "nbdkit: dirtybitmap: restoring the disk from %s (%"
           PRIu64 " bytes)%s%s%s%s\n", cfg->restore_from, size,
           dirtied ? ": every bitmap that was recording is now dirty all "
           "over" : "",
           cfg->restore_checkpoint ? (dirtied ? "; bitmap " : ": bitmap ")
           : "",
           cfg->restore_checkpoint ? cfg->restore_checkpoint : "",
           cfg->restore_checkpoint ? " records the writes from now on" : "");
  return 0;
}

int
restore_start_txn (const struct store_config *cfg, struct bmf_txn *t)
{
  const struct bmf_state *st = t ? bmf_txn_state (t)
    : bmf_state (store.file);
  const struct bmf_restore_record *rs = &st->restore;

  if (rs->state == BMF_RESTORE_RUNNING)
    return resume (cfg, st);
  if (cfg->restore_from == NULL)
    return 0;
  if (rs->state == BMF_RESTORE_DONE &&
      strcmp (rs->source, cfg->restore_from) == 0) {
    fprintf (stderr, "nbdkit: dirtybitmap: the restore from %s is "
             "complete: restore-from= has no effect\n", rs->source);
    return 0;
  }
  return begin (cfg, t);
}

int
store_restore_map (char **source, uint64_t *size, unsigned *gbits,
                   struct bits *bits, struct bmerr *err)
{
  const struct bmf_state *st;
  struct bmf_region reg;
  int r = 0;

  *source = NULL;
  memset (bits, 0, sizeof *bits);
  pthread_mutex_lock (&meta_lock);
  st = bmf_state (store.file);
  if (st->restore.state != BMF_RESTORE_RUNNING)
    goto out;
  reg = bmf_restored_region (st);
  r = -1;
  if ((*source = strdup (st->restore.source)) == NULL) {
    bmerr_set (err, errno, "%s", strerror (errno));
    goto out;
  }
  if (bmf_map_restored (store.file, true, bits, err) == -1)
    goto out;
  if (bmf_reserve (store.file, reg.offset, reg.length) == -1) {
    bmerr_set (err, errno, "%s", strerror (errno));
    bmf_unmap (bits);
    goto out;
  }
  mapped = reg;
  *size = st->disk_size;
  *gbits = st->restore.gbits;
  r = 0;
 out:
  pthread_mutex_unlock (&meta_lock);
  if (r == -1) {
    free (*source);
    *source = NULL;
  }
  return r;
}

void
store_restore_unmap (struct bits *bits)
{
  if (bits->map_base == NULL)
    return;
  pthread_mutex_lock (&meta_lock);
  bmf_unmap (bits);
  bmf_unreserve (store.file, mapped.offset, mapped.length);
  mapped = (struct bmf_region) { 0, 0 };
  pthread_mutex_unlock (&meta_lock);
}

int
store_restore_done (struct bmerr *err)
{
  struct bmf_txn *t;
  int r = -1;

  pthread_mutex_lock (&meta_lock);
  t = bmf_txn_begin (store.file, false, err);
  if (t && bmf_txn_restore_done (t, err) == 0)
    r = bmf_txn_commit (t, err);
  else
    bmf_txn_abort (t);
  pthread_mutex_unlock (&meta_lock);
  return r;
}

int
store_restore_record (enum bmf_restore *state, char **source,
                      uint64_t *size)
{
  const struct bmf_state *st;
  int r = 0;

  pthread_mutex_lock (&meta_lock);
  st = bmf_state (store.file);
  *state = st->restore.state;
  *size = st->disk_size;
  *source = NULL;
  if (*state != BMF_RESTORE_NONE &&
      (*source = strdup (st->restore.source)) == NULL)
    r = -1;
  pthread_mutex_unlock (&meta_lock);
  return r;
}
