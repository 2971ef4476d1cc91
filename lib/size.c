/* SPDX-License-Identifier: BSD-3-Clause */
/* size.c: parse and print sizes (see size.h).  The tool's options
 * (-g, --size, --request-size) and its human-readable output use
 * these; the filter parses with nbdkit_parse_size.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <ctype.h>
#include <errno.h>

#include "size.h"

int64_t
parse_size (const char *s)
{
  static const char suffixes[] = "KMGTPE";
  const char *p;
  char *end;
  uint64_t v;
  int shift = 0;

  if (!isdigit ((unsigned char) *s))
    return -1;
  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno)
    return -1;
  if (*end && (p = strchr (suffixes, toupper ((unsigned char) *end)))) {
    shift = 10 * (p - suffixes + 1);
    end++;
    if (end[0] == 'i' && end[1] == 'B')
      end += 2;
    else if (*end == 'B')
      end++;
  }
  else if (*end == 'B' || *end == 'b')
    end++;
  if (*end || (shift && v > (UINT64_C (1) << (63 - shift)) - 1))
    return -1;
  v <<= shift;
  return v > INT64_MAX ? -1 : (int64_t) v;
}

char *
human_size (uint64_t bytes, char *buf, size_t len)
{
  static const char *const units[] = {
    "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"
  };
  unsigned i = 0;
  double v = bytes;

  /* Keep at most three digits before the point: 1000 bytes is
   * 0.977 KiB, not 1000 B.  "%.3g" rounds 999.5 and more up to 1000,
   * which it prints as "1e+03": that is the next unit's 0.976.
   * (2^64 bytes are 16 EiB, so EiB always has room.)
   */
  while (i < 6 && v >= 999.5) {
    v /= 1024;
    i++;
  }
  snprintf (buf, len, "%.3g %s", v, units[i]);
  return buf;
}
