/* SPDX-License-Identifier: BSD-3-Clause */
/* tsan-freelocale.c: preloaded after the ThreadSanitizer runtime into
 * nbdkit by make check-tsan.  Under ThreadSanitizer (gcc 12, glibc
 * 2.36) nbdkit 1.32.5 hangs in exit, with or without this filter (the
 * file plugin alone, exiting on "Address already in use", is enough):
 * libp11-kit's destructor calls freelocale, which waits forever for
 * glibc's __libc_setlocale_lock, whose reader count has gone below
 * zero.  Leaving locales unfreed lets such an nbdkit exit; it hides no
 * access of the filter's.
 */

#include <config.h>

#include <locale.h>

void
freelocale (locale_t l)
{
}
