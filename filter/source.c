/* SPDX-License-Identifier: BSD-3-Clause */
/* source.c: the source of a restore, read through libnbd (see
 * source.h).
 *
 * The source is read through SOURCE_CONNS connections: a request
 * takes one that is idle (connecting it if it is not yet), and waits
 * while all are busy.  One, since a server may take one client at a
 * time and leave the next waiting for the first to go (qemu-nbd does,
 * without -e): so reads of the source wait for each other, a step of
 * the fill (restore-fill.c) at most, or a client's read.  A read (of
 * one range, or of several) is sent as requests of SOURCE_REQUEST
 * bytes, up to SOURCE_IN_FLIGHT of them in flight at once on the
 * connection (qemu-nbd serves 256K with much less work than 1M, and a
 * server that has several requests to serve is never idle waiting for
 * the next one).  The connection asks
 * for base:allocation, so that source_map can say which ranges read
 * as zeroes.  Requests are asynchronous, polled a second at a time, so
 * that a source that stops answering does not hold nbdkit's shutdown
 * (or a client that has gone) forever.  A connection on which a
 * request failed is closed (with the requests still in flight on it:
 * none writes into a buffer afterwards), and made again by the next
 * request: a source served again after it went away is read again.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>

#include <libnbd.h>

#include "source.h"
#include "util.h"

#define SOURCE_CONNS 1
#define SOURCE_REQUEST (256 * 1024)
#define SOURCE_IN_FLIGHT 16
/* The largest range asked for in one block status: 1G. */
#define SOURCE_MAX_MAP (1024 * 1024 * 1024)
#define SOURCE_POLL_MS 1000

struct source {
  char *uri;
  /* Protects the slots' busy flags and handles; cond wakes a request
   * waiting for an idle slot.  A leaf: no I/O under it.
   */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct {
    struct nbd_handle *h;       /* NULL until connected */
    bool busy;
    bool map;                   /* h answers base:allocation */
  } slot[SOURCE_CONNS];
};

static struct nbd_handle *
connect_source (const char *uri, struct bmerr *err)
{
  struct nbd_handle *h = nbd_create ();

  if (h == NULL) {
    bmerr_set (err, ENOMEM, "restore-from=%s: %s", uri, nbd_get_error ());
    return NULL;
  }
  if (nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1 ||
      nbd_connect_uri (h, uri) == -1) {
    bmerr_set (err, nbd_get_errno () ? nbd_get_errno () : EIO,
               "restore-from=%s: cannot connect to the source: %s", uri,
               nbd_get_error ());
    nbd_close (h);
    return NULL;
  }
  return h;
}

int
source_probe (const char *uri, uint64_t *size, struct bmerr *err)
{
  struct nbd_handle *h = connect_source (uri, err);
  int64_t r;

  if (h == NULL)
    return -1;
  r = nbd_get_size (h);
  if (r == -1)
    bmerr_set (err, EIO, "restore-from=%s: cannot read the source's size: "
               "%s", uri, nbd_get_error ());
  else
    *size = r;
  nbd_shutdown (h, 0);
  nbd_close (h);
  return r == -1 ? -1 : 0;
}

struct source *
source_new (const char *uri)
{
  struct source *s = calloc (1, sizeof *s);

  if (s == NULL || (s->uri = strdup (uri)) == NULL) {
    free (s);
    return NULL;
  }
  pthread_mutex_init (&s->lock, NULL);
  pthread_cond_init (&s->cond, NULL);
  return s;
}

void
source_free (struct source *s)
{
  size_t i;

  if (s == NULL)
    return;
  for (i = 0; i < SOURCE_CONNS; ++i)
    if (s->slot[i].h)
      nbd_close (s->slot[i].h);
  pthread_mutex_destroy (&s->lock);
  pthread_cond_destroy (&s->cond);
  free (s->uri);
  free (s);
}

/* Take an idle slot: a connected one if there is one. */
static size_t
take (struct source *s)
{
  size_t i, idle;

  pthread_mutex_lock (&s->lock);
  for (;;) {
    idle = SOURCE_CONNS;
    for (i = 0; i < SOURCE_CONNS; ++i)
      if (!s->slot[i].busy && (idle == SOURCE_CONNS || s->slot[i].h))
        idle = i;
    if (idle < SOURCE_CONNS)
      break;
    pthread_cond_wait (&s->cond, &s->lock);
  }
  s->slot[idle].busy = true;
  pthread_mutex_unlock (&s->lock);
  return idle;
}

/* Give the slot back; a connection that failed is closed. */
static void
put (struct source *s, size_t i, bool broken)
{
  struct nbd_handle *h = NULL;

  pthread_mutex_lock (&s->lock);
  if (broken) {
    h = s->slot[i].h;
    s->slot[i].h = NULL;
  }
  s->slot[i].busy = false;
  pthread_cond_signal (&s->cond);
  pthread_mutex_unlock (&s->lock);
  if (h)
    nbd_close (h);
}

/* Wait until cookie is done on h (1), or it failed or give_up said
 * to stop (-1, in err).
 */
static int
wait_cookie (struct source *s, struct nbd_handle *h, int64_t cookie,
             bool (*give_up) (void), struct bmerr *err)
{
  int r;

  while ((r = nbd_aio_command_completed (h, cookie)) == 0) {
    if (nbd_poll (h, SOURCE_POLL_MS) == -1)
      break;
    if (give_up && give_up ()) {
      bmerr_set (err, ESHUTDOWN, "restore-from=%s: gave up waiting for the "
                 "source", s->uri);
      return -1;
    }
  }
  if (r == 1)
    return 1;
  bmerr_set (err, nbd_get_errno () ? nbd_get_errno () : EIO,
             "restore-from=%s: %s", s->uri, nbd_get_error ());
  return -1;
}

/* Read the n ranges r on h, SOURCE_IN_FLIGHT requests at most in
 * flight, across ranges; on error the caller closes h (requests may
 * still be in flight into the buffers).
 */
static int
read_all (struct source *s, struct nbd_handle *h,
          const struct source_range *r, size_t n, bool (*give_up) (void),
          struct bmerr *err)
{
  int64_t cookie[SOURCE_IN_FLIGHT];
  size_t k = 0, head = 0, queued = 0;
  uint64_t sent = 0;

  while (k < n || queued > 0) {
    if (k < n && queued < SOURCE_IN_FLIGHT) {
      const uint64_t len = MIN (r[k].count - sent, SOURCE_REQUEST);
      int64_t c = nbd_aio_pread (h, r[k].buf + sent, len, r[k].offset + sent,
                                 NBD_NULL_COMPLETION, 0);
      if (c == -1) {
        bmerr_set (err, nbd_get_errno () ? nbd_get_errno () : EIO,
                   "restore-from=%s: %s", s->uri, nbd_get_error ());
        goto fail;
      }
      cookie[(head + queued++) % SOURCE_IN_FLIGHT] = c;
      sent += len;
      if (sent == r[k].count) {
        k++;
        sent = 0;
      }
      continue;
    }
    /* The oldest first: the server mostly answers in order. */
    if (wait_cookie (s, h, cookie[head], give_up, err) == -1)
      goto fail;
    head = (head + 1) % SOURCE_IN_FLIGHT;
    queued--;
  }
  return 0;

 fail:
  if (err->errnum != ESHUTDOWN)
    bmerr_set (err, err->errnum, "restore-from=%s: reading %" PRIu64
               " bytes at offset %" PRIu64 " failed: %s", s->uri,
               r[MIN (k, n - 1)].count, r[MIN (k, n - 1)].offset,
               nbd_get_error ());
  return -1;
}

/* Take a slot and connect it if need be: its index, or -1. */
static int
take_connected (struct source *s, struct bmerr *err)
{
  size_t i = take (s);

  if (s->slot[i].h == NULL) {
    s->slot[i].h = connect_source (s->uri, err);
    if (s->slot[i].h == NULL) {
      put (s, i, false);
      return -1;
    }
    s->slot[i].map = nbd_can_meta_context (s->slot[i].h,
                                           LIBNBD_CONTEXT_BASE_ALLOCATION) == 1;
  }
  return i;
}

int
source_preadv (struct source *s, const struct source_range *r, size_t n,
               bool (*give_up) (void), struct bmerr *err)
{
  int i = take_connected (s, err);
  int ret;

  if (i == -1)
    return -1;
  ret = read_all (s, s->slot[i].h, r, n, give_up, err);
  put (s, i, ret == -1);
  return ret;
}

int
source_pread (struct source *s, void *buf, uint64_t count, uint64_t offset,
              bool (*give_up) (void), struct bmerr *err)
{
  const struct source_range r = { .buf = buf, .count = count,
                                  .offset = offset };

  return source_preadv (s, &r, 1, give_up, err);
}

struct map_answer {
  struct source_extent *ex;
  size_t n, room;
  uint64_t offset, end;         /* the next extent's offset; the end */
};

static int
map_extent (void *opaque, const char *context, uint64_t offset,
            uint32_t *entries, size_t nr_entries, int *error)
{
  struct map_answer *m = opaque;
  size_t k;

  if (strcmp (context, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0 ||
      offset != m->offset)
    return 0;
  for (k = 0; k + 1 < nr_entries && m->n < m->room && m->offset < m->end;
       k += 2) {
    const uint64_t len = MIN (entries[k], m->end - m->offset);
    const bool zero = (entries[k + 1] & LIBNBD_STATE_ZERO) != 0;

    if (len == 0)
      break;
    if (m->n > 0 && m->ex[m->n - 1].zero == zero)
      m->ex[m->n - 1].length += len;
    else
      m->ex[m->n++] = (struct source_extent) { len, zero };
    m->offset += len;
  }
  return 0;
}

int
source_map (struct source *s, uint64_t offset, uint64_t count,
            struct source_extent *ex, size_t *n, bool (*give_up) (void),
            struct bmerr *err)
{
  struct map_answer m = { .ex = ex, .room = *n, .offset = offset,
                          .end = offset + MIN (count, SOURCE_MAX_MAP) };
  int64_t cookie;
  int i = take_connected (s, err), r = 0;

  if (i == -1)
    return -1;
  if (s->slot[i].map && m.room > 0) {
    cookie = nbd_aio_block_status (s->slot[i].h, m.end - offset, offset,
                                   (nbd_extent_callback) {
                                     .callback = map_extent, .user_data = &m },
                                   NBD_NULL_COMPLETION, 0);
    if (cookie == -1)
      bmerr_set (err, nbd_get_errno () ? nbd_get_errno () : EIO,
                 "restore-from=%s: %s", s->uri, nbd_get_error ());
    r = cookie == -1 ? -1 : wait_cookie (s, s->slot[i].h, cookie, give_up,
                                          err) == -1 ? -1 : 0;
  }
  put (s, i, r == -1);
  if (r == -1)
    return -1;
  /* Without an answer: data. */
  if (m.n == 0 && m.room > 0)
    ex[m.n++] = (struct source_extent) { m.end - offset, false };
  *n = m.n;
  return 0;
}
