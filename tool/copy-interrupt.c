/* SPDX-License-Identifier: BSD-3-Clause */
/* copy-interrupt.c: SIGINT and SIGTERM while a copy runs.
 *
 * Signals belong to the process, so this is the one process-wide
 * state of the copy engine: a flag and a pipe.  The handler (async
 * signal safe: an atomic store and a write(2)) sets the flag and makes
 * the pipe readable; nobody reads the pipe, so it stays readable, and
 * every worker, which polls it next to its connections, wakes up and
 * stops starting work.  copy_run sees the flag, waits for the requests
 * in flight, and reports the copy as interrupted.
 *
 * The handlers are installed with SA_RESETHAND: a second signal gets
 * the default action and ends the process at once, so a copy stuck
 * somewhere can still be stopped.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "copy-internal.h"

static volatile sig_atomic_t requested;
static int pipe_fds[2] = { -1, -1 };
static struct sigaction old_int, old_term;

static void
handler (int sig)
{
  int saved = errno;

  requested = 1;
  if (write (pipe_fds[1], "!", 1) == -1) {
    /* Nothing to do: the pipe is readable already, or the flag will
     * be seen at the next poll timeout.
     */
  }
  errno = saved;
}

int
interrupt_install (char **errp)
{
  struct sigaction sa;

  requested = 0;
  if (pipe2 (pipe_fds, O_CLOEXEC | O_NONBLOCK) == -1) {
    set_error (errp, "pipe: %s", strerror (errno));
    return -1;
  }
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESETHAND | SA_RESTART;
  sigemptyset (&sa.sa_mask);
  sigaction (SIGINT, &sa, &old_int);
  sigaction (SIGTERM, &sa, &old_term);
  return 0;
}

void
interrupt_uninstall (void)
{
  if (pipe_fds[0] == -1)
    return;
  sigaction (SIGINT, &old_int, NULL);
  sigaction (SIGTERM, &old_term, NULL);
  close (pipe_fds[0]);
  close (pipe_fds[1]);
  pipe_fds[0] = pipe_fds[1] = -1;
}

bool
interrupt_requested (void)
{
  return requested;
}

int
interrupt_fd (void)
{
  return pipe_fds[0];
}
