/* SPDX-License-Identifier: BSD-3-Clause */
/* error.h: errors as values.  A function of lib/ that fails fills a
 * struct bmerr (when given one) with what went wrong, naming the file
 * and the bitmap it concerns, and returns -1 or NULL; it never prints.
 * The caller reports it where it belongs: nbdkit's log, the tool's
 * stderr, or a control client's JSON reply.
 */

#ifndef DIRTYBITMAP_ERROR_H
#define DIRTYBITMAP_ERROR_H

#include <errno.h>

struct bmerr {
  int errnum;                   /* an errno value: EBUSY "in use", ... */
  char msg[1536];
};

/* Set the error (e may be NULL; then nothing happens). */
extern void bmerr_set (struct bmerr *e, int errnum, const char *fs, ...)
  __attribute__ ((format (printf, 3, 4)));

/* Put "PREFIX: " in front of the message already in e. */
extern void bmerr_prefix (struct bmerr *e, const char *fs, ...)
  __attribute__ ((format (printf, 2, 3)));

#endif /* DIRTYBITMAP_ERROR_H */
