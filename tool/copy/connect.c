/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/connect.c: the NBD connections of a copy: opening one, and
 * closing them all without waiting on a server for ever.
 *
 * nbd_shutdown sends NBD_CMD_DISC and then waits, with no limit, for
 * the server to close the connection; a server that does not would
 * keep a finished copy from ever returning.  So close_handles sends
 * the disconnect on every handle at once (nbd_aio_disconnect) and runs
 * their state machines in one poll loop until each has closed or
 * SHUTDOWN_WAIT_SECS have passed for all of them together, then
 * closes the sockets.  By then the copy is complete and flushed: a
 * server that does not close in time loses nothing, it only gets its
 * end of file without the courtesy of a wait.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <poll.h>

#include <libnbd.h>

#include "dirtybitmap.h"
#include "msg.h"
#include "internal.h"
#include "util.h"

struct nbd_handle *
connect_uri (const char *what, const char *uri, bool meta, struct bmerr *err)
{
  struct nbd_handle *h = nbd_create ();

  if (h == NULL) {
    bmerr_first (err, 0, "%s", nbd_get_error ());
    return NULL;
  }
  nbd_set_handle_name (h, what);
  if (meta &&
      nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1) {
    bmerr_first (err, 0, "%s", nbd_get_error ());
    nbd_close (h);
    return NULL;
  }
  if (nbd_connect_uri (h, uri) == -1) {
    bmerr_first (err, 0, "%s %s: cannot connect: %s", what, uri,
                 nbd_get_error ());
    nbd_close (h);
    return NULL;
  }
  return h;
}

uint64_t
max_block (struct nbd_handle *h)
{
  int64_t r = nbd_get_block_size (h, LIBNBD_SIZE_MAXIMUM);
  return r > 0 ? (uint64_t) r : 0;
}

/* Still to wait for: connected or disconnecting, not closed or dead. */
static bool
open_still (struct nbd_handle *h)
{
  return nbd_aio_is_closed (h) != 1 && nbd_aio_is_dead (h) != 1 &&
    nbd_aio_get_fd (h) >= 0;
}

void
close_handles (struct nbd_handle **hs, unsigned n, bool graceful)
{
  double deadline = clock_seconds (CLOCK_MONOTONIC) + SHUTDOWN_WAIT_SECS;
  struct pollfd *fds = NULL;
  unsigned *idx = NULL;         /* the handle of each descriptor */
  unsigned i;

  if (hs == NULL)
    return;
  if (graceful) {
    fds = calloc (n, sizeof *fds);
    idx = calloc (n, sizeof *idx);
  }
  if (fds && idx) {
    for (i = 0; i < n; ++i)
      if (hs[i] && nbd_aio_disconnect (hs[i], 0) == -1)
        bm_debug ("copy: disconnect: %s", nbd_get_error ());

    for (;;) {
      unsigned nfds = 0, k;
      int ms = (deadline - clock_seconds (CLOCK_MONOTONIC)) * 1000, r;

      for (i = 0; i < n; ++i) {
        unsigned dir;
        if (hs[i] == NULL || !open_still (hs[i]))
          continue;
        dir = nbd_aio_get_direction (hs[i]);
        fds[nfds].fd = nbd_aio_get_fd (hs[i]);
        fds[nfds].events = ((dir & LIBNBD_AIO_DIRECTION_READ) ? POLLIN : 0) |
          ((dir & LIBNBD_AIO_DIRECTION_WRITE) ? POLLOUT : 0);
        fds[nfds].revents = 0;
        idx[nfds++] = i;
      }
      if (nfds == 0)
        break;
      if (ms <= 0) {
        bm_debug ("copy: %u server%s did not close the connection after "
                  "NBD_CMD_DISC within %d seconds: closing it",
                  nfds, nfds == 1 ? "" : "s", SHUTDOWN_WAIT_SECS);
        break;
      }
      r = poll (fds, nfds, ms);
      if (r == -1 && errno != EINTR)
        break;
      for (k = 0; k < nfds; ++k) {
        struct nbd_handle *h = hs[idx[k]];
        unsigned dir = nbd_aio_get_direction (h);
        if ((dir & LIBNBD_AIO_DIRECTION_READ) &&
            (fds[k].revents & (POLLIN | POLLHUP | POLLERR)))
          nbd_aio_notify_read (h);
        else if ((dir & LIBNBD_AIO_DIRECTION_WRITE) &&
                 (fds[k].revents & (POLLOUT | POLLHUP | POLLERR)))
          nbd_aio_notify_write (h);
      }
    }
  }
  free (fds);
  free (idx);
  for (i = 0; i < n; ++i)
    if (hs[i]) {
      nbd_close (hs[i]);
      hs[i] = NULL;
    }
}

int64_t
copy_export_size (const char *uri, struct bmerr *err)
{
  struct nbd_handle *h;
  int64_t size;

  bmerr_clear (err);
  h = connect_uri ("source", uri, false, err);
  if (h == NULL)
    return -1;
  size = nbd_get_size (h);
  if (size == -1)
    bmerr_first (err, 0, "%s: %s", uri, nbd_get_error ());
  close_handles (&h, 1, true);
  return size;
}
