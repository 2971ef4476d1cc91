/* SPDX-License-Identifier: BSD-3-Clause */
/* keep.h: which points of a repository a prune keeps (dirtybitmap(1),
 * prune): Proxmox Backup Server's rules (its mark_selections), the
 * periods in UTC, and the newest point always kept.  A pure function
 * of the points' times and the options: nothing here reads the
 * repository.
 */

#ifndef DIRTYBITMAP_KEEP_H
#define DIRTYBITMAP_KEEP_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* The options, in the order they apply. */
enum keep_rule {
  KEEP_LAST, KEEP_HOURLY, KEEP_DAILY, KEEP_WEEKLY, KEEP_MONTHLY,
  KEEP_YEARLY,
  KEEP_RULES                    /* how many */
};

/* Why a point is kept: a rule, or one of these. */
enum keep_reason {
  KEEP_BY_NEWEST = KEEP_RULES,  /* the newest point, always kept */
  KEEP_BY_ALL,                  /* no keep option: nothing removed */
  KEEP_BY_NONE,                 /* removed */
};

struct keep_options {
  uint64_t n[KEEP_RULES];       /* 0: the option is not given */
};

struct keep_mark {
  bool keep;
  enum keep_reason reason;      /* an enum keep_rule, or the above */
};

/* "keep-daily", "newest", ...; NULL for KEEP_BY_NONE. */
extern const char *keep_reason_name (enum keep_reason r);

/* Mark each of the n points, whose times (as a record writes them,
 * 2026-12-06T05:00:00.123456Z) are given oldest first, in marks[n].
 * -1 with errno EINVAL if a time is not one (*bad: its index), or
 * ENOMEM.
 */
extern int keep_select (const char *const *times, size_t n,
                        const struct keep_options *o,
                        struct keep_mark *marks, size_t *bad);

#endif /* DIRTYBITMAP_KEEP_H */
