/* SPDX-License-Identifier: BSD-3-Clause */
/* copy.c: dirtybitmap copy: the pull-mode backup client.
 *
 * Connects to an NBD export served through nbdkit-dirtybitmap-filter,
 * lists its dirty ranges from base:allocation (copy-ranges.c), and
 * brings them to a target that holds the previous copy: data ranges
 * are read and written, zero ranges become write-zeroes, clean ranges
 * are not touched (copy-worker.c, copy-file.c).  With --full every
 * byte is copied.  Then the target is flushed and one summary line is
 * printed on stdout; errors and the progress bar go to stderr.
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
#include <getopt.h>
#include <pthread.h>

#include <libnbd.h>

#include "dirtybitmap.h"
#include "msg.h"
#include "copy.h"
#include "util.h"

#define DEFAULT_REQUESTS 16
#define MAX_REQUESTS 1024
#define MAX_CONNECTIONS 64
#define AUTO_CONNECTIONS 4              /* at most, and one per CPU */
#define DEFAULT_REQUEST_SIZE (1 << 20)
#define MIN_REQUEST_SIZE 512
#define MAX_REQUEST_SIZE (32 << 20)
#define ZERO_SIZE (UINT64_C (1) << 30)  /* largest write-zeroes */

static void __attribute__ ((noreturn))
copy_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s copy [-p|--progress] [--requests N] [--connections N]\n"
"                    [--request-size SIZE] [--full] SOURCE_URI TARGET\n"
"\n"
"Copy the dirty ranges of SOURCE_URI, an NBD export served through\n"
"nbdkit-dirtybitmap-filter, to TARGET (a file, a block device or an NBD\n"
"URI of the same size) that holds the previous copy: data is copied,\n"
"dirty ranges that read as zeroes are zeroed, clean ranges are not\n"
"touched.  Afterwards TARGET equals SOURCE_URI.  The summary line goes\n"
"to stdout.\n"
"\n"
"  -p, --progress        show a progress bar on stderr\n"
"  --requests N          requests in flight per connection (default %d)\n"
"  --connections N       connections, if the servers allow multi-conn\n"
"                        (default: one per CPU, up to 4, if they do)\n"
"  --request-size SIZE   largest read and write (default 1M, or the\n"
"                        server's maximum block size if smaller)\n"
"  --full                copy every byte, whatever the extents say\n"
"                        (a missing TARGET file is then created)\n"
"\n"
"Example:\n"
"  nbdkit -r -U - --filter=dirtybitmap file disk.img bitmap=b0 \\\n"
"         --run '%s copy -p \"$uri\" backup.img'\n",
           prog, DEFAULT_REQUESTS, prog);
  exit (status);
}

static bool
is_nbd_uri (const char *s)
{
  static const char *const schemes[] = {
    "nbd://", "nbds://", "nbd+unix://", "nbds+unix://",
    "nbd+vsock://", "nbds+vsock://",
  };
  size_t i;

  for (i = 0; i < sizeof schemes / sizeof schemes[0]; ++i)
    if (strncmp (s, schemes[i], strlen (schemes[i])) == 0)
      return true;
  return false;
}

static double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static char out_of_memory[] = "out of memory";

void
copy_error (struct copy *c, const char *fs, ...)
{
  va_list args;
  SCOPED_LOCK (&c->lock);

  __atomic_store_n (&c->stop, true, __ATOMIC_RELEASE);
  if (c->error)
    return;
  va_start (args, fs);
  if (vasprintf (&c->error, fs, args) == -1)
    c->error = NULL;
  va_end (args);
  if (c->error == NULL)
    c->error = out_of_memory;
}

/* The progress bar.  On a terminal it is redrawn in place; otherwise
 * a line is printed every PROGRESS_LINE_SECS seconds.
 */
#define PROGRESS_LINE_SECS 5

struct progress {
  bool on;
  bool tty;
  bool drawn;                   /* a bar is on the screen */
  double start, last_line;
  uint64_t total;
};

static void
progress_draw (struct progress *p, uint64_t done, bool last)
{
  double t = now (), elapsed = t - p->start;
  double frac = p->total ? (double) done / p->total : 1;
  char rate[32], bar[41];
  size_t i;

  if (!p->on)
    return;
  if (frac > 1)
    frac = 1;
  human_size (elapsed > 0 ? done / elapsed : 0, rate, sizeof rate);
  if (p->tty) {
    for (i = 0; i < 40; ++i)
      bar[i] = i < 40 * frac ? '*' : '-';
    bar[40] = '\0';
    fprintf (stderr, "\r%3d%% [%s] %s/s%s", (int) (100 * frac), bar, rate,
             last ? "\n" : "\033[K");
    p->drawn = !last;
  }
  else if (!last && t - p->last_line >= PROGRESS_LINE_SECS) {
    fprintf (stderr, "%s: copy: %d%% of %" PRIu64 " dirty bytes, %s/s\n",
             prog, (int) (100 * frac), p->total, rate);
    p->last_line = t;
  }
  fflush (stderr);
}

/* Leave the bar where it is, on its own line, before a message. */
static void
progress_end (struct progress *p)
{
  if (p->drawn) {
    fputc ('\n', stderr);
    p->drawn = false;
  }
}

static int
parse_count (const char *opt, const char *s, unsigned max, unsigned *out)
{
  char *end;
  unsigned long v;

  errno = 0;
  v = strtoul (s, &end, 10);
  if (errno || end == s || *end || *s == '-' || v < 1 || v > max) {
    bad_usage ("copy ", "%s %s: must be a number from 1 to %u", opt, s, max);
    return -1;
  }
  *out = v;
  return 0;
}

/* Connect one handle; the first source handle also asks for
 * base:allocation.
 */
static struct nbd_handle *
connect_uri (const char *what, const char *uri, bool meta)
{
  struct nbd_handle *h = nbd_create ();

  if (h == NULL) {
    bm_error ("copy: %s", nbd_get_error ());
    return NULL;
  }
  nbd_set_handle_name (h, what);
  if (meta &&
      nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1) {
    bm_error ("copy: %s", nbd_get_error ());
    nbd_close (h);
    return NULL;
  }
  if (nbd_connect_uri (h, uri) == -1) {
    bm_error ("copy: %s %s: cannot connect: %s", what, uri,
              nbd_get_error ());
    nbd_close (h);
    return NULL;
  }
  return h;
}

static void
close_handles (struct nbd_handle **hs, unsigned n, bool graceful)
{
  unsigned i;

  if (hs == NULL)
    return;
  for (i = 0; i < n; ++i)
    if (hs[i]) {
      if (graceful)
        nbd_shutdown (hs[i], 0);
      nbd_close (hs[i]);
    }
}

/* The server's largest read/write, or 0 if it did not say. */
static uint64_t
max_block (struct nbd_handle *h)
{
  int64_t r = nbd_get_block_size (h, LIBNBD_SIZE_MAXIMUM);
  return r > 0 ? (uint64_t) r : 0;
}

int
do_copy (int argc, char *argv[])
{
  enum { REQUESTS = 256, CONNECTIONS, REQUEST_SIZE, FULL };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "progress", no_argument, NULL, 'p' },
    { "requests", required_argument, NULL, REQUESTS },
    { "connections", required_argument, NULL, CONNECTIONS },
    { "request-size", required_argument, NULL, REQUEST_SIZE },
    { "full", no_argument, NULL, FULL },
    { NULL }
  };
  struct copy c = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .finished = PTHREAD_COND_INITIALIZER,
    .requests = DEFAULT_REQUESTS,
    .connections = 0,           /* not given: see below */
    .request_size = DEFAULT_REQUEST_SIZE,
  };
  struct file_target file = { .fd = -1 };
  struct ranges ranges = { NULL };
  struct progress p = { .on = false };
  struct worker *workers = NULL;
  pthread_t *threads = NULL;
  bool full = false, dst_is_nbd;
  const char *src_uri, *dst;
  char *zero_buf = NULL;
  uint64_t size, dst_size, total, done, mb;
  unsigned i, started = 0, max_connections;
  long cpus;
  int opt, status = EXIT_FAILURE;
  double start;
  int64_t v;

  while ((opt = getopt_long (argc, argv, "hp", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': copy_usage (EXIT_SUCCESS);
    case 'p': p.on = true; break;
    case FULL: full = true; break;
    case REQUESTS:
      if (parse_count ("--requests", optarg, MAX_REQUESTS, &c.requests) == -1)
        return EXIT_FAILURE;
      break;
    case CONNECTIONS:
      if (parse_count ("--connections", optarg, MAX_CONNECTIONS,
                       &c.connections) == -1)
        return EXIT_FAILURE;
      break;
    case REQUEST_SIZE:
      v = parse_size (optarg);
      if (v < MIN_REQUEST_SIZE || v > MAX_REQUEST_SIZE ||
          !is_power_of_2 (v))
        return bad_usage ("copy ", "--request-size %s: must be a power "
                          "of 2 from 512 to 32M", optarg);
      c.request_size = v;
      break;
    default: return bad_usage ("copy ", "bad option");
    }
  }
  if (optind != argc - 2)
    return bad_usage ("copy ", "expecting SOURCE_URI and TARGET");
  src_uri = argv[optind];
  dst = argv[optind + 1];
  if (!is_nbd_uri (src_uri))
    return bad_usage ("copy ", "%s: SOURCE_URI must be an NBD URI "
                      "(nbd://... or nbd+unix://...)", src_uri);
  dst_is_nbd = is_nbd_uri (dst);
  c.src_name = src_uri;
  c.dst_name = dst;
  start = now ();

  /* The first connections: what the source is, and the target. */
  max_connections = c.connections ? c.connections : AUTO_CONNECTIONS;
  c.src = calloc (max_connections, sizeof *c.src);
  if (dst_is_nbd)
    c.dst = calloc (max_connections, sizeof *c.dst);
  if (c.src == NULL || (dst_is_nbd && c.dst == NULL)) {
    bm_error ("copy: %s", strerror (errno));
    goto out;
  }
  if ((c.src[0] = connect_uri ("source", src_uri, !full)) == NULL)
    goto out;
  if ((v = nbd_get_size (c.src[0])) == -1) {
    bm_error ("copy: source %s: %s", src_uri, nbd_get_error ());
    goto out;
  }
  size = v;
  if (!full &&
      nbd_can_meta_context (c.src[0], LIBNBD_CONTEXT_BASE_ALLOCATION) != 1) {
    bm_error ("copy: source %s does not offer base:allocation, so its "
              "dirty ranges are unknown: serve it through "
              "nbdkit-dirtybitmap-filter with bitmap=NAME, or copy "
              "everything with --full", src_uri);
    goto out;
  }

  if (dst_is_nbd) {
    if ((c.dst[0] = connect_uri ("target", dst, false)) == NULL)
      goto out;
    if (nbd_is_read_only (c.dst[0]) == 1) {
      bm_error ("copy: target %s is read-only", dst);
      goto out;
    }
    if ((v = nbd_get_size (c.dst[0])) == -1) {
      bm_error ("copy: target %s: %s", dst, nbd_get_error ());
      goto out;
    }
    dst_size = v;
    c.dst_can_zero = nbd_can_zero (c.dst[0]) == 1;
  }
  else {
    if (file_target_open (&file, dst, full, size) == -1)
      goto out;
    dst_size = file.size;
    c.file = &file;
  }
  if (dst_size != size) {
    bm_error ("copy: target %s is %" PRIu64 " bytes but source %s is %"
              PRIu64 " bytes: the target must be a copy of the same disk",
              dst, dst_size, src_uri, size);
    goto out;
  }

  /* Request sizes: never above what either server accepts. */
  if ((mb = max_block (c.src[0])) && mb < c.request_size)
    c.request_size = mb;
  if (dst_is_nbd && (mb = max_block (c.dst[0])) && mb < c.request_size)
    c.request_size = mb;
  c.zero_size = dst_is_nbd && !c.dst_can_zero ? c.request_size : ZERO_SIZE;
  bm_debug ("copy: size %" PRIu64 ", request size %zu, %u requests",
            size, c.request_size, c.requests);

  zero_buf = calloc (1, c.request_size);
  if (zero_buf == NULL) {
    bm_error ("copy: %s", strerror (errno));
    goto out;
  }
  c.zero_buf = zero_buf;
  file.zero_buf = zero_buf;
  file.zero_buf_size = c.request_size;

  /* More connections only where the servers allow multi-conn: as
   * many as asked, or by default one per CPU up to AUTO_CONNECTIONS.
   */
  {
    const char *refuser = NULL;
    if (nbd_can_multi_conn (c.src[0]) != 1)
      refuser = src_uri;
    else if (dst_is_nbd && nbd_can_multi_conn (c.dst[0]) != 1)
      refuser = dst;
    if (c.connections == 0) {
      cpus = sysconf (_SC_NPROCESSORS_ONLN);
      c.connections = refuser || cpus < 1 ? 1 : MIN (cpus, AUTO_CONNECTIONS);
    }
    else if (c.connections > 1 && refuser) {
      fprintf (stderr, "%s: copy: %s does not allow multi-conn: using "
               "1 connection\n", prog, refuser);
      c.connections = 1;
    }
  }
  bm_debug ("copy: %u connections", c.connections);
  for (i = 1; i < c.connections; ++i) {
    if ((c.src[i] = connect_uri ("source", src_uri, false)) == NULL)
      goto out;
    if (dst_is_nbd && (c.dst[i] = connect_uri ("target", dst, false)) == NULL)
      goto out;
  }

  /* What to copy. */
  if ((full ? full_range (size, &ranges)
       : scan_ranges (c.src[0], src_uri, size, &ranges)) == -1)
    goto out;
  c.ranges = &ranges;
  total = ranges.data_bytes + ranges.zero_bytes;
  bm_debug ("copy: %zu ranges, %" PRIu64 " bytes to copy, %" PRIu64
            " to zero", ranges.n, ranges.data_bytes, ranges.zero_bytes);

  /* Copy, one thread per connection; this thread shows progress. */
  p.tty = p.on && isatty (fileno (stderr));
  p.start = p.last_line = now ();
  p.total = total;
  progress_draw (&p, 0, false);
  workers = calloc (c.connections, sizeof *workers);
  threads = calloc (c.connections, sizeof *threads);
  if (workers == NULL || threads == NULL) {
    bm_error ("copy: %s", strerror (errno));
    goto out;
  }
  for (i = 0; i < c.connections; ++i) {
    int err;
    workers[i] = (struct worker) { .c = &c, .i = i };
    {
      SCOPED_LOCK (&c.lock);
      c.running++;
    }
    err = pthread_create (&threads[i], NULL, copy_worker, &workers[i]);
    if (err) {
      {
        SCOPED_LOCK (&c.lock);
        c.running--;
      }
      copy_error (&c, "pthread_create: %s", strerror (err));
      break;
    }
    started++;
  }
  for (;;) {
    struct timespec ts;
    bool running;

    clock_gettime (CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    {
      SCOPED_LOCK (&c.lock);
      if (c.running)
        pthread_cond_timedwait (&c.finished, &c.lock, &ts);
      running = c.running > 0;
    }
    if (!running)
      break;
    progress_draw (&p, __atomic_load_n (&c.copied, __ATOMIC_RELAXED) +
                   __atomic_load_n (&c.zeroed, __ATOMIC_RELAXED), false);
  }
  for (i = 0; i < started; ++i)
    pthread_join (threads[i], NULL);
  done = c.copied + c.zeroed;

  if (c.error) {
    progress_end (&p);
    bm_error ("copy: %s", c.error);
    bm_error ("copy incomplete: %" PRIu64 " of %" PRIu64 " %sbytes copied",
              done, total, full ? "" : "dirty ");
    goto out;
  }

  /* Only a flushed target holds the copy. */
  if (dst_is_nbd) {
    if (nbd_can_flush (c.dst[0]) == 1)
      for (i = 0; i < c.connections; ++i)
        if (nbd_flush (c.dst[i], 0) == -1) {
          progress_end (&p);
          bm_error ("copy: target %s: flush: %s", dst, nbd_get_error ());
          bm_error ("copy incomplete: the target could not be flushed");
          goto out;
        }
  }
  else if (file_target_flush (&file) == -1) {
    progress_end (&p);
    bm_error ("copy: target %s: fdatasync: %s", dst, strerror (errno));
    bm_error ("copy incomplete: the target could not be flushed");
    goto out;
  }
  progress_draw (&p, done, true);

  printf ("copied %" PRIu64 " bytes, zeroed %" PRIu64 " bytes, "
          "%zu range%s, %.3f seconds\n",
          c.copied, c.zeroed, ranges.n, ranges.n == 1 ? "" : "s",
          now () - start);
  status = EXIT_SUCCESS;

 out:
  close_handles (c.dst, max_connections, status == EXIT_SUCCESS);
  close_handles (c.src, max_connections, status == EXIT_SUCCESS);
  file_target_close (&file);
  free (c.src);
  free (c.dst);
  free (workers);
  free (threads);
  free (zero_buf);
  free_ranges (&ranges);
  if (c.error != out_of_memory)
    free (c.error);
  if (fflush (stdout) == EOF) {
    bm_error ("copy: stdout: %s", strerror (errno));
    status = EXIT_FAILURE;
  }
  return status;
}
