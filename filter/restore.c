/* SPDX-License-Identifier: BSD-3-Clause */
/* restore.c: a disk restored from a source while it is served (see
 * restore.h and nbdkit-dirtybitmap-filter(1), INSTANT RESTORE): the
 * requests of the disk's connections while the restore runs, and its
 * end.  The fill in the background is in restore-fill.c, the record in
 * the bitmap file in store-restore.c and lib/restore-record.c.
 *
 * The disk is cut into granules of 64K.  A granule is *restored* when
 * its bit is set in the file's restored bitmap: its data is then on
 * stable storage in the disk, and the disk is read and written there
 * as if no restore ran.  Elsewhere the disk's data is the source's,
 * whatever lies below.
 *
 * The rule that makes it survive a crash: a restored bit is set only
 * after the data of its granule is durable below (written, then the
 * layer below flushed), so a crash or a power loss never leaves a
 * granule marked whose data is not there; and a write to a granule
 * that is not restored is acknowledged only once its bit is set (in
 * the page cache: it survives kill -9), so the restore never fills
 * again a granule that a client has written.  Bits not yet on stable
 * storage when the power goes only cost a fill again; a flush, and a
 * FUA write, sync them first, so that a write that a client made
 * durable is never filled over after a power loss.
 *
 *   - A read of granules not all *ready* (restored, or *filled*: their
 *     data written below, not yet flushed and marked) claims them,
 *     reads those not ready from the source, writes them below (copy on
 *     read: filled), and answers from that data and from below.
 *   - A pwrite or zero of granules not all restored claims them,
 *     fills the granules it covers in part and that are not ready,
 *     goes down, flushes the layer below and marks every granule it
 *     touches restored, all before its reply.
 *   - A trim goes down only where every granule is restored (a trim
 *     may be dropped; the restore fills the others).
 *   - The fill thread (restore-fill.c) claims runs of granules not
 *     restored, fills those not ready, and after each batch flushes
 *     the layer below and marks them restored.
 *
 * Claims make two requests on one granule wait for each other (a
 * fill must not land over a client's write): a request claims only
 * the granules it touches, and only if one of them is not restored,
 * so a client waits for another only where both touch a granule that
 * is not restored yet.  "Filled" granules are trusted from any
 * connection (what one wrote, another reads, and its flush makes
 * durable): restore-from= needs a layer below that promises
 * multi-conn, which is checked per connection.
 *
 * Block status of a granule not ready is data: what the layer below
 * says of it describes the old disk (restore_extents).
 *
 * Costs.  A request on restored granules costs a test of their bits
 * (lock-free) and nothing else; the first write to a granule not
 * restored costs a flush of the layer below, and a read of the source
 * if it covers the granule in part; a flush or FUA write costs a sync
 * of the restored bits if any was set since the last.
 *
 * When every granule is restored, the fill flushes, records the
 * restore complete in the file, and this module steps aside: after a
 * grace period (no request still uses the bits) they are unmapped and
 * the source let go.  A restore makes no bitmap record what it writes:
 * the source's data is what clients read already (the bitmaps that
 * recorded when it began were made dirty all over, lib/txn-restore.c).
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <pthread.h>
#include <sys/mman.h>

#include <nbdkit-filter.h>

#include "inflight.h"
#include "restore.h"
#include "restore-impl.h"
#include "restore-record.h"
#include "store.h"
#include "testpause.h"
#include "tracker.h"
#include "util.h"

struct restore rs;

struct claim_range {
  uint64_t first, last;
};

/* Protects the claims and the writers of rs.restored and rs.filled
 * (bits_set_range needs its writers serialized); claimed wakes the
 * requests waiting for a claim.  No I/O under it but the page faults
 * of setting a restored bit.
 */
static pthread_mutex_t claims_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t claimed = PTHREAD_COND_INITIALIZER;
static struct claim_range *claims;
static size_t nr_claims, cap_claims;

/* One sync of the restored bits at a time; synced is the generation
 * of marks (rs.marked) that the last one covered.
 */
static pthread_mutex_t sync_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t synced;

/*----------------------------------------------------------------------
 * Start and stop.
 */

int
restore_init (void)
{
  struct bmerr err;
  size_t len;
  void *p;

  if (store_restore_map (&rs.source, &rs.size, &rs.gbits, &rs.restored,
                         &err) == -1) {
    nbdkit_error ("dirtybitmap: %s", err.msg);
    return -1;
  }
  if (rs.source == NULL)
    return 0;
  rs.nr = rs.restored.nr_bits;
  /* Zero pages that cost nothing until a granule in them is filled. */
  len = MAX (bits_nr_words (rs.nr), 1) * sizeof (uint64_t);
  p = mmap (NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
            -1, 0);
  rs.src = source_new (rs.source);
  if (p == MAP_FAILED || rs.src == NULL) {
    nbdkit_error ("dirtybitmap: restore-from=%s: %m", rs.source);
    if (p != MAP_FAILED)
      munmap (p, len);
    source_free (rs.src);
    store_restore_unmap (&rs.restored);
    free (rs.source);
    memset (&rs, 0, sizeof rs);
    return -1;
  }
  rs.filled = (struct bits) { .words = p, .nr_bits = rs.nr, .map_base = p,
                              .map_length = len };
  __atomic_store_n (&rs.active, true, __ATOMIC_RELEASE);
  return 0;
}

void
restore_start (bool (*give_up) (void))
{
  rs.give_up = give_up;
}

/* The bits and the source go (no request uses them any more). */
static void
release (void)
{
  pthread_mutex_lock (&claims_lock);
  store_restore_unmap (&rs.restored);
  if (rs.filled.map_base)
    munmap (rs.filled.map_base, rs.filled.map_length);
  memset (&rs.filled, 0, sizeof rs.filled);
  pthread_mutex_unlock (&claims_lock);
  source_free (rs.src);
  rs.src = NULL;
}

void
restore_stop (void)
{
  release ();
  free (rs.source);
  rs.source = NULL;
  free (claims);
  claims = NULL;
}

bool
restore_active (void)
{
  return __atomic_load_n (&rs.active, __ATOMIC_ACQUIRE);
}

int
restore_check_connection (nbdkit_next *next)
{
  int64_t size = next->get_size (next);
  int mc = next->can_multi_conn (next), fl = next->can_flush (next);

  if (size == -1 || mc == -1 || fl == -1)
    return -1;
  if ((uint64_t) size != rs.size) {
    nbdkit_error ("dirtybitmap: the disk is %" PRIi64 " bytes, but it is "
                  "being restored from %s, of %" PRIu64 " bytes: "
                  "connection refused", size, rs.source, rs.size);
    return -1;
  }
  if (mc != 1 || fl != 1) {
    nbdkit_error ("dirtybitmap: restore-from=%s: the layer below %s: a "
                  "restore needs one that can flush and promises multi-conn "
                  "(a write seen and flushed from every connection): "
                  "connection refused", rs.source,
                  fl != 1 ? "cannot flush" : "does not promise multi-conn");
    return -1;
  }
  return 0;
}

/*----------------------------------------------------------------------
 * Claims and granules.
 */

static bool
overlaps_locked (uint64_t first, uint64_t last)
{
  size_t i;

  for (i = 0; i < nr_claims; ++i)
    if (claims[i].first <= last && first <= claims[i].last)
      return true;
  return false;
}

void
claim (uint64_t first, uint64_t last)
{
  pthread_mutex_lock (&claims_lock);
  while (overlaps_locked (first, last) || nr_claims == cap_claims) {
    if (nr_claims == cap_claims) {
      if (array_room (&claims, &cap_claims, nr_claims, sizeof *claims,
                      16) == 0)
        continue;
    }
    else {
      /* (A test sees this wait.) */
      pthread_mutex_unlock (&claims_lock);
      test_pause_point ("restore-claim-waits");
      pthread_mutex_lock (&claims_lock);
      if (!overlaps_locked (first, last))
        continue;
    }
    /* Out of memory, a claim goes away in the end. */
    pthread_cond_wait (&claimed, &claims_lock);
  }
  claims[nr_claims++] = (struct claim_range) { first, last };
  pthread_mutex_unlock (&claims_lock);
}

void
unclaim (uint64_t first, uint64_t last)
{
  size_t i;

  pthread_mutex_lock (&claims_lock);
  for (i = 0; i < nr_claims; ++i)
    if (claims[i].first == first && claims[i].last == last) {
      claims[i] = claims[--nr_claims];
      break;
    }
  pthread_cond_broadcast (&claimed);
  pthread_mutex_unlock (&claims_lock);
}

static bool
all_restored (uint64_t first, uint64_t last)
{
  return bits_all_set (&rs.restored, first, last);
}

static bool
all_ready (uint64_t first, uint64_t last)
{
  uint64_t i;

  if (all_restored (first, last))
    return true;
  for (i = first; i <= last; ++i)
    if (!ready (i))
      return false;
  return true;
}

/* Granules [a, b] read from the source into buf, for a client. */
static int
fill_read (uint64_t a, uint64_t b, char *buf, int *err)
{
  const uint64_t offset = granule_start (a), len = granule_end (b) - offset;
  struct bmerr e;

  /* A client's request gives up when nbdkit shuts down or the client
   * goes (and then there is no one to tell).
   */
  if (source_pread (rs.src, buf, len, offset, rs.give_up, &e) == -1) {
    if (e.errnum != ESHUTDOWN)
      nbdkit_error ("dirtybitmap: %s", e.msg);
    *err = e.errnum == ESHUTDOWN ? ESHUTDOWN : EIO;
    return -1;
  }
  return 0;
}

int
fill_write (nbdkit_next *next, uint64_t a, uint64_t b, const char *buf,
            bool background, int *err)
{
  const uint64_t offset = granule_start (a), len = granule_end (b) - offset;

  /* The disk changes from here on: the file records that it is open
   * before (tracker.h).
   */
  if (tracker_first_write (err) == -1 ||
      (buf ? next->pwrite (next, buf, len, offset, 0, err) :
       next->zero (next, len, offset, NBDKIT_FLAG_MAY_TRIM, err)) == -1)
    return -1;
  if (background)
    test_pause_point ("restore-fill-written");
  pthread_mutex_lock (&claims_lock);
  bits_set_range (&rs.filled, a, b);
  pthread_mutex_unlock (&claims_lock);
  return 0;
}

/* Granules [a, b], claimed and none ready: read from the source into
 * buf (room for them), written below, filled.
 */
static int
fill_granules (nbdkit_next *next, uint64_t a, uint64_t b, char *buf,
               int *err)
{
  if (fill_read (a, b, buf, err) == -1)
    return -1;
  return fill_write (next, a, b, buf, false, err);
}

void
mark_restored (uint64_t a, uint64_t b)
{
  pthread_mutex_lock (&claims_lock);
  bits_set_range (&rs.restored, a, b);
  pthread_mutex_unlock (&claims_lock);
  /* After the bits: a sync that reads this generation covers them. */
  __atomic_add_fetch (&rs.marked, 1, __ATOMIC_SEQ_CST);
}

int
restore_sync (int *err)
{
  const uint64_t target = __atomic_load_n (&rs.marked, __ATOMIC_SEQ_CST);
  uint64_t upto;
  int r = 0;

  pthread_mutex_lock (&sync_lock);
  if (synced < target) {
    upto = __atomic_load_n (&rs.marked, __ATOMIC_SEQ_CST);
    r = msync (rs.restored.map_base, rs.restored.map_length, MS_SYNC);
    if (r == 0)
      synced = upto;
  }
  pthread_mutex_unlock (&sync_lock);
  if (r == -1) {
    *err = errno;
    nbdkit_error ("dirtybitmap: restore-from=%s: syncing the restored "
                  "granules in the bitmap file: %m", rs.source);
  }
  return r;
}

/* The clients' last request, for the fill to give way to them. */
static void
touch (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  __atomic_store_n (&rs.last_request_ns,
                    (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec,
                    __ATOMIC_RELAXED);
}

/*----------------------------------------------------------------------
 * Requests.
 */

/* The granules that [offset, offset+count) touches. */
static void
granules_of (uint32_t count, uint64_t offset, uint64_t *first,
             uint64_t *last)
{
  *first = offset >> rs.gbits;
  *last = (offset + count - 1) >> rs.gbits;
}

/* A read with [first, last] claimed: runs of ready granules from
 * below, the others from the source (and written below).
 */
static int
read_claimed (nbdkit_next *next, char *buf, uint32_t count, uint64_t offset,
              uint32_t flags, int *err)
{
  const uint64_t end = offset + count;
  uint64_t pos = offset;
  char *data;
  int r;

  while (pos < end) {
    const uint64_t i = pos >> rs.gbits;
    const bool is_ready = ready (i);
    uint64_t j = i, run_end;

    while (granule_end (j) < end && ready (j + 1) == is_ready)
      j++;
    run_end = MIN (granule_end (j), end);
    if (is_ready) {
      if (next->pread (next, buf + (pos - offset), run_end - pos, pos,
                       flags, err) == -1)
        return -1;
    }
    else {
      data = malloc (granule_end (j) - granule_start (i));
      if (data == NULL) {
        *err = errno;
        nbdkit_error ("dirtybitmap: restore: %m");
        return -1;
      }
      r = fill_granules (next, i, j, data, err);
      if (r == 0)
        memcpy (buf + (pos - offset), data + (pos - granule_start (i)),
                run_end - pos);
      free (data);
      if (r == -1)
        return -1;
    }
    pos = run_end;
  }
  return 0;
}

int
restore_read (nbdkit_next *next, void *buf, uint32_t count, uint64_t offset,
              uint32_t flags, int *err)
{
  uint64_t first, last;
  int r;

  touch ();
  if (count == 0)
    return next->pread (next, buf, count, offset, flags, err);
  granules_of (count, offset, &first, &last);
  if (all_ready (first, last))
    return next->pread (next, buf, count, offset, flags, err);
  claim (first, last);
  r = read_claimed (next, buf, count, offset, flags, err);
  unclaim (first, last);
  return r;
}

/* Whether [offset, offset+count) covers granule i in part only. */
static bool
in_part (uint32_t count, uint64_t offset, uint64_t i)
{
  return offset > granule_start (i) || offset + count < granule_end (i);
}

/* Fill granule i (claimed, not ready) from the source. */
static int
fill_one (nbdkit_next *next, uint64_t i, int *err)
{
  char *data = malloc (granule_end (i) - granule_start (i));
  int r;

  if (data == NULL) {
    *err = errno;
    nbdkit_error ("dirtybitmap: restore: %m");
    return -1;
  }
  r = fill_granules (next, i, i, data, err);
  free (data);
  return r;
}

/* A change with [first, last] claimed: the granules it covers in part
 * hold the source's data first; then it goes down, and once the layer
 * below is flushed every granule it touches is restored.
 */
static int
change_claimed (nbdkit_next *next, uint32_t count, uint64_t offset,
                uint32_t flags, int (*down) (void *opaque, int *err),
                void *opaque, uint64_t first, uint64_t last, int *err)
{
  const bool fill_first = !ready (first) && in_part (count, offset, first);
  const bool fill_last = last != first && !ready (last) &&
    in_part (count, offset, last);

  if ((fill_first || fill_last) && (flags & NBDKIT_FLAG_FAST_ZERO)) {
    *err = ENOTSUP;
    return -1;
  }
  if ((fill_first && fill_one (next, first, err) == -1) ||
      (fill_last && fill_one (next, last, err) == -1))
    return -1;
  test_pause_point ("restore-write-filled");
  if (down (opaque, err) == -1)
    return -1;
  test_pause_point ("restore-write-down");
  if (next->flush (next, 0, err) == -1)
    return -1;
  test_pause_point ("restore-write-flushed");
  mark_restored (first, last);
  return 0;
}

int
restore_change (nbdkit_next *next, uint32_t count, uint64_t offset,
                uint32_t flags, int (*down) (void *opaque, int *err),
                void *opaque, int *err)
{
  uint64_t first, last;
  int r;

  touch ();
  if (count == 0)
    return down (opaque, err);
  granules_of (count, offset, &first, &last);
  if (all_restored (first, last))
    r = down (opaque, err);
  else {
    claim (first, last);
    r = change_claimed (next, count, offset, flags, down, opaque,
                        first, last, err);
    unclaim (first, last);
  }
  /* A FUA write is durable when it replies: so is its granules' bit,
   * or a power loss would have them filled over it.
   */
  if (r == 0 && (flags & NBDKIT_FLAG_FUA))
    r = restore_sync (err);
  return r;
}

bool
restore_may_trim (uint32_t count, uint64_t offset)
{
  uint64_t first, last;

  touch ();
  if (count == 0)
    return true;
  granules_of (count, offset, &first, &last);
  return all_restored (first, last);
}

/*----------------------------------------------------------------------
 * Block status.
 */

/* Add [start, end) of extent type t, as data where a granule was not
 * ready (in the snapshot rdy of granules from first on) but for the
 * bits of keep.
 */
static int
add_converted (struct nbdkit_extents *extents, uint64_t start, uint64_t end,
               uint32_t t, uint32_t keep, const struct bits *rdy,
               uint64_t first)
{
  while (start < end) {
    const uint64_t i = start >> rs.gbits;
    const bool is_ready = bits_test (rdy, i - first);
    uint64_t j = i;

    while (granule_end (j) < end && bits_test (rdy, j + 1 - first) ==
           is_ready)
      j++;
    if (nbdkit_add_extent (extents, start, MIN (granule_end (j), end) - start,
                           is_ready ? t : (t & keep)) == -1)
      return -1;
    start = MIN (granule_end (j), end);
  }
  return 0;
}

/* Which granules of [first, last] are ready, now: before the answer
 * is asked for, so that what it says of a granule filled meanwhile is
 * not taken for the source's.
 */
static int
snapshot (uint64_t first, uint64_t last, struct bits *rdy)
{
  uint64_t i;

  rdy->nr_bits = last - first + 1;
  rdy->words = calloc (bits_nr_words (rdy->nr_bits), sizeof (uint64_t));
  if (rdy->words == NULL)
    return -1;
  for (i = first; i <= last; ++i)
    if (ready (i))
      rdy->words[(i - first) / 64] |= UINT64_C (1) << ((i - first) & 63);
  return 0;
}

int
restore_extents (nbdkit_next *next, uint32_t count, uint64_t offset,
                 uint32_t flags, struct nbdkit_extents *extents,
                 uint32_t keep,
                 int (*answer) (void *opaque, struct nbdkit_extents *ex,
                                int *err),
                 void *opaque, int *err)
{
  const uint64_t end = MIN (offset + count, rs.size);
  struct nbdkit_extents *ex = NULL;
  struct bits rdy = { .words = NULL };
  uint64_t first, last;
  size_t i, n;
  int r = -1;

  touch ();
  granules_of (end - offset, offset, &first, &last);
  /* (Only up to the request's end: past it, the answer would speak
   * of granules that the snapshot does not hold.)
   */
  if (snapshot (first, last, &rdy) == -1 ||
      (ex = nbdkit_extents_new (offset, end)) == NULL) {
    *err = errno;
    goto out;
  }
  if (answer (opaque, ex, err) == -1)
    goto out;
  n = nbdkit_extents_count (ex);
  /* (At least one extent, or nbdkit aborts: data, if none came.) */
  if (n == 0 && nbdkit_add_extent (extents, offset, end - offset, 0) == -1) {
    *err = errno;
    goto out;
  }
  for (i = 0; i < n; ++i) {
    struct nbdkit_extent e = nbdkit_get_extent (ex, i);
    if (add_converted (extents, MAX (e.offset, offset),
                       MIN (e.offset + e.length, end), e.type, keep, &rdy,
                       first) == -1) {
      *err = errno;
      goto out;
    }
    if (flags & NBDKIT_FLAG_REQ_ONE)
      break;
  }
  r = 0;
 out:
  if (ex)
    nbdkit_extents_free (ex);
  free (rdy.words);
  return r;
}

/*----------------------------------------------------------------------
 * The end.
 */

void
restore_complete (nbdkit_next *next)
{
  struct bmerr err;
  int e;

  /* Every granule's data is durable (each was flushed before it was
   * marked): the record can say so.
   */
  test_pause_point ("restore-complete");
  if (next->flush (next, 0, &e) == -1) {
    nbdkit_error ("dirtybitmap: restore-from=%s: flushing the disk: %s: "
                  "the restore is not recorded complete (the next start "
                  "does it)", rs.source, strerror (e));
    return;
  }
  if (store_restore_done (&err) == -1) {
    nbdkit_error ("dirtybitmap: restore-from=%s: %s: the restore is not "
                  "recorded complete (the next start does it)", rs.source,
                  err.msg);
    return;
  }
  __atomic_store_n (&rs.active, false, __ATOMIC_RELEASE);
  /* Requests that saw it running may still read the bits. */
  inflight_grace ();
  release ();
  fprintf (stderr, "nbdkit: dirtybitmap: the restore from %s is complete\n",
           rs.source);
  nbdkit_debug ("dirtybitmap: the restore from %s is complete", rs.source);
}

/*----------------------------------------------------------------------
 * Query.
 */

int
restore_query (struct restore_info *info, struct bmerr *err)
{
  enum bmf_restore state;
  uint64_t size;

  memset (info, 0, sizeof *info);
  pthread_mutex_lock (&claims_lock);
  if (restore_active () && rs.restored.words) {
    info->source = strdup (rs.source);
    info->size = rs.size;
    info->done_bytes = bmf_restored_bytes (&rs.restored, rs.gbits, rs.size);
    pthread_mutex_unlock (&claims_lock);
    goto out;
  }
  pthread_mutex_unlock (&claims_lock);
  if (store_restore_record (&state, &info->source, &size) == -1)
    goto nomem;
  if (state == BMF_RESTORE_NONE)
    return 0;
  /* Complete, in this run or before.  (Running and not taken over
   * cannot be: a start that finds a restore running takes it, or is
   * refused; then nothing is known restored.)
   */
  info->complete = state == BMF_RESTORE_DONE;
  info->size = size;
  info->done_bytes = info->complete ? size : 0;
 out:
  if (info->source)
    return 0;
 nomem:
  bmerr_set (err, ENOMEM, "out of memory");
  return -1;
}

void
restore_info_free (struct restore_info *info)
{
  free (info->source);
  memset (info, 0, sizeof *info);
}
