/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/file.c: a regular file or a block device as the target of a
 * copy: positioned writes, zeroes, the final flush, and a new file's
 * way into place.
 *
 * Operations are synchronous (the callback runs before they return)
 * and safe from several threads at once: pwrite and fallocate on one
 * descriptor, plus a small lock for the writeback window.
 *
 * A new file (--full to a name that does not exist) is written under
 * a temporary name in the same directory, NAME.tmp-XXXXXX, created
 * with mode 0644 less the umask as NAME itself would have been, and
 * set to its full size at once (sparse).  Only commit, after the
 * final fdatasync, renames it to NAME (without replacing a NAME that
 * appeared meanwhile) and syncs the directory; close removes it if it
 * was not committed.  So NAME never holds a partial copy: a copy that
 * fails or is interrupted leaves no NAME, and a later incremental copy
 * to it fails instead of "completing" a backup that was never whole.
 * Only a kill -9 or a crash can leave the temporary file behind.
 *
 * Zeroes are made without writing a buffer of them: a new file is
 * zero already, so nothing is done; an existing regular file gets
 * fallocate PUNCH_HOLE|KEEP_SIZE (the range becomes sparse), or
 * ZERO_RANGE where holes cannot be punched; a block device gets
 * BLKZEROOUT.  Only when the file system or device supports none of
 * these are zeroes written, and the first failure is remembered so the
 * unsupported call is not tried again.
 *
 * Each write is handed to writeback at once, and the page cache is
 * kept from filling with the copy (see written()).
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
#include <libgen.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <linux/fs.h>
#include <linux/falloc.h>

#include "dirtybitmap.h"
#include "fullio.h"
#include "msg.h"
#include "internal.h"
#include "util.h"

#define WRITEBACK_WINDOW 16
#define NEW_FILE_MODE 0644      /* less the umask, as open(2) applies it */
#define TEMP_TRIES 100

struct wb_range {
  uint64_t offset, length;
};

struct file_target {
  struct target t;              /* first: a struct target * is one of these */
  int fd;
  bool is_block_device;
  char *temp;                   /* a new file's temporary name, until
                                 * committed or removed */
  bool fresh;                   /* a new file: every byte reads as zero
                                 * until written */
  /* Which ways to zero have failed as unsupported (set once). */
  bool no_punch_hole, no_zero_range, no_blkzeroout;
  /* The last ranges written, oldest at wb_next (see written()). */
  pthread_mutex_t wb_lock;
  struct wb_range wb[WRITEBACK_WINDOW];
  unsigned wb_next;
};

static const struct target_ops file_ops;

/* Create NAME.tmp-XXXXXX exclusively, with the mode a new NAME would
 * get.  Returns the descriptor and sets *temp, or -1.
 */
static int
create_temp (const char *name, char **temp)
{
  unsigned i;

  for (i = 0; i < TEMP_TRIES; ++i) {
    uint32_t rnd;
    int fd;

    if (getrandom (&rnd, sizeof rnd, 0) != sizeof rnd)
      rnd = (uint32_t) getpid () * 2654435761u + i;
    if (asprintf (temp, "%s.tmp-%06" PRIx32, name, rnd & 0xffffff) == -1) {
      *temp = NULL;
      return -1;
    }
    fd = open (*temp, O_RDWR | O_CLOEXEC | O_CREAT | O_EXCL, NEW_FILE_MODE);
    if (fd >= 0)
      return fd;
    free (*temp);
    *temp = NULL;
    if (errno != EEXIST)
      return -1;
  }
  errno = EEXIST;
  return -1;
}

struct target *
file_target_open (const char *name, bool create, uint64_t size,
                  struct bmerr *err)
{
  struct file_target *f;
  struct stat st;

  f = calloc (1, sizeof *f);
  if (f == NULL) {
    bmerr_first (err, 0, "%s", strerror (errno));
    return NULL;
  }
  f->t.ops = &file_ops;
  f->t.name = name;
  f->t.multi_conn = true;
  f->t.zero_size = UINT64_C (1) << 30;
  pthread_mutex_init (&f->wb_lock, NULL);

  f->fd = open (name, O_RDWR | O_CLOEXEC);
  if (f->fd == -1 && errno == ENOENT && create) {
    /* A dangling symbolic link is not a missing file. */
    if (lstat (name, &st) == 0) {
      bmerr_first (err, 0, "target %s: a symbolic link to a missing file",
                   name);
      goto err;
    }
    f->fd = create_temp (name, &f->temp);
    if (f->fd == -1) {
      bmerr_first (err, 0, "target %s: cannot create a temporary file next "
                   "to it: %s", name, strerror (errno));
      goto err;
    }
    f->fresh = true;
    bm_debug ("copy: writing the new file %s as %s", name, f->temp);
  }
  if (f->fd == -1) {
    bmerr_first (err, 0, "target %s: %s", name, strerror (errno));
    goto err;
  }
  if (fstat (f->fd, &st) == -1) {
    bmerr_first (err, 0, "target %s: fstat: %s", name, strerror (errno));
    goto err;
  }
  if (S_ISBLK (st.st_mode)) {
    f->is_block_device = true;
    if (ioctl (f->fd, BLKGETSIZE64, &f->t.size) == -1) {
      bmerr_first (err, 0, "target %s: BLKGETSIZE64: %s", name,
                   strerror (errno));
      goto err;
    }
  }
  else if (S_ISREG (st.st_mode)) {
    if (f->fresh && ftruncate (f->fd, size) == -1) {
      bmerr_first (err, 0, "target %s: cannot make it %" PRIu64 " bytes: %s",
                   name, size, strerror (errno));
      goto err;
    }
    f->t.size = f->fresh ? size : (uint64_t) st.st_size;
  }
  else {
    bmerr_first (err, 0, "target %s: not a regular file, a block device "
                 "or an NBD URI", name);
    goto err;
  }
  return &f->t;

 err:
  file_ops.close (&f->t, false);
  return NULL;
}

static int
file_connect (struct target *t, unsigned n, struct bmerr *err)
{
  return 0;                     /* one descriptor serves every thread */
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
written (struct file_target *f, uint64_t offset, uint64_t length)
{
  struct wb_range old;

  {
    SCOPED_LOCK (&f->wb_lock);
    old = f->wb[f->wb_next];
    f->wb[f->wb_next] = (struct wb_range) { offset, length };
    f->wb_next = (f->wb_next + 1) % WRITEBACK_WINDOW;
  }
  sync_file_range (f->fd, offset, length, SYNC_FILE_RANGE_WRITE);
  if (old.length) {
    sync_file_range (f->fd, old.offset, old.length,
                     SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                     SYNC_FILE_RANGE_WAIT_AFTER);
    posix_fadvise (f->fd, old.offset, old.length, POSIX_FADV_DONTNEED);
  }
}

static int
pwrite_all (struct file_target *f, const void *buf, size_t count,
            uint64_t offset)
{
  if (full_pwrite (f->fd, buf, count, offset) == -1)
    return -1;
  written (f, offset, count);
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
write_zeroes (struct file_target *f, uint64_t count, uint64_t offset)
{
  while (count > 0) {
    size_t n = MIN (count, f->t.zero_buf_size);
    if (pwrite_all (f, f->t.zero_buf, n, offset) == -1)
      return -1;
    count -= n;
    offset += n;
  }
  return 0;
}

static int
zero_range (struct file_target *f, uint64_t count, uint64_t offset)
{
  if (f->fresh)
    return 0;                   /* never written: zero already */

  if (f->is_block_device) {
    if (!flag_get (&f->no_blkzeroout)) {
      uint64_t range[2] = { offset, count };
      if (ioctl (f->fd, BLKZEROOUT, range) == 0)
        return 0;
      if (!unsupported (errno))
        return -1;
      /* EINVAL can also mean a range not aligned to the logical block
       * size: keep trying BLKZEROOUT for aligned ranges.
       */
      if (errno != EINVAL)
        flag_set (&f->no_blkzeroout);
    }
    return write_zeroes (f, count, offset);
  }

  if (!flag_get (&f->no_punch_hole)) {
    if (fallocate (f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                   offset, count) == 0)
      return 0;
    if (!unsupported (errno))
      return -1;
    flag_set (&f->no_punch_hole);
  }
  if (!flag_get (&f->no_zero_range)) {
    if (fallocate (f->fd, FALLOC_FL_ZERO_RANGE, offset, count) == 0)
      return 0;
    if (!unsupported (errno))
      return -1;
    flag_set (&f->no_zero_range);
  }
  return write_zeroes (f, count, offset);
}

/* The operation is done: tell the caller, through the callback. */
static int
done (int r, struct target_cb cb)
{
  int err = r == -1 ? errno : 0;

  cb.fn (cb.opaque, &err);
  return 0;
}

static int
file_write (struct target *t, unsigned conn, const void *buf, size_t count,
            uint64_t offset, struct target_cb cb)
{
  return done (pwrite_all ((struct file_target *) t, buf, count, offset), cb);
}

static int
file_zero (struct target *t, unsigned conn, uint64_t count, uint64_t offset,
           struct target_cb cb)
{
  return done (zero_range ((struct file_target *) t, count, offset), cb);
}

/* pread until count bytes, or the end of the file: the rest zeroes. */
static int
pread_all (struct file_target *f, void *buf, size_t count, uint64_t offset)
{
  ssize_t r = full_pread (f->fd, buf, count, offset);

  if (r == -1)
    return -1;
  memset ((char *) buf + r, 0, count - r);
  return 0;
}

static int
file_read (struct target *t, unsigned conn, void *buf, size_t count,
           uint64_t offset, struct target_cb cb)
{
  return done (pread_all ((struct file_target *) t, buf, count, offset), cb);
}

static const char *
file_last_error (struct target *t, int err)
{
  return strerror (err);
}

static int
file_get_fd (struct target *t, unsigned conn, short *events)
{
  return -1;                    /* nothing is ever in flight */
}

static int
file_notify (struct target *t, unsigned conn, short revents,
             const char **msg)
{
  return 0;
}

static int
file_flush (struct target *t, struct bmerr *err)
{
  struct file_target *f = (struct file_target *) t;

  if (fdatasync (f->fd) == -1) {
    bmerr_first (err, 0, "target %s: fdatasync: %s", t->name,
                 strerror (errno));
    return -1;
  }
  return 0;
}

/* fsync the directory holding name, so that a rename in it is
 * durable.
 */
static int
sync_dir_of (const char *name)
{
  char *copy = strdup (name);
  int fd, r, saved;

  if (copy == NULL)
    return -1;
  fd = open (dirname (copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  free (copy);
  if (fd == -1)
    return -1;
  r = fsync (fd);
  saved = errno;
  close (fd);
  errno = saved;
  return r;
}

static int
file_commit (struct target *t, struct bmerr *err)
{
  struct file_target *f = (struct file_target *) t;

  if (f->temp == NULL)
    return 0;                   /* written in place */

  /* Never replace a NAME made by someone else during the copy. */
  if (renameat2 (AT_FDCWD, f->temp, AT_FDCWD, t->name,
                 RENAME_NOREPLACE) == -1) {
    if (errno != EINVAL && errno != ENOSYS) {
      bmerr_first (err, 0, "target %s: cannot rename %s to it: %s%s",
                   t->name, f->temp, strerror (errno),
                   errno == EEXIST ? " (it was created during the copy)" : "");
      return -1;
    }
    /* A file system without RENAME_NOREPLACE: link does not replace. */
    if (link (f->temp, t->name) == -1) {
      bmerr_first (err, 0, "target %s: cannot link %s to it: %s",
                   t->name, f->temp, strerror (errno));
      return -1;
    }
    unlink (f->temp);
  }
  free (f->temp);
  f->temp = NULL;
  if (sync_dir_of (t->name) == -1) {
    bmerr_first (err, 0, "target %s: fsync of its directory: %s",
                 t->name, strerror (errno));
    return -1;
  }
  return 0;
}

static void
file_close (struct target *t, bool graceful)
{
  struct file_target *f = (struct file_target *) t;

  if (f->fd >= 0)
    close (f->fd);
  if (f->temp) {
    if (unlink (f->temp) == -1)
      bm_error ("copy: target %s: cannot remove the temporary file %s: %s",
                t->name, f->temp, strerror (errno));
    free (f->temp);
  }
  pthread_mutex_destroy (&f->wb_lock);
  free (f);
}

static const struct target_ops file_ops = {
  .connect = file_connect,
  .write = file_write,
  .zero = file_zero,
  .read = file_read,
  .last_error = file_last_error,
  .get_fd = file_get_fd,
  .notify = file_notify,
  .flush = file_flush,
  .commit = file_commit,
  .close = file_close,
};
