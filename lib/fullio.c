/* SPDX-License-Identifier: BSD-3-Clause */
/* fullio.c: whole reads and writes at an offset (see fullio.h). */

#include <config.h>

#include <errno.h>
#include <unistd.h>

#include "fullio.h"

int
full_pwrite (int fd, const void *buf, size_t count, uint64_t offset)
{
  const char *p = buf;

  while (count > 0) {
    ssize_t r = pwrite (fd, p, count, offset);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  return 0;
}

ssize_t
full_pread (int fd, void *buf, size_t count, uint64_t offset)
{
  char *p = buf;
  size_t done = 0;

  while (done < count) {
    ssize_t r = pread (fd, p + done, count - done, offset + done);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (r == 0)
      break;
    done += r;
  }
  return done;
}
