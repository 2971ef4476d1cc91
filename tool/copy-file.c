/* SPDX-License-Identifier: BSD-3-Clause */
/* copy-file.c: a regular file or a block device as the target of
 * dirtybitmap copy: positioned writes, write-zeroes and the final
 * flush.
 *
 * Each write is handed to writeback at once, and the page cache is
 * kept from filling with the copy (see written()).
 *
 * Zeroes are made without writing a buffer of them: a regular file
 * gets fallocate PUNCH_HOLE|KEEP_SIZE (the range becomes sparse), or
 * ZERO_RANGE where holes cannot be punched; a block device gets
 * BLKZEROOUT.  Only when the file system or device supports none of
 * these are zeroes written, and the first failure is remembered so
 * the unsupported call is not tried again.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
#include <linux/falloc.h>

#include "dirtybitmap.h"
#include "msg.h"
#include "copy.h"
#include "util.h"

int
file_target_open (struct file_target *t, const char *name, bool create,
                  uint64_t size)
{
  struct stat st;
  bool created = false;

  t->name = name;
  pthread_mutex_init (&t->wb_lock, NULL);
  t->fd = open (name, O_RDWR | O_CLOEXEC);
  if (t->fd == -1 && errno == ENOENT && create) {
    t->fd = open (name, O_RDWR | O_CLOEXEC | O_CREAT | O_EXCL, 0644);
    created = t->fd >= 0;
  }
  if (t->fd == -1) {
    bm_error ("copy: target %s: %s", name, strerror (errno));
    return -1;
  }
  if (fstat (t->fd, &st) == -1) {
    bm_error ("copy: target %s: fstat: %s", name, strerror (errno));
    goto err;
  }
  if (S_ISBLK (st.st_mode)) {
    t->is_block_device = true;
    if (ioctl (t->fd, BLKGETSIZE64, &t->size) == -1) {
      bm_error ("copy: target %s: BLKGETSIZE64: %s", name, strerror (errno));
      goto err;
    }
  }
  else if (S_ISREG (st.st_mode)) {
    if (created && ftruncate (t->fd, size) == -1) {
      bm_error ("copy: target %s: cannot make it %" PRIu64 " bytes: %s",
                name, size, strerror (errno));
      goto err;
    }
    t->size = created ? size : (uint64_t) st.st_size;
  }
  else {
    bm_error ("copy: target %s: not a regular file, a block device "
              "or an NBD URI", name);
    goto err;
  }
  return 0;

 err:
  close (t->fd);
  t->fd = -1;
  return -1;
}

/* Writeback of what the copy writes.  Left to itself, the kernel
 * lets the whole copy pile up in the page cache and then throttles the
 * writer hard (or leaves everything to the final fdatasync).  So each
 * written range is handed to writeback at once, and the range written
 * WRITEBACK_WINDOW writes earlier, which has had time to reach the
 * disk, is waited for and dropped from the page cache: the copy runs
 * at the speed of the disk throughout and does not push other data out
 * of the cache.  These are hints; the fdatasync at the end is what
 * makes the copy durable, and errors surface there.
 */
static void
written (struct file_target *t, uint64_t offset, uint64_t length)
{
  struct wb_range old;

  {
    SCOPED_LOCK (&t->wb_lock);
    old = t->wb[t->wb_next];
    t->wb[t->wb_next] = (struct wb_range) { offset, length };
    t->wb_next = (t->wb_next + 1) % WRITEBACK_WINDOW;
  }
  sync_file_range (t->fd, offset, length, SYNC_FILE_RANGE_WRITE);
  if (old.length) {
    sync_file_range (t->fd, old.offset, old.length,
                     SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                     SYNC_FILE_RANGE_WAIT_AFTER);
    posix_fadvise (t->fd, old.offset, old.length, POSIX_FADV_DONTNEED);
  }
}

int
file_target_write (struct file_target *t, const void *buf, size_t count,
                   uint64_t offset)
{
  const char *p = buf;
  const uint64_t start = offset, length = count;

  while (count > 0) {
    ssize_t r = pwrite (t->fd, p, count, offset);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  written (t, start, length);
  return 0;
}

/* An errno that says "this way of zeroing is not available here". */
static bool
unsupported (int err)
{
  return err == EOPNOTSUPP || err == ENOSYS || err == ENOTTY ||
    err == EINVAL;
}

static bool
flag_get (bool *flag)
{
  return __atomic_load_n (flag, __ATOMIC_RELAXED);
}

static void
flag_set (bool *flag)
{
  __atomic_store_n (flag, true, __ATOMIC_RELAXED);
}

static int
write_zeroes (struct file_target *t, uint64_t count, uint64_t offset)
{
  while (count > 0) {
    size_t n = MIN (count, t->zero_buf_size);
    if (file_target_write (t, t->zero_buf, n, offset) == -1)
      return -1;
    count -= n;
    offset += n;
  }
  return 0;
}

int
file_target_zero (struct file_target *t, uint64_t count, uint64_t offset)
{
  if (t->is_block_device) {
    if (!flag_get (&t->no_blkzeroout)) {
      uint64_t range[2] = { offset, count };
      if (ioctl (t->fd, BLKZEROOUT, range) == 0)
        return 0;
      if (!unsupported (errno))
        return -1;
      /* EINVAL can also mean a range not aligned to the logical block
       * size: keep trying BLKZEROOUT for aligned ranges.
       */
      if (errno != EINVAL)
        flag_set (&t->no_blkzeroout);
    }
    return write_zeroes (t, count, offset);
  }

  if (!flag_get (&t->no_punch_hole)) {
    if (fallocate (t->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                   offset, count) == 0)
      return 0;
    if (!unsupported (errno))
      return -1;
    flag_set (&t->no_punch_hole);
  }
  if (!flag_get (&t->no_zero_range)) {
    if (fallocate (t->fd, FALLOC_FL_ZERO_RANGE, offset, count) == 0)
      return 0;
    if (!unsupported (errno))
      return -1;
    flag_set (&t->no_zero_range);
  }
  return write_zeroes (t, count, offset);
}

int
file_target_flush (struct file_target *t)
{
  return fdatasync (t->fd);
}

void
file_target_close (struct file_target *t)
{
  if (t->fd >= 0) {
    close (t->fd);
    pthread_mutex_destroy (&t->wb_lock);
  }
  t->fd = -1;
}
