/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/progress.c: the progress display of a copy, on stderr.
 *
 * On a terminal, a bar redrawn in place with the percentage of the
 * bytes to copy and the rate; elsewhere (a log), a line every
 * PROGRESS_LINE_SECS seconds.  copy_run draws it from its own thread,
 * about five times a second, from the counters the workers update;
 * nothing here is shared with them.
 */

#include <config.h>

#include <stdio.h>
#include <stdint.h>
#include <inttypes.h>
#include <unistd.h>

#include "dirtybitmap.h"
#include "internal.h"
#include "util.h"

#define BAR_WIDTH 40

void
progress_start (struct progress *p, bool on, bool full, const char *label,
                uint64_t total)
{
  *p = (struct progress) {
    .on = on,
    .tty = on && label == NULL && isatty (fileno (stderr)),
    .full = full,
    .label = label,
    .total = total,
  };
  p->start = p->last_line = clock_seconds (CLOCK_MONOTONIC);
  progress_draw (p, 0, false);
}

void
progress_draw (struct progress *p, uint64_t done, bool last)
{
  double t, elapsed, frac;
  char rate[32], bar[BAR_WIDTH + 1];
  size_t i;

  if (!p->on)
    return;
  t = clock_seconds (CLOCK_MONOTONIC);
  elapsed = t - p->start;
  frac = p->total ? (double) done / p->total : 1;
  if (frac > 1)
    frac = 1;
  human_size (elapsed > 0 ? done / elapsed : 0, rate, sizeof rate);
  if (p->tty) {
    for (i = 0; i < BAR_WIDTH; ++i)
      bar[i] = i < BAR_WIDTH * frac ? '*' : '-';
    bar[BAR_WIDTH] = '\0';
    fprintf (stderr, "\r%3d%% [%s] %s/s%s", (int) (100 * frac), bar, rate,
             last ? "\n" : "\033[K");
    p->drawn = !last;
  }
  else if (!last && t - p->last_line >= PROGRESS_LINE_SECS) {
    fprintf (stderr, "%s: copy%s%s: %d%% of %" PRIu64 " %sbytes, %s/s\n",
             prog, p->label ? " " : "", p->label ? p->label : "",
             (int) (100 * frac), p->total, p->full ? "" : "dirty ", rate);
    p->last_line = t;
  }
  fflush (stderr);
}

void
progress_end (struct progress *p)
{
  if (p->drawn) {
    fputc ('\n', stderr);
    p->drawn = false;
  }
}
