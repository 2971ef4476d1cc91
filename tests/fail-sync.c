/* SPDX-License-Identifier: BSD-3-Clause */
/* fail-sync.c: an LD_PRELOAD shim for test-dirtybitmap-crash-syncfail.sh.
 * The Nth fdatasync (FAIL_SYNC_AT=N) of a file whose name ends in
 * ".bitmaps" fails with EIO, as on a disk that could not write the
 * pages; every other call goes to the kernel.
 */

#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

int
fdatasync (int fd)
{
  static int count;
  const char *at = getenv ("FAIL_SYNC_AT");
  char link[64], path[4096];
  ssize_t n;

  snprintf (link, sizeof link, "/proc/self/fd/%d", fd);
  n = readlink (link, path, sizeof path);
  if (at && n > 8 && memcmp (path + n - 8, ".bitmaps", 8) == 0 &&
      __atomic_add_fetch (&count, 1, __ATOMIC_SEQ_CST) == atoi (at)) {
    errno = EIO;
    return -1;
  }
  return syscall (SYS_fdatasync, fd);
}
