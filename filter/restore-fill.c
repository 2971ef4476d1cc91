/* SPDX-License-Identifier: BSD-3-Clause */
/* restore-fill.c: the fill of a restore in the background (see
 * restore.c for the rules it keeps).
 *
 * Three threads, one after the other on the same granules, so that
 * the source is read while the disk is written and flushed.  The
 * reader (the fill thread) walks the granules that are not restored,
 * from where it stopped to the end of the disk and round again, a
 * step at a time: it claims the step's granules, reads from the source
 * those that are not ready, and hands the step to the writer, which
 * writes them below (with a context of its own on the layer below),
 * marks them filled and lets the claim go, as a client's read does.
 * Where the source reads as zeroes (its base:allocation, asked for
 * FILL_MAP bytes ahead and kept: the source never changes), a step is
 * a run of such granules, up to FILL_ZERO_STEP, written below as
 * zeroes (a zero request that may trim: a hole in a file) without
 * reading the source; elsewhere it is FILL_STEP granules (4M) at most,
 * its runs of data read together, with several requests in flight
 * (source.c), and its granules of zeroes (runs of fewer than FILL_GAP
 * between data) written as zeroes.  FILL_DEPTH steps
 * at most are between the reader and the writer, each with its
 * buffer.  After FILL_BATCH steps, or FILL_BATCH_DATA bytes of data,
 * the writer hands the batch to the committer, which flushes the layer
 * below, marks the batch restored and syncs the restored bits (so that
 * a power loss costs at most the batches being filled and committed),
 * while the writer fills the next one (and waits for the committer
 * only if that one is full first).  At the end of the disk the reader
 * waits for both to be done; when no granule is left, the restore is
 * complete (restore_complete).
 *
 * Clients go first: while they have made a request in the last
 * FILL_IDLE_NS, the reader waits, but never more than FILL_MAX_WAITS
 * times in a row, so that it goes on, a step at a time, under a load
 * that never stops.  Each step, from its claim to its write, and each
 * batch's flush and marks, run as a request in flight (inflight.h:
 * the reader enters, the writer or, for the step that ends a batch,
 * the committer exits; neither waits for anything a pause holds), so
 * that a pause holds the fill too.  A failure (the source has gone,
 * the disk fails) is logged, the steps after it are dropped, and the
 * fill goes on later from the step that failed (from the start, for
 * a commit), after a wait that grows up to FILL_RETRY_MAX_NS.
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

#define FILL_STEP 64                    /* granules (<= 64) */
#define FILL_GAP 16                     /* granules */
#define FILL_ZERO_STEP (1024 * 1024 * 1024)     /* bytes of zeroes */
#define FILL_DEPTH 3                    /* steps */
#define FILL_BATCH 64                   /* steps */
#define FILL_BATCH_DATA (16 * 1024 * 1024)      /* bytes of data */
#define FILL_MAP (1024 * 1024 * 1024)   /* bytes */
#define FILL_MAP_EXTENTS 256
#define FILL_IDLE_NS 10000000           /* 10 ms */
#define FILL_MAX_WAITS 10
#define FILL_RETRY_MIN_NS 100000000     /* 100 ms */
#define FILL_RETRY_MAX_NS 10000000000   /* 10 s */

static nbdkit_next *below;              /* the writer's context */
static bool zeroes;                     /* below can write zeroes */
static pthread_t thread;
static bool started;
/* Protects stop; wake ends the fill's waits early. */
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static bool stop;

/* A step handed from the reader to the writer: granules [a, b],
 * claimed (none if a > b: only a commit), their data in buf, or
 * zeroes; token is its inflight_enter's.
 */
struct step {
  uint64_t a, b;
  bool zero, commit;
  uint64_t zeromask;                    /* of a data step: bit i - a */
  unsigned token;
  char *buf;                            /* FILL_STEP granules */
};

/* The granules written since the last commit, and the token of the
 * step that asked for it to be committed.
 */
struct batch {
  size_t n;
  uint64_t data;                        /* bytes of data filled */
  unsigned token;
  struct { uint64_t a, b; } run[FILL_BATCH];
};

/* The steps between the reader and the writer: q[head], ... queued of
 * them, in order.  Under pipe_lock; changed wakes any of the three.
 * failed is set by the writer or the committer (with err and the
 * granule to go on from) and cleared by the reader; the steps after a
 * failure are dropped.  busy: the writer has a step in hand.
 */
static pthread_mutex_t pipe_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static struct step q[FILL_DEPTH];
static size_t head, queued;
static bool busy, failed, writer_stop, committer_stop;
static int fail_err;
static uint64_t fail_at;
/* The batch the writer fills, and the one the committer commits (NULL
 * while it has none).
 */
static struct batch batches[2];
static struct batch *filling = &batches[0], *committing;

/* What the source said of [offset, end): ex[0..n), adjacent. */
static struct {
  uint64_t offset, end;
  size_t n;
  struct source_extent ex[FILL_MAP_EXTENTS];
} smap;

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
  size_t k, nr = FILL_MAP_EXTENTS;

  if (source_map (rs.src, start, MIN (rs.size - start, FILL_MAP), smap.ex, &nr,
                  fill_stopping, &e) == -1) {
    if (e.errnum != ESHUTDOWN)
      nbdkit_error ("dirtybitmap: %s", e.msg);
    *err = e.errnum == ESHUTDOWN ? ESHUTDOWN : EIO;
    smap.n = 0;
    smap.offset = smap.end = 0;
    return -1;
  }
  smap.n = nr;
  smap.offset = smap.end = start;
  for (k = 0; k < nr; ++k)
    smap.end += smap.ex[k].length;
  return 0;
}

/* Whether granule g lies all in a zero extent of the map (false past
 * its end, or without a map).  *k and *pos walk the map: the extent
 * where the last granule asked for began, and its offset; granules
 * are asked for in order.
 */
static bool
map_zero (uint64_t g, size_t *k, uint64_t *pos)
{
  const uint64_t start = granule_start (g);

  if (!zeroes)
    return false;
  while (*k < smap.n && *pos + smap.ex[*k].length <= start)
    *pos += smap.ex[(*k)++].length;
  return *k < smap.n && smap.ex[*k].zero &&
    granule_end (g) <= *pos + smap.ex[*k].length;
}

/* The step from granule a (not restored), up to limit: a run of
 * granules that read as zeroes in the source, up to FILL_ZERO_STEP;
 * or else up to FILL_STEP granules ending with one of data, with the
 * zero granules among them in zeromask (FILL_GAP of them in a row end
 * the step: they begin the next one), so that scattered data is read
 * with many requests in flight.
 */
static int
plan_step (uint64_t a, uint64_t limit, struct step *st, int *err)
{
  const uint64_t start = granule_start (a);
  uint64_t pos, g, gap = 0;
  size_t k = 0;

  if (zeroes && (start < smap.offset || start >= smap.end) &&
      ask_map (start, err) == -1)
    return -1;
  pos = smap.offset;
  st->a = st->b = a;
  st->zeromask = 0;
  st->zero = map_zero (a, &k, &pos);
  if (st->zero) {
    limit = MIN (limit, a + (FILL_ZERO_STEP >> rs.gbits) - 1);
    while (st->b < limit && map_zero (st->b + 1, &k, &pos))
      st->b++;
    return 0;
  }
  limit = MIN (limit, a + FILL_STEP - 1);
  for (g = a + 1; g <= limit && gap < FILL_GAP; ++g) {
    if (map_zero (g, &k, &pos)) {
      st->zeromask |= UINT64_C (1) << (g - a);
      gap++;
    }
    else {
      st->b = g;
      gap = 0;
    }
  }
  /* (Only the zero granules up to b.) */
  if (st->b - a + 1 < 64)
    st->zeromask &= (UINT64_C (1) << (st->b - a + 1)) - 1;
  return 0;
}

/* Whether granule i of st reads as zeroes. */
static bool
is_zero (const struct step *st, uint64_t i)
{
  return st->zero || ((st->zeromask >> (i - st->a)) & 1);
}

/* The next run [*i, *j] of granules of st from *i that are not ready,
 * and all zero or all data (*zero); false if there is none.
 */
static bool
next_kind_run (const struct step *st, uint64_t *i, uint64_t *j, bool *zero)
{
  while (*i <= st->b && ready (*i))
    ++*i;
  if (*i > st->b)
    return false;
  *zero = is_zero (st, *i);
  for (*j = *i; *j < st->b && !ready (*j + 1) &&
         is_zero (st, *j + 1) == *zero; ++*j)
    ;
  return true;
}

/*----------------------------------------------------------------------
 * The writer.
 */

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
  return 0;
}

/* Write what is not ready of st's granules, and let them go; add
 * them to the batch being filled.
 */
static int
write_step (struct step *st, struct batch *bt, int *err)
{
  uint64_t i = st->a, j;
  bool zero;
  int r = 0;

  while (r == 0 && next_kind_run (st, &i, &j, &zero)) {
    r = fill_write (below, i, j, zero ? NULL :
                    st->buf + granule_start (i - st->a), true, err);
    if (!zero)
      bt->data += granule_end (j) - granule_start (i);
    i = j + 1;
  }
  unclaim (st->a, st->b);
  if (r == 0) {
    bt->run[bt->n].a = st->a;
    bt->run[bt->n++].b = st->b;
  }
  return r;
}

/* The writer has written st (r: how it went); under pipe_lock.  If
 * the batch being filled is full, or st asks for it, it is handed to
 * the committer (once it is done with the one before) with st's
 * token; else st's token goes.
 */
static void
step_done (struct step *st, int r, int err)
{
  struct batch *bt = filling;

  if (r == -1 && !failed) {
    failed = true;
    fail_err = err;
    fail_at = st->a;
  }
  if (!st->commit && bt->n < FILL_BATCH && bt->data < FILL_BATCH_DATA) {
    inflight_exit (st->token);
    return;
  }
  while (committing)
    pthread_cond_wait (&changed, &pipe_lock);
  bt->token = st->token;
  committing = bt;
  filling = bt == &batches[0] ? &batches[1] : &batches[0];
}

static void *
writer_main (void *arg)
{
  struct step *st;
  int r, err = 0;

  pthread_mutex_lock (&pipe_lock);
  for (;;) {
    while (queued == 0 && !writer_stop)
      pthread_cond_wait (&changed, &pipe_lock);
    if (queued == 0)
      break;
    st = &q[head];
    busy = true;
    r = failed ? 1 : 0;
    pthread_mutex_unlock (&pipe_lock);
    if (st->a > st->b)
      r = 0;
    else if (r == 1) {
      /* Dropped. */
      unclaim (st->a, st->b);
      r = 0;
    }
    else
      r = write_step (st, filling, &err);
    pthread_mutex_lock (&pipe_lock);
    step_done (st, r, err);
    head = (head + 1) % FILL_DEPTH;
    queued--;
    busy = false;
    pthread_cond_broadcast (&changed);
  }
  pthread_mutex_unlock (&pipe_lock);
  return NULL;
}

/* The committer: each batch handed over, committed. */
static void *
committer_main (void *arg)
{
  struct batch *bt;
  int r, err = 0;

  pthread_mutex_lock (&pipe_lock);
  for (;;) {
    while (committing == NULL && !committer_stop)
      pthread_cond_wait (&changed, &pipe_lock);
    if (committing == NULL)
      break;
    bt = committing;
    pthread_mutex_unlock (&pipe_lock);
    r = commit_batch (bt, &err);
    inflight_exit (bt->token);
    pthread_mutex_lock (&pipe_lock);
    /* (A batch that failed is dropped: its granules, filled and not
     * restored, are filled again from the start.)
     */
    if (r == -1 && !failed) {
      failed = true;
      fail_err = err;
      fail_at = 0;
    }
    bt->n = 0;
    bt->data = 0;
    committing = NULL;
    pthread_cond_broadcast (&changed);
  }
  pthread_mutex_unlock (&pipe_lock);
  return NULL;
}

/*----------------------------------------------------------------------
 * The reader.
 */

/* Hand st to the writer (there is room). */
static void
hand_over (const struct step *st)
{
  struct step *t;

  pthread_mutex_lock (&pipe_lock);
  t = &q[(head + queued) % FILL_DEPTH];
  t->a = st->a;
  t->b = st->b;
  t->zero = st->zero;
  t->zeromask = st->zeromask;
  t->commit = st->commit;
  t->token = st->token;
  queued++;
  pthread_cond_broadcast (&changed);
  pthread_mutex_unlock (&pipe_lock);
}

/* Wait for room for a step (and set buf to its buffer), or, with
 * all, for the writer to be done with every step.  After a failure of
 * the writer, waits for it to be done with every step (it drops them),
 * clears the failure and returns -1 with its error, and the granule to
 * go on from in cursor.
 */
static int
wait_writer (bool all, char **buf, uint64_t *cursor, int *err)
{
  int r = 0;

  pthread_mutex_lock (&pipe_lock);
  while (all || failed ? queued > 0 || busy || committing
         : queued == FILL_DEPTH)
    pthread_cond_wait (&changed, &pipe_lock);
  if (failed) {
    failed = false;
    *err = fail_err;
    *cursor = fail_at;
    r = -1;
  }
  if (buf)
    *buf = q[(head + queued) % FILL_DEPTH].buf;
  pthread_mutex_unlock (&pipe_lock);
  return r;
}

/* Read the next step from a (not restored when it was found), up to
 * limit, into buf, claimed, in st: its runs of data not ready, all
 * with requests in flight together.
 */
static int
read_step (uint64_t a, uint64_t limit, char *buf, struct step *st, int *err)
{
  struct source_range r[FILL_STEP];
  struct bmerr e;
  uint64_t i = a, j;
  size_t n = 0;
  bool zero;

  if (plan_step (a, limit, st, err) == -1)
    return -1;
  st->commit = false;
  claim (st->a, st->b);
  while (next_kind_run (st, &i, &j, &zero)) {
    if (!zero)
      r[n++] = (struct source_range) {
        .buf = buf + granule_start (i - a),
        .offset = granule_start (i),
        .count = granule_end (j) - granule_start (i) };
    i = j + 1;
  }
  /* The fill gives up when it is stopped. */
  if (n > 0 && source_preadv (rs.src, r, n, fill_stopping, &e) == -1) {
    if (e.errnum != ESHUTDOWN)
      nbdkit_error ("dirtybitmap: %s", e.msg);
    *err = e.errnum == ESHUTDOWN ? ESHUTDOWN : EIO;
    unclaim (st->a, st->b);
    return -1;
  }
  test_pause_point ("restore-fill-read");
  return 0;
}

/* At the end of the disk: the writer commits all it has.  1 if every
 * granule is restored then; else the next round begins at 0.
 */
static int
round_end (uint64_t *cursor, int *err)
{
  struct step st = { .a = 1, .b = 0, .commit = true };

  if (wait_writer (false, NULL, cursor, err) == -1)
    return -1;
  if (inflight_enter (&st.token) == -1) {
    *err = ESHUTDOWN;
    return -1;
  }
  hand_over (&st);
  if (wait_writer (true, NULL, cursor, err) == -1)
    return -1;
  if (bits_next_clear (&rs.restored, 0, rs.nr) == rs.nr)
    return 1;
  *cursor = 0;
  return 0;
}

/* One step: the next one handed to the writer, or the end of a round;
 * 1 when every granule is restored, -1 on error.
 */
static int
step (uint64_t *cursor, int *err)
{
  struct step st;
  uint64_t a;
  char *buf;

  a = bits_next_clear (&rs.restored, *cursor, rs.nr);
  if (a == rs.nr)
    return round_end (cursor, err);
  if (wait_writer (false, &buf, cursor, err) == -1)
    return -1;
  if (inflight_enter (&st.token) == -1) {
    *err = ESHUTDOWN;
    return -1;
  }
  if (read_step (a, bits_next_set (&rs.restored, a, rs.nr) - 1, buf, &st,
                 err) == -1) {
    inflight_exit (st.token);
    return -1;
  }
  hand_over (&st);
  *cursor = st.b + 1;
  return 0;
}

/* Stop the writer, then the committer: what they have is written
 * and committed.
 */
static void
stop_pipe (pthread_t writer, pthread_t committer)
{
  pthread_mutex_lock (&pipe_lock);
  writer_stop = true;
  pthread_cond_broadcast (&changed);
  pthread_mutex_unlock (&pipe_lock);
  pthread_join (writer, NULL);
  pthread_mutex_lock (&pipe_lock);
  committer_stop = true;
  pthread_cond_broadcast (&changed);
  pthread_mutex_unlock (&pipe_lock);
  pthread_join (committer, NULL);
}

static void *
fill_main (void *arg)
{
  pthread_t writer, committer;
  uint64_t cursor = 0;
  int64_t retry = FILL_RETRY_MIN_NS;
  int r = 0, err = 0;

  test_pause_point ("restore-fill-start");
  err = pthread_create (&committer, NULL, committer_main, NULL);
  if (err == 0 &&
      (err = pthread_create (&writer, NULL, writer_main, NULL)) != 0) {
    pthread_mutex_lock (&pipe_lock);
    committer_stop = true;
    pthread_cond_broadcast (&changed);
    pthread_mutex_unlock (&pipe_lock);
    pthread_join (committer, NULL);
  }
  if (err) {
    nbdkit_error ("dirtybitmap: restore-from=%s: cannot start the fill: %s",
                  rs.source, strerror (err));
    return NULL;
  }
  while (!fill_stopping () && give_way ()) {
    r = step (&cursor, &err);
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
  stop_pipe (writer, committer);
  if (r == 1)
    restore_complete (below);
  return NULL;
}

/* The writer's own context on the layer below, checked as a client's
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
  /* (Or every granule is read from the source.) */
  zeroes = below->can_zero (below) > NBDKIT_ZERO_NONE;
  return 0;
}

static void
close_below (void)
{
  size_t k;

  if (below) {
    below->finalize (below);
    nbdkit_next_context_close (below);
    below = NULL;
  }
  for (k = 0; k < FILL_DEPTH; ++k) {
    free (q[k].buf);
    q[k].buf = NULL;
  }
}

static int
fill_start (nbdkit_backend *backend, const char *export_name,
            struct bmerr *err)
{
  size_t k;
  int e;

  head = queued = 0;
  failed = writer_stop = committer_stop = false;
  memset (batches, 0, sizeof batches);
  filling = &batches[0];
  committing = NULL;
  for (k = 0; k < FILL_DEPTH; ++k)
    if ((q[k].buf = malloc (FILL_STEP << rs.gbits)) == NULL) {
      bmerr_set (err, errno, "cannot start the fill: %s", strerror (errno));
      close_below ();
      return -1;
    }
  if (open_below (backend, export_name, err) == -1) {
    close_below ();
    return -1;
  }
  e = pthread_create (&thread, NULL, fill_main, NULL);
  if (e) {
    bmerr_set (err, e, "cannot start the fill: %s", strerror (e));
    close_below ();
    return -1;
  }
  started = true;
  return 0;
}

int
restore_fill_start (nbdkit_backend *backend, const char *export_name)
{
  struct bmerr err;

  if (!restore_active ())
    return 0;
  if (fill_start (backend, export_name, &err) == -1) {
    nbdkit_error ("dirtybitmap: restore-from=%s: %s", rs.source, err.msg);
    return -1;
  }
  return 0;
}

void
restore_fill_stop (void)
{
  if (!started)
    return;
  pthread_mutex_lock (&stop_lock);
  stop = true;
  pthread_cond_broadcast (&wake);
  pthread_mutex_unlock (&stop_lock);
  pthread_join (thread, NULL);
  started = false;
  close_below ();
}
