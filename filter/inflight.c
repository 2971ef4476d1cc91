/* SPDX-License-Identifier: BSD-3-Clause */
/* inflight.c: request accounting (see inflight.h).
 *
 * Each request counts itself in active[epoch & 1] for its whole life.
 * Entering costs one atomic add and three loads; leaving, one atomic
 * subtract and a load; nothing else is shared and no lock is taken
 * unless a thread is waiting.
 *
 * The gate (pause, the cut of a backup view).  A closer sets `gate`
 * and waits until both counts are zero.  A request adds itself to a
 * count and then reads `gate` (both sequentially consistent), so
 * either the closer sees its count, and waits for it, or it sees the
 * gate closed, takes itself out again and waits for the gate to open
 * (asking now and then whether to give up: nbdkit waits for every
 * request before it exits, and a paused server must still exit).
 *
 * Grace periods (retiring a set of bitmaps).  The retirer has already
 * published the new set.  It moves `epoch` on and waits for the count
 * of the old epoch's parity to reach zero.  A request proceeds only if
 * `epoch` still holds, after it counted itself, the value it read
 * before: so it either counted itself before the move, and is waited
 * for, or it entered after the move, and loads the new set.  (The
 * whole value is compared, not the parity: two moves in between
 * bring the parity back.)  One grace period runs at a time.
 *
 * Waiting.  A waiter holds `gate_lock`, counts itself in `waiters`, and
 * checks the count before sleeping on `changed`; a request that brings
 * a count to zero broadcasts under `gate_lock` if it sees a waiter.  Both
 * sides are sequentially consistent, so no wake-up is lost.
 *
 * Never close the gate or wait for a grace period while holding a
 * lock that a request in flight may wait for (the file's metadata
 * lock, the bits lock): the request could never leave.
 */

#include <config.h>

#include <stdint.h>
#include <time.h>
#include <pthread.h>

#include "inflight.h"

static struct {
  uint64_t active[2];           /* requests in flight, by epoch parity */
  unsigned epoch;
  bool gate;                    /* closed: new requests wait */
  unsigned waiters;             /* threads waiting for a count of zero */
} s __attribute__ ((aligned (64)));

/* Protects the gate, gate_depth and the waiters of `changed` (the
 * counts in s are atomic, and taken without it).  A leaf: nothing is
 * taken under it.
 */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static unsigned gate_depth;     /* under gate_lock */
/* One grace period at a time: an epoch is flipped and drained whole
 * before the next flips it.  Taken before gate_lock.
 */
static pthread_mutex_t grace_lock = PTHREAD_MUTEX_INITIALIZER;
static bool (*give_up) (void);

/* How often a held request asks whether to give up. */
#define HELD_POLL_NS 50000000

void
inflight_init (bool (*fn) (void))
{
  give_up = fn;
}

void
inflight_exit (unsigned token)
{
  if (__atomic_sub_fetch (&s.active[token & 1], 1, __ATOMIC_SEQ_CST) == 0 &&
      __atomic_load_n (&s.waiters, __ATOMIC_SEQ_CST) > 0) {
    pthread_mutex_lock (&gate_lock);
    pthread_cond_broadcast (&changed);
    pthread_mutex_unlock (&gate_lock);
  }
}

/* Wait while the gate is closed; -1 if told to give up. */
static int
held (void)
{
  int r = 0;

  pthread_mutex_lock (&gate_lock);
  while (r == 0 && __atomic_load_n (&s.gate, __ATOMIC_SEQ_CST)) {
    struct timespec ts;

    clock_gettime (CLOCK_REALTIME, &ts);
    ts.tv_nsec += HELD_POLL_NS;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait (&changed, &gate_lock, &ts);
    if (__atomic_load_n (&s.gate, __ATOMIC_SEQ_CST) && give_up && give_up ())
      r = -1;
  }
  pthread_mutex_unlock (&gate_lock);
  return r;
}

int
inflight_enter (unsigned *token)
{
  for (;;) {
    unsigned e = __atomic_load_n (&s.epoch, __ATOMIC_SEQ_CST);

    __atomic_add_fetch (&s.active[e & 1], 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n (&s.gate, __ATOMIC_SEQ_CST) &&
        __atomic_load_n (&s.epoch, __ATOMIC_SEQ_CST) == e) {
      *token = e;
      return 0;
    }
    inflight_exit (e);
    if (__atomic_load_n (&s.gate, __ATOMIC_SEQ_CST) && held () == -1)
      return -1;
  }
}

/* Wait, with gate_lock held, until the count of parity p is zero. */
static void
wait_zero_locked (unsigned p)
{
  __atomic_add_fetch (&s.waiters, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n (&s.active[p], __ATOMIC_SEQ_CST) != 0)
    pthread_cond_wait (&changed, &gate_lock);
  __atomic_sub_fetch (&s.waiters, 1, __ATOMIC_SEQ_CST);
}

void
inflight_close (void)
{
  pthread_mutex_lock (&gate_lock);
  if (gate_depth++ == 0)
    __atomic_store_n (&s.gate, true, __ATOMIC_SEQ_CST);
  wait_zero_locked (0);
  wait_zero_locked (1);
  pthread_mutex_unlock (&gate_lock);
}

void
inflight_open (void)
{
  pthread_mutex_lock (&gate_lock);
  if (gate_depth > 0 && --gate_depth == 0) {
    __atomic_store_n (&s.gate, false, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast (&changed);
  }
  pthread_mutex_unlock (&gate_lock);
}

void
inflight_grace (void)
{
  unsigned old;

  pthread_mutex_lock (&grace_lock);
  old = __atomic_fetch_add (&s.epoch, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_lock (&gate_lock);
  wait_zero_locked (old & 1);
  pthread_mutex_unlock (&gate_lock);
  pthread_mutex_unlock (&grace_lock);
}
