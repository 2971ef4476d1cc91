/* SPDX-License-Identifier: BSD-3-Clause */
/* identity.c: writes made without the filter (see identity.h for the
 * rule and the two records that keep it).
 *
 * Why the "seen" time is sound.  The kernel stamps a write with the
 * (coarse) clock at that instant, so a write made after a time T has
 * a modification time of at least T, and one made before has at most
 * T: a disk whose time is below T has not been written since T.  A
 * server's writes happen while it lives, and it lives until the last
 * liveness record it wrote plus the lease (it renews the record every
 * BMF_ALIVE_PERIOD; a server stalled past its lease can only make a
 * later start see its own writes as foreign, which costs a full backup
 * and misses nothing).  After a reboot it died before the boot.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "bmfile-impl.h"
#include "identity.h"
#include "msg.h"
#include "txn-impl.h"
#include "util.h"

#define NS INT64_C (1000000000)

static int64_t
now_ns (clockid_t clock)
{
  struct timespec ts;

  clock_gettime (clock, &ts);
  return ts.tv_sec * NS + ts.tv_nsec;
}

/* When this boot began, by /proc/stat (whole seconds), or 0. */
static int64_t
boot_time_ns (void)
{
  FILE *fp = fopen ("/proc/stat", "re");
  char line[256];
  int64_t t = 0;
  long long s;

  if (fp == NULL)
    return 0;
  while (fgets (line, sizeof line, fp))
    if (sscanf (line, "btime %lld", &s) == 1) {
      t = s * NS;
      break;
    }
  fclose (fp);
  return t;
}

static int
disk_id_of (const char *disk, struct bmf_disk_id *id)
{
  struct stat sb;

  if (disk == NULL || stat (disk, &sb) == -1)
    return -1;
  *id = (struct bmf_disk_id) {
    .dev = sb.st_dev, .ino = sb.st_ino, .size = sb.st_size,
    .mtime_ns = sb.st_mtim.tv_sec * NS + sb.st_mtim.tv_nsec,
  };
  return 0;
}

/* Whether a bitmap of st trusts the record: one that records. */
static bool
relies (const struct bmf_state *st)
{
  size_t i;

  for (i = 0; i < st->nr_bitmaps; ++i)
    if ((st->bitmaps[i].flags & (BMF_ENABLED | BMF_INCONSISTENT)) ==
        BMF_ENABLED)
      return true;
  return false;
}

/* A time, in UTC to the millisecond, for messages. */
static const char *
when (int64_t ns, char *buf, size_t len)
{
  time_t s = ns / NS;
  struct tm tm;

  if (ns <= 0 || gmtime_r (&s, &tm) == NULL)
    snprintf (buf, len, "%" PRIi64 " ns", ns);
  else {
    size_t n = strftime (buf, len, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf (buf + n, len - n, ".%03d UTC", (int) (ns % NS / 1000000));
  }
  return buf;
}

enum bmf_disk_verdict
bmf_check_disk (struct bmf *f, const char *disk, struct bmerr *why)
{
  const struct bmf_state *st = &f->st;
  struct bmf_disk_id now;
  char t1[64], t2[64];

  if (!relies (st))
    return BMF_DISK_SAME;
  if (disk_id_of (disk, &now) == -1) {
    if (disk)
      bm_debug ("%s: %m: the disk is not checked", disk);
    return BMF_DISK_UNCHECKED;
  }
  if (st->has_disk_id) {
    /* Size and time only: a reboot may change the device number, and
     * a copy that keeps the time (cp -p, rsync -t) of a disk moved
     * with its bitmap file is the same disk.
     */
    if (st->disk_id.size == now.size && st->disk_id.mtime_ns == now.mtime_ns)
      return BMF_DISK_SAME;
    bmerr_set (why, ESTALE, "%s was written without the filter since its "
               "bitmaps last recorded it (its size or modification time "
               "changed)", disk);
  }
  else if (st->has_seen) {
    /* The time alone: a size change is a write, and the size that the
     * bitmaps cover may not be the file's (a filter below the
     * dirtybitmap filter, such as partition or truncate).
     */
    if (now.mtime_ns < st->seen_ns)
      return BMF_DISK_SAME;
    bmerr_set (why, ESTALE, "%s was written without the filter since its "
               "bitmaps last recorded it (it was modified at %s, after %s, "
               "up to when its bitmaps are known to hold every write)",
               disk, when (now.mtime_ns, t1, sizeof t1),
               when (st->seen_ns, t2, sizeof t2));
  }
  else
    bmerr_set (why, ESTALE, "whether %s was written without the filter "
               "cannot be told: its bitmap file %s has no record of the "
               "disk (made by an older version, or a server that stopped "
               "without one)", disk, f->path);
  bmf_condemn_enabled (f);
  return st->has_disk_id || st->has_seen ? BMF_DISK_WRITTEN
    : BMF_DISK_UNKNOWN;
}

void
bmf_txn_disk_seen (struct bmf_txn *t, const char *disk)
{
  struct bmf_disk_id id;
  int i;

  if (disk_id_of (disk, &id) == 0) {
    /* A write made after this returns must get another time than the
     * one recorded, even one in the same clock tick as the last write
     * recorded: wait for the clock to pass it (a tick, a few ms).
     */
    for (i = 0; i < 100 && now_ns (CLOCK_REALTIME_COARSE) <= id.mtime_ns;
         ++i)
      nanosleep (&(struct timespec) { .tv_nsec = 1000000 }, NULL);
    t->st.has_disk_id = true;
    t->st.disk_id = id;
    t->st.has_seen = false;
    t->st.seen_ns = 0;
    return;
  }
  /* Unseen: the time now vouches for the bitmaps that t adds, never
   * for those the record vouched for until now.
   */
  if (relies (&t->f->st))
    return;
  t->st.has_disk_id = false;
  memset (&t->st.disk_id, 0, sizeof t->st.disk_id);
  t->st.has_seen = true;
  t->st.seen_ns = now_ns (CLOCK_REALTIME_COARSE);
}

void
bmf_txn_disk_open (struct bmf_txn *t)
{
  t->st.has_disk_id = false;
  memset (&t->st.disk_id, 0, sizeof t->st.disk_id);
  t->st.has_seen = true;
  t->st.seen_ns = now_ns (CLOCK_REALTIME) + BMF_ALIVE_LEASE;
}

int
bmf_alive (struct bmf *f, struct bmerr *err)
{
  unsigned char buf[BMF_ALIVE_LENGTH];

  bmf_encode_alive (f->st.open_pid,
                    now_ns (CLOCK_REALTIME) + BMF_ALIVE_LEASE, buf);
  if (pwrite (f->fd, buf, sizeof buf, BMF_ALIVE_OFFSET) != sizeof buf) {
    bmerr_set (err, errno ? errno : EIO, "%s: write the liveness record: %s",
               f->path, strerror (errno ? errno : EIO));
    return -1;
  }
  return 0;
}

void
bmf_disk_after_crash (struct bmf_state *st, bool rebooted,
                      const unsigned char *alive)
{
  int64_t bound = st->has_seen ? st->seen_ns : 0, until, boot;
  uint64_t pid;

  if (alive && bmf_decode_alive (alive, &pid, &until) == 0 &&
      pid == st->open_pid)
    bound = MAX (bound, until);
  if (rebooted && (boot = boot_time_ns ()) > 0)
    bound = MAX (bound, boot - NS);
  st->has_disk_id = false;
  memset (&st->disk_id, 0, sizeof st->disk_id);
  st->has_seen = bound > 0;
  st->seen_ns = MAX (bound, 0);
}
