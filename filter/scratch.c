/* SPDX-License-Identifier: BSD-3-Clause */
/* scratch.c: the scratch store of a backup view (see scratch.h).
 *
 * A sparse file, mode 0600, that has no name: it is made with
 * O_TMPFILE in the scratch directory (or made and unlinked at once
 * where O_TMPFILE is not supported), so it goes away with its last
 * file descriptor, whether the backup ends, the server stops or the
 * server dies: a crash can leave nothing behind.  Preserved data is
 * written at its own offset on the disk, so the file needs no index;
 * space given back is punched out.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

#include "fullio.h"
#include "scratch.h"
#include "testpause.h"

struct scratch {
  int fd;
};

struct scratch *
scratch_create (const char *dir, struct bmerr *err)
{
  struct scratch *s = calloc (1, sizeof *s);
  char *tmpl = NULL;
  struct stat sb;

  if (s == NULL) {
    bmerr_set (err, errno, "%s", strerror (errno));
    return NULL;
  }
  if (stat (dir, &sb) == -1 || !S_ISDIR (sb.st_mode)) {
    bmerr_set (err, errno ? errno : ENOTDIR, "scratch %s: %s", dir,
               stat (dir, &sb) == -1 ? strerror (errno) :
               "not a directory");
    free (s);
    return NULL;
  }
  s->fd = open (dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (s->fd == -1 && (errno == EOPNOTSUPP || errno == EISDIR ||
                      errno == EINVAL)) {
    if (asprintf (&tmpl, "%s/.dirtybitmap-scratch.XXXXXX", dir) == -1) {
      bmerr_set (err, errno, "%s", strerror (errno));
      free (s);
      return NULL;
    }
    s->fd = mkostemp (tmpl, O_CLOEXEC);
    if (s->fd >= 0)
      unlink (tmpl);
    free (tmpl);
  }
  if (s->fd == -1) {
    bmerr_set (err, errno, "scratch %s: cannot create the scratch store: "
               "%s", dir, strerror (errno));
    free (s);
    return NULL;
  }
  return s;
}

void
scratch_free (struct scratch *s)
{
  if (s == NULL)
    return;
  close (s->fd);
  free (s);
}

int
scratch_write (struct scratch *s, const void *buf, uint32_t count,
               uint64_t offset)
{
  return full_pwrite (s->fd, buf, count, offset);
}

int
scratch_read (struct scratch *s, void *buf, uint32_t count, uint64_t offset)
{
  ssize_t r = full_pread (s->fd, buf, count, offset);

  if (r >= 0 && r < count) {
    errno = EIO;                /* all that is read was written */
    return -1;
  }
  return r == -1 ? -1 : 0;
}

void
scratch_release (struct scratch *s, uint64_t count, uint64_t offset)
{
  if (count == 0)
    return;
  test_pause_point ("scratch-release");
  fallocate (s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
             offset, count);
}

uint64_t
scratch_allocated (struct scratch *s)
{
  struct stat sb;

  return fstat (s->fd, &sb) == 0 ? (uint64_t) sb.st_blocks * 512 : 0;
}
