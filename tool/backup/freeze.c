/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/freeze.c: the guest quiesced around the cut: its file
 * systems frozen by qemu-guest-agent (--guest-agent), or by commands
 * of the user's (--freeze-command, --thaw-command, run with sh -c).
 *
 * Once a freeze was attempted, a thaw is owed, whatever happens after
 * (a failure, a timeout, SIGINT or SIGTERM): thaw_guest runs it, and
 * running it twice is harmless (a thaw of a thawed guest does
 * nothing).  Each is bounded by --freeze-timeout.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "dirtybitmap.h"
#include "internal.h"
#include "util.h"

/* Run command with sh -c in a process group of its own, its standard
 * output on our standard error (ours carries the summary), until it
 * exits or deadline passes (or a signal comes, with wake): then it is
 * killed.  0 if it exited with status 0, -1 with err.
 */
static int
run_command (const char *what, const char *command, double deadline,
             bool wake, struct bmerr *err)
{
  struct pollfd p[2];
  pid_t pid;
  int pidfd, status, ms, r;

  pid = fork ();
  if (pid == -1)
    goto errno_out;
  if (pid == 0) {
    setpgid (0, 0);
    dup2 (STDERR_FILENO, STDOUT_FILENO);
    signal (SIGPIPE, SIG_DFL);
    execl ("/bin/sh", "sh", "-c", command, (char *) NULL);
    _exit (127);
  }
  setpgid (pid, pid);
  /* Without pidfds (before Linux 5.3, or under valgrind), the child
   * is looked at every 10 ms.
   */
  pidfd = syscall (SYS_pidfd_open, pid, 0);
  p[0] = (struct pollfd) { .fd = pidfd, .events = POLLIN };
  p[1] = (struct pollfd) { .fd = wake ? copy_interrupt_fd () : -1,
                           .events = POLLIN };
  for (;;) {
    ms = (deadline - clock_seconds (CLOCK_MONOTONIC)) * 1000;
    if (ms <= 0) {
      bmerr_set (err, ETIMEDOUT, "%s did not end within --freeze-timeout: "
                 "killed", what);
      break;
    }
    r = poll (p, 2, pidfd >= 0 || ms < 10 ? ms : 10);
    if (r > 0 && (p[1].revents & POLLIN)) {
      bmerr_set (err, EINTR, "%s interrupted: killed", what);
      break;
    }
    if (r > 0 || (pidfd == -1 && waitpid (pid, &status, WNOHANG) == pid)) {
      if (pidfd >= 0) {
        close (pidfd);
        if (waitpid (pid, &status, 0) == -1)
          goto errno_out;
      }
      if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
        return 0;
      if (WIFEXITED (status))
        bmerr_set (err, EIO, "%s failed: exit status %d", what,
                   WEXITSTATUS (status));
      else
        bmerr_set (err, EIO, "%s failed: killed by signal %d", what,
                   WTERMSIG (status));
      return -1;
    }
  }
  kill (-pid, SIGKILL);
  waitpid (pid, NULL, 0);
  if (pidfd >= 0)
    close (pidfd);
  return -1;

 errno_out:
  bmerr_set (err, errno, "%s: %s", what, strerror (errno));
  return -1;
}

static int
agent_freeze (struct set *s, double deadline, struct bmerr *err)
{
  json_object *ret;

  if (agent_connect (s->agent, deadline, true, &s->agent_fd, err) == -1) {
    bmerr_prefix (err, "--guest-agent %s", s->agent);
    return -1;
  }
  s->freeze_sent = true;
  if (agent_execute (s->agent_fd, "guest-fsfreeze-freeze", deadline, true,
                     &ret, err) != AGENT_OK) {
    bmerr_prefix (err, "--guest-agent %s: guest-fsfreeze-freeze", s->agent);
    /* The connection stays, even out of step: the thaw goes on it,
     * behind the freeze (agent_thaw).
     */
    return -1;
  }
  json_object_put (ret);
  return 0;
}

/* The thaw is written behind the freeze: on the freeze's connection,
 * or if that one failed, on a new one, without awaiting a sync first.
 * The agent runs one request at a time, in the order of its channel,
 * so it runs this thaw as soon as it is done with the freeze, even
 * when the freeze has not answered yet and this process is gone by
 * then.  (Awaiting a guest-sync-delimited before sending the thaw
 * would not do: a single-threaded agent answers it only once the
 * freeze is done, and a thaw never sent never runs.)
 */
static int
agent_thaw (struct set *s, double deadline, struct bmerr *err)
{
  json_object *ret;
  struct bmerr e = { 0 };
  bool sent = false, sent_now;
  int r = AGENT_GONE, attempt;

  for (attempt = 0; attempt < 2 && r == AGENT_GONE; ++attempt) {
    bmerr_clear (&e);
    if (s->agent_fd == -1 &&
        agent_open (s->agent, deadline, false, &s->agent_fd, &e) == -1)
      break;
    r = agent_execute_after (s->agent_fd, "guest-fsfreeze-thaw", deadline,
                             false, &ret, &sent_now, &e);
    sent |= sent_now;
    if (r != AGENT_OK) {
      /* Out of step, or gone: a new connection for what follows. */
      close (s->agent_fd);
      s->agent_fd = -1;
    }
  }
  if (r == AGENT_OK) {
    json_object_put (ret);
    return 0;
  }
  bmerr_set (err, e.errnum, "--guest-agent %s: guest-fsfreeze-thaw: %s%s",
             s->agent, e.msg,
             r == AGENT_SILENT && sent
             ? " (it was sent after the freeze: the agent runs it as "
             "soon as it is done freezing; guest-fsfreeze-status "
             "tells)" : "");
  return -1;
}

int
freeze_guest (struct set *s)
{
  const double deadline = clock_seconds (CLOCK_MONOTONIC) + s->freeze_timeout;
  struct bmerr err = { 0 };
  int r;

  s->freeze_start = clock_seconds (CLOCK_MONOTONIC);
  if (s->freeze == FREEZE_AGENT)
    r = agent_freeze (s, deadline, &err);
  else {
    s->freeze_sent = true;
    r = run_command ("--freeze-command", s->freeze_command, deadline, true,
                     &err);
  }
  if (r == -1) {
    if (copy_interrupted ())
      s->interrupted = true;
    set_fail (s, "the guest could not be frozen: %s", err.msg);
  }
  return r;
}

int
thaw_guest (struct set *s)
{
  const double deadline = clock_seconds (CLOCK_MONOTONIC) + s->freeze_timeout;
  struct bmerr err = { 0 };
  int r;

  if (!s->freeze_sent || s->thawed)
    return 0;
  if (s->freeze == FREEZE_AGENT)
    r = agent_thaw (s, deadline, &err);
  else
    r = run_command ("--thaw-command", s->thaw_command, deadline, false,
                     &err);
  if (r == 0) {
    s->thawed = true;
    s->frozen_ms = (clock_seconds (CLOCK_MONOTONIC) - s->freeze_start) * 1000;
  }
  else {
    /* Said at once: whatever else failed, this one the user must see. */
    bm_error ("backup: THE GUEST MAY STILL BE FROZEN: %s", err.msg);
    set_fail (s, "the guest could not be thawed");
  }
  return r;
}
