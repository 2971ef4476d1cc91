/* SPDX-License-Identifier: BSD-3-Clause */
/* identity.c: writes made without the filter (see identity.h for the
 * rule and the two records that keep it).
 *
 * The kernel stamps a write with a time between the coarse clock
 * (CLOCK_REALTIME_COARSE, which lags by up to BM_STAMP_LAG) and the
 * instant, cut to the file system's granule: a nanosecond on most, a
 * whole second on ext4 with 128-byte inodes and ext3, two on vfat.
 *
 * Why the "seen" time is sound.  It is a time T of the coarse clock
 * such that every write made after it is stamped at T or later, so a
 * write made since has a modification time whose granule ends after
 * T: a disk whose time's granule ends at T or before has not been
 * written since.  A server's writes happen while it lives, and it
 * lives until the last liveness record it wrote plus the lease (it
 * renews the record every BMF_ALIVE_PERIOD; a server stalled past its
 * lease can only make a later start see its own writes as foreign,
 * which costs a full backup and misses nothing); that instant less the
 * lag is such a T.  After a reboot it died before the boot.  The tool,
 * when it records the time of its change, waits for the coarse clock
 * to reach the instant it records (stamp_time_now).
 *
 * Why an identity is sound.  A write made in the same granule as the
 * time recorded keeps it, and the size: it would pass unseen.  So an
 * identity is taken with a stat that follows a reading of that coarse
 * clock already past the granule of the time that the stat shows
 * (stable_id_of): every later write is stamped with a later granule.  The granule is inferred from the time itself (a
 * time that happens to end in zeros only waits longer), and the wait
 * comes only when the disk was written within its last granule: a
 * tick, or up to 2 s on such file systems.  The identity recorded is
 * the one judged (a later stat would take in a write made since),
 * until this process writes the disk.
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
#include "mtime.h"
#include "txn-impl.h"
#include "util.h"

#define NS INT64_C (1000000000)
#define MS INT64_C (1000000)

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

enum stable { STABLE, UNSTABLE, UNSEEN };

/* Stat disk into *id as mtime.h says: STABLE, or UNSEEN (cannot
 * stat), or UNSTABLE if the clock did not pass the granule of its time
 * within BM_STAMP_WAIT_MAX (*id is the last stat).
 */
static enum stable
stable_id_of (const char *disk, struct bmf_disk_id *id)
{
  struct stat sb;
  int r;

  if (disk == NULL || (r = bm_stat_stable (disk, &sb)) == -1)
    return UNSEEN;
  *id = (struct bmf_disk_id) {
    .dev = sb.st_dev, .ino = sb.st_ino, .size = sb.st_size,
    .mtime_ns = bm_mtime_ns (&sb),
  };
  return r == 0 ? STABLE : UNSTABLE;
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

/* A granule of times, for messages: "2 s", "10 ms", "1 us", "1 ns". */
static const char *
granule_text (int64_t g, char *buf, size_t len)
{
  static const struct { int64_t unit; const char *name; } units[] = {
    { NS, "s" }, { MS, "ms" }, { 1000, "us" }, { 1, "ns" },
  };
  size_t i;

  for (i = 0; i < sizeof units / sizeof units[0] - 1; ++i)
    if (g >= units[i].unit)
      break;
  snprintf (buf, len, "%" PRIi64 " %s", g / units[i].unit, units[i].name);
  return buf;
}

enum bmf_disk_verdict
bmf_disk_verdict (const struct bmf_disk_facts *x, const char *disk,
                  const char *file, struct bmerr *why)
{
  const int64_t m = x->now.mtime_ns, g = bm_stamp_granule (m);
  char t1[64], t2[64], gt[32];

  if (!x->relies)
    return BMF_DISK_SAME;
  if (!x->seen_disk)
    return BMF_DISK_UNCHECKED;
  if (x->has_disk_id) {
    /* Size and time only: a reboot may change the device number, and
     * a copy that keeps the time (cp -p, rsync -t) of a disk moved
     * with its bitmap file is the same disk.
     */
    if (x->disk_id.size == x->now.size && x->disk_id.mtime_ns == m)
      return BMF_DISK_SAME;
    bmerr_set (why, ESTALE, "%s was written without the filter since its "
               "bitmaps last recorded it (its size or modification time "
               "changed)", disk);
    return BMF_DISK_WRITTEN;
  }
  if (x->has_seen) {
    /* The time alone: a size change is a write, and the size that the
     * bitmaps cover may not be the file's (a filter below the
     * dirtybitmap filter, such as partition or truncate).  A write
     * made since is stamped at seen_ns or later, cut to the granule:
     * only a time whose granule ends by then was surely made before.
     */
    if (m + g <= x->seen_ns)
      return BMF_DISK_SAME;
    if (m >= x->seen_ns)
      bmerr_set (why, ESTALE, "%s was written without the filter since "
                 "its bitmaps last recorded it (it was modified at %s, "
                 "after %s, up to when its bitmaps are known to hold every "
                 "write)", disk, when (m, t1, sizeof t1),
                 when (x->seen_ns, t2, sizeof t2));
    else
      bmerr_set (why, ESTALE, "whether %s was written without the filter "
                 "since its bitmaps last recorded it cannot be told (it was "
                 "modified at %s, which its file system's times, to %s, "
                 "cannot tell from a time after %s, up to when its bitmaps "
                 "are known to hold every write)", disk,
                 when (m, t1, sizeof t1), granule_text (g, gt, sizeof gt),
                 when (x->seen_ns, t2, sizeof t2));
    return BMF_DISK_WRITTEN;
  }
  bmerr_set (why, ESTALE, "whether %s was written without the filter "
             "cannot be told: its bitmap file %s has no record of the "
             "disk (made by an older version, or by a run that could not "
             "record it)", disk, file);
  return BMF_DISK_UNKNOWN;
}

static void
forget_judged (struct bmf *f)
{
  f->judged = BMF_NOT_JUDGED;
  free (f->judged_disk);
  f->judged_disk = NULL;
}

/* Keep what f judged of disk, for bmf_txn_disk_seen (if the name
 * cannot be kept, that records a stat of its own).
 */
static void
keep_judged (struct bmf *f, const char *disk, const struct bmf_disk_id *id,
             bool stable)
{
  f->judged_disk = strdup (disk);
  if (f->judged_disk == NULL)
    return;
  f->judged = stable ? BMF_JUDGED : BMF_JUDGED_UNSTABLE;
  f->judged_id = *id;
}

enum bmf_disk_verdict
bmf_check_disk (struct bmf *f, const char *disk, struct bmerr *why)
{
  const struct bmf_state *st = &f->st;
  /* Only a file that can be written records what it judged. */
  const bool keep = f->lock == BMF_LOCK_EXCLUSIVE;
  struct bmf_disk_facts x = {
    .relies = relies (st),
    .has_disk_id = st->has_disk_id, .disk_id = st->disk_id,
    .has_seen = st->has_seen, .seen_ns = st->seen_ns,
  };
  enum bmf_disk_verdict v;
  enum stable r = UNSEEN;

  forget_judged (f);
  if (x.relies) {
    if (keep)
      r = stable_id_of (disk, &x.now);
    else if (disk_id_of (disk, &x.now) == 0)
      r = STABLE;
    if (r == UNSEEN && disk)
      bm_debug ("%s: %m: the disk is not checked", disk);
    x.seen_disk = r != UNSEEN;
  }
  if (keep && x.seen_disk)
    keep_judged (f, disk, &x.now, r == STABLE);
  v = bmf_disk_verdict (&x, disk, f->path, why);
  if (v == BMF_DISK_WRITTEN || v == BMF_DISK_UNKNOWN)
    bmf_condemn_enabled (f);
  return v;
}

/* The records of st: the identity id (NULL: none), the time seen_ns
 * (-1: none).
 */
static void
set_records (struct bmf_state *st, const struct bmf_disk_id *id,
             int64_t seen_ns)
{
  st->has_disk_id = id != NULL;
  memset (&st->disk_id, 0, sizeof st->disk_id);
  if (id)
    st->disk_id = *id;
  st->has_seen = seen_ns >= 0;
  st->seen_ns = MAX (seen_ns, 0);
}

/* A time of the clock that stamps writes, now: every write made before
 * was stamped no later, and every write made after this returns is
 * stamped no earlier (it waits for the coarse clock to reach the
 * instant: a tick).  Bounded: with a coarse clock that does not reach
 * it, that clock's time (a write made just before may then be taken for
 * one made after: a false alarm, never a missed write).
 */
static int64_t
stamp_time_now (void)
{
  const int64_t t = now_ns (CLOCK_REALTIME);
  int i;

  for (i = 0; i < 100; ++i) {
    if (now_ns (CLOCK_REALTIME_COARSE) >= t)
      return t;
    nanosleep (&(struct timespec) { .tv_nsec = MS }, NULL);
  }
  return now_ns (CLOCK_REALTIME_COARSE);
}

/* Why the identity id of disk cannot be taken. */
static void
unstable_why (const char *disk, const struct bmf_disk_id *id,
              struct bmerr *why)
{
  static const char *const then = "a later write could keep it, so the "
    "disk is not recorded, and the next start will find every enabled "
    "bitmap inconsistent";
  const int64_t now = now_ns (CLOCK_REALTIME_COARSE);
  char t1[64], t2[64], g[32];

  if (id->mtime_ns > now)
    bmerr_set (why, ETIMEDOUT, "%s: its modification time, %s, is in the "
               "future (the clock says %s): %s", disk,
               when (id->mtime_ns, t1, sizeof t1), when (now, t2, sizeof t2),
               then);
  else
    bmerr_set (why, ETIMEDOUT, "%s: the clock (%s) did not pass its "
               "modification time, %s, by the granule of that time (%s) "
               "within %" PRIi64 " seconds: %s", disk,
               when (now, t2, sizeof t2), when (id->mtime_ns, t1, sizeof t1),
               granule_text (bm_stamp_granule (id->mtime_ns), g, sizeof g),
               BM_STAMP_WAIT_MAX / NS, then);
}

int
bmf_txn_disk_seen (struct bmf_txn *t, const char *disk, struct bmerr *why)
{
  struct bmf *f = t->f;
  struct bmf_disk_id id;
  enum stable r;

  if (disk && f->judged != BMF_NOT_JUDGED &&
      strcmp (disk, f->judged_disk) == 0) {
    id = f->judged_id;
    r = f->judged == BMF_JUDGED ? STABLE : UNSTABLE;
  }
  else
    r = stable_id_of (disk, &id);
  switch (r) {
  case STABLE:
    set_records (&t->st, &id, -1);
    return 0;
  case UNSTABLE:
    /* Neither record: the next judge finds the bitmaps inconsistent. */
    set_records (&t->st, NULL, -1);
    unstable_why (disk, &id, why);
    return -1;
  case UNSEEN:
    break;
  }
  /* Unseen: the time now vouches for the bitmaps that t adds, never
   * for those the record vouched for until now.
   */
  if (!relies (&f->st))
    set_records (&t->st, NULL, stamp_time_now ());
  return 0;
}

void
bmf_txn_disk_open (struct bmf_txn *t)
{
  forget_judged (t->f);
  set_records (&t->st, NULL, now_ns (CLOCK_REALTIME) + BMF_ALIVE_LEASE);
}

void
bmf_disk_written (struct bmf *f)
{
  forget_judged (f);
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
  int64_t until = 0, bound;
  uint64_t pid;

  if (!alive || bmf_decode_alive (alive, &pid, &until) == -1 ||
      pid != st->open_pid)
    until = 0;
  bound = bmf_crash_bound (st->has_seen ? st->seen_ns : 0, until,
                           rebooted ? boot_time_ns () : 0);
  set_records (st, NULL, bound > 0 ? bound : -1);
}

int64_t
bmf_crash_bound (int64_t seen_ns, int64_t alive_until_ns, int64_t boot_ns)
{
  int64_t bound = MAX (seen_ns, alive_until_ns);

  if (boot_ns > 0)
    bound = MAX (bound, boot_ns - NS);
  /* Instants: a write made after one is stamped from the lag before. */
  return bound > BM_STAMP_LAG ? bound - BM_STAMP_LAG : 0;
}
