/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/interrupt.c: SIGINT and SIGTERM while a copy runs.
 *
 * Signals belong to the process, so this is the one process-wide
 * state of the copy engine: a flag and a pipe, shared by every copy
 * running at the time (a backup of several disks runs one per disk,
 * and catches the signals around them all).  The handler (async
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
#include <pthread.h>

#include "internal.h"
#include "util.h"

static volatile sig_atomic_t requested;
static volatile sig_atomic_t firm;     /* a second signal is caught too */
static struct sigaction ours;          /* set before it is installed */

/* Protects depth, pipe_fds and the old actions (the handler reads
 * pipe_fds[1], which is set before the handler is installed and
 * closed after it is removed).
 */
static pthread_mutex_t catch_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned depth;          /* catches not yet released */
static int pipe_fds[2] = { -1, -1 };
static struct sigaction old_int, old_term;

static void
handler (int sig)
{
  int saved = errno;

  requested = 1;
  if (firm)
    sigaction (sig, &ours, NULL);       /* async-signal-safe */
  if (write (pipe_fds[1], "!", 1) == -1) {
    /* Nothing to do: the pipe is readable already, or the flag will
     * be seen at the next poll timeout.
     */
  }
  errno = saved;
}

int
copy_signals_trap (struct bmerr *err)
{
  struct sigaction sa;
  SCOPED_LOCK (&catch_lock);

  if (depth > 0) {
    depth++;
    return 0;
  }
  requested = 0;
  if (pipe2 (pipe_fds, O_CLOEXEC | O_NONBLOCK) == -1) {
    bmerr_first (err, 0, "pipe: %s", strerror (errno));
    return -1;
  }
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESETHAND | SA_RESTART;
  sigemptyset (&sa.sa_mask);
  ours = sa;
  sigaction (SIGINT, &sa, &old_int);
  sigaction (SIGTERM, &sa, &old_term);
  depth = 1;
  return 0;
}

void
copy_signals_release (void)
{
  SCOPED_LOCK (&catch_lock);

  if (depth == 0 || --depth > 0)
    return;
  sigaction (SIGINT, &old_int, NULL);
  sigaction (SIGTERM, &old_term, NULL);
  close (pipe_fds[0]);
  close (pipe_fds[1]);
  pipe_fds[0] = pipe_fds[1] = -1;
}

void
copy_stop_all (void)
{
  int saved = errno;

  requested = 1;
  if (write (pipe_fds[1], "!", 1) == -1) {
    /* Readable already. */
  }
  errno = saved;
}

void
copy_signals_firm (bool on)
{
  firm = on;
  /* A signal that came while it was off left the default in place. */
  if (on && depth > 0) {
    sigaction (SIGINT, &ours, NULL);
    sigaction (SIGTERM, &ours, NULL);
  }
}

bool
copy_interrupted (void)
{
  return requested;
}

int
copy_interrupt_fd (void)
{
  return pipe_fds[0];
}
