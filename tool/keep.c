/* SPDX-License-Identifier: BSD-3-Clause */
/* keep.c: the keep rules of a prune (keep.h), after Proxmox Backup
 * Server's mark_selections.  The options apply in the order last,
 * hourly, daily, weekly, monthly, yearly.  Each walks the points
 * newest first, each point in a period (its hour, day, ISO week,
 * month or year in UTC; for last, the point itself):
 *
 *   - a point already marked (kept or removed) by an earlier option
 *     is skipped;
 *   - a point whose period holds a point kept by an earlier option is
 *     skipped, unmarked (a later option may keep it);
 *   - the first point of a period not counted yet is kept, until N
 *     periods are counted: at the next new period the walk stops;
 *   - a further point of a counted period is marked removed (no later
 *     option keeps it).
 *
 * Points unmarked at the end are removed; then the newest is kept
 * whatever the rules said (the live disks' checkpoint builds on it).
 * With no option given (or all 0), every point is kept.  The walk of
 * one option is O(n^2) in the points: a repository holds hundreds.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>

#include "keep.h"

#define PERIOD 32               /* bytes of a period's name */

enum state { UNMARKED, KEPT, REMOVED };

const char *
keep_reason_name (enum keep_reason r)
{
  static const char *const names[] = {
    "keep-last", "keep-hourly", "keep-daily", "keep-weekly",
    "keep-monthly", "keep-yearly", "newest", "no keep option",
  };

  return r < KEEP_BY_NONE ? names[r] : NULL;
}

/* The period of time t for rule, into out: -1 if t is not a time. */
static int
period_of (const char *t, enum keep_rule rule, size_t i, char *out)
{
  struct tm tm = { 0 };
  time_t s;

  if (sscanf (t, "%4d-%2d-%2dT%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
              &tm.tm_hour) != 4 || tm.tm_mon < 1 || tm.tm_mon > 12 ||
      tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23)
    return -1;
  switch (rule) {
  case KEEP_LAST: snprintf (out, PERIOD, "%zu", i); break;
  case KEEP_HOURLY: snprintf (out, PERIOD, "%.13s", t); break;
  case KEEP_DAILY: snprintf (out, PERIOD, "%.10s", t); break;
  case KEEP_MONTHLY: snprintf (out, PERIOD, "%.7s", t); break;
  case KEEP_YEARLY: snprintf (out, PERIOD, "%.4s", t); break;
  case KEEP_WEEKLY:
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    s = timegm (&tm);
    if (gmtime_r (&s, &tm) == NULL ||
        strftime (out, PERIOD, "%G-W%V", &tm) == 0)
      return -1;
    break;
  default: abort ();
  }
  return 0;
}

/* Is period p one of the n in set? */
static bool
among (char (*set)[PERIOD], size_t n, const char *p)
{
  size_t i;

  for (i = 0; i < n; ++i)
    if (strcmp (set[i], p) == 0)
      return true;
  return false;
}

/* One option's walk (periods[i]: point i's period for this rule).
 * -1 on ENOMEM.
 */
static int
walk (enum keep_rule rule, uint64_t keep, char (*periods)[PERIOD],
      size_t n, enum state *state, struct keep_mark *marks)
{
  char (*kept)[PERIOD] = NULL, (*counted)[PERIOD] = NULL;
  size_t nkept = 0, ncounted = 0, i;

  kept = calloc (n + 1, PERIOD);
  counted = calloc (n + 1, PERIOD);
  if (kept == NULL || counted == NULL) {
    free (kept);
    free (counted);
    return -1;
  }
  for (i = 0; i < n; ++i)
    if (state[i] == KEPT)
      strcpy (kept[nkept++], periods[i]);
  for (i = n; i-- > 0;) {
    if (state[i] != UNMARKED || among (kept, nkept, periods[i]))
      continue;
    if (!among (counted, ncounted, periods[i])) {
      if (ncounted >= keep)
        break;
      strcpy (counted[ncounted++], periods[i]);
      state[i] = KEPT;
      marks[i].reason = (enum keep_reason) rule;
    }
    else
      state[i] = REMOVED;
  }
  free (kept);
  free (counted);
  return 0;
}

int
keep_select (const char *const *times, size_t n,
             const struct keep_options *o, struct keep_mark *marks,
             size_t *bad)
{
  char (*periods)[PERIOD] = calloc (n + 1, PERIOD);
  enum state *state = calloc (n + 1, sizeof *state);
  bool any = false;
  size_t i;
  int r, ret = -1;

  *bad = n;
  if (periods == NULL || state == NULL)
    goto out;
  for (r = 0; r < KEEP_RULES; ++r)
    any |= o->n[r] > 0;
  for (i = 0; i < n; ++i)
    marks[i] = (struct keep_mark) { !any, any ? KEEP_BY_NONE : KEEP_BY_ALL };
  for (r = 0; any && r < KEEP_RULES; ++r) {
    if (o->n[r] == 0)
      continue;
    for (i = 0; i < n; ++i)
      if (period_of (times[i], r, i, periods[i]) == -1) {
        *bad = i;
        errno = EINVAL;
        goto out;
      }
    if (walk (r, o->n[r], periods, n, state, marks) == -1)
      goto out;
  }
  for (i = 0; any && i < n; ++i)
    marks[i].keep = state[i] == KEPT;
  if (n > 0 && !marks[n - 1].keep)
    marks[n - 1] = (struct keep_mark) { true, KEEP_BY_NEWEST };
  ret = 0;
 out:
  free (periods);
  free (state);
  return ret;
}
