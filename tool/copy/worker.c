/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/worker.c: the copying thread of one connection.
 *
 * Each thread owns its source handle (and its connection of the
 * target, see copy/target.h) and runs its own poll(2) loop with up to
 * c->requests pieces of work in flight, each in a slot with its own
 * buffer.  A piece goes through up to three stages:
 *
 *   READ    data only: nbd_aio_pread_structured from the source.  The
 *           chunk callback notes which bytes each reply chunk covers;
 *           at the end they must cover the piece exactly, or the copy
 *           fails (libnbd would otherwise leave the rest as it was,
 *           zeroes, and report success).  With checksums compared
 *           with what the target holds (copy_sums.held), every piece,
 *           zero ones too, also reads the target here, and each
 *           chunk's digest compared with is that of what it read.
 *   TARGET  the piece on the target (plan_ops, copy/plan.c).  A zero
 *           range is a run of zeroes.  Data is cut into blocks of
 *           SPARSE_SIZE (on multiples of it on the disk): runs of
 *           blocks that read as all zeroes are runs of zeroes, the
 *           rest is written.  A run
 *           of zeroes is one zero operation over the whole blocks of
 *           the target's zero_align inside it (copy/target.h); what
 *           is left of it at either end is written as data (from the
 *           piece's buffer, or for a zero range from the target's
 *           buffer of zeroes).  So a copy keeps the target sparse: a
 *           new file is zero already and gets nothing, an existing
 *           file gets holes punched, an NBD target gets write-zeroes
 *           over whole aligned blocks of 2M.
 *   TRIM    with trim_source only: nbd_aio_trim of the piece on the
 *           source, once every operation on the target has ended
 *           well.
 *
 * Threads take pieces from the shared cursor in struct copy (at most
 * request_size of data or zero_size of zeroes, ending on a multiple
 * of that size so that the following pieces are aligned).
 *
 * Callbacks (libnbd's, or a file target's, which runs at once) only
 * count and mark their slot; all further work happens in the loop.
 * Every operation of a stage holds a reference on its slot (pending);
 * the stage is done when the last one ends.  Bytes count as copied or
 * zeroed as each target operation succeeds.  A failure anywhere
 * records the first error and sets c->stop; so does an interruption
 * (the interrupt pipe becomes readable).  Then no new work starts and
 * the operations in flight are waited for (a dead handle fails them
 * at once).
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <sys/types.h>

#include <libnbd.h>

#include "internal.h"
#include "slot.h"
#include "sums.h"
#include "util.h"


static bool
stopped (struct copy *c)
{
  return __atomic_load_n (&c->stop, __ATOMIC_ACQUIRE);
}

/* Does each piece read what the target holds first? */
static bool
reads_target (const struct copy *c)
{
  return c->sums && c->sums->compare && c->sums->held;
}

/* Take the next piece of work; false when there is none left. */
static bool
next_piece (struct copy *c, uint64_t *offset, uint64_t *length, bool *zero)
{
  SCOPED_LOCK (&c->workers_lock);
  const struct range *r;
  uint64_t max, off, left;

  if (c->next_range >= c->ranges->n)
    return false;
  r = &c->ranges->r[c->next_range];
  max = r->zero && !reads_target (c) ? c->zero_size : c->request_size;
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

/* A stage's operation has ended. */
static void
put_slot (struct slot *s, int err)
{
  if (err && !s->err)
    s->err = err;
  if (--s->pending == 0)
    s->done = true;
}

static int
read_done (void *opaque, int *error)
{
  put_slot (opaque, *error);
  return 1;                     /* retire the command */
}

static int
target_read_done (void *opaque, int *error)
{
  struct slot *s = opaque;

  if (*error && !s->terr)
    s->terr = *error;
  put_slot (s, 0);
  return 1;
}

static int
read_chunk (void *opaque, const void *subbuf, size_t count, uint64_t offset,
            unsigned status, int *error)
{
  struct slot *s = opaque;

  if (status != LIBNBD_READ_DATA && status != LIBNBD_READ_HOLE)
    return 0;                   /* an error chunk fails the read anyway */
  if (array_room (&s->chunks, &s->chunks_cap, s->nchunks,
                  sizeof *s->chunks, 4) == -1) {
    s->chunks_nomem = true;
    return 0;
  }
  s->chunks[s->nchunks++] = (struct chunk) { offset, count };
  return 0;
}

static int
target_done (void *opaque, int *error)
{
  struct op *op = opaque;
  struct slot *s = op->s;

  if (*error) {
    if (!s->err)
      s->err_op = op;
  }
  else if (op->buf == NULL)
    add_done (&s->l->c->zeroed, op->length);
  else
    add_done (&s->l->c->copied, op->length);
  put_slot (s, *error);
  return 1;
}

static int
compare_chunks (const void *a, const void *b)
{
  const struct chunk *x = a, *y = b;

  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Do the chunks of the read reply cover the piece exactly?  If not,
 * fail the copy saying how.
 */
static bool
read_complete (struct copy *c, struct slot *s)
{
  uint64_t pos = s->offset, covered = 0;
  size_t i;

  if (s->chunks_nomem) {
    copy_error (c, "%s", strerror (ENOMEM));
    return false;
  }
  if (s->nchunks > 1)
    qsort (s->chunks, s->nchunks, sizeof *s->chunks, compare_chunks);
  for (i = 0; i < s->nchunks; ++i) {
    if (s->chunks[i].offset < pos) {
      copy_error (c, "source %s: reading %" PRIu64 " bytes at offset %"
                  PRIu64 ": the server's reply chunks overlap at offset %"
                  PRIu64, c->src_name, s->length, s->offset,
                  s->chunks[i].offset);
      return false;
    }
    covered += s->chunks[i].length;
    pos = s->chunks[i].offset + s->chunks[i].length;
  }
  if (covered != s->length) {
    copy_error (c, "source %s: reading %" PRIu64 " bytes at offset %"
                PRIu64 ": the server's reply covers only %" PRIu64
                " of them", c->src_name, s->length, s->offset, covered);
    return false;
  }
  return true;
}


static void
error_in_op (struct copy *c, const struct op *op, const char *msg)
{
  copy_error (c, "target %s: %s %" PRIu64 " bytes at offset %" PRIu64
              ": %s", c->dst_name, op->buf ? "writing" : "zeroing",
              op->length, op->offset, msg);
}

/* Start the TARGET stage of s. */
static void
start_target (struct loop *l, struct slot *s)
{
  struct copy *c = l->c;
  struct target *t = c->dst;
  ssize_t n;
  size_t i;

  s->state = SLOT_TARGET;
  s->pending = 1;               /* this function's own reference */
  s->done = false;
  s->err = 0;
  s->err_op = NULL;
  n = plan_ops (c, s);
  if (n == -1) {
    copy_error (c, "%s", strerror (ENOMEM));
    n = 0;                      /* the slot is freed at once */
  }
  for (i = 0; i < (size_t) n; ++i) {
    struct op *op = &s->ops[i];
    struct target_cb cb = { .fn = target_done, .opaque = op };
    int r;

    s->pending++;
    if (op->buf == NULL)
      r = t->ops->zero (t, l->conn, op->length, op->offset, cb);
    else
      r = t->ops->write (t, l->conn, op->buf, op->length, op->offset, cb);
    if (r == -1) {
      error_in_op (c, op, t->ops->last_error (t, errno));
      s->pending--;
      break;
    }
  }
  put_slot (s, 0);
}

/* Grow *buf to hold len bytes (small dirty ranges keep small
 * buffers).  -1 on ENOMEM.
 */
static int
grow (char **buf, size_t *size, size_t len)
{
  char *p;

  if (*size >= len)
    return 0;
  if ((p = realloc (*buf, len)) == NULL)
    return -1;
  *buf = p;
  *size = len;
  return 0;
}

/* Start the READ stage of s: the source's data, what the target
 * holds, or both.
 */
static void
start_read (struct loop *l, struct slot *s)
{
  struct copy *c = l->c;
  struct target *t = c->dst;

  s->state = SLOT_READ;
  s->pending = 1;               /* this function's own reference */
  s->done = false;
  s->err = s->terr = 0;
  s->nchunks = 0;
  s->chunks_nomem = false;
  if (!s->zero) {
    s->pending++;
    if (nbd_aio_pread_structured (l->src, s->buf, s->length, s->offset,
                                  (nbd_chunk_callback) {
                                    .callback = read_chunk, .user_data = s },
                                  (nbd_completion_callback) {
                                    .callback = read_done, .user_data = s },
                                  0) == -1) {
      copy_error (c, "source %s: reading %" PRIu64 " bytes at offset %"
                  PRIu64 ": %s", c->src_name, s->length, s->offset,
                  nbd_get_error ());
      s->pending--;
    }
  }
  if (reads_target (c) && !stopped (c)) {
    s->pending++;
    if (t->ops->read (t, l->conn, s->tbuf, s->length, s->offset,
                      (struct target_cb) { .fn = target_read_done,
                                           .opaque = s }) == -1) {
      copy_error (c, "target %s: reading %" PRIu64 " bytes at offset %"
                  PRIu64 ": %s", c->dst_name, s->length, s->offset,
                  t->ops->last_error (t, errno));
      s->pending--;
    }
  }
  put_slot (s, 0);
}

/* Start one piece of work in the free slot s.  Returns false when
 * there is nothing left to start.
 */
static bool
start_piece (struct loop *l, struct slot *s)
{
  struct copy *c = l->c;

  if (!next_piece (c, &s->offset, &s->length, &s->zero))
    return false;
  l->in_flight++;
  if (s->zero && !reads_target (c)) {
    if (c->sums && hash_piece (c, s) == -1) {
      copy_error (c, "%s", strerror (ENOMEM));
      s->done = true;
      return true;
    }
    start_target (l, s);
    return true;
  }
  if ((!s->zero && grow (&s->buf, &s->buf_size, s->length) == -1) ||
      (reads_target (c) && grow (&s->tbuf, &s->tbuf_size, s->length) == -1)) {
    copy_error (c, "%s", strerror (errno));
    s->done = true;
    return true;
  }
  start_read (l, s);
  return true;
}

static void
free_slot (struct loop *l, struct slot *s)
{
  s->state = SLOT_FREE;
  s->done = false;
  l->in_flight--;
}

/* Start the TRIM stage of s. */
static void
start_trim (struct loop *l, struct slot *s)
{
  struct copy *c = l->c;

  s->state = SLOT_TRIM;
  s->pending = 1;
  s->done = false;
  s->err = 0;
  if (nbd_aio_trim (l->src, s->length, s->offset,
                    (nbd_completion_callback) {
                      .callback = read_done, .user_data = s },
                    0) == -1) {
    copy_error (c, "source %s: trimming %" PRIu64 " bytes at offset %"
                PRIu64 ": %s", c->src_name, s->length, s->offset,
                nbd_get_error ());
    s->pending = 0;
    s->done = true;
  }
}

/* Deal with a slot whose stage has ended. */
static void
finish_slot (struct loop *l, struct slot *s)
{
  struct copy *c = l->c;

  s->done = false;
  switch (s->state) {
  case SLOT_READ:
    if (s->err || s->terr) {
      copy_error (c, "%s %s: reading %" PRIu64 " bytes at offset %"
                  PRIu64 ": %s", s->err ? "source" : "target",
                  s->err ? c->src_name : c->dst_name, s->length, s->offset,
                  strerror (s->err ? s->err : s->terr));
      break;
    }
    if (stopped (c) || (!s->zero && !read_complete (c, s)))
      break;
    if (!s->zero)
      add_done (&c->read, s->length);
    if (reads_target (c))
      hash_held (c, s);
    if (c->sums && hash_piece (c, s) == -1) {
      copy_error (c, "%s", strerror (ENOMEM));
      break;
    }
    start_target (l, s);
    return;

  case SLOT_TARGET:
    if (s->err) {
      if (s->err_op)
        error_in_op (c, s->err_op, strerror (s->err));
      break;
    }
    if (c->trim_source && !stopped (c)) {
      start_trim (l, s);
      return;
    }
    break;

  case SLOT_TRIM:
    if (s->err)
      copy_error (c, "source %s: trimming %" PRIu64 " bytes at offset %"
                  PRIu64 ": %s", c->src_name, s->length, s->offset,
                  strerror (s->err));
    break;

  case SLOT_FREE:
    break;                      /* failed before it started */
  }
  free_slot (l, s);
}

/* Fail every slot still waiting for an operation. */
static void
abandon_slots (struct loop *l)
{
  unsigned i;

  for (i = 0; i < l->c->requests; ++i) {
    struct slot *s = &l->slots[i];
    if (s->state != SLOT_FREE && !s->done) {
      s->pending = 0;
      s->err = EIO;
      s->err_op = NULL;
      s->done = true;
    }
  }
}

/* The descriptors to poll: the source's (-1 if it is dead), the
 * target's (-1 if it has none now) and the wake pipe's, in fds; their
 * indexes in *src_i, *dst_i and *wake_i (-1 if not polled).  Returns
 * how many.
 */
static int
poll_set (struct loop *l, struct pollfd fds[3], int *src_i, int *dst_i,
          int *wake_i)
{
  struct copy *c = l->c;
  struct target *t = c->dst;
  int nfds = 0;

  *src_i = *dst_i = *wake_i = -1;
  if (!l->src_dead) {
    int fd = nbd_aio_get_fd (l->src);
    if (fd == -1) {
      copy_error (c, "source %s: %s", c->src_name, nbd_get_error ());
      l->src_dead = true;
    }
    else {
      unsigned dir = nbd_aio_get_direction (l->src);
      fds[nfds] = (struct pollfd) {
        .fd = fd,
        .events = ((dir & LIBNBD_AIO_DIRECTION_READ) ? POLLIN : 0) |
                  ((dir & LIBNBD_AIO_DIRECTION_WRITE) ? POLLOUT : 0),
      };
      *src_i = nfds++;
    }
  }
  if (!l->dst_dead) {
    short events = 0;
    int fd = t->ops->get_fd (t, l->conn, &events);
    if (fd >= 0) {
      fds[nfds] = (struct pollfd) { .fd = fd, .events = events };
      *dst_i = nfds++;
    }
  }
  if (!l->woken && c->wake_fd >= 0) {
    fds[nfds] = (struct pollfd) { .fd = c->wake_fd, .events = POLLIN };
    *wake_i = nfds++;
  }
  return nfds;
}

/* The source's descriptor is ready (revents): let libnbd go on. */
static void
notify_source (struct loop *l, short rev)
{
  struct copy *c = l->c;
  unsigned dir = nbd_aio_get_direction (l->src);
  int r = 0;

  if ((dir & LIBNBD_AIO_DIRECTION_READ) &&
      (rev & (POLLIN | POLLHUP | POLLERR)))
    r = nbd_aio_notify_read (l->src);
  else if ((dir & LIBNBD_AIO_DIRECTION_WRITE) &&
           (rev & (POLLOUT | POLLHUP | POLLERR)))
    r = nbd_aio_notify_write (l->src);
  if (r == -1) {
    copy_error (c, "source %s: %s", c->src_name, nbd_get_error ());
    l->src_dead = true;
  }
  else if (nbd_aio_is_closed (l->src) == 1 ||
           nbd_aio_is_dead (l->src) == 1) {
    /* End of file where a reply could start: libnbd calls that a
     * close, not an error, but the commands in flight are lost.
     */
    copy_error (c, "source %s: the server closed the connection",
                c->src_name);
    l->src_dead = true;
  }
}

/* Wait for the source, the target or the interrupt pipe, and let
 * libnbd move on.  A handle that fails is dead: its commands in
 * flight have been failed by libnbd (their callbacks ran) and it is
 * polled no more.
 */
static void
poll_handles (struct loop *l)
{
  struct copy *c = l->c;
  struct target *t = c->dst;
  struct pollfd fds[3];
  int nfds, src_i, dst_i, wake_i;

  nfds = poll_set (l, fds, &src_i, &dst_i, &wake_i);
  if (src_i == -1 && dst_i == -1) {
    /* libnbd fails the commands in flight on a handle that dies or
     * closes, so this should not happen; if it does, give the slots
     * up rather than wait for ever.
     */
    copy_error (c, "no connection left with operations in flight");
    abandon_slots (l);
    return;
  }

  if (poll (fds, nfds, -1) == -1) {
    if (errno != EINTR)
      copy_error (c, "poll: %s", strerror (errno));
    return;
  }

  if (wake_i >= 0 && (fds[wake_i].revents & POLLIN)) {
    l->woken = true;
    copy_stop (c);
  }
  if (src_i >= 0)
    notify_source (l, fds[src_i].revents);
  if (dst_i >= 0) {
    const char *msg = NULL;
    if (t->ops->notify (t, l->conn, fds[dst_i].revents, &msg) == -1) {
      copy_error (c, "target %s: %s", c->dst_name,
                  msg ? msg : "connection failed");
      l->dst_dead = true;
    }
  }
}

static bool
any_done (struct loop *l)
{
  unsigned i;

  for (i = 0; i < l->c->requests; ++i)
    if (l->slots[i].done)
      return true;
  return false;
}

void *
copy_worker (void *arg)
{
  struct worker *w = arg;
  struct copy *c = w->c;
  struct loop l = {
    .c = c,
    .conn = w->i,
    .src = c->src[w->i],
  };
  bool more = true;
  unsigned i;

  l.slots = calloc (c->requests, sizeof *l.slots);
  if (l.slots == NULL) {
    copy_error (c, "%s", strerror (errno));
    goto out;
  }
  for (i = 0; i < c->requests; ++i)
    l.slots[i].l = &l;

  for (;;) {
    for (i = 0; i < c->requests; ++i)
      while (l.slots[i].done)
        finish_slot (&l, &l.slots[i]);

    for (i = 0; more && i < c->requests && !stopped (c); ++i)
      if (l.slots[i].state == SLOT_FREE && !l.slots[i].done)
        more = start_piece (&l, &l.slots[i]);

    if (l.in_flight == 0 && (!more || stopped (c)))
      break;
    if (!any_done (&l))
      poll_handles (&l);
  }

 out:
  if (l.slots)
    for (i = 0; i < c->requests; ++i) {
      free (l.slots[i].buf);
      free (l.slots[i].tbuf);
      free (l.slots[i].ops);
      free (l.slots[i].chunks);
      free (l.slots[i].same);
    }
  free (l.slots);
  {
    SCOPED_LOCK (&c->workers_lock);
    c->running--;
    pthread_cond_signal (&c->finished);
  }
  return NULL;
}
