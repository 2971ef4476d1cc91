/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/agent.c: a client of qemu-guest-agent, on the host side of
 * its channel (the Unix socket of qemu's chardev).
 *
 * The channel is a byte stream that outlives its clients: what an
 * earlier client left unread (or a reply that came too late) may still
 * be in it.  So each connection begins with guest-sync-delimited: a
 * 0xFF byte resets the agent's parser, and the reply to the sync comes
 * after a 0xFF of the agent's; everything before that byte, and any
 * reply that does not carry our id, is skipped.  Then one command at a
 * time, each reply a JSON object.
 *
 * The agent is single-threaded: it reads the channel in order and runs
 * one request at a time, to its end, whoever sent it (qemu's chardev
 * takes one client at a time; the next one's bytes follow the last
 * one's).  A request written on the channel is therefore run after
 * every request written before it, even one that hangs, and even once
 * its sender is gone.  agent_execute_after relies on that: it needs no
 * answer to what came before.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "internal.h"
#include "util.h"

/* Wait until fd is ready for events, by deadline (or a signal, with
 * wake): 0, or AGENT_SILENT or AGENT_GONE with err.
 */
static int
wait_fd (int fd, short events, double deadline, bool wake, struct bmerr *err)
{
  struct pollfd p[2] = {
    { .fd = fd, .events = events },
    { .fd = wake ? copy_interrupt_fd () : -1, .events = POLLIN },
  };
  int r, ms;

  for (;;) {
    ms = (deadline - clock_seconds (CLOCK_MONOTONIC)) * 1000;
    if (ms <= 0) {
      bmerr_set (err, ETIMEDOUT, "no answer in time");
      return AGENT_SILENT;
    }
    r = poll (p, 2, ms);
    if (r > 0 && (p[1].revents & POLLIN)) {
      bmerr_set (err, EINTR, "interrupted");
      return AGENT_SILENT;
    }
    if (r > 0)
      return 0;
    if (r == -1 && errno != EINTR) {
      bmerr_set (err, errno, "%s", strerror (errno));
      return AGENT_GONE;
    }
  }
}

/* Send len bytes: 0, or an agent_result with err. */
static int
send_all (int fd, const char *buf, size_t len, double deadline, bool wake,
          struct bmerr *err)
{
  int r;

  while (len > 0) {
    ssize_t w;
    if ((r = wait_fd (fd, POLLOUT, deadline, wake, err)) != 0)
      return r;
    w = send (fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w == -1 && errno != EAGAIN && errno != EINTR) {
      bmerr_set (err, errno, "%s", strerror (errno));
      return AGENT_GONE;
    }
    if (w > 0) {
      buf += w;
      len -= w;
    }
  }
  return 0;
}

/* One byte: 0, or an agent_result with err. */
static int
recv_byte (int fd, double deadline, bool wake, unsigned char *c,
           struct bmerr *err)
{
  int r;

  for (;;) {
    ssize_t got;
    if ((r = wait_fd (fd, POLLIN, deadline, wake, err)) != 0)
      return r;
    got = recv (fd, c, 1, MSG_DONTWAIT);
    if (got == 1)
      return 0;
    if (got == 0) {
      bmerr_set (err, ECONNRESET, "the agent's channel closed");
      return AGENT_GONE;
    }
    if (errno != EAGAIN && errno != EINTR) {
      bmerr_set (err, errno, "%s", strerror (errno));
      return AGENT_GONE;
    }
  }
}

/* The next JSON object on the channel (a 0xFF on the way starts it
 * again): 0, or an agent_result with err.
 */
static int
recv_object (int fd, double deadline, bool wake, json_object **obj,
             struct bmerr *err)
{
  json_tokener *tok = json_tokener_new ();
  unsigned char c;
  int r;

  if (tok == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return AGENT_GONE;
  }
  for (;;) {
    enum json_tokener_error e;
    if ((r = recv_byte (fd, deadline, wake, &c, err)) != 0)
      break;
    if (c == 0xFF) {
      json_tokener_reset (tok);
      continue;
    }
    *obj = json_tokener_parse_ex (tok, (const char *) &c, 1);
    e = json_tokener_get_error (tok);
    if (e == json_tokener_continue)
      continue;
    if (e != json_tokener_success) {
      /* Not JSON (a line of something else): start again. */
      json_tokener_reset (tok);
      continue;
    }
    if (*obj && json_object_is_type (*obj, json_type_object)) {
      r = 0;
      break;
    }
    json_object_put (*obj);
    *obj = NULL;
  }
  json_tokener_free (tok);
  return r;
}

static int
send_request (int fd, json_object *req, double deadline, bool wake,
              struct bmerr *err)
{
  const char *s = json_object_to_json_string_ext (req,
                                                  JSON_C_TO_STRING_PLAIN);
  int r;

  r = send_all (fd, s, strlen (s), deadline, wake, err);
  if (r == 0)
    r = send_all (fd, "\n", 1, deadline, wake, err);
  json_object_put (req);
  return r;
}

static json_object *
request (const char *command, json_object *args)
{
  json_object *req = json_object_new_object ();

  json_object_object_add (req, "execute", json_object_new_string (command));
  if (args)
    json_object_object_add (req, "arguments", args);
  return req;
}

/* An id for a guest-sync: its reply carries it back. */
static int64_t
sync_id (void)
{
  static int64_t n;

  return ((int64_t) getpid () << 20 ^ (int64_t) time (NULL)) + ++n;
}

int
agent_open (const char *path, double deadline, bool wake, int *fdp,
            struct bmerr *err)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int fd;

  bmerr_clear (err);
  if (strlen (path) >= sizeof sun.sun_path) {
    bmerr_set (err, ENAMETOOLONG, "path too long");
    return -1;
  }
  memcpy (sun.sun_path, path, strlen (path));
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd == -1 ||
      (connect (fd, (struct sockaddr *) &sun, sizeof sun) == -1 &&
       errno != EINPROGRESS)) {
    bmerr_set (err, errno, "cannot connect: %s", strerror (errno));
    goto err;
  }
  if (wait_fd (fd, POLLOUT, deadline, wake, err) != 0 ||
      send_all (fd, "\xff", 1, deadline, wake, err) != 0)
    goto err;
  *fdp = fd;
  return 0;

 err:
  if (!bmerr_failed (err))
    bmerr_set (err, errno, "%s", strerror (errno));
  if (fd >= 0)
    close (fd);
  return -1;
}

int
agent_connect (const char *path, double deadline, bool wake, int *fdp,
               struct bmerr *err)
{
  const int64_t id = sync_id ();
  json_object *args, *reply, *v;
  int fd;

  if (agent_open (path, deadline, wake, &fd, err) == -1)
    return -1;
  args = json_object_new_object ();
  json_object_object_add (args, "id", json_object_new_int64 (id));
  if (send_request (fd, request ("guest-sync-delimited", args), deadline,
                    wake, err) != 0)
    goto err;
  /* Skip what came before the agent's 0xFF, and stale replies. */
  for (;;) {
    unsigned char c;
    do {
      if (recv_byte (fd, deadline, wake, &c, err) != 0)
        goto err;
    } while (c != 0xFF);
    if (recv_object (fd, deadline, wake, &reply, err) != 0)
      goto err;
    if (json_object_object_get_ex (reply, "return", &v) &&
        json_object_get_int64 (v) == id) {
      json_object_put (reply);
      break;
    }
    json_object_put (reply);
  }
  *fdp = fd;
  return 0;

 err:
  if (!bmerr_failed (err))
    bmerr_set (err, errno, "%s", strerror (errno));
  close (fd);
  return -1;
}

/* What reply says: its return value in *ret, or its error. */
static int
reply_value (json_object *reply, json_object **ret, struct bmerr *err)
{
  json_object *v, *e;

  if (json_object_object_get_ex (reply, "return", &v)) {
    *ret = json_object_get (v);
    return AGENT_OK;
  }
  if (json_object_object_get_ex (reply, "error", &e) &&
      json_object_object_get_ex (e, "desc", &v))
    bmerr_set (err, EIO, "%s", json_object_get_string (v));
  else
    bmerr_set (err, EIO, "%s", json_object_to_json_string (reply));
  return AGENT_REFUSED;
}

int
agent_execute (int fd, const char *command, double deadline, bool wake,
               json_object **ret, struct bmerr *err)
{
  json_object *reply;
  int r;

  *ret = NULL;
  bmerr_clear (err);
  if ((r = send_request (fd, request (command, NULL), deadline, wake,
                         err)) != 0 ||
      (r = recv_object (fd, deadline, wake, &reply, err)) != 0)
    return r;
  r = reply_value (reply, ret, err);
  json_object_put (reply);
  return r;
}

int
agent_execute_after (int fd, const char *command, double deadline,
                     bool wake, json_object **ret, bool *sent,
                     struct bmerr *err)
{
  const int64_t id = sync_id ();
  json_object *args, *reply, *last = NULL, *v;
  int r;

  *ret = NULL;
  bmerr_clear (err);
  *sent = false;
  if ((r = send_request (fd, request (command, NULL), deadline, wake,
                         err)) != 0)
    return r;
  *sent = true;
  args = json_object_new_object ();
  json_object_object_add (args, "id", json_object_new_int64 (id));
  if ((r = send_request (fd, request ("guest-sync", args), deadline, wake,
                         err)) != 0)
    return r;
  /* The replies owed to earlier requests come first, then command's,
   * then the sync's.
   */
  while ((r = recv_object (fd, deadline, wake, &reply, err)) == 0) {
    if (json_object_object_get_ex (reply, "return", &v) &&
        json_object_is_type (v, json_type_int) &&
        json_object_get_int64 (v) == id) {
      json_object_put (reply);
      if (last == NULL) {
        bmerr_set (err, EIO, "its reply was not seen (the guest-sync sent "
                   "after it was answered)");
        r = AGENT_REFUSED;
      }
      else
        r = reply_value (last, ret, err);
      break;
    }
    json_object_put (last);
    last = reply;
  }
  json_object_put (last);
  return r;
}
