/* SPDX-License-Identifier: BSD-3-Clause */
/* bmfile.c: a bitmap file, open: creating it, opening and locking it,
 * loading its state through the format layer (format.h), and mapping
 * its bitmap data.  Changes go through transactions (txn.c).  What an
 * unclean stop means for a file is applied above this, by open.c:
 * nothing here knows the policy.
 *
 * One process writes a file at a time: it holds flock(LOCK_EX) on it
 * (a lock of the open file description, so it survives nbdkit's
 * fork); readers take LOCK_SH, or no lock at all (-U).
 *
 * Who owns a file.  A lock protects the inode it was taken on, not the
 * name, so two things make sure that the owner of a path is the owner
 * of the file that others will open at it:
 *
 *   - A new file is built under a private name, with its first
 *     transaction committed, and renamed to its path only when
 *     complete (bmf_publish): a start that fails never has a file at
 *     the path to unlink, so no other opener can be left holding a
 *     lock on a file that has gone.
 *   - After taking the lock, an opener checks that the path still
 *     names the locked file, and opens it again if not.
 *
 * What is refused before a byte is read: anything but a regular file
 * (a FIFO would block forever), and, for writing, a symbolic link or a
 * file owned by another user (a file planted in a shared directory).
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "bmfile-impl.h"
#include "crc32c.h"
#include "msg.h"
#include "shadow.h"
#include "util.h"

/* How many times an opener tries again when the file it locked is no
 * longer the one at its path.
 */
#define REOPEN_TRIES 5


const char *
bmf_path (const struct bmf *f)
{
  return f->path;
}

const struct bmf_state *
bmf_state (const struct bmf *f)
{
  return &f->st;
}

bool
bmf_unclean (const struct bmf *f)
{
  return f->unclean;
}

bool
bmf_rebooted (const struct bmf *f)
{
  return f->rebooted;
}

void
bmf_boot_id (char out[BMF_BOOT_ID_LEN])
{
  FILE *fp = fopen ("/proc/sys/kernel/random/boot_id", "re");

  out[0] = '\0';
  if (fp) {
    if (fgets (out, BMF_BOOT_ID_LEN, fp) == NULL)
      out[0] = '\0';
    fclose (fp);
  }
  out[strcspn (out, "\n")] = '\0';
}

const char *
bmf_inconsistent_reason (const struct bmf *f)
{
  return "it was recording when the machine stopped uncleanly, when its "
    "file could not be synced, or when the disk was written without the "
    "filter, so it may have missed changes";
}

void
bmf_condemn_enabled (struct bmf *f)
{
  size_t i;

  for (i = 0; i < f->st.nr_bitmaps; ++i)
    if (f->st.bitmaps[i].flags & BMF_ENABLED)
      f->st.bitmaps[i].flags |= BMF_INCONSISTENT;
}

/*----------------------------------------------------------------------
 * Loading.
 */

/* Read and decode the shadow table of st (shadow.h). */
static int
load_shadows (int fd, struct bmf_state *st, uint32_t crc,
              struct bmf_problems *p)
{
  const size_t len = st->shadow_table_length;
  unsigned char *buf = malloc (MAX (len, 1));
  ssize_t r;
  int ret;

  if (buf == NULL) {
    bmf_problem (p, "%s", strerror (errno));
    return -1;
  }
  r = len ? pread (fd, buf, len, st->shadow_table_offset) : 0;
  if (r != (ssize_t) len) {
    bmf_problem (p, "read shadow table: %s",
                 r == -1 ? strerror (errno) : "short read");
    free (buf);
    return -1;
  }
  ret = bmf_decode_shadows (buf, len, crc, st, p);
  free (buf);
  return ret;
}

/* Read and check the source of st's record from fd: problems go to
 * p, -1 if there was one.
 */
static int
load_restore (int fd, struct bmf_state *st, struct bmf_problems *p)
{
  struct bmf_restore_record *rs = &st->restore;
  ssize_t r;

  memset (rs->source, 0, sizeof rs->source);
  r = pread (fd, rs->source, rs->source_length, rs->region.offset);
  if (r != (ssize_t) rs->source_length) {
    bmf_problem (p, "restore record: read its source: %s",
                 r == -1 ? strerror (errno) : "short read");
    return -1;
  }
  if (crc32c (rs->source, rs->source_length) != rs->source_crc) {
    bmf_problem (p, "restore record: source checksum mismatch");
    return -1;
  }
  if (strlen (rs->source) != rs->source_length) {
    bmf_problem (p, "restore record: the source contains a NUL byte");
    return -1;
  }
  return 0;
}

int
bmf_load (int fd, struct bmf_state *st, int *slot, uint64_t *file_size,
          struct bmf_problems *p)
{
  unsigned char buf[BMF_HEADER_LENGTH], *dir;
  struct bmf_slot s[2];
  const unsigned before = p->count;
  struct stat sb;
  ssize_t r;
  int i;

  memset (st, 0, sizeof *st);
  if (fstat (fd, &sb) == -1) {
    bmf_problem (p, "fstat: %s", strerror (errno));
    return -1;
  }
  if (!S_ISREG (sb.st_mode)) {
    bmf_problem (p, "not a regular file");
    return -1;
  }
  *file_size = sb.st_size;
  for (i = 0; i < 2; ++i) {
    r = pread (fd, buf, sizeof buf, (off_t) i * BMF_HEADER_SLOT);
    if (r == -1) {
      bmf_problem (p, "read header: %s", strerror (errno));
      return -1;
    }
    bmf_decode_slot (buf, r, &s[i]);
  }
  *slot = bmf_pick_slot (s, *file_size, p);
  if (*slot == -1)
    return -1;
  *st = s[*slot].st;

  dir = malloc (MAX (st->dir_length, 1));
  if (dir == NULL) {
    bmf_problem (p, "%s", strerror (errno));
    return -1;
  }
  r = st->dir_length ? pread (fd, dir, st->dir_length, st->dir_offset) : 0;
  if (r != (ssize_t) st->dir_length) {
    bmf_problem (p, "read directory: %s",
                 r == -1 ? strerror (errno) : "short read");
    free (dir);
    st->nr_bitmaps = 0;
    return -1;
  }
  if (bmf_decode_dir (dir, st->dir_length, s[*slot].dir_crc, st, p) == -1 &&
      !p->report) {
    free (dir);
    return -1;
  }
  free (dir);
  if (st->has_shadows && load_shadows (fd, st, s[*slot].shadow_crc, p) == -1 &&
      !p->report)
    return -1;
  if (st->restore.state != BMF_RESTORE_NONE &&
      load_restore (fd, st, p) == -1 && !p->report)
    return -1;
  bmf_check_overlaps (st, p);
  return p->count > before ? -1 : 0;
}

/*----------------------------------------------------------------------
 * Opening.
 */

static int
lock_fd (int fd, const char *path, enum bmf_lock lock, struct bmerr *err)
{
  if (lock == BMF_LOCK_NONE)
    return 0;
  if (flock (fd, (lock == BMF_LOCK_EXCLUSIVE ? LOCK_EX : LOCK_SH)
             | LOCK_NB) == -1) {
    if (errno == EWOULDBLOCK)
      bmerr_set (err, EBUSY, "%s: in use by another process (a running "
                 "nbdkit or dirtybitmap)", path);
    else
      bmerr_set (err, errno, "%s: lock: %s", path, strerror (errno));
    return -1;
  }
  return 0;
}

/* Open path and check what it is before anything is read or locked. */
static int
open_checked (const char *path, enum bmf_lock lock, struct bmerr *err)
{
  const bool rw = lock == BMF_LOCK_EXCLUSIVE;
  struct stat sb;
  int fd;

  /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
  fd = open (path, (rw ? O_RDWR | O_NOFOLLOW : O_RDONLY) | O_NONBLOCK |
             O_CLOEXEC);
  if (fd == -1) {
    if (errno == ELOOP && rw)
      bmerr_set (err, ELOOP, "%s: is a symbolic link: refused (give the "
                 "path of the file itself)", path);
    else
      bmerr_set (err, errno, "%s: %s", path, strerror (errno));
    return -1;
  }
  if (fstat (fd, &sb) == -1) {
    bmerr_set (err, errno, "%s: fstat: %s", path, strerror (errno));
    goto err;
  }
  if (!S_ISREG (sb.st_mode)) {
    bmerr_set (err, EINVAL, "%s: not a regular file", path);
    goto err;
  }
  if (rw && sb.st_uid != geteuid () && sb.st_uid != 0) {
    bmerr_set (err, EPERM, "%s: owned by uid %ju, neither this user "
               "(uid %ju) nor root: refused (a file planted by another "
               "user?)", path, (uintmax_t) sb.st_uid,
               (uintmax_t) geteuid ());
    goto err;
  }
  if (fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK) == -1) {
    bmerr_set (err, errno, "%s: fcntl: %s", path, strerror (errno));
    goto err;
  }
  return fd;

 err:
  close (fd);
  return -1;
}

/* Whether path still names the file open as fd. */
static bool
still_at (int fd, const char *path)
{
  struct stat a, b;

  return fstat (fd, &a) == 0 && a.st_nlink > 0 &&
    stat (path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static struct bmf *
new_bmf (const char *path, int fd, enum bmf_lock lock, struct bmerr *err)
{
  struct bmf *f = calloc (1, sizeof *f);

  if (f == NULL || (f->path = strdup (path)) == NULL) {
    bmerr_set (err, errno, "%s: %s", path, strerror (errno));
    free (f);
    return NULL;
  }
  f->fd = fd;
  f->sync_fd = -1;
  f->lock = lock;
  return f;
}

struct bmf *
bmf_open_file (const char *path, enum bmf_lock lock, struct bmerr *err)
{
  struct bmf_problems p = { .path = path };
  struct bmf *f;
  uint64_t size;
  int fd, tries;

  for (tries = 0; ; ++tries) {
    fd = open_checked (path, lock, err);
    if (fd == -1)
      return NULL;
    if (lock_fd (fd, path, lock, err) == -1) {
      close (fd);
      return NULL;
    }
    if (lock == BMF_LOCK_NONE || still_at (fd, path))
      break;
    close (fd);
    if (tries == REOPEN_TRIES) {
      bmerr_set (err, EAGAIN, "%s: keeps being replaced or removed while "
                 "it is opened", path);
      return NULL;
    }
    bm_debug ("%s: replaced or removed while it was locked: again", path);
  }

  f = new_bmf (path, fd, lock, err);
  if (f == NULL) {
    close (fd);
    return NULL;
  }
  if (bmf_load (fd, &f->st, &f->slot, &size, &p) == -1) {
    if (err)
      *err = p.first;
    bmf_close (f);
    return NULL;
  }
  return f;
}

/*----------------------------------------------------------------------
 * Creating.
 */

struct bmf *
bmf_create (const char *path, mode_t mode, bool sized, uint64_t disk_size,
            struct bmerr *err)
{
  unsigned char buf[BMF_FIRST_REGION] = { 0 };
  struct bmf *f;
  char *tmp;
  int fd;

  if (sized && disk_size > BMF_MAX_DISK_SIZE) {
    bmerr_set (err, EINVAL, "%s: disk size %" PRIu64 " is too large",
               path, disk_size);
    return NULL;
  }
  if (asprintf (&tmp, "%s.XXXXXX", path) == -1) {
    bmerr_set (err, errno, "%s: %s", path, strerror (errno));
    return NULL;
  }
  fd = mkostemp (tmp, O_CLOEXEC);
  if (fd == -1) {
    bmerr_set (err, errno, "%s: cannot create: %s", path, strerror (errno));
    free (tmp);
    return NULL;
  }
  f = new_bmf (path, fd, BMF_LOCK_EXCLUSIVE, err);
  if (f == NULL) {
    close (fd);
    unlink (tmp);
    free (tmp);
    return NULL;
  }
  f->tmp_path = tmp;
  f->st = (struct bmf_state) {
    .seq = 1, .disk_size = sized ? disk_size : 0, .sized = sized,
    .file_length = BMF_FIRST_REGION,
  };
  bmf_encode_header (&f->st, 0, 0, buf);
  if (fchmod (fd, mode & 0664) == -1 ||
      flock (fd, LOCK_EX | LOCK_NB) == -1 ||
      pwrite (fd, buf, sizeof buf, 0) != sizeof buf) {
    bmerr_set (err, errno, "%s: cannot create: %s", path, strerror (errno));
    bmf_close (f);
    return NULL;
  }
  f->st.bitmaps = calloc (1, sizeof *f->st.bitmaps);
  if (f->st.bitmaps == NULL) {
    bmerr_set (err, errno, "%s: %s", path, strerror (errno));
    bmf_close (f);
    return NULL;
  }
  return f;
}

static int
sync_dir_of (const char *path)
{
  char *copy = strdup (path);
  int dfd, r = 0;

  if (copy == NULL)
    return -1;
  dfd = open (dirname (copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd == -1 || fsync (dfd) == -1)
    r = -1;
  if (dfd >= 0)
    close (dfd);
  free (copy);
  return r;
}

int
bmf_publish (struct bmf *f, struct bmerr *err)
{
  int r;

  if (f->tmp_path == NULL)
    return 0;
  if (fsync (f->fd) == -1) {
    bmerr_set (err, errno, "%s: fsync: %s", f->path, strerror (errno));
    return -1;
  }
  /* A rename moves the very name this process opened the file by, so
   * that its descriptors (seen in /proc/PID/fd, and by lsof) name the
   * file at its path, not a private name gone "(deleted)".  Never
   * over a file made meanwhile: RENAME_NOREPLACE, or on a file system
   * without it, link, which does not replace either (the descriptors
   * then keep the private name: a descriptor opened again at the path
   * could not take the lock that this one holds).
   */
  r = renameat2 (AT_FDCWD, f->tmp_path, AT_FDCWD, f->path, RENAME_NOREPLACE);
  if (r == -1 && (errno == EINVAL || errno == ENOSYS)) {
    r = link (f->tmp_path, f->path);
    if (r == 0)
      unlink (f->tmp_path);
  }
  if (r == -1) {
    if (errno == EEXIST)
      bmerr_set (err, EEXIST, "%s: created by another process meanwhile",
                 f->path);
    else
      bmerr_set (err, errno, "%s: cannot create: %s", f->path,
                 strerror (errno));
    return -1;
  }
  free (f->tmp_path);
  f->tmp_path = NULL;
  if (sync_dir_of (f->path) == -1) {
    bmerr_set (err, errno, "%s: fsync of its directory: %s", f->path,
               strerror (errno));
    return -1;
  }
  bm_debug ("%s: created", f->path);
  return 0;
}

void
bmf_close (struct bmf *f)
{
  if (f == NULL)
    return;
  if (f->tmp_path)
    unlink (f->tmp_path);
  if (f->sync_fd >= 0)
    close (f->sync_fd);
  close (f->fd);              /* releases the lock */
  bmf_state_free (&f->st);
  free (f->reserved);
  free (f->judged_disk);
  free (f->tmp_path);
  free (f->path);
  free (f);
}

bool
bmf_in_use (const struct bmf *f)
{
  if (f->lock != BMF_LOCK_NONE)
    return false;
  if (flock (f->fd, LOCK_SH | LOCK_NB) == -1)
    return errno == EWOULDBLOCK;
  flock (f->fd, LOCK_UN);
  return false;
}

bool
bmf_same_file (const struct bmf *f, const char *path)
{
  struct stat a, b;

  return fstat (f->fd, &a) == 0 && stat (path, &b) == 0 &&
    a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int
bmf_sync (struct bmf *f)
{
  return fdatasync (f->fd);
}

int
bmf_reserve (struct bmf *f, uint64_t offset, uint64_t length)
{
  struct bmf_region *r;

  if (length == 0)
    return 0;
  r = realloc (f->reserved, (f->nr_reserved + 1) * sizeof *r);
  if (r == NULL)
    return -1;
  f->reserved = r;
  r[f->nr_reserved++] = (struct bmf_region) { offset, length };
  return 0;
}

void
bmf_unreserve (struct bmf *f, uint64_t offset, uint64_t length)
{
  size_t i;

  for (i = 0; i < f->nr_reserved; ++i)
    if (f->reserved[i].offset == offset && f->reserved[i].length == length) {
      f->reserved[i] = f->reserved[--f->nr_reserved];
      return;
    }
}

/*----------------------------------------------------------------------
 * Mapping bitmap data.
 */

int
bmf_map_region (int fd, uint64_t offset, uint64_t length, bool writable,
                struct bits *out)
{
  uint64_t page = sysconf (_SC_PAGESIZE);
  uint64_t start = ROUND_DOWN (offset, page);
  size_t len;
  void *p;

  if (length > SIZE_MAX - page) {
    errno = ENOMEM;
    return -1;
  }
  len = length + (offset - start);
  p = mmap (NULL, len, writable ? PROT_READ | PROT_WRITE : PROT_READ,
            MAP_SHARED, fd, start);
  if (p == MAP_FAILED)
    return -1;
  out->map_base = p;
  out->map_length = len;
  out->words = (uint64_t *) ((char *) p + (offset - start));
  return 0;
}

int
bmf_copy_bits (struct bmf *f, const struct bmf_state *st,
               const struct bmf_bitmap *bm, struct bits *out,
               struct bmerr *err)
{
  uint64_t len;
  ssize_t r;

  memset (out, 0, sizeof *out);
  out->nr_bits = st->sized ? bmf_nr_bits (st->disk_size, bm->gbits) : 0;
  len = bits_nr_words (out->nr_bits) * 8;
  if (len == 0)
    return 0;
  out->words = malloc (len);
  if (out->words == NULL) {
    bmerr_set (err, errno, "%s: bitmap %s: %s", f->path, bm->name,
               strerror (errno));
    return -1;
  }
  r = pread (f->fd, out->words, len, bm->data_offset);
  if (r != (ssize_t) len) {
    if (r == -1)
      bmerr_set (err, errno, "%s: bitmap %s: read: %s", f->path, bm->name,
                 strerror (errno));
    else
      bmerr_set (err, EAGAIN, "%s: bitmap %s: short read (the file changed "
                 "while it was read: try again)", f->path, bm->name);
    bmf_unmap (out);
    return -1;
  }
  return 0;
}

int
bmf_map_data (struct bmf *f, const struct bmf_state *st,
              const struct bmf_bitmap *bm, bool writable, struct bits *out,
              struct bmerr *err)
{
  memset (out, 0, sizeof *out);
  out->nr_bits = st->sized ? bmf_nr_bits (st->disk_size, bm->gbits) : 0;
  if (bm->data_length == 0)
    return 0;
  if (bmf_map_region (f->fd, bm->data_offset, bm->data_length,
                      writable, out) == -1) {
    bmerr_set (err, errno, "%s: bitmap %s: cannot map %" PRIu64
               " bytes: %s", f->path, bm->name, bm->data_length,
               strerror (errno));
    return -1;
  }
  return 0;
}

int
bmf_map_shadow (struct bmf *f, const struct bmf_state *st,
                const struct bmf_bitmap *bm, struct bits *out,
                struct bmerr *err)
{
  memset (out, 0, sizeof *out);
  out->nr_bits = st->sized ?
    bmf_nr_bits (st->disk_size, bmf_shadow_gbits (st, bm)) : 0;
  if (bm->shadow_length == 0)
    return 0;
  if (bmf_map_region (f->fd, bm->shadow_offset, bm->shadow_length,
                      true, out) == -1) {
    bmerr_set (err, errno, "%s: bitmap %s: cannot map its shadow: %s",
               f->path, bm->name, strerror (errno));
    return -1;
  }
  return 0;
}

void
bmf_unmap (struct bits *b)
{
  if (b->map_base)
    munmap (b->map_base, b->map_length);
  else
    free (b->words);
  bits_free_summary (b);
  memset (b, 0, sizeof *b);
}
