/* SPDX-License-Identifier: BSD-3-Clause */
/* store-txn.c: the actions of a control transaction, applied
 * all-or-nothing as a cut through the writes (store-commit.c), with
 * the pins of the selected bitmap checked under the same hold of
 * meta_lock as the publish.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>

#include <nbdkit-filter.h>

#include "report.h"
#include "selection.h"
#include "store.h"
#include "store-impl.h"
#include "testpause.h"

struct actions {
  struct action *acts;
  size_t n;
};

static int
apply_actions (struct bmf_txn **t, void *opaque, struct bmerr *err)
{
  const struct actions *a = opaque;

  *t = act_begin (store.file, a->acts, a->n, err);
  return *t ? 0 : -1;
}

/* Whether any action copies bits (a merge does). */
static bool
copies_bits (const struct action *acts, size_t n)
{
  size_t i;

  for (i = 0; i < n; ++i)
    if (acts[i].kind == ACT_MERGE)
      return true;
  return false;
}

/* Whether a bitmap of that name is in the current set. */
static bool
in_current_set (const char *name)
{
  return set_find (tracker_current (), name) != NULL;
}

int
store_transaction (struct action *acts, size_t n, struct bmerr *err)
{
  struct actions a = { acts, n };
  struct bitmap_set *retire[2] = { NULL };
  bool stopped;
  size_t i;
  int r;

  if (store.readonly) {
    bmerr_set (err, EROFS, "the server is read-only (-r): the bitmaps "
               "cannot change");
    return -1;
  }
  pthread_mutex_lock (&meta_lock);
  r = selection_check_discards (acts, n, err);
  if (r == 0) {
    test_pause_point ("txn-checked");
    r = commit_live_locked (apply_actions, &a, copies_bits (acts, n), retire,
                            err);
  }
  if (r == 0) {
    /* A removed bitmap answers nothing any more. */
    selection_forget_unless (in_current_set);
    for (i = 0; i < n; ++i) {
      char buf[BMF_MAX_NAME + 16];
      filter_debug ("action %s on bitmap %s",
                    act_to_string (&acts[i], buf, sizeof buf),
                    acts[i].bitmap);
    }
  }
  stopped = r == 0 && bmf_settling (store.file);
  pthread_mutex_unlock (&meta_lock);
  retire_sets (retire);
  if (stopped)
    r = settle (err);
  return r;
}
