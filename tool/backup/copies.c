/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/copies.c: every disk's view copied to its target at once, a
 * thread per disk, each with a copy of its own (copy.h): the disks
 * are independent, so a set takes as long as its largest disk, not
 * the sum.  The first copy that fails stops the others (they then end
 * as interrupted), since the set is all or nothing.
 *
 * Each thread owns its disk's o and r while it runs; the main thread
 * reads them only after joining it.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "internal.h"

/* Protects stopped: set by the first copy that fails, before it stops
 * the others (read without it once every thread is joined).
 */
static pthread_mutex_t stopped_lock = PTHREAD_MUTEX_INITIALIZER;
static bool stopped;

static void *
copy_thread (void *arg)
{
  struct disk *d = arg;

  if (copy_run (&d->o, &d->r) == -1 && !d->r.interrupted) {
    pthread_mutex_lock (&stopped_lock);
    if (!stopped) {
      stopped = true;
      copy_stop_all ();
    }
    pthread_mutex_unlock (&stopped_lock);
  }
  return NULL;
}

int
copies_run (struct set *s, bool progress)
{
  pthread_t *threads = calloc (s->n, sizeof *threads);
  bool *started = calloc (s->n, sizeof *started);
  size_t i;
  int r = 0, err;

  stopped = false;
  if (threads == NULL || started == NULL) {
    set_fail (s, "out of memory");
    r = -1;
    goto out;
  }
  for (i = 0; i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    d->o.progress = progress;
    d->o.label = s->n > 1 ? d->name : NULL;
    err = pthread_create (&threads[i], NULL, copy_thread, d);
    if (err) {
      set_fail (s, "pthread_create: %s", strerror (err));
      pthread_mutex_lock (&stopped_lock);
      stopped = true;
      copy_stop_all ();
      pthread_mutex_unlock (&stopped_lock);
      r = -1;
      break;
    }
    started[i] = true;
  }
  for (i = 0; i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    if (!started[i])
      continue;
    pthread_join (threads[i], NULL);
    if (!d->r.ok)
      r = -1;
  }
  if (r == -1 && copy_interrupted () && !stopped)
    s->interrupted = true;

 out:
  free (threads);
  free (started);
  return r;
}
