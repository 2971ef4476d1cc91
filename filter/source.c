/* SPDX-License-Identifier: BSD-3-Clause */
/* source.c: the source of a restore, read through libnbd (see
 * source.h).
 *
 * The source is read through SOURCE_CONNS connections: a request
 * takes one that is idle (connecting it if it is not yet), and waits
 * while all are busy.  One, since a server may take one client at a
 * time and leave the next waiting for the first to go (qemu-nbd does,
 * without -e): so reads of the source wait for each other, a chunk of
 * the fill (1M) at most, or a client's read.  Each read is
 * asynchronous, polled a second at a time, so that a source that stops
 * answering does not hold nbdkit's shutdown (or a client that has
 * gone) forever.  A connection on which a read failed is closed, and
 * made again by the next read: a source served again after it went
 * away is read again.
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
/* The largest read sent in one command: every server takes 4M. */
#define SOURCE_MAX_READ (4 * 1024 * 1024)
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
  if (nbd_connect_uri (h, uri) == -1) {
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

/* One read of at most SOURCE_MAX_READ bytes on h. */
static int
read_once (struct source *s, struct nbd_handle *h, void *buf, size_t count,
           uint64_t offset, bool (*give_up) (void), struct bmerr *err)
{
  int64_t cookie;
  int r;

  cookie = nbd_aio_pread (h, buf, count, offset, NBD_NULL_COMPLETION, 0);
  if (cookie == -1)
    goto fail;
  while ((r = nbd_aio_command_completed (h, cookie)) == 0) {
    if (nbd_poll (h, SOURCE_POLL_MS) == -1)
      goto fail;
    if (give_up && give_up ()) {
      bmerr_set (err, ESHUTDOWN, "restore-from=%s: gave up waiting for the "
                 "source", s->uri);
      return -1;
    }
  }
  if (r == 1)
    return 0;
 fail:
  bmerr_set (err, nbd_get_errno () ? nbd_get_errno () : EIO,
             "restore-from=%s: reading %zu bytes at offset %" PRIu64
             " failed: %s", s->uri, count, offset, nbd_get_error ());
  return -1;
}

int
source_pread (struct source *s, void *buf, uint64_t count, uint64_t offset,
              bool (*give_up) (void), struct bmerr *err)
{
  size_t i = take (s);
  uint64_t done;
  int r = 0;

  if (s->slot[i].h == NULL &&
      (s->slot[i].h = connect_source (s->uri, err)) == NULL) {
    put (s, i, false);
    return -1;
  }
  for (done = 0; r == 0 && done < count; done += SOURCE_MAX_READ)
    r = read_once (s, s->slot[i].h, (char *) buf + done,
                   MIN (count - done, SOURCE_MAX_READ), offset + done,
                   give_up, err);
  put (s, i, r == -1);
  return r;
}
