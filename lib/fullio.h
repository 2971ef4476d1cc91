/* SPDX-License-Identifier: BSD-3-Clause */
/* fullio.h: whole reads and writes at an offset, through interruptions
 * and short transfers.
 */

#ifndef DIRTYBITMAP_FULLIO_H
#define DIRTYBITMAP_FULLIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Write all count bytes of buf at offset: 0, or -1 with errno. */
extern int full_pwrite (int fd, const void *buf, size_t count,
                        uint64_t offset);

/* Read count bytes at offset, or up to the end of the file: the bytes
 * read (fewer than count only at the end), or -1 with errno.
 */
extern ssize_t full_pread (int fd, void *buf, size_t count,
                           uint64_t offset);

#endif /* DIRTYBITMAP_FULLIO_H */
