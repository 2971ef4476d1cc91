/* SPDX-License-Identifier: BSD-3-Clause */
/* crc32c.h: CRC-32C (Castagnoli), the checksum of the bitmap file's
 * headers and directory.
 */

#ifndef DIRTYBITMAP_CRC32C_H
#define DIRTYBITMAP_CRC32C_H

#include <stddef.h>
#include <stdint.h>

extern uint32_t crc32c (const void *buf, size_t len);

#endif /* DIRTYBITMAP_CRC32C_H */
