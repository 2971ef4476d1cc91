/* SPDX-License-Identifier: BSD-3-Clause */
/* size.h: sizes as people write and read them ("64K", "0.976 MiB").
 * Pure functions: no I/O, no allocation, no global state.
 */

#ifndef DIRTYBITMAP_SIZE_H
#define DIRTYBITMAP_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* "1M", "64K", "512": sizes with optional K/M/G/T/P/E (powers of
 * 1024) and an optional B or iB; -1 on error (not reported).
 */
extern int64_t parse_size (const char *s);

/* "1 MiB": at most three significant digits and a binary unit, as
 * qemu-img info prints sizes.  Returns buf.
 */
extern char *human_size (uint64_t bytes, char *buf, size_t len);

#endif /* DIRTYBITMAP_SIZE_H */
