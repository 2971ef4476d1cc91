/* SPDX-License-Identifier: BSD-3-Clause */
/* unit-crc32c.c: crc32c (lib/crc32c.c) against published values: the
 * CRC-32C check value (of "123456789", in the CRC catalogue) and the
 * iSCSI test vectors of RFC 3720 appendix B.4, plus a bit-at-a-time
 * implementation of the same definition over many lengths and
 * alignments.  Each failed check prints what was expected and what
 * came; the exit status is 1 if any failed.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "crc32c.h"

static unsigned checks, failures;

static void
check (const char *what, const void *buf, size_t len, uint32_t want)
{
  uint32_t got = crc32c (buf, len);

  checks++;
  if (got != want) {
    printf ("FAIL: crc32c (%s, %zu bytes): expected 0x%08X, got 0x%08X\n",
            what, len, want, got);
    failures++;
  }
}

/* The definition, one bit at a time: reflected polynomial 0x82F63B78,
 * initial value and final xor 0xFFFFFFFF.
 */
static uint32_t
crc32c_bitwise (const uint8_t *p, size_t len)
{
  uint32_t c = 0xFFFFFFFF;
  int k;

  while (len--) {
    c ^= *p++;
    for (k = 0; k < 8; ++k)
      c = (c >> 1) ^ (0x82F63B78 & -(c & 1));
  }
  return ~c;
}

int
main (void)
{
  uint8_t buf[48], big[4096 + 8];
  unsigned i;
  size_t off, len;

  check ("\"123456789\"", "123456789", 9, 0xE3069283);
  check ("empty", "", 0, 0x00000000);
  check ("\"a\"", "a", 1, 0xC1D04330);
  check ("\"The quick brown fox jumps over the lazy dog\"",
         "The quick brown fox jumps over the lazy dog", 43, 0x22620404);

  /* RFC 3720 B.4. */
  memset (buf, 0, 32);
  check ("32 bytes of zeros", buf, 32, 0x8A9136AA);
  memset (buf, 0xFF, 32);
  check ("32 bytes of 0xFF", buf, 32, 0x62A8AB43);
  for (i = 0; i < 32; ++i)
    buf[i] = i;
  check ("32 incrementing bytes", buf, 32, 0x46DD794E);
  for (i = 0; i < 32; ++i)
    buf[i] = 31 - i;
  check ("32 decrementing bytes", buf, 32, 0x113FDB5C);
  {
    static const uint8_t iscsi_read[48] = {
      0x01, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
      0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
      0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    };
    check ("an iSCSI SCSI Read (10) command PDU", iscsi_read, 48, 0xD9963A56);
  }

  /* Any length and alignment, against the definition. */
  srand (1);
  for (i = 0; i < sizeof big; ++i)
    big[i] = rand ();
  for (off = 0; off < 8; ++off)
    for (len = 0; len + off <= sizeof big; len += len < 300 ? 1 : 509) {
      char what[64];
      snprintf (what, sizeof what, "random bytes at offset %zu", off);
      check (what, big + off, len, crc32c_bitwise (big + off, len));
    }

  printf ("unit-crc32c: %u checks, %u failed\n", checks, failures);
  return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
