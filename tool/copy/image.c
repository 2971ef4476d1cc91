/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/image.c: image_hash (image.h), the digest of every chunk of an
 * image, in one of two ways chosen by its format alone:
 *
 *   raw file   read here, directly: a file's bytes are the image, to
 *              the last one (qemu-nbd would round its size up to a
 *              multiple of 512).  Up to RAW_THREADS threads, one per
 *              CPU, take pieces of RAW_PIECE bytes (whole chunks) from
 *              a shared cursor, pread them and hash each chunk; a
 *              piece in which SEEK_DATA finds no data (a hole) is not
 *              read and its chunks get the digest of zeroes, as the
 *              copy engine does with a range that a server reports as
 *              zeroes.  This thread draws the progress display.
 *   otherwise  the copy engine (copy_run) from an NBD export to the
 *              null target, with checksums: an NBD URI as it is, or a
 *              qcow2 file served by qemu-nbd with its backing chain
 *              (qemu_nbd_serve_qcow2: no format is ever probed).
 *
 * SIGINT and SIGTERM are caught for the whole call (copy/interrupt.c):
 * the threads, or copy_run, stop at the next piece, and a qemu-nbd
 * started here is stopped.  Errors are values in the result.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdarg.h>
#include <assert.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/fs.h>

#include "dirtybitmap.h"
#include "fullio.h"
#include "msg.h"
#include "internal.h"
#include "image.h"
#include "qemu.h"
#include "sums.h"
#include "util.h"

#define RAW_THREADS 4                   /* at most, as copy_run's
                                         * connections */
#define RAW_PIECE COPY_DEFAULT_REQUEST_SIZE

int
image_format_parse (const char *name, enum image_format *out)
{
  if (strcmp (name, "raw") == 0)
    *out = IMAGE_RAW;
  else if (strcmp (name, "qcow2") == 0)
    *out = IMAGE_QCOW2;
  else
    return -1;
  return 0;
}

const char *
image_format_name (enum image_format fmt)
{
  switch (fmt) {
  case IMAGE_RAW: return "raw";
  case IMAGE_QCOW2: return "qcow2";
  }
  return "unknown";
}

/*----------------------------------------------------------------------
 * A raw file or block device, read directly.
 */

struct raw {
  const char *name;
  int fd;
  uint64_t size, chunk, piece;
  uint8_t *digests;
  uint8_t zero_digest[SUMS_DIGEST];      /* of a chunk of zeroes */
  uint8_t zero_digest_last[SUMS_DIGEST]; /* of the last one, if short */

  /* Updated atomically by the threads. */
  uint64_t next;                /* the offset of the next piece */
  uint64_t done;                /* bytes hashed */
  uint64_t read;                /* bytes read */
  bool stop;                    /* an error or a signal: take no more */

  /* Protects error and running. */
  pthread_mutex_t workers_lock;
  pthread_cond_t finished;      /* signalled when a thread ends */
  unsigned running;
  struct bmerr error;           /* the first error, or empty */
};

/* Record an error (only the first one is kept) and stop. */
static void __attribute__ ((format (printf, 2, 3)))
raw_fail (struct raw *w, const char *fs, ...)
{
  va_list args;
  SCOPED_LOCK (&w->workers_lock);

  __atomic_store_n (&w->stop, true, __ATOMIC_RELEASE);
  va_start (args, fs);
  bmerr_vfirst (&w->error, 0, fs, args);
  va_end (args);
}

/* Open name, a regular file or a block device, and its size. */
static int
raw_open (struct raw *w, struct bmerr *err)
{
  struct stat st;

  /* O_NONBLOCK: a FIFO must not hang the open. */
  w->fd = open (w->name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (w->fd == -1 || fstat (w->fd, &st) == -1) {
    bmerr_first (err, 0, "%s: %s", w->name, strerror (errno));
    return -1;
  }
  if (S_ISREG (st.st_mode))
    w->size = st.st_size;
  else if (!S_ISBLK (st.st_mode)) {
    bmerr_first (err, 0, "%s: not a regular file or a block device",
                 w->name);
    return -1;
  }
  else if (ioctl (w->fd, BLKGETSIZE64, &w->size) == -1) {
    bmerr_first (err, 0, "%s: BLKGETSIZE64: %s", w->name,
                 strerror (errno));
    return -1;
  }
  /* Read ahead further: each thread reads its pieces in order. */
  posix_fadvise (w->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return 0;
}

/* Where the first chunk of [off, end) that may hold data begins (end
 * if none does): a file system that cannot say has data everywhere.
 */
static uint64_t
first_data (struct raw *w, uint64_t off, uint64_t end)
{
  off_t d = lseek (w->fd, off, SEEK_DATA);

  if (d == -1)
    return errno == ENXIO ? end : off;
  return MIN (ROUND_DOWN ((uint64_t) d, w->chunk), end);
}

static int
read_all (struct raw *w, char *buf, uint64_t len, uint64_t off)
{
  ssize_t r = full_pread (w->fd, buf, len, off);

  if (r == -1) {
    raw_fail (w, "%s: reading %" PRIu64 " bytes at offset %" PRIu64
              ": %s", w->name, len, off, strerror (errno));
    return -1;
  }
  if ((uint64_t) r < len) {
    raw_fail (w, "%s: it ends at offset %" PRIu64 ", before its %"
              PRIu64 " bytes (was it cut while read?)", w->name, off + r,
              w->size);
    return -1;
  }
  return 0;
}

/* Hash the piece [off, off + len) (whole chunks, the last one maybe
 * short) with buf as the buffer.
 */
static int
raw_piece (struct raw *w, char *buf, uint64_t off, uint64_t len)
{
  const uint64_t end = off + len;
  const uint64_t data = first_data (w, off, end);
  uint64_t pos, n;

  for (pos = off; pos < data; pos += w->chunk)
    memcpy (w->digests + pos / w->chunk * SUMS_DIGEST,
            pos + w->chunk <= w->size ? w->zero_digest : w->zero_digest_last,
            SUMS_DIGEST);
  if (data < end) {
    if (read_all (w, buf, end - data, data) == -1)
      return -1;
    for (pos = data; pos < end; pos += n) {
      n = MIN (w->chunk, end - pos);
      sums_hash (buf + (pos - data), n,
                 w->digests + pos / w->chunk * SUMS_DIGEST);
    }
    __atomic_fetch_add (&w->read, end - data, __ATOMIC_RELAXED);
  }
  __atomic_fetch_add (&w->done, len, __ATOMIC_RELAXED);
  return 0;
}

static void *
raw_worker (void *arg)
{
  struct raw *w = arg;
  char *buf = malloc (w->piece);

  if (buf == NULL)
    raw_fail (w, "%s", strerror (errno));
  while (buf && !__atomic_load_n (&w->stop, __ATOMIC_ACQUIRE)) {
    uint64_t off = __atomic_fetch_add (&w->next, w->piece, __ATOMIC_RELAXED);

    if (off >= w->size ||
        raw_piece (w, buf, off, MIN (w->piece, w->size - off)) == -1)
      break;
  }
  free (buf);
  {
    SCOPED_LOCK (&w->workers_lock);
    w->running--;
    pthread_cond_signal (&w->finished);
  }
  return NULL;
}

/* Until every thread has ended: the progress display, and a signal
 * stops them.
 */
static void
raw_wait (struct raw *w, struct progress *p)
{
  while (wait_workers (&w->workers_lock, &w->finished, &w->running)) {
    if (copy_interrupted ())
      __atomic_store_n (&w->stop, true, __ATOMIC_RELEASE);
    progress_draw (p, __atomic_load_n (&w->done, __ATOMIC_RELAXED), false);
  }
}

/* Start the threads, wait for them, and say how it went in r. */
static void
raw_run (struct raw *w, bool progress, struct image_result *r,
         struct bmerr *err)
{
  pthread_t threads[RAW_THREADS];
  long cpus = sysconf (_SC_NPROCESSORS_ONLN);
  unsigned n = cpus < 1 ? 1 : MIN (cpus, RAW_THREADS), i, started = 0;
  struct progress p;

  progress_start (&p, progress, true, NULL, w->size);
  for (i = 0; i < n; ++i) {
    int e;
    {
      SCOPED_LOCK (&w->workers_lock);
      w->running++;
    }
    if ((e = pthread_create (&threads[i], NULL, raw_worker, w)) != 0) {
      {
        SCOPED_LOCK (&w->workers_lock);
        w->running--;
      }
      raw_fail (w, "pthread_create: %s", strerror (e));
      break;
    }
    started++;
  }
  raw_wait (w, &p);
  for (i = 0; i < started; ++i)
    pthread_join (threads[i], NULL);
  r->read = w->read;
  if (bmerr_failed (&w->error))
    *err = w->error;
  else if (w->done < w->size)
    r->interrupted = true;
  if (bmerr_failed (err) || r->interrupted)
    progress_end (&p);
  else
    progress_draw (&p, w->done, true);
}

static int
hash_raw (const char *image, uint64_t chunk, uint64_t size,
          uint8_t *digests, bool progress, struct image_result *r,
          struct bmerr *err)
{
  struct raw w = {
    .name = image, .fd = -1, .chunk = chunk, .digests = digests,
    .piece = MAX (ROUND_DOWN (RAW_PIECE, chunk), chunk),
  };
  char *zeroes = NULL;

  pthread_mutex_init (&w.workers_lock, NULL);
  pthread_cond_init (&w.finished, NULL);
  if (raw_open (&w, err) == -1)
    goto out;
  r->size = w.size;
  if (w.size != size) {
    r->wrong_size = true;
    goto out;
  }
  if ((zeroes = calloc (1, chunk)) == NULL) {
    bmerr_first (err, 0, "%s", strerror (errno));
    goto out;
  }
  sums_hash (zeroes, chunk, w.zero_digest);
  sums_hash (zeroes, size % chunk ? size % chunk : chunk, w.zero_digest_last);
  raw_run (&w, progress, r, err);

 out:
  if (w.fd >= 0)
    close (w.fd);
  free (zeroes);
  pthread_mutex_destroy (&w.workers_lock);
  pthread_cond_destroy (&w.finished);
  return bmerr_failed (err) || r->wrong_size || r->interrupted ? -1 : 0;
}

/*----------------------------------------------------------------------
 * An NBD export, through the copy engine.
 */

/* Is the export at uri size bytes?  0 if it is; -1 if not
 * (r->wrong_size) or if it could not be reached (err).
 */
static int
nbd_size_is (const char *uri, uint64_t size, struct image_result *r,
             struct bmerr *err)
{
  int64_t v = copy_export_size (uri, err);

  if (v == -1)
    return -1;
  r->size = v;
  r->wrong_size = r->size != size;
  return r->wrong_size ? -1 : 0;
}

/* Hash the export at uri, which messages call name, in reads of
 * request_size bytes (0: the copy engine's default).
 */
static int
nbd_hash (const char *uri, const char *name, uint64_t chunk, uint64_t size,
          size_t request_size, uint8_t *digests, bool progress,
          struct image_result *r, struct bmerr *err)
{
  struct copy_sums cs = {
    .chunk = chunk, .n = DIV_ROUND_UP (size, chunk), .digests = digests,
  };
  struct copy_options o = {
    .source = uri, .source_name = name, .target = "(none)", .full = true,
    .no_target = true, .progress = progress, .sums = &cs,
    .request_size = request_size,
  };
  struct copy_result cr;

  copy_run (&o, &cr);
  r->read = cr.read;
  r->interrupted = cr.interrupted;
  if (bmerr_failed (&cr.error))
    *err = cr.error;
  else if (!cr.ok && !r->interrupted)
    bmerr_first (err, 0, "%s: not read to the end", name);
  return cr.ok ? 0 : -1;
}

/* Hash a qcow2 file, served by qemu-nbd for the time. */
static int
hash_qcow2 (const char *image, uint64_t chunk, uint64_t size,
            uint8_t *digests, bool progress, struct image_result *r,
            struct bmerr *err)
{
  struct qemu_nbd q;
  char *name = NULL, *text = NULL;
  int ret = -1, status;
  bool served = false;

  if (qemu_nbd_serve_qcow2 (image, &q, err) == -1)
    return -1;
  if (asprintf (&name, "%s (qcow2, through qemu-nbd)", image) == -1) {
    name = NULL;
    bmerr_first (err, 0, "%s", strerror (errno));
  }
  else if (!copy_interrupted ()) {
    served = nbd_size_is (q.uri, size, r, err) == 0 || r->wrong_size;
    if (served && !r->wrong_size)
      ret = nbd_hash (q.uri, name, chunk, size,
                      MAX (QEMU_NBD_READ_SIZE, chunk), digests, progress, r,
                      err);
  }
  status = qemu_nbd_stop (&q, &text);
  if (name && !served && !copy_interrupted ())
    /* It never served the image: qemu-nbd's words say why, not the
     * connection's.
     */
    qemu_error (err, "qemu-nbd", text, status);
  else if (text && *text)
    bm_debug ("qemu-nbd said: %s", text);
  free (text);
  free (name);
  return ret;
}

/*----------------------------------------------------------------------
 * The image.
 */

static uint64_t
count_differing (const struct sums *expect, const uint8_t *digests)
{
  uint64_t i, n = 0;

  for (i = 0; i < expect->n; ++i)
    if (memcmp (digests + i * SUMS_DIGEST, expect->digests + i * SUMS_DIGEST,
                SUMS_DIGEST) != 0)
      n++;
  return n;
}

int
image_hash (const char *image, enum image_format fmt,
            const struct sums *expect, uint64_t chunk, uint64_t size,
            uint8_t *digests, bool progress, struct image_result *r)
{
  struct bmerr err = { 0 };
  int ret = -1;

  memset (r, 0, sizeof *r);
  assert (is_power_of_2 (chunk));
  assert (!expect || (expect->chunk == chunk && expect->disk_size == size));
  if (copy_signals_trap (&err) == -1)
    goto out;
  if (is_nbd_uri (image) && fmt != IMAGE_RAW)
    bmerr_first (&err, 0, "%s: an NBD export is read as it is, not as %s",
                 image, image_format_name (fmt));
  else if (is_nbd_uri (image)) {
    if (nbd_size_is (image, size, r, &err) == 0)
      ret = nbd_hash (image, image, chunk, size, 0, digests, progress, r,
                      &err);
  }
  else if (fmt == IMAGE_QCOW2)
    ret = hash_qcow2 (image, chunk, size, digests, progress, r, &err);
  else
    ret = hash_raw (image, chunk, size, digests, progress, r, &err);
  if (ret == -1 && copy_interrupted ()) {
    r->interrupted = true;
    bmerr_clear (&err);
  }
  copy_signals_release ();
  if (ret == 0 && expect)
    r->differing = count_differing (expect, digests);
 out:
  r->error = err;
  return ret;
}
