/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/nbd.c: an NBD server as the target of a copy.
 *
 * One libnbd handle per connection, each used only by the worker
 * thread of that connection: writes are nbd_aio_pwrite, zeroes are
 * nbd_aio_zero (without NBD_CMD_FLAG_NO_HOLE, so the server may punch
 * holes and keep its disk sparse) or, if the server has no
 * write-zeroes, writes of a buffer of zeroes.  The worker polls the
 * handle's descriptor and calls notify, which moves libnbd's state
 * machine on; completion callbacks run from there.
 *
 * Zero operations only over whole blocks of ZERO_ALIGN, on multiples
 * of it (zero_align, see copy/target.h): the other zeroes are written
 * as data.  The server may be qemu-nbd serving a qcow2 overlay, whose
 * clusters are at most 2M.  With qemu 7.2, a write-zeroes and a write
 * in flight together in one cluster of an overlay can leave the
 * backing file's data where the disk reads zeroes (seen; the likely
 * cause is qcow2's write-zeroes of part of a cluster, which checks
 * that the rest reads as zeroes and zeroes the whole cluster, without
 * waiting for the write's copy-on-write).  The same operations one at
 * a time, or the zeroes written as data, give the right image.  A zero
 * operation over whole aligned blocks of 2M covers whole clusters, and
 * no other operation of the copy touches them.  The cost: changed
 * zeroes that do not fill such a block are sent as data (never more
 * bytes than the dirty ranges).
 *
 * flush is NBD_CMD_FLUSH on every connection (if the server has it),
 * commit has nothing to do, close disconnects (bounded: see
 * copy/connect.c).
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

#include "internal.h"
#include "util.h"

/* The largest qcow2 cluster. */
#define ZERO_ALIGN (UINT64_C (2) << 20)

struct nbd_target {
  struct target t;              /* first: a struct target * is one of these */
  struct nbd_handle **h;        /* [max_connections] */
  unsigned max_connections;
  unsigned connections;         /* opened */
  bool can_zero;
  bool can_flush;
};

static const struct target_ops nbd_ops;

struct target *
nbd_target_open (const char *uri, unsigned max_connections, struct bmerr *err)
{
  struct nbd_target *n;
  int64_t v;

  n = calloc (1, sizeof *n);
  if (n == NULL || (n->h = calloc (max_connections, sizeof *n->h)) == NULL) {
    bmerr_first (err, 0, "%s", strerror (errno));
    free (n);
    return NULL;
  }
  n->t.ops = &nbd_ops;
  n->t.name = uri;
  n->max_connections = max_connections;
  n->connections = 1;
  if ((n->h[0] = connect_uri ("target", uri, false, err)) == NULL)
    goto err;
  if (nbd_is_read_only (n->h[0]) == 1) {
    bmerr_first (err, 0, "target %s is read-only", uri);
    goto err;
  }
  if ((v = nbd_get_size (n->h[0])) == -1) {
    bmerr_first (err, 0, "target %s: %s", uri, nbd_get_error ());
    goto err;
  }
  n->t.size = v;
  n->t.max_request = max_block (n->h[0]);
  n->t.multi_conn = nbd_can_multi_conn (n->h[0]) == 1;
  n->can_zero = nbd_can_zero (n->h[0]) == 1;
  n->can_flush = nbd_can_flush (n->h[0]) == 1;
  /* Without write-zeroes, zeroes are written from a buffer. */
  n->t.zero_size = n->can_zero ? UINT64_C (1) << 30 : 0;
  n->t.zero_align = ZERO_ALIGN;
  return &n->t;

 err:
  nbd_ops.close (&n->t, false);
  return NULL;
}

static int
nbd_target_connect (struct target *t, unsigned count, struct bmerr *err)
{
  struct nbd_target *n = (struct nbd_target *) t;

  while (n->connections < count && n->connections < n->max_connections) {
    n->h[n->connections] = connect_uri ("target", t->name, false, err);
    if (n->h[n->connections] == NULL)
      return -1;
    n->connections++;
  }
  return 0;
}

static int
nbd_target_write (struct target *t, unsigned conn, const void *buf,
                  size_t count, uint64_t offset, struct target_cb cb)
{
  struct nbd_target *n = (struct nbd_target *) t;
  nbd_completion_callback c = { .callback = cb.fn, .user_data = cb.opaque };

  return nbd_aio_pwrite (n->h[conn], buf, count, offset, c, 0) == -1 ? -1 : 0;
}

static int
nbd_target_zero (struct target *t, unsigned conn, uint64_t count,
                 uint64_t offset, struct target_cb cb)
{
  struct nbd_target *n = (struct nbd_target *) t;
  nbd_completion_callback c = { .callback = cb.fn, .user_data = cb.opaque };
  int64_t r;

  if (n->can_zero)
    r = nbd_aio_zero (n->h[conn], count, offset, c, 0);
  else {
    /* zero_size was set to the buffer's size: one write does it. */
    if (count > t->zero_buf_size) {
      errno = EINVAL;
      return -1;
    }
    r = nbd_aio_pwrite (n->h[conn], t->zero_buf, count, offset, c, 0);
  }
  return r == -1 ? -1 : 0;
}

static int
nbd_target_read (struct target *t, unsigned conn, void *buf, size_t count,
                 uint64_t offset, struct target_cb cb)
{
  struct nbd_target *n = (struct nbd_target *) t;
  nbd_completion_callback c = { .callback = cb.fn, .user_data = cb.opaque };

  return nbd_aio_pread (n->h[conn], buf, count, offset, c, 0) == -1 ? -1 : 0;
}

static const char *
nbd_target_last_error (struct target *t, int err)
{
  const char *msg = nbd_get_error ();

  return msg ? msg : strerror (err);
}

static int
nbd_target_get_fd (struct target *t, unsigned conn, short *events)
{
  struct nbd_target *n = (struct nbd_target *) t;
  unsigned dir;
  int fd;

  if (nbd_aio_in_flight (n->h[conn]) <= 0)
    return -1;
  fd = nbd_aio_get_fd (n->h[conn]);
  if (fd == -1)
    return -1;
  dir = nbd_aio_get_direction (n->h[conn]);
  *events = ((dir & LIBNBD_AIO_DIRECTION_READ) ? POLLIN : 0) |
    ((dir & LIBNBD_AIO_DIRECTION_WRITE) ? POLLOUT : 0);
  return fd;
}

static int
nbd_target_notify (struct target *t, unsigned conn, short revents,
                   const char **msg)
{
  struct nbd_target *n = (struct nbd_target *) t;
  struct nbd_handle *h = n->h[conn];
  unsigned dir = nbd_aio_get_direction (h);
  int r = 0;

  if ((dir & LIBNBD_AIO_DIRECTION_READ) &&
      (revents & (POLLIN | POLLHUP | POLLERR)))
    r = nbd_aio_notify_read (h);
  else if ((dir & LIBNBD_AIO_DIRECTION_WRITE) &&
           (revents & (POLLOUT | POLLHUP | POLLERR)))
    r = nbd_aio_notify_write (h);
  if (r == -1) {
    *msg = nbd_get_error ();
    return -1;
  }
  if (nbd_aio_is_closed (h) == 1 || nbd_aio_is_dead (h) == 1) {
    /* End of file where a reply could start: libnbd calls that a
     * close, not an error, but the commands in flight are lost.
     */
    *msg = "the server closed the connection";
    return -1;
  }
  return 0;
}

static int
nbd_target_flush (struct target *t, struct bmerr *err)
{
  struct nbd_target *n = (struct nbd_target *) t;
  unsigned i;

  if (!n->can_flush)
    return 0;
  for (i = 0; i < n->connections; ++i)
    if (nbd_flush (n->h[i], 0) == -1) {
      bmerr_first (err, 0, "target %s: flush: %s", t->name, nbd_get_error ());
      return -1;
    }
  return 0;
}

static int
nbd_target_commit (struct target *t, struct bmerr *err)
{
  return 0;                     /* written in place, and flushed */
}

static void
nbd_target_close (struct target *t, bool graceful)
{
  struct nbd_target *n = (struct nbd_target *) t;

  close_handles (n->h, n->max_connections, graceful);
  free (n->h);
  free (n);
}

static const struct target_ops nbd_ops = {
  .connect = nbd_target_connect,
  .write = nbd_target_write,
  .zero = nbd_target_zero,
  .read = nbd_target_read,
  .last_error = nbd_target_last_error,
  .get_fd = nbd_target_get_fd,
  .notify = nbd_target_notify,
  .flush = nbd_target_flush,
  .commit = nbd_target_commit,
  .close = nbd_target_close,
};
