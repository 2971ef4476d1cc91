/* SPDX-License-Identifier: BSD-3-Clause */
/* unit-size.c: parse_size and human_size (lib/size.c).
 *
 * parse_size: every suffix form the man page allows (K to E in either
 * case, then nothing, B or iB; B or b after a plain number), the
 * largest values, overflow and malformed input.  human_size: the exact
 * text at the unit boundaries, then over many sizes the properties the
 * header promises (under 1000, at most three significant digits, the
 * smallest such unit, the right value).  Each failed check prints what
 * was expected and what came; the exit status is 1 if any failed.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <inttypes.h>
#include <stdbool.h>
#include <math.h>

#include "size.h"

static unsigned checks, failures;

static void
parses (const char *s, int64_t want)
{
  int64_t got = parse_size (s);

  checks++;
  if (got != want) {
    printf ("FAIL: parse_size (\"%s\"): expected %" PRIi64 ", got %" PRIi64
            "\n", s, want, got);
    failures++;
  }
}

static void
prints (uint64_t bytes, const char *want)
{
  char buf[32];

  checks++;
  human_size (bytes, buf, sizeof buf);
  if (strcmp (buf, want) != 0) {
    printf ("FAIL: human_size (%" PRIu64 "): expected \"%s\", got \"%s\"\n",
            bytes, want, buf);
    failures++;
  }
}

static void
test_parse_size (void)
{
  static const char letters[] = "KMGTPE";
  char s[64];
  unsigned i;

  /* Plain numbers. */
  parses ("0", 0);
  parses ("1", 1);
  parses ("512", 512);
  parses ("007", 7);
  parses ("512B", 512);
  parses ("512b", 512);
  parses ("0B", 0);
  parses ("9223372036854775807", INT64_MAX);
  parses ("9223372036854775807B", INT64_MAX);

  /* Every unit, in either case, alone, with B and with iB. */
  for (i = 0; letters[i]; ++i) {
    int64_t unit = INT64_C (1) << (10 * (i + 1));
    const char *forms[] = { "", "B", "iB" };
    unsigned f;

    for (f = 0; f < 3; ++f) {
      snprintf (s, sizeof s, "1%c%s", letters[i], forms[f]);
      parses (s, unit);
      snprintf (s, sizeof s, "3%c%s", letters[i] + 'a' - 'A', forms[f]);
      parses (s, 3 * unit);
    }
    /* The largest multiple that fits, and the next one. */
    snprintf (s, sizeof s, "%" PRIi64 "%c", INT64_MAX / unit, letters[i]);
    parses (s, INT64_MAX / unit * unit);
    snprintf (s, sizeof s, "%" PRIi64 "%c", INT64_MAX / unit + 1, letters[i]);
    parses (s, -1);
    /* Other spellings of the suffix. */
    snprintf (s, sizeof s, "1%ci", letters[i]);
    parses (s, -1);
    snprintf (s, sizeof s, "1%cb", letters[i]);
    parses (s, -1);
    snprintf (s, sizeof s, "1%cib", letters[i]);
    parses (s, -1);
    snprintf (s, sizeof s, "1%cBi", letters[i]);
    parses (s, -1);
    snprintf (s, sizeof s, "1%ciBB", letters[i]);
    parses (s, -1);
    snprintf (s, sizeof s, "1%c%c", letters[i], letters[i]);
    parses (s, -1);
  }
  parses ("64K", 65536);
  parses ("64k", 65536);
  parses ("2G", INT64_C (2147483648));
  parses ("4G", INT64_C (4294967296));
  parses ("16T", INT64_C (17592186044416));
  parses ("7E", INT64_C (7) << 60);
  parses ("0K", 0);
  parses ("0E", 0);

  /* Overflow. */
  parses ("8E", -1);
  parses ("8192P", -1);
  parses ("9223372036854775808", -1);
  parses ("18446744073709551615", -1);
  parses ("18446744073709551616", -1);
  parses ("99999999999999999999999999", -1);
  parses ("99999999999999999999999999K", -1);

  /* Not sizes. */
  parses ("", -1);
  parses ("K", -1);
  parses ("B", -1);
  parses ("iB", -1);
  parses ("-1", -1);
  parses ("+1", -1);
  parses (" 1", -1);
  parses ("1 ", -1);
  parses ("1 K", -1);
  parses ("1.5M", -1);
  parses ("1,5M", -1);
  parses ("1e3", -1);
  parses ("0x10", -1);
  parses ("1X", -1);
  parses ("1iB", -1);
  parses ("1BB", -1);
  parses ("1Bb", -1);
  parses ("1B2", -1);
  parses ("1K2", -1);
  parses ("ten", -1);
  parses ("12x", -1);
}

/* The number of significant digits of the number in s ("0.976" has
 * 3, "16" 2, "100" 3: %g drops only zeros after the point).
 */
static unsigned
significant (const char *s)
{
  unsigned n = 0;
  bool leading = true;

  for (; *s && *s != ' '; ++s) {
    if (*s == '.')
      continue;
    if (leading && *s == '0')
      continue;
    leading = false;
    n++;
  }
  return n;
}

/* The properties of human_size's text for one size. */
static void
check_human (uint64_t bytes)
{
  static const char *const units[] = {
    "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"
  };
  char buf[32], unit[8];
  double v, exact;
  unsigned i;

  checks++;
  human_size (bytes, buf, sizeof buf);
  if (sscanf (buf, "%lf %7s", &v, unit) != 2 || strchr (buf, 'e')) {
    printf ("FAIL: human_size (%" PRIu64 "): \"%s\" is not \"N UNIT\"\n",
            bytes, buf);
    failures++;
    return;
  }
  for (i = 0; i < 7 && strcmp (unit, units[i]) != 0; ++i)
    ;
  exact = bytes / pow (1024, i);
  if (i == 7 || v >= 1000 || significant (buf) > 3 ||
      /* Rounded to three significant digits (half a unit in the third). */
      fabs (v - exact) > 0.5 * pow (10, floor (log10 (exact)) - 2) * 1.0001 ||
      /* The smallest unit: in the one below it would round to 1000. */
      (i > 0 && exact * 1024 < 999.5)) {
    printf ("FAIL: human_size (%" PRIu64 "): \"%s\" (%.6g %s exactly)\n",
            bytes, buf, exact, i < 7 ? units[i] : "?");
    failures++;
  }
}

static void
test_human_size (void)
{
  uint64_t x, p;
  unsigned i;

  prints (0, "0 B");
  prints (1, "1 B");
  prints (999, "999 B");
  prints (1000, "0.977 KiB");
  prints (1023, "0.999 KiB");
  prints (1024, "1 KiB");
  prints (1536, "1.5 KiB");
  prints (8768, "8.56 KiB");
  prints (213568, "209 KiB");
  prints (1000000, "977 KiB");
  prints (1023487, "999 KiB");
  prints (1023488, "0.976 MiB");
  prints (1023590, "0.976 MiB");
  prints (1048575, "1 MiB");
  prints (1048576, "1 MiB");
  prints (UINT64_C (1) << 30, "1 GiB");
  prints (UINT64_C (1) << 40, "1 TiB");
  prints (UINT64_C (16) << 40, "16 TiB");
  prints (UINT64_C (1) << 50, "1 PiB");
  prints ((UINT64_C (1) << 60) - 1, "1 EiB");
  prints (UINT64_C (1) << 60, "1 EiB");
  prints (UINT64_C (1) << 63, "8 EiB");
  prints (INT64_MAX, "8 EiB");
  prints (UINT64_MAX, "16 EiB");

  /* A short buffer gets a terminated prefix. */
  {
    char small[4];
    checks++;
    if (strcmp (human_size (1023590, small, sizeof small), "0.9") != 0) {
      printf ("FAIL: human_size into 4 bytes: expected \"0.9\", got \"%s\"\n",
              small);
      failures++;
    }
  }

  /* Around every boundary of every unit, and a sweep of the first
   * few thousand sizes.
   */
  for (i = 0, p = 1; i < 7; ++i, p *= 1024) {
    uint64_t k;
    for (k = 1; k <= 1024; k++) {
      if (p > UINT64_MAX / k)
        break;
      x = k * p;
      check_human (x);
      check_human (x - 1);
      check_human (x + 1);
      if (i > 0)
        check_human (x + p / 2);
    }
    /* Just below and above the rounding point 999.5 of this unit. */
    if (p <= UINT64_MAX / 1000) {
      x = (uint64_t) (999.5 * p);
      check_human (x - 1);
      check_human (x);
      check_human (x + 1);
    }
  }
  for (x = 0; x < 5000; ++x)
    check_human (x);
  check_human (UINT64_MAX - 1);
}

int
main (void)
{
  test_parse_size ();
  test_human_size ();
  printf ("unit-size: %u checks, %u failed\n", checks, failures);
  return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
