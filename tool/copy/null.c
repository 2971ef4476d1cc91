/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/null.c: a target that keeps nothing, for a copy that only
 * reads and hashes (dirtybitmap verify): every operation ends at once,
 * well.
 */

#include <config.h>

#include <stdlib.h>
#include <string.h>
#include <errno.h>

#include "internal.h"

static int
null_connect (struct target *t, unsigned n, struct bmerr *err)
{
  (void) t; (void) n; (void) err;
  return 0;
}

static int
null_write (struct target *t, unsigned conn, const void *buf, size_t count,
            uint64_t offset, struct target_cb cb)
{
  int err = 0;

  (void) t; (void) conn; (void) buf; (void) count; (void) offset;
  cb.fn (cb.opaque, &err);
  return 0;
}

static int
null_zero (struct target *t, unsigned conn, uint64_t count, uint64_t offset,
           struct target_cb cb)
{
  return null_write (t, conn, NULL, count, offset, cb);
}

/* It keeps nothing: it holds zeroes. */
static int
null_read (struct target *t, unsigned conn, void *buf, size_t count,
           uint64_t offset, struct target_cb cb)
{
  int err = 0;

  (void) t; (void) conn; (void) offset;
  memset (buf, 0, count);
  cb.fn (cb.opaque, &err);
  return 0;
}

static const char *
null_last_error (struct target *t, int err)
{
  (void) t;
  return strerror (err);
}

static int
null_get_fd (struct target *t, unsigned conn, short *events)
{
  (void) t; (void) conn;
  *events = 0;
  return -1;
}

static int
null_notify (struct target *t, unsigned conn, short revents,
             const char **msg)
{
  (void) t; (void) conn; (void) revents; (void) msg;
  return 0;
}

static int
null_flush (struct target *t, struct bmerr *err)
{
  (void) t; (void) err;
  return 0;
}

static void
null_close (struct target *t, bool graceful)
{
  (void) graceful;
  free (t);
}

static const struct target_ops null_ops = {
  .connect = null_connect,
  .write = null_write,
  .zero = null_zero,
  .read = null_read,
  .last_error = null_last_error,
  .get_fd = null_get_fd,
  .notify = null_notify,
  .flush = null_flush,
  .commit = null_flush,
  .close = null_close,
};

struct target *
null_target_open (uint64_t size, struct bmerr *err)
{
  struct target *t = calloc (1, sizeof *t);

  if (t == NULL) {
    bmerr_first (err, 0, "%s", strerror (errno));
    return NULL;
  }
  t->ops = &null_ops;
  t->name = "(none)";
  t->size = size;
  t->zero_size = UINT64_C (1) << 30;
  t->multi_conn = true;
  return t;
}
