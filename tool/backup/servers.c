/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/servers.c: the control connections of a backup, one per
 * disk, kept for the whole run (a pause, and a view begun with
 * end-on-disconnect, last as long as the connection that asked).
 *
 * A step of the cut sends its request to every server first and then
 * awaits the replies, so the servers work at once and the step costs
 * the slowest of them, not their sum.  Every wait ends at the step's
 * deadline (a signal ends the step, but the replies owed are still
 * awaited).  A server that does not answer in time is out of step
 * with its connection (its reply may still come): it is marked broken
 * and its connection closed, which makes the server itself resume and
 * end the view it began (see nbdkit-dirtybitmap-filter(1)); nothing
 * more is sent on it.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include "control-client.h"
#include "internal.h"

int
servers_connect (struct set *s)
{
  size_t i;
  int r = 0;

  for (i = 0; i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    /* control_connect says why it failed. */
    d->fd = control_connect (d->control);
    if (d->fd == -1) {
      disk_fail (d, "cannot connect to its control socket %s",
                 d->control);
      r = -1;
    }
  }
  return r;
}

static void
disk_break (struct disk *d)
{
  d->broken = true;
  if (d->fd >= 0) {
    close (d->fd);
    d->fd = -1;
  }
}

int
servers_call (struct set *s, const char *command, args_fn args,
              bool (*want) (const struct disk *d), double deadline,
              bool wake, json_object **rets)
{
  const int wake_fd = wake ? copy_interrupt_fd () : -1;
  bool *sent = calloc (s->n, sizeof *sent);
  size_t i;
  int r = 0;

  if (sent == NULL) {
    set_fail (s, "%s: out of memory", command);
    return -1;
  }
  for (i = 0; i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    struct bmerr e = { 0 };
    if (rets)
      rets[i] = NULL;
    if (d->fd == -1 || (want && !want (d)))
      continue;
    if (control_send (d->fd, control_request (command,
                                              args ? args (s, d) : NULL),
                      deadline, &e) == -1) {
      disk_fail (d, "%s: %s", command, e.msg);
      disk_break (d);
      r = -1;
      continue;
    }
    sent[i] = true;
  }
  for (i = 0; i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    json_object *ret;
    struct bmerr e = { 0 };
    int c;
    if (!sent[i])
      continue;
    /* After a signal the replies owed are still read (until the
     * deadline), so that the undo finds every connection in step.
     */
    while ((c = control_receive (d->fd, deadline,
                                 s->interrupted ? -1 : wake_fd,
                                 &ret, &e)) == -1 && e.errnum == EINTR) {
      s->interrupted = true;
      bmerr_clear (&e);
    }
    if (c == 0) {
      if (rets)
        rets[i] = ret;
      else
        json_object_put (ret);
      continue;
    }
    r = -1;
    if (c == -1 && e.errnum == ETIMEDOUT)
      disk_fail (d, "%s: no reply from %s in time", command, d->control);
    else
      disk_fail (d, "%s: %s", command, e.msg);
    if (c == -1)
      disk_break (d);
  }
  if (s->interrupted)
    r = -1;
  free (sent);
  return r;
}
