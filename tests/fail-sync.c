/* SPDX-License-Identifier: BSD-3-Clause */
/* fail-sync.c: an LD_PRELOAD shim for test-dirtybitmap-crash-syncfail.sh.
 * The Nth sync (FAIL_SYNC_AT=N) of the bitmap file fails with EIO, as
 * on a disk that could not write the pages; every other call goes to
 * the kernel.  Syncs are fdatasyncs of a file whose name ends in
 * ".bitmaps", msyncs (only the bitmap file is synced so: a server's
 * commits sync the ranges they change), and sync_file_range calls
 * that wait for a write-back of it (a commit writes back all of its
 * regions but the last so).
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static int count;

/* True if this sync is the one to fail. */
static bool
fail_now (void)
{
  const char *at = getenv ("FAIL_SYNC_AT");

  return at && __atomic_add_fetch (&count, 1, __ATOMIC_SEQ_CST) == atoi (at);
}

/* True if fd is open on a file whose name ends in ".bitmaps". */
static bool
is_bitmap_file (int fd)
{
  char link[64], path[4096];
  ssize_t n;

  snprintf (link, sizeof link, "/proc/self/fd/%d", fd);
  n = readlink (link, path, sizeof path);
  return n > 8 && memcmp (path + n - 8, ".bitmaps", 8) == 0;
}

int
fdatasync (int fd)
{
  if (is_bitmap_file (fd) && fail_now ()) {
    errno = EIO;
    return -1;
  }
  return syscall (SYS_fdatasync, fd);
}

int
sync_file_range (int fd, off64_t offset, off64_t nbytes, unsigned int flags)
{
  if ((flags & SYNC_FILE_RANGE_WAIT_AFTER) && is_bitmap_file (fd) &&
      fail_now ()) {
    errno = EIO;
    return -1;
  }
  return syscall (SYS_sync_file_range, fd, offset, nbytes, flags);
}

int
msync (void *addr, size_t length, int flags)
{
  if ((flags & MS_SYNC) && fail_now ()) {
    errno = EIO;
    return -1;
  }
  return syscall (SYS_msync, addr, length, flags);
}
