/* SPDX-License-Identifier: BSD-3-Clause */
/* restore-fill.c: the fill of a restore in the background (see
 * restore.c for the rules it keeps).
 *
 * One thread, with a context of its own on the layer below, walks the
 * granules that are not restored, from where it stopped to the end of
 * the disk and round again, a chunk (FILL_CHUNK granules, 1M) at a
 * time: it claims the chunk, reads from the source what is not ready
 * and writes it below, as a client's read does.  After FILL_BATCH
 * chunks (16M) it flushes the layer below, marks the batch restored
 * and syncs the restored bits (so that a power loss costs at most the
 * batch being filled).  When no granule is left, the restore is
 * complete (restore_complete).
 *
 * Clients go first: while they have made a request in the last
 * FILL_IDLE_NS, the fill waits, but never more than FILL_MAX_WAITS
 * times in a row, so that it goes on, a chunk at a time, under a
 * load that never stops.  Each chunk, and each batch's flush and
 * marks, run as a request in flight (inflight.h), so that a pause
 * holds the fill too.  A failure (the source has gone, the disk
 * fails) is logged, and the chunk tried again later, after a wait
 * that grows up to FILL_RETRY_MAX_NS.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <pthread.h>

#include <nbdkit-filter.h>

#include "inflight.h"
#include "restore.h"
#include "restore-impl.h"
#include "testpause.h"
#include "util.h"

#define FILL_CHUNK 16                   /* granules */
#define FILL_BATCH 16                   /* chunks */
#define FILL_IDLE_NS 10000000           /* 10 ms */
#define FILL_MAX_WAITS 10
#define FILL_RETRY_MIN_NS 100000000     /* 100 ms */
#define FILL_RETRY_MAX_NS 10000000000   /* 10 s */

static nbdkit_next *below;              /* the fill's context */
static pthread_t thread;
static bool started;
/* Protects stop; wake ends the fill's waits early. */
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static bool stop;

struct batch {
  size_t n;
  struct { uint64_t a, b; } run[FILL_BATCH];
};

static int64_t
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Wait ns, or less if told to stop: false once told. */
static bool
wait_ns (int64_t ns)
{
  struct timespec ts;
  bool go_on;

  clock_gettime (CLOCK_REALTIME, &ts);
  ts.tv_sec += ns / 1000000000;
  ts.tv_nsec += ns % 1000000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock (&stop_lock);
  if (!stop)
    pthread_cond_timedwait (&wake, &stop_lock, &ts);
  go_on = !stop;
  pthread_mutex_unlock (&stop_lock);
  return go_on;
}

bool
fill_stopping (void)
{
  bool r;

  pthread_mutex_lock (&stop_lock);
  r = stop;
  pthread_mutex_unlock (&stop_lock);
  return r;
}

/* Clients go first (see the top). */
static bool
give_way (void)
{
  int i;

  for (i = 0; i < FILL_MAX_WAITS; ++i) {
    int64_t last = __atomic_load_n (&rs.last_request_ns, __ATOMIC_RELAXED);
    if (now_ns () - last >= FILL_IDLE_NS)
      break;
    if (!wait_ns (FILL_IDLE_NS))
      return false;
  }
  return true;
}

/* Fill what is not ready of [a, b] (not restored when it was found). */
static int
fill_chunk (uint64_t a, uint64_t b, int *err)
{
  uint64_t i = a, j;
  int r = 0;

  claim (a, b);
  while (r == 0 && i <= b) {
    if (ready (i)) {
      i++;
      continue;
    }
    for (j = i; j < b && !ready (j + 1); ++j)
      ;
    r = fill_granules (below, i, j, true, NULL, err);
    i = j + 1;
  }
  unclaim (a, b);
  return r;
}

/* Flush below, then mark the batch's filled granules restored, and
 * sync them.  (A granule of the batch that a client has marked since
 * is marked again, which changes nothing.)
 */
static int
commit_batch (struct batch *bt, int *err)
{
  uint64_t i;
  size_t k;

  if (bt->n == 0)
    return 0;
  if (below->flush (below, 0, err) == -1)
    return -1;
  test_pause_point ("restore-fill-flushed");
  for (k = 0; k < bt->n; ++k)
    for (i = bt->run[k].a; i <= bt->run[k].b; ++i)
      if (ready (i))
        mark_restored (i, i);
  test_pause_point ("restore-fill-marked");
  if (restore_sync (err) == -1)
    return -1;
  test_pause_point ("restore-fill-synced");
  bt->n = 0;
  return 0;
}

/* One step: the next chunk, or the batch's commit; 1 when every
 * granule is restored, -1 on error.
 */
static int
step (struct batch *bt, uint64_t *cursor, int *err)
{
  uint64_t a, b;
  unsigned token;
  int r;

  a = bits_next_clear (&rs.restored, *cursor, rs.nr);
  /* Past the end, once the batch is committed: round again. */
  if (a == rs.nr && bt->n == 0 && *cursor > 0) {
    *cursor = 0;
    a = bits_next_clear (&rs.restored, 0, rs.nr);
  }
  if (a == rs.nr && bt->n == 0)
    return 1;
  if (inflight_enter (&token) == -1) {
    *err = ESHUTDOWN;
    return -1;
  }
  if (a == rs.nr || bt->n == FILL_BATCH)
    r = commit_batch (bt, err);
  else {
    b = MIN (bits_next_set (&rs.restored, a, rs.nr), a + FILL_CHUNK) - 1;
    r = fill_chunk (a, b, err);
    if (r == 0) {
      bt->run[bt->n].a = a;
      bt->run[bt->n++].b = b;
      *cursor = b + 1;
    }
  }
  inflight_exit (token);
  return r;
}

static void *
fill_main (void *arg)
{
  struct batch bt = { .n = 0 };
  uint64_t cursor = 0;
  int64_t retry = FILL_RETRY_MIN_NS;
  int r = 0, err = 0;

  test_pause_point ("restore-fill-start");
  while (!fill_stopping () && give_way ()) {
    r = step (&bt, &cursor, &err);
    if (r == 1)
      break;
    if (r == 0) {
      retry = FILL_RETRY_MIN_NS;
      continue;
    }
    if (fill_stopping ())
      break;
    nbdkit_error ("dirtybitmap: restore-from=%s: the fill failed (%s): it "
                  "is tried again", rs.source, strerror (err));
    if (!wait_ns (retry))
      break;
    retry = MIN (2 * retry, FILL_RETRY_MAX_NS);
  }
  if (r == 1)
    restore_complete (below);
  return NULL;
}

/* The fill's own context on the layer below, checked as a client's
 * connection is.
 */
static int
open_below (nbdkit_backend *backend, const char *export_name,
            struct bmerr *err)
{
  below = nbdkit_next_context_open (backend, 0, export_name, 1);
  if (below == NULL) {
    bmerr_set (err, EIO, "cannot open the layer below");
    return -1;
  }
  if (below->prepare (below) == -1 || below->can_write (below) != 1 ||
      restore_check_connection (below) == -1) {
    bmerr_set (err, EIO, "the layer below cannot be restored (see the "
               "errors above)");
    below->finalize (below);
    nbdkit_next_context_close (below);
    below = NULL;
    return -1;
  }
  return 0;
}

int
fill_start (nbdkit_backend *backend, const char *export_name,
            struct bmerr *err)
{
  int e;

  if (open_below (backend, export_name, err) == -1)
    return -1;
  e = pthread_create (&thread, NULL, fill_main, NULL);
  if (e) {
    bmerr_set (err, e, "cannot start the fill: %s", strerror (e));
    below->finalize (below);
    nbdkit_next_context_close (below);
    below = NULL;
    return -1;
  }
  started = true;
  return 0;
}

void
fill_stop (void)
{
  if (!started)
    return;
  pthread_mutex_lock (&stop_lock);
  stop = true;
  pthread_cond_broadcast (&wake);
  pthread_mutex_unlock (&stop_lock);
  pthread_join (thread, NULL);
  started = false;
  below->finalize (below);
  nbdkit_next_context_close (below);
  below = NULL;
}
