/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/run.c: copy_run, one copy from start to end.
 *
 *   setup   connect to the source (asking for base:allocation), open
 *           the target (a file, created under a temporary name with
 *           --full, or an NBD server), check sizes, choose request
 *           sizes and connections, list the ranges (copy/ranges.c);
 *   copy    one worker thread per connection (copy/worker.c) while
 *           this thread draws the progress display;
 *   flush   only when every byte is on the target: flush it, then
 *           commit (a new file is renamed into place);
 *   close   every connection, bounded in time (copy/connect.c).
 *
 * Errors become values: the first one is kept in the result, which
 * also says how far the copy got and what it counted.  SIGINT and
 * SIGTERM are caught for the whole run (copy/interrupt.c) and stop it
 * at the next step; during the copy, the workers let what is in
 * flight end and start nothing new.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdarg.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

#include <libnbd.h>

#include "dirtybitmap.h"
#include "msg.h"
#include "internal.h"
#include "sums.h"
#include "util.h"

#define AUTO_CONNECTIONS 4              /* at most, and one per CPU */

/* Everything one run holds, released by job_close. */
struct job {
  const struct copy_options *o;
  struct copy_result *r;
  struct copy c;
  unsigned max_connections;
  uint64_t size;
  bool use_extents;             /* the source offers base:allocation */
  struct ranges ranges;
  char *zero_buf;
  struct progress p;
};

void
copy_error (struct copy *c, const char *fs, ...)
{
  va_list args;
  SCOPED_LOCK (&c->workers_lock);

  __atomic_store_n (&c->stop, true, __ATOMIC_RELEASE);
  va_start (args, fs);
  bmerr_vfirst (&c->error, 0, fs, args);
  va_end (args);
}

void
copy_stop (struct copy *c)
{
  __atomic_store_n (&c->stop, true, __ATOMIC_RELEASE);
}

bool
wait_workers (pthread_mutex_t *lock, pthread_cond_t *finished,
              const unsigned *running)
{
  struct timespec ts;

  clock_gettime (CLOCK_REALTIME, &ts);
  ts.tv_nsec += 200000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  SCOPED_LOCK (lock);
  if (*running)
    pthread_cond_timedwait (finished, lock, &ts);
  return *running > 0;
}

/* The first source connection: what the source is. */
static int
open_source (struct job *j)
{
  struct copy *c = &j->c;
  const struct copy_options *o = j->o;
  int64_t v;

  c->src = calloc (j->max_connections, sizeof *c->src);
  if (c->src == NULL) {
    bmerr_first (&j->r->error, 0, "%s", strerror (errno));
    return -1;
  }
  if ((c->src[0] = connect_uri ("source", o->source, true,
                                &j->r->error)) == NULL)
    return -1;
  if ((v = nbd_get_size (c->src[0])) == -1) {
    bmerr_first (&j->r->error, 0, "source %s: %s", c->src_name,
                 nbd_get_error ());
    return -1;
  }
  j->size = v;
  j->use_extents =
    nbd_can_meta_context (c->src[0], LIBNBD_CONTEXT_BASE_ALLOCATION) == 1;
  if (!o->full && !j->use_extents) {
    bmerr_first (&j->r->error, 0, "source %s does not offer base:allocation, "
                 "so its dirty ranges are unknown: serve it through "
                 "nbdkit-dirtybitmap-filter with bitmap=NAME, or copy "
                 "everything with --full", c->src_name);
    return -1;
  }
  if (o->trim_source && nbd_can_trim (c->src[0]) != 1) {
    bmerr_first (&j->r->error, 0, "source %s does not accept trim requests "
                 "(is it served read-only?), so the ranges copied cannot "
                 "be trimmed on it", c->src_name);
    return -1;
  }
  return 0;
}

static int
open_target (struct job *j)
{
  const struct copy_options *o = j->o;
  struct target *t;

  if (o->no_target)
    t = null_target_open (j->size, &j->r->error);
  else if (is_nbd_uri (o->target))
    t = nbd_target_open (o->target, j->max_connections, &j->r->error);
  else
    t = file_target_open (o->target, o->full, j->size, &j->r->error);
  if (t == NULL)
    return -1;
  j->c.dst = t;
  if (t->size != j->size) {
    bmerr_first (&j->r->error, 0, "target %s is %" PRIu64 " bytes but "
                 "source %s is %" PRIu64 " bytes: the target must be a copy "
                 "of the same disk", o->target, t->size, j->c.src_name,
                 j->size);
    return -1;
  }
  return 0;
}

/* Request sizes: never above what either server accepts.  By default
 * at least the target's zero_align, so that a piece of data that
 * reads as zeroes can be a zero operation (copy/worker.c).
 */
static int
choose_sizes (struct job *j)
{
  struct copy *c = &j->c;
  struct target *t = c->dst;
  uint64_t mb;

  if (j->o->request_size == 0 && t->zero_align > c->request_size &&
      t->zero_align <= COPY_MAX_REQUEST_SIZE)
    c->request_size = t->zero_align;
  if ((mb = max_block (c->src[0])) && mb < c->request_size)
    c->request_size = mb;
  if (t->max_request && t->max_request < c->request_size)
    c->request_size = t->max_request;
  if (c->sums && c->request_size < c->sums->chunk) {
    /* A chunk is hashed from one read. */
    if ((mb && mb < c->sums->chunk) ||
        (t->max_request && t->max_request < c->sums->chunk)) {
      bmerr_first (&j->r->error, 0, "the servers' largest request is smaller "
                   "than a checksum chunk (%" PRIu64 " bytes)",
                   c->sums->chunk);
      return -1;
    }
    c->request_size = c->sums->chunk;
  }
  if (c->sums)
    c->request_size -= c->request_size % c->sums->chunk;
  if (t->zero_size == 0)
    t->zero_size = c->request_size;     /* zeroes are written */
  c->zero_size = t->zero_size;

  j->zero_buf = calloc (1, c->request_size);
  if (j->zero_buf == NULL) {
    bmerr_first (&j->r->error, 0, "%s", strerror (errno));
    return -1;
  }
  t->zero_buf = j->zero_buf;
  t->zero_buf_size = c->request_size;
  if (c->sums) {
    sums_hash (j->zero_buf, c->sums->chunk, c->zero_digest);
    sums_hash (j->zero_buf, j->size % c->sums->chunk
               ? j->size % c->sums->chunk : c->sums->chunk,
               c->zero_digest_last);
  }
  bm_debug ("copy: size %" PRIu64 ", request size %zu, %u requests",
            j->size, c->request_size, c->requests);
  return 0;
}

/* More connections only where both sides allow multi-conn: as many as
 * asked, or by default one per CPU up to AUTO_CONNECTIONS.
 */
static int
choose_connections (struct job *j)
{
  struct copy *c = &j->c;
  const char *refuser = NULL;
  unsigned i;
  long cpus;

  if (nbd_can_multi_conn (c->src[0]) != 1)
    refuser = c->src_name;
  else if (!c->dst->multi_conn)
    refuser = j->o->target;
  if (c->connections == 0) {
    cpus = sysconf (_SC_NPROCESSORS_ONLN);
    c->connections = refuser || cpus < 1 ? 1 : MIN (cpus, AUTO_CONNECTIONS);
  }
  else if (c->connections > 1 && refuser) {
    bm_error ("copy: %s does not allow multi-conn: using "
              "1 connection", refuser);
    c->connections = 1;
  }
  bm_debug ("copy: %u connections", c->connections);

  for (i = 1; i < c->connections; ++i)
    if ((c->src[i] = connect_uri ("source", j->o->source, false,
                                  &j->r->error)) == NULL)
      return -1;
  if (c->dst->ops->connect (c->dst, c->connections, &j->r->error) == -1)
    return -1;
  /* Every byte read is checked against the reply's chunks, so libnbd
   * need not clear the buffers first.
   */
  for (i = 0; i < c->connections; ++i)
    nbd_set_pread_initialize (c->src[i], false);
  return 0;
}

/* What to copy: the dirty ranges, or with --full everything (the
 * ranges reading as zeroes apart, if the source says which).
 */
static int
list_ranges (struct job *j)
{
  struct copy_result *r = j->r;
  int ret;

  if (j->use_extents)
    ret = scan_ranges (j->c.src[0], j->c.src_name, j->size,
                       j->o->full ? SCAN_ALL : SCAN_DIRTY, &j->ranges,
                       &r->error);
  else
    ret = full_range (j->size, &j->ranges, &r->error);
  if (ret == 0 && j->c.sums &&
      DIV_ROUND_UP (j->size, j->c.sums->chunk) != j->c.sums->n) {
    bmerr_first (&r->error, 0, "source %s is %" PRIu64 " bytes, not the size "
                 "its checksums describe (%" PRIu64 " chunks of %" PRIu64
                 " bytes)", j->c.src_name, j->size, j->c.sums->n,
                 j->c.sums->chunk);
    ret = -1;
  }
  if (ret == 0 && j->c.sums && j->c.sums->force)
    ret = force_ranges (&j->ranges, j->c.sums->force, j->c.sums->chunk,
                        j->size, &r->error);
  if (ret == 0 && j->c.sums)
    ret = chunk_ranges (&j->ranges, j->c.sums->chunk, j->size, &r->error);
  if (ret == 0 && j->o->only)
    ret = select_chunks (&j->ranges, j->c.sums->chunk, j->o->only,
                         &r->error);
  if (ret == -1)
    return -1;
  j->c.ranges = &j->ranges;
  r->sizes_known = true;
  r->total = j->ranges.data_bytes + j->ranges.zero_bytes;
  r->ranges = j->ranges.n;
  bm_debug ("copy: %zu ranges, %" PRIu64 " bytes to copy, %" PRIu64
            " to zero", j->ranges.n, j->ranges.data_bytes,
            j->ranges.zero_bytes);
  return 0;
}

static uint64_t
bytes_done (struct copy *c)
{
  return __atomic_load_n (&c->copied, __ATOMIC_RELAXED) +
    __atomic_load_n (&c->zeroed, __ATOMIC_RELAXED) +
    __atomic_load_n (&c->unchanged, __ATOMIC_RELAXED);
}

/* Copy, one thread per connection; this thread shows progress.
 * Returns once every thread has ended.
 */
static void
run_workers (struct job *j)
{
  struct copy *c = &j->c;
  struct worker *workers;
  pthread_t *threads;
  unsigned i, started = 0;

  workers = calloc (c->connections, sizeof *workers);
  threads = calloc (c->connections, sizeof *threads);
  if (workers == NULL || threads == NULL) {
    copy_error (c, "%s", strerror (errno));
    goto out;
  }
  for (i = 0; i < c->connections; ++i) {
    int err;
    workers[i] = (struct worker) { .c = c, .i = i };
    {
      SCOPED_LOCK (&c->workers_lock);
      c->running++;
    }
    err = pthread_create (&threads[i], NULL, copy_worker, &workers[i]);
    if (err) {
      {
        SCOPED_LOCK (&c->workers_lock);
        c->running--;
      }
      copy_error (c, "pthread_create: %s", strerror (err));
      break;
    }
    started++;
  }
  while (wait_workers (&c->workers_lock, &c->finished, &c->running)) {
    if (copy_interrupted ())
      copy_stop (c);
    progress_draw (&j->p, bytes_done (c), false);
  }
  for (i = 0; i < started; ++i)
    pthread_join (threads[i], NULL);

 out:
  free (workers);
  free (threads);
}

/* Stop at the next step if a signal came. */
static bool
interrupted (struct job *j)
{
  if (copy_interrupted ())
    j->r->interrupted = true;
  return j->r->interrupted;
}

static int
copy_and_flush (struct job *j)
{
  struct copy *c = &j->c;
  struct copy_result *r = j->r;

  r->stage = COPY_STAGE_COPY;
  progress_start (&j->p, j->o->progress, j->o->full, j->o->label,
                  r->total);
  run_workers (j);
  r->copied = c->copied;
  r->zeroed = c->zeroed;
  r->read = c->read;
  r->unchanged = c->unchanged;
  if (bmerr_failed (&c->error)) {
    progress_end (&j->p);
    r->error = c->error;
    if (copy_interrupted ())
      r->interrupted = true;
    return -1;
  }
  /* A signal that came after the last byte stopped nothing. */
  if (r->copied + r->zeroed + r->unchanged < r->total) {
    progress_end (&j->p);
    r->interrupted = true;
    return -1;
  }

  /* Only a flushed target holds the copy. */
  r->stage = COPY_STAGE_FLUSH;
  if (c->dst->ops->flush (c->dst, &r->error) == -1 ||
      c->dst->ops->commit (c->dst, &r->error) == -1) {
    progress_end (&j->p);
    return -1;
  }
  progress_draw (&j->p, r->copied + r->zeroed + r->unchanged, true);
  r->stage = COPY_STAGE_DONE;
  return 0;
}

static void
job_close (struct job *j)
{
  struct copy *c = &j->c;

  if (c->dst)
    c->dst->ops->close (c->dst, true);
  close_handles (c->src, j->max_connections, true);
  free (c->src);
  free (j->zero_buf);
  free_ranges (&j->ranges);
  pthread_mutex_destroy (&c->workers_lock);
  pthread_cond_destroy (&c->finished);
}

int
copy_run (const struct copy_options *o, struct copy_result *r)
{
  double start = clock_seconds (CLOCK_MONOTONIC);
  struct job j = {
    .o = o,
    .r = r,
    .c = {
      .src_name = o->source_name ? o->source_name : o->source,
      .dst_name = o->target,
      .requests = o->requests ? o->requests : COPY_DEFAULT_REQUESTS,
      .connections = o->connections,
      .request_size = o->request_size ? o->request_size
                                      : COPY_DEFAULT_REQUEST_SIZE,
      .trim_source = o->trim_source,
      .sums = o->sums,
      .wake_fd = -1,
    },
    .max_connections = o->connections ? o->connections : AUTO_CONNECTIONS,
  };
  int ret = -1;

  memset (r, 0, sizeof *r);
  r->stage = COPY_STAGE_SETUP;
  pthread_mutex_init (&j.c.workers_lock, NULL);
  pthread_cond_init (&j.c.finished, NULL);
  if (copy_signals_trap (&r->error) == -1)
    goto out;
  j.c.wake_fd = copy_interrupt_fd ();

  if (open_source (&j) == -1 || interrupted (&j) ||
      open_target (&j) == -1 || interrupted (&j) ||
      choose_sizes (&j) == -1 ||
      choose_connections (&j) == -1 || interrupted (&j) ||
      list_ranges (&j) == -1 || interrupted (&j))
    goto out;
  ret = copy_and_flush (&j);

 out:
  /* A signal can also make a blocking call fail (libnbd's poll). */
  if (ret == -1 && copy_interrupted ())
    r->interrupted = true;
  /* The time of the copy, not of saying goodbye to the servers. */
  r->seconds = clock_seconds (CLOCK_MONOTONIC) - start;
  job_close (&j);
  copy_signals_release ();
  r->ok = ret == 0;
  return ret;
}

void
copy_result_free (struct copy_result *r)
{
  bmerr_clear (&r->error);
}
