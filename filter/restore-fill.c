/* SPDX-License-Identifier: BSD-3-Clause */
/* restore-fill.c: the fill of a restore in the background (see
 * restore.c for the rules it keeps).
 *
 * One thread, with a context of its own on the layer below, walks the
 * granules that are not restored, from where it stopped to the end of
 * the disk and round again, a step at a time: it claims the step's
 * granules, and fills those that are not ready, as a client's read
 * does.  Where the source reads as zeroes (its base:allocation, asked
 * for FILL_MAP bytes ahead and kept: the source never changes), a step
 * is a run of such granules, up to FILL_ZERO_STEP, written below as
 * zeroes (a zero request that may trim: a hole in a file) without
 * reading the source; elsewhere it is FILL_STEP granules (4M) at most,
 * read from the source with several requests in flight (source.c) and
 * written below.  After FILL_BATCH steps, or FILL_BATCH_DATA bytes of
 * data, it flushes the layer below, marks the batch restored and syncs
 * the restored bits (so that a power loss costs at most the batch
 * being filled).  When no granule is left, the restore is complete
 * (restore_complete).
 *
 * Clients go first: while they have made a request in the last
 * FILL_IDLE_NS, the fill waits, but never more than FILL_MAX_WAITS
 * times in a row, so that it goes on, a step at a time, under a load
 * that never stops.  Each step, and each batch's flush and marks, run
 * as a request in flight (inflight.h), so that a pause holds the fill
 * too.  A failure (the source has gone, the disk fails) is logged,
 * and the step tried again later, after a wait that grows up to
 * FILL_RETRY_MAX_NS.
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

#define FILL_STEP 64                    /* granules of data */
#define FILL_ZERO_STEP (1024 * 1024 * 1024)     /* bytes of zeroes */
#define FILL_BATCH 64                   /* steps */
#define FILL_BATCH_DATA (16 * 1024 * 1024)      /* bytes of data */
#define FILL_MAP (1024 * 1024 * 1024)   /* bytes */
#define FILL_MAP_EXTENTS 256
#define FILL_IDLE_NS 10000000           /* 10 ms */
#define FILL_MAX_WAITS 10
#define FILL_RETRY_MIN_NS 100000000     /* 100 ms */
#define FILL_RETRY_MAX_NS 10000000000   /* 10 s */

static nbdkit_next *below;              /* the fill's context */
static char *buf;                       /* FILL_STEP granules */
static bool zeroes;                     /* below can write zeroes */
static pthread_t thread;
static bool started;
/* Protects stop; wake ends the fill's waits early. */
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static bool stop;

struct batch {
  size_t n;
  uint64_t data;                        /* bytes of data filled */
  struct { uint64_t a, b; } run[FILL_BATCH];
};

/* What the source said of [offset, end): ex[0..n), adjacent. */
static struct {
  uint64_t offset, end;
  size_t n;
  struct source_extent ex[FILL_MAP_EXTENTS];
} map;

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

/* Ask the source which of it reads as zeroes, from start on. */
static int
ask_map (uint64_t start, int *err)
{
  struct bmerr e;
  size_t k, n = FILL_MAP_EXTENTS;

  if (source_map (rs.src, start, MIN (rs.size - start, FILL_MAP), map.ex, &n,
                  fill_stopping, &e) == -1) {
    if (e.errnum != ESHUTDOWN)
      nbdkit_error ("dirtybitmap: %s", e.msg);
    *err = e.errnum == ESHUTDOWN ? ESHUTDOWN : EIO;
    map.n = 0;
    map.offset = map.end = 0;
    return -1;
  }
  map.n = n;
  map.offset = map.end = start;
  for (k = 0; k < n; ++k)
    map.end += map.ex[k].length;
  return 0;
}

/* The first granule from start whose data lies all in [zs, ze). */
static uint64_t
first_inside (uint64_t zs, uint64_t ze)
{
  const uint64_t g = (zs + (UINT64_C (1) << rs.gbits) - 1) >> rs.gbits;

  return g < rs.nr && granule_end (g) <= ze ? g : rs.nr;
}

/* Whether granule i reads as zeroes in the source (all of it), and
 * the last granule of the same kind after it, up to limit, that the
 * map knows of (data where it knows nothing).
 */
static int
map_granule (uint64_t i, uint64_t limit, bool *zero, uint64_t *last,
             int *err)
{
  const uint64_t start = granule_start (i);
  uint64_t pos = map.offset, g;
  size_t k = 0;

  *zero = false;
  *last = limit;
  if (!zeroes)
    return 0;
  if ((start < map.offset || start >= map.end) && ask_map (start, err) == -1)
    return -1;
  while (pos + map.ex[k].length <= start)
    pos += map.ex[k++].length;
  if (map.ex[k].zero && granule_end (i) <= pos + map.ex[k].length) {
    const uint64_t end = pos + map.ex[k].length;
    *zero = true;
    *last = MIN (limit, end >= rs.size ? rs.nr - 1 : (end >> rs.gbits) - 1);
    return 0;
  }
  /* Data up to the first granule that lies in a zero extent. */
  for (; k < map.n; pos += map.ex[k++].length) {
    g = map.ex[k].zero ? first_inside (MAX (pos, start + 1),
                                       pos + map.ex[k].length) : rs.nr;
    if (g < rs.nr) {
      *last = MIN (limit, g - 1);
      break;
    }
  }
  return 0;
}

/* Fill what is not ready of the next step from a (not restored when
 * it was found), up to limit, and add it to the batch.
 */
static int
fill_step (uint64_t a, uint64_t limit, struct batch *bt, int *err)
{
  uint64_t b, i, j;
  bool zero;
  int r = 0;

  if (map_granule (a, limit, &zero, &b, err) == -1)
    return -1;
  b = MIN (b, a + (zero ? FILL_ZERO_STEP >> rs.gbits : FILL_STEP) - 1);
  claim (a, b);
  for (i = a; r == 0 && i <= b; i = j + 1) {
    j = i;
    if (ready (i))
      continue;
    while (j < b && !ready (j + 1))
      j++;
    r = fill_granules (below, i, j, zero ? NULL : buf, true, err);
    if (!zero)
      bt->data += granule_end (j) - granule_start (i);
  }
  unclaim (a, b);
  if (r == 0) {
    bt->run[bt->n].a = a;
    bt->run[bt->n++].b = b;
  }
  return r;
}

/* Flush below, then mark the batch's filled granules restored, and
 * sync them.  (A granule of the batch that a client has marked since
 * is marked again, which changes nothing.)
 */
static int
commit_batch (struct batch *bt, int *err)
{
  uint64_t i, j;
  size_t k;

  if (bt->n == 0)
    return 0;
  if (below->flush (below, 0, err) == -1)
    return -1;
  test_pause_point ("restore-fill-flushed");
  for (k = 0; k < bt->n; ++k)
    for (i = bt->run[k].a; i <= bt->run[k].b; i = j + 1) {
      j = i;
      if (!ready (i))
        continue;
      while (j < bt->run[k].b && ready (j + 1))
        j++;
      mark_restored (i, j);
    }
  test_pause_point ("restore-fill-marked");
  if (restore_sync (err) == -1)
    return -1;
  test_pause_point ("restore-fill-synced");
  bt->n = 0;
  bt->data = 0;
  return 0;
}

/* One step: the next one, or the batch's commit; 1 when every
 * granule is restored, -1 on error.
 */
static int
step (struct batch *bt, uint64_t *cursor, int *err)
{
  uint64_t a;
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
  if (a == rs.nr || bt->n == FILL_BATCH || bt->data >= FILL_BATCH_DATA)
    r = commit_batch (bt, err);
  else {
    r = fill_step (a, bits_next_set (&rs.restored, a, rs.nr) - 1, bt, err);
    if (r == 0)
      *cursor = bt->run[bt->n - 1].b + 1;
  }
  inflight_exit (token);
  return r;
}

static void *
fill_main (void *arg)
{
  struct batch bt = { .n = 0, .data = 0 };
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

  buf = malloc (FILL_STEP << rs.gbits);
  if (buf == NULL) {
    bmerr_set (err, errno, "cannot start the fill: %s", strerror (errno));
    return -1;
  }
  if (open_below (backend, export_name, err) == -1)
    goto err;
  /* (Or every granule is read from the source.) */
  zeroes = below->can_zero (below) > NBDKIT_ZERO_NONE;
  e = pthread_create (&thread, NULL, fill_main, NULL);
  if (e) {
    bmerr_set (err, e, "cannot start the fill: %s", strerror (e));
    below->finalize (below);
    nbdkit_next_context_close (below);
    below = NULL;
    goto err;
  }
  started = true;
  return 0;

 err:
  free (buf);
  buf = NULL;
  return -1;
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
  free (buf);
  buf = NULL;
}
