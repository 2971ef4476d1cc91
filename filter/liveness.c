/* SPDX-License-Identifier: BSD-3-Clause */
/* liveness.c: the liveness thread (see liveness.h).  It never touches
 * the write path: writers neither wait for it nor share a lock with it
 * (renew takes the store's meta_lock, which writers take only for
 * their first write of a run).
 */

#include <config.h>

#include <stdbool.h>
#include <stdint.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "identity.h"
#include "liveness.h"

/* Protects stopping; the condition wakes the thread to stop. */
static pthread_mutex_t renew_stop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;
static bool running, stopping;
static pthread_t thread;
static void (*renew_fn) (void);

static void *
run (void *arg)
{
  struct timespec at;

  pthread_mutex_lock (&renew_stop_lock);
  while (!stopping) {
    pthread_mutex_unlock (&renew_stop_lock);
    renew_fn ();
    pthread_mutex_lock (&renew_stop_lock);
    clock_gettime (CLOCK_MONOTONIC, &at);
    at.tv_nsec += BMF_ALIVE_PERIOD % 1000000000;
    at.tv_sec += BMF_ALIVE_PERIOD / 1000000000 + at.tv_nsec / 1000000000;
    at.tv_nsec %= 1000000000;
    while (!stopping &&
           pthread_cond_timedwait (&cond, &renew_stop_lock, &at) != ETIMEDOUT)
      ;
  }
  pthread_mutex_unlock (&renew_stop_lock);
  return NULL;
}

int
liveness_start (void (*renew) (void))
{
  pthread_condattr_t attr;
  int e;

  renew_fn = renew;
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&cond, &attr);
  pthread_condattr_destroy (&attr);
  e = pthread_create (&thread, NULL, run, NULL);
  if (e) {
    errno = e;
    return -1;
  }
  running = true;
  return 0;
}

void
liveness_stop (void)
{
  if (!running)
    return;
  pthread_mutex_lock (&renew_stop_lock);
  stopping = true;
  pthread_cond_signal (&cond);
  pthread_mutex_unlock (&renew_stop_lock);
  pthread_join (thread, NULL);
  running = false;
}
