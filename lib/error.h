/* SPDX-License-Identifier: BSD-3-Clause */
/* error.h: errors as values, the one carrier of lib/ and tool/.  A
 * function that fails fills a struct bmerr (when given one) with what
 * went wrong, naming the file and the bitmap it concerns, and returns
 * -1 or NULL; it never prints.  Whoever reports the error decides
 * what becomes of it: nbdkit's log, the tool's stderr (bm_error,
 * msg.h), or a control client's JSON reply.
 *
 * Where several parts of one job may fail (the copy engine's threads,
 * the disks of a backup), each failure is offered with bmerr_first:
 * the first one is kept, the later ones (usually its consequences) are
 * dropped.  Start such a carrier empty: struct bmerr e = { 0 }.
 *
 * A message may name a remedy whose spelling only the caller knows
 * (how its user removes a bitmap: the filter's action=remove): lib
 * marks the place with bmerr_hint_then, and the caller that knows the
 * words adds them with bmerr_append_hint, as qemu's error_append_hint.
 */

#ifndef DIRTYBITMAP_ERROR_H
#define DIRTYBITMAP_ERROR_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>

struct bmerr {
  int errnum;                   /* an errno value: EBUSY "in use", ... */
  int hint_at;                  /* where a hint goes in msg, or 0: none */
  char msg[1536];
};

/* Set the error (e may be NULL; then nothing happens). */
extern void bmerr_set (struct bmerr *e, int errnum, const char *fs, ...)
  __attribute__ ((format (printf, 3, 4)));
extern void bmerr_vset (struct bmerr *e, int errnum, const char *fs,
                        va_list args)
  __attribute__ ((format (printf, 3, 0)));

/* Set the error unless e already holds one: the first is kept. */
extern void bmerr_first (struct bmerr *e, int errnum, const char *fs, ...)
  __attribute__ ((format (printf, 3, 4)));
extern void bmerr_vfirst (struct bmerr *e, int errnum, const char *fs,
                          va_list args)
  __attribute__ ((format (printf, 3, 0)));

/* Whether e holds an error (it must have started empty). */
static inline bool
bmerr_failed (const struct bmerr *e)
{
  return e->msg[0] != '\0';
}

/* Empty e again. */
extern void bmerr_clear (struct bmerr *e);

/* Put "PREFIX: " in front of the message already in e. */
extern void bmerr_prefix (struct bmerr *e, const char *fs, ...)
  __attribute__ ((format (printf, 2, 3)));

/* Mark the end of the message so far as the place of its caller's
 * hint (the remedy it names is spelled there), then go on with fs.
 */
extern void bmerr_hint_then (struct bmerr *e, const char *fs, ...)
  __attribute__ ((format (printf, 2, 3)));

/* Add the caller's words " (HINT)" where the message marked a place
 * for them; a message that marked none names no remedy, and is left as
 * it is.
 */
extern void bmerr_append_hint (struct bmerr *e, const char *fs, ...)
  __attribute__ ((format (printf, 2, 3)));

#endif /* DIRTYBITMAP_ERROR_H */
