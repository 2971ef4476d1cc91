/* SPDX-License-Identifier: BSD-3-Clause */
/* selection.c: which bitmap answers block status (see selection.h).
 *
 * New connections take the bitmap selected when they connect.  One
 * that asks for block status pins it from its first request until it
 * closes: a backup client reading the map must not see it cleared or
 * removed under it, so clear and remove of a pinned bitmap are
 * refused.  Connections that only write pin nothing.
 *
 * The check and the pins are atomic with a transaction's publish
 * through store.c's meta_lock (store_pin), not through this lock,
 * which only keeps the list: it is a leaf, taken under meta_lock,
 * never around another lock.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>

#include "selection.h"

/* Protects `selected` and the pins.  A leaf: nothing is taken under
 * it.  Pins are taken only under the store's meta_lock too
 * (store_pin), which makes them atomic with transactions.
 */
static pthread_mutex_t pins_lock = PTHREAD_MUTEX_INITIALIZER;
static char *selected;
static struct pin { char *name; unsigned count; } *pins;
static size_t nr_pins;

int
selection_set (const char *name)
{
  char *copy = NULL;

  if (name && (copy = strdup (name)) == NULL)
    return -1;
  pthread_mutex_lock (&pins_lock);
  free (selected);
  selected = copy;
  pthread_mutex_unlock (&pins_lock);
  return 0;
}

bool
selection_is (const char *name)
{
  bool r;

  pthread_mutex_lock (&pins_lock);
  r = selected && strcmp (selected, name) == 0;
  pthread_mutex_unlock (&pins_lock);
  return r;
}

int
selection_get (char **name)
{
  int r = 0;

  pthread_mutex_lock (&pins_lock);
  *name = NULL;
  if (selected && (*name = strdup (selected)) == NULL)
    r = -1;
  pthread_mutex_unlock (&pins_lock);
  return r;
}

void
selection_forget_unless (bool (*still_there) (const char *name))
{
  pthread_mutex_lock (&pins_lock);
  if (selected && !still_there (selected)) {
    free (selected);
    selected = NULL;
  }
  pthread_mutex_unlock (&pins_lock);
}

int
selection_pin (const char *name)
{
  struct pin *p;
  size_t i;
  int r = 0;

  pthread_mutex_lock (&pins_lock);
  for (i = 0; i < nr_pins; ++i)
    if (strcmp (pins[i].name, name) == 0)
      break;
  if (i == nr_pins) {
    p = realloc (pins, (nr_pins + 1) * sizeof *p);
    if (p == NULL || (p[i].name = strdup (name)) == NULL) {
      if (p)
        pins = p;
      r = -1;
      goto out;
    }
    pins = p;
    pins[i].count = 0;
    nr_pins++;
  }
  pins[i].count++;
 out:
  pthread_mutex_unlock (&pins_lock);
  return r;
}

void
selection_unpin (const char *name)
{
  size_t i;

  pthread_mutex_lock (&pins_lock);
  for (i = 0; i < nr_pins; ++i)
    if (strcmp (pins[i].name, name) == 0) {
      if (--pins[i].count == 0) {
        free (pins[i].name);
        pins[i] = pins[--nr_pins];
      }
      break;
    }
  pthread_mutex_unlock (&pins_lock);
}

int
selection_check_discards (const struct action *acts, size_t n,
                          struct bmerr *err)
{
  char buf[BMF_MAX_NAME + 16];
  size_t i, j;
  int r = 0;

  pthread_mutex_lock (&pins_lock);
  for (i = 0; r == 0 && i < n; ++i) {
    if (!act_discards (&acts[i]))
      continue;
    for (j = 0; j < nr_pins; ++j)
      if (strcmp (pins[j].name, acts[i].bitmap) == 0) {
        bmerr_set (err, EBUSY, "action %s on bitmap %s failed: bitmap %s "
                   "is in use: %u connection%s read%s its block status",
                   act_to_string (&acts[i], buf, sizeof buf),
                   acts[i].bitmap, acts[i].bitmap, pins[j].count,
                   pins[j].count == 1 ? "" : "s",
                   pins[j].count == 1 ? "s" : "");
        r = -1;
        break;
      }
  }
  pthread_mutex_unlock (&pins_lock);
  return r;
}

void
selection_free (void)
{
  size_t i;

  pthread_mutex_lock (&pins_lock);
  free (selected);
  selected = NULL;
  for (i = 0; i < nr_pins; ++i)
    free (pins[i].name);
  free (pins);
  pins = NULL;
  nr_pins = 0;
  pthread_mutex_unlock (&pins_lock);
}
