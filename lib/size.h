/* SPDX-License-Identifier: BSD-3-Clause */
/* size.h: sizes as people write and read them ("64K", "0.976 MiB").
 * Pure functions: no I/O, no allocation, no global state.
 */

#ifndef DIRTYBITMAP_SIZE_H
#define DIRTYBITMAP_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* "1M", "64K", "512": sizes with optional K/M/G/T/P/E (powers of
 * 1024, either case) and an optional B or iB after the letter; a
 * plain number may end in B (or b).  -1 on error (not reported): no
 * digits, anything else after them, or a value over INT64_MAX.
 */
extern int64_t parse_size (const char *s);

/* "1 MiB": at most three significant digits and a binary unit, as
 * qemu-img info prints sizes.  Returns buf.
 *
 * Exactly: the unit is the smallest of B, KiB, MiB, GiB, TiB, PiB and
 * EiB (powers of 1024) in which the value rounds, to three significant
 * digits, to less than 1000; the value is printed as printf "%.3g"
 * does (so trailing zeros go), then a space and the unit.  So 999 is
 * "999 B", 1000 "0.977 KiB", 1023 "0.999 KiB", 1024 "1 KiB",
 * 1023487 "999 KiB", 1023488 and 1023590 "0.976 MiB" (not "1e+03
 * KiB"), 1048575 "1 MiB" (rounded), 1048576 "1 MiB", and UINT64_MAX
 * "16 EiB".  12 bytes of buf are always enough.
 */
extern char *human_size (uint64_t bytes, char *buf, size_t len);

#endif /* DIRTYBITMAP_SIZE_H */
