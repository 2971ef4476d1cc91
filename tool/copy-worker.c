/* SPDX-License-Identifier: BSD-3-Clause */
/* copy-worker.c: the copying thread of one connection.
 *
 * Each thread owns its source handle (and its target handle when the
 * target is an NBD server) and runs its own poll(2) loop with up to
 * c->requests commands in flight, each in a slot with its own buffer:
 *
 *   data range:  nbd_aio_pread from the source; when it completes,
 *                pwrite to a file target, or nbd_aio_pwrite to an NBD
 *                target from the same buffer;
 *   zero range:  write-zeroes on the target (file: at once, see
 *                copy-file.c; NBD: nbd_aio_zero, or a write of zeroes
 *                if the server has no write-zeroes).
 *
 * Threads take pieces of work from the shared cursor in struct copy
 * (at most request_size of data or zero_size of zeroes, ending on a
 * multiple of that size so that the following pieces are aligned).
 *
 * Completion callbacks only mark their slot; all further work happens
 * in the loop, outside libnbd's callbacks.  A failure anywhere records
 * the first error and sets c->stop: no new work starts, the commands
 * in flight are waited for (a dead handle fails them at once), and
 * only completed writes and zeroes count as copied.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <poll.h>

#include <libnbd.h>

#include "dirtybitmap.h"
#include "msg.h"
#include "copy.h"
#include "util.h"

enum slot_state {
  SLOT_FREE,
  SLOT_READ,                    /* reading from the source */
  SLOT_WRITE,                   /* writing the data to an NBD target */
  SLOT_ZERO,                    /* zeroing on an NBD target */
};

struct slot {
  enum slot_state state;
  bool done;                    /* set by the completion callback */
  int err;                      /* its errno, 0 on success */
  uint64_t offset;
  uint64_t length;
  char *buf;                    /* grown to the largest piece read */
  size_t buf_size;
};

struct loop {
  struct copy *c;
  struct nbd_handle *src, *dst;
  bool src_dead, dst_dead;
  struct slot *slots;
  unsigned in_flight;
};

static bool
stopped (struct copy *c)
{
  return __atomic_load_n (&c->stop, __ATOMIC_ACQUIRE);
}

/* Take the next piece of work; false when there is none left. */
static bool
next_piece (struct copy *c, uint64_t *offset, uint64_t *length, bool *zero)
{
  SCOPED_LOCK (&c->lock);
  const struct range *r;
  uint64_t max, off, left;

  if (c->next_range >= c->ranges->n)
    return false;
  r = &c->ranges->r[c->next_range];
  max = r->zero ? c->zero_size : c->request_size;
  off = r->offset + c->next_offset;
  left = r->length - c->next_offset;
  *offset = off;
  *length = MIN (left, max - off % max);
  *zero = r->zero;
  c->next_offset += *length;
  if (c->next_offset == r->length) {
    c->next_range++;
    c->next_offset = 0;
  }
  return true;
}

static int
slot_done (void *opaque, int *error)
{
  struct slot *s = opaque;

  s->done = true;
  s->err = *error;
  return 1;                     /* retire the command */
}

static void
free_slot (struct loop *l, struct slot *s)
{
  s->state = SLOT_FREE;
  s->done = false;
  l->in_flight--;
}

static void
add_done (uint64_t *counter, uint64_t n)
{
  __atomic_fetch_add (counter, n, __ATOMIC_RELAXED);
}

/* Start one piece of work in the free slot s.  Returns false when
 * there is nothing left to start.
 */
static bool
start_piece (struct loop *l, struct slot *s)
{
  struct copy *c = l->c;
  nbd_completion_callback cb = { .callback = slot_done, .user_data = s };
  uint64_t offset, length;
  bool zero;

  if (!next_piece (c, &offset, &length, &zero))
    return false;
  s->offset = offset;
  s->length = length;
  s->done = false;
  s->err = 0;

  if (zero && c->file) {
    /* Synchronous: fallocate or an ioctl, no slot needed. */
    if (file_target_zero (c->file, length, offset) == -1)
      copy_error (c, "target %s: zeroing %" PRIu64 " bytes at offset %"
                  PRIu64 ": %s", c->dst_name, length, offset,
                  strerror (errno));
    else
      add_done (&c->zeroed, length);
    return true;
  }

  if (zero) {
    int64_t r;
    if (c->dst_can_zero)
      r = nbd_aio_zero (l->dst, length, offset, cb, 0);
    else
      r = nbd_aio_pwrite (l->dst, c->zero_buf, length, offset, cb, 0);
    if (r == -1) {
      copy_error (c, "target %s: zeroing %" PRIu64 " bytes at offset %"
                  PRIu64 ": %s", c->dst_name, length, offset,
                  nbd_get_error ());
      return true;
    }
    s->state = SLOT_ZERO;
    l->in_flight++;
    return true;
  }

  /* Small dirty ranges keep small buffers. */
  if (s->buf_size < length) {
    char *buf = realloc (s->buf, length);
    if (buf == NULL) {
      copy_error (c, "%s", strerror (errno));
      return true;
    }
    s->buf = buf;
    s->buf_size = length;
  }
  if (nbd_aio_pread (l->src, s->buf, length, offset, cb, 0) == -1) {
    copy_error (c, "source %s: reading %" PRIu64 " bytes at offset %"
                PRIu64 ": %s", c->src_name, length, offset,
                nbd_get_error ());
    return true;
  }
  s->state = SLOT_READ;
  l->in_flight++;
  return true;
}

/* Deal with a slot whose command has completed. */
static void
finish_slot (struct loop *l, struct slot *s)
{
  struct copy *c = l->c;

  s->done = false;
  switch (s->state) {
  case SLOT_READ:
    if (s->err) {
      copy_error (c, "source %s: reading %" PRIu64 " bytes at offset %"
                  PRIu64 ": %s", c->src_name, s->length, s->offset,
                  strerror (s->err));
      break;
    }
    if (stopped (c))
      break;
    if (c->file) {
      if (file_target_write (c->file, s->buf, s->length, s->offset) == -1)
        copy_error (c, "target %s: writing %" PRIu64 " bytes at offset %"
                    PRIu64 ": %s", c->dst_name, s->length, s->offset,
                    strerror (errno));
      else
        add_done (&c->copied, s->length);
      break;
    }
    if (nbd_aio_pwrite (l->dst, s->buf, s->length, s->offset,
                        (nbd_completion_callback) { .callback = slot_done,
                                                    .user_data = s },
                        0) == -1) {
      copy_error (c, "target %s: writing %" PRIu64 " bytes at offset %"
                  PRIu64 ": %s", c->dst_name, s->length, s->offset,
                  nbd_get_error ());
      break;
    }
    s->state = SLOT_WRITE;
    return;                     /* still in flight */

  case SLOT_WRITE:
  case SLOT_ZERO:
    if (s->err)
      copy_error (c, "target %s: %s %" PRIu64 " bytes at offset %" PRIu64
                  ": %s", c->dst_name,
                  s->state == SLOT_WRITE ? "writing" : "zeroing",
                  s->length, s->offset, strerror (s->err));
    else if (s->state == SLOT_WRITE)
      add_done (&c->copied, s->length);
    else
      add_done (&c->zeroed, s->length);
    break;

  case SLOT_FREE:
    abort ();
  }
  free_slot (l, s);
}

/* Wait for one of the handles to be ready and let libnbd move on.
 * A handle that fails is dead: its commands in flight have been
 * failed by libnbd (their callbacks ran) and it is polled no more.
 */
static void
poll_handles (struct loop *l)
{
  struct copy *c = l->c;
  struct nbd_handle *h[2];
  bool *dead[2];
  const char *what[2], *name[2];
  struct pollfd fds[2];
  int idx[2];
  int nfds = 0, i;

  h[0] = l->src; dead[0] = &l->src_dead;
  what[0] = "source"; name[0] = c->src_name;
  h[1] = l->dst; dead[1] = &l->dst_dead;
  what[1] = "target"; name[1] = c->dst_name;

  for (i = 0; i < 2; ++i) {
    unsigned dir;
    int fd;

    if (h[i] == NULL || *dead[i])
      continue;
    fd = nbd_aio_get_fd (h[i]);
    if (fd == -1) {
      copy_error (c, "%s %s: %s", what[i], name[i], nbd_get_error ());
      *dead[i] = true;
      continue;
    }
    dir = nbd_aio_get_direction (h[i]);
    fds[nfds].fd = fd;
    fds[nfds].events = ((dir & LIBNBD_AIO_DIRECTION_READ) ? POLLIN : 0) |
      ((dir & LIBNBD_AIO_DIRECTION_WRITE) ? POLLOUT : 0);
    fds[nfds].revents = 0;
    idx[nfds++] = i;
  }
  if (nfds == 0) {
    /* Cannot happen: commands in flight on dead handles are failed. */
    copy_error (c, "no connection left with commands in flight");
    return;
  }

  if (poll (fds, nfds, -1) == -1) {
    if (errno != EINTR)
      copy_error (c, "poll: %s", strerror (errno));
    return;
  }

  for (i = 0; i < nfds; ++i) {
    int k = idx[i], r = 0;
    unsigned dir = nbd_aio_get_direction (h[k]);
    short rev = fds[i].revents;

    if ((dir & LIBNBD_AIO_DIRECTION_READ) &&
        (rev & (POLLIN | POLLHUP | POLLERR)))
      r = nbd_aio_notify_read (h[k]);
    else if ((dir & LIBNBD_AIO_DIRECTION_WRITE) &&
             (rev & (POLLOUT | POLLHUP | POLLERR)))
      r = nbd_aio_notify_write (h[k]);
    if (r == -1) {
      copy_error (c, "%s %s: %s", what[k], name[k], nbd_get_error ());
      *dead[k] = true;
    }
    else if (nbd_aio_is_closed (h[k]) == 1 || nbd_aio_is_dead (h[k]) == 1) {
      /* End of file where a reply could start: libnbd calls that a
       * close, not an error, but the commands in flight are lost.
       */
      copy_error (c, "%s %s: the server closed the connection",
                  what[k], name[k]);
      *dead[k] = true;
    }
  }
}

void *
copy_worker (void *arg)
{
  struct worker *w = arg;
  struct copy *c = w->c;
  struct loop l = {
    .c = c,
    .src = c->src[w->i],
    .dst = c->dst ? c->dst[w->i] : NULL,
  };
  bool more = true;
  unsigned i;

  l.slots = calloc (c->requests, sizeof *l.slots);
  if (l.slots == NULL) {
    copy_error (c, "%s", strerror (errno));
    goto out;
  }

  for (;;) {
    for (i = 0; i < c->requests; ++i)
      if (l.slots[i].done)
        finish_slot (&l, &l.slots[i]);

    for (i = 0; more && i < c->requests && !stopped (c); ++i)
      if (l.slots[i].state == SLOT_FREE)
        more = start_piece (&l, &l.slots[i]);

    if (l.in_flight == 0 && (!more || stopped (c)))
      break;
    if (l.in_flight > 0)
      poll_handles (&l);
  }

 out:
  if (l.slots)
    for (i = 0; i < c->requests; ++i)
      free (l.slots[i].buf);
  free (l.slots);
  {
    SCOPED_LOCK (&c->lock);
    c->running--;
    pthread_cond_signal (&c->finished);
  }
  return NULL;
}
