/* SPDX-License-Identifier: BSD-3-Clause */
/* unit-error.c: errors as values (lib/error.c).
 *
 * bmerr_first keeps the first error and drops the later ones;
 * bmerr_prefix names what failed in front; a caller's hint goes where
 * the message marked its place (bmerr_hint_then), with a prefix added
 * before or after, and nowhere when no place was marked or the error
 * was replaced since; messages as long as the carrier holds are cut,
 * never overrun, hint and prefix included; a NULL carrier is ignored.
 * Each failed check prints what was expected and what came; the exit
 * status is 1 if any failed.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static unsigned checks, failures;

static void
says (const char *what, const struct bmerr *e, const char *want)
{
  checks++;
  if (strcmp (e->msg, want) != 0) {
    printf ("FAIL: %s: expected \"%s\", got \"%s\"\n", what, want, e->msg);
    failures++;
  }
}

static void
holds (const char *what, bool cond)
{
  checks++;
  if (!cond) {
    printf ("FAIL: %s\n", what);
    failures++;
  }
}

static void
test_first (void)
{
  struct bmerr e = { 0 };

  holds ("a new carrier is empty", !bmerr_failed (&e));
  bmerr_first (&e, EIO, "source %s: read failed", "a");
  bmerr_first (&e, EINTR, "interrupted");
  says ("the first error is kept", &e, "source a: read failed");
  holds ("with its errnum", e.errnum == EIO);
  bmerr_set (&e, ENOENT, "replaced");
  says ("bmerr_set replaces", &e, "replaced");
  bmerr_clear (&e);
  holds ("bmerr_clear empties", !bmerr_failed (&e) && e.errnum == 0);
  bmerr_first (&e, EINVAL, "again");
  says ("an emptied carrier takes the next one", &e, "again");
}

static void
test_hint (void)
{
  struct bmerr e = { 0 };

  bmerr_set (&e, EINVAL, "bitmap b0 is inconsistent: why; remove it");
  bmerr_hint_then (&e, " and take a full backup");
  says ("no hint appended", &e,
        "bitmap b0 is inconsistent: why; remove it and take a full backup");
  bmerr_prefix (&e, "action %s on bitmap %s failed", "enable", "b0");
  bmerr_append_hint (&e, "action=%s", "remove");
  says ("prefix, then hint", &e,
        "action enable on bitmap b0 failed: bitmap b0 is inconsistent: "
        "why; remove it (action=remove) and take a full backup");

  bmerr_set (&e, EINVAL, "remove it");
  bmerr_hint_then (&e, " and go on");
  bmerr_append_hint (&e, "action=remove");
  bmerr_prefix (&e, "p");
  says ("hint, then prefix", &e, "p: remove it (action=remove) and go on");

  bmerr_set (&e, ENOENT, "bitmap b0 not found");
  bmerr_append_hint (&e, "action=remove");
  says ("no place marked: no hint", &e, "bitmap b0 not found");

  bmerr_set (&e, EINVAL, "remove it");
  bmerr_hint_then (&e, " later");
  bmerr_set (&e, EIO, "another error");
  bmerr_append_hint (&e, "action=remove");
  says ("a replaced error forgets the place", &e, "another error");
}

static void
test_long (void)
{
  const size_t max = sizeof ((struct bmerr *) 0)->msg - 1;
  char *big = malloc (max + 100);
  struct bmerr e = { 0 };

  if (big == NULL) {
    perror ("malloc");
    exit (EXIT_FAILURE);
  }
  memset (big, 'x', max + 99);
  big[max + 99] = '\0';
  bmerr_set (&e, EINVAL, "%s", big);
  holds ("a long message is cut to the carrier",
         strlen (e.msg) == max && e.msg[0] == 'x');
  bmerr_prefix (&e, "prefix");
  holds ("a prefix on a full message: cut, the prefix kept",
         strlen (e.msg) == max && strncmp (e.msg, "prefix: xx", 10) == 0);
  bmerr_prefix (&e, "%s", big);
  holds ("a prefix longer than the carrier: cut",
         strlen (e.msg) == max && e.msg[0] == 'x');

  big[max - 20] = '\0';
  bmerr_set (&e, EINVAL, "%s", big);
  bmerr_hint_then (&e, " and the rest of the sentence");
  bmerr_append_hint (&e, "a hint");
  holds ("a hint in a full message: cut at the end, the hint kept",
         strlen (e.msg) == max &&
         strncmp (e.msg + max - 20, " (a hint) and", 13) == 0);
  free (big);
}

static void
test_null (void)
{
  bmerr_set (NULL, EIO, "ignored");
  bmerr_first (NULL, EIO, "ignored");
  bmerr_prefix (NULL, "ignored");
  bmerr_hint_then (NULL, "ignored");
  bmerr_append_hint (NULL, "ignored");
  holds ("a NULL carrier is ignored", true);
}

int
main (void)
{
  static void (*const tests[]) (void) = {
    test_first, test_hint, test_long, test_null,
  };
  size_t i;

  for (i = 0; i < sizeof tests / sizeof tests[0]; ++i)
    tests[i] ();
  printf ("unit-error: %u checks, %u failed\n", checks, failures);
  return failures > 0;
}
