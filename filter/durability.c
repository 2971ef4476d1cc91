/* SPDX-License-Identifier: BSD-3-Clause */
/* durability.c: tickets and group commit (see durability.h).
 *
 * `synced` is the highest ticket known to be on stable storage.  A
 * flush, a FUA write, or (with durability=strict) the first touch of a
 * granule waits until synced reaches its ticket.  A writer takes its
 * ticket and then sets its bits, both under the bits lock (tracker.c),
 * so a request that finds its bits already set lock-free is covered by
 * any later ticket.  A sync reads the tickets it covers under the bits
 * lock too, so that every one of them has its bits set when it starts:
 * read without it, between a writer's ticket and its bits, the sync
 * would cover the ticket and miss the bits, and the writer would not
 * wait for them (the owner passes that read to dur_init: durability.c
 * knows no lock of the tracker).  One waiter runs fdatasync for all
 * the tickets taken so far while the others wait on `cond`; they all
 * return together (group commit).  No caller may hold the bits lock.
 *
 * After a failed fdatasync the kernel may have dropped pages it could
 * not write: from then on every sync fails, and the owner of the file
 * is told once (on_failure, with the errno) so that it can mark the
 * bitmaps and say so.
 */

#include <config.h>

#include <stdint.h>
#include <inttypes.h>
#include <errno.h>
#include <pthread.h>

#include <nbdkit-filter.h>

#include "durability.h"
#include "report.h"

extern int dirtybitmap_debug_verbose;

static struct bmf *file;
static enum bmf_durability mode;
static uint64_t (*covered) (void);
static void (*on_failure) (int errnum);

/* Protects syncing and the waiters of `cond` (one fdatasync at a
 * time, for the whole group).  Taken under meta_lock (a commit's
 * sync), never around another lock: the tickets a sync covers are
 * read without it.
 */
static pthread_mutex_t group_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static uint64_t requested;      /* tickets taken (atomic) */
static uint64_t synced;         /* tickets on stable storage (atomic) */
static bool syncing;            /* a thread is in fdatasync (group_lock) */
static bool failed;             /* a sync failed (atomic) */
static int fail_errno;          /* its errno (set before failed) */

void
dur_init (struct bmf *f, enum bmf_durability m, uint64_t (*cover) (void),
          void (*fail) (int errnum))
{
  file = f;
  mode = m;
  covered = cover;
  on_failure = fail;
}

enum bmf_durability
dur_mode (void)
{
  return mode;
}

uint64_t
dur_take_ticket (void)
{
  return __atomic_add_fetch (&requested, 1, __ATOMIC_SEQ_CST);
}

uint64_t
dur_requested (void)
{
  return __atomic_load_n (&requested, __ATOMIC_SEQ_CST);
}

bool
dur_failed (void)
{
  return __atomic_load_n (&failed, __ATOMIC_ACQUIRE);
}

int
dur_error (void)
{
  return dur_failed () ? fail_errno : 0;
}

static int
sync_to (uint64_t target, bool tell)
{
  bool first_failure = false;
  int r = 0, e;

  if (!dur_failed () &&
      __atomic_load_n (&synced, __ATOMIC_ACQUIRE) >= target)
    return 0;

  pthread_mutex_lock (&group_lock);
  while (!failed && __atomic_load_n (&synced, __ATOMIC_ACQUIRE) < target) {
    uint64_t upto;

    if (syncing) {
      pthread_cond_wait (&cond, &group_lock);
      continue;
    }
    syncing = true;
    pthread_mutex_unlock (&group_lock);
    upto = covered ();
    r = bmf_sync (file);
    e = errno;
    /* A failure is said once, by whoever reports it: the owner of the
     * file (on_failure), and each request that it fails.
     */
    if (r == 0 && dirtybitmap_debug_verbose)
      filter_debug ("synced tickets up to %" PRIu64, upto);
    pthread_mutex_lock (&group_lock);
    syncing = false;
    if (r == -1 && !failed) {
      fail_errno = e ? e : EIO;
      __atomic_store_n (&failed, true, __ATOMIC_RELEASE);
      first_failure = true;
    }
    else if (r == 0 && upto > synced)
      __atomic_store_n (&synced, upto, __ATOMIC_RELEASE);
    pthread_cond_broadcast (&cond);
  }
  r = failed ? -1 : 0;
  pthread_mutex_unlock (&group_lock);

  if (first_failure && tell && on_failure)
    on_failure (fail_errno);
  if (r == -1)
    errno = EIO;
  return r;
}

int
dur_sync_to (uint64_t target)
{
  return sync_to (target, true);
}

int
dur_sync_to_owner (uint64_t target)
{
  return sync_to (target, false);
}
