/* SPDX-License-Identifier: BSD-3-Clause */
/* crc32c.c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78,
 * initial value and final xor 0xFFFFFFFF), table driven.  Only
 * metadata is checksummed, so a byte at a time is fast enough.
 * crc32c ("123456789", 9) == 0xE3069283.
 */

#include <config.h>

#include <pthread.h>

#include "crc32c.h"

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void
make_table (void)
{
  uint32_t i, j, c;

  for (i = 0; i < 256; ++i) {
    c = i;
    for (j = 0; j < 8; ++j)
      c = (c & 1) ? (c >> 1) ^ 0x82F63B78 : c >> 1;
    table[i] = c;
  }
}

uint32_t
crc32c (const void *buf, size_t len)
{
  const unsigned char *p = buf;
  uint32_t c = 0xFFFFFFFF;

  pthread_once (&table_once, make_table);
  while (len--)
    c = table[(c ^ *p++) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFF;
}
