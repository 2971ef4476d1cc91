/* SPDX-License-Identifier: BSD-3-Clause */
/* view.c: a backup view (see view.h): copy-before-write, and the
 * frozen disk read back.
 *
 * The view works in granules of 2^gbits bytes (64K, or the frozen
 * bitmap's granularity when that is smaller, so that only what the
 * bitmap says changed is ever kept).  Per granule, four bit arrays:
 *
 *   preserved  its data at the cut is in the scratch store;
 *   lost       it was overwritten but could not be kept (the store
 *              failed): reads of it fail, the view is broken;
 *   released   the client said it is done with it (a trim);
 *   done       nothing more to do before a write to it: released,
 *              preserved, or lost.
 *
 * A granule is *settled* when it is done or the frozen bitmap of an
 * incremental view says it did not change (the view does not hold
 * it).  The frozen bits are tested where they are, never copied into
 * `done`: a begin inside a machine's cut then costs no work that grows
 * with the disk, and the arrays are anonymous mappings, whose pages
 * cost nothing until a granule in them is first marked.
 *
 * A write to the disk tests its granules lock-free: once a granule is
 * settled, that is all it costs.  Otherwise, per granule not settled:
 * wait until nobody reads or preserves it, read its old data from the
 * layer below, write it to the store, mark it, and only then let the
 * write go down.
 *
 * A read of the view registers its granules as busy, so that no write
 * can overwrite one of them while it is being read from below; a
 * preserved granule is read from the store, anything else it needs
 * from below (unchanged since the cut, as no write to it has gone
 * down).  A read waits for a granule being preserved.  So a read never
 * sees a half-overwritten granule.  Reads of what the view does not
 * hold (clean in an incremental view, released, lost) fail with EIO
 * rather than return data that may be newer than the cut.
 *
 * A trim marks its granules released under the lock, then gives their
 * space in the store back outside it.
 *
 * All of it is under `granules_lock`, except the lock-free test and the
 * I/O.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>

#include "format.h"
#include "report.h"
#include "util.h"
#include "view.h"

#define VIEW_MAX_GBITS 16               /* 64K */

struct busy {
  uint64_t first, last;                 /* granules */
  bool preserving;                      /* else reading, or a trim
                                         * giving the store's space
                                         * back */
};

struct view {
  char *name;
  uint64_t size;                        /* the disk at the cut */
  unsigned gbits;
  uint64_t nr;                          /* granules */
  bool full;
  struct bits frozen;                   /* incremental: at frozen_gbits */
  unsigned frozen_gbits;
  struct bits done, preserved, released, lost;
  struct scratch *scratch;

  /* Protects busy, done, preserved, released, lost, refs and ended;
   * cond wakes the readers waiting for a busy range.  A leaf.
   */
  pthread_mutex_t granules_lock;
  pthread_cond_t cond;
  struct busy *busy;
  size_t nr_busy, cap_busy;
  unsigned refs;
  bool ended;
  bool failed;                          /* atomic */
};

/*----------------------------------------------------------------------
 * Lifetime.
 */

/* The view's own arrays: zero pages of an anonymous mapping, which
 * cost neither clearing nor a fault until a bit in them is set (a
 * calloc of this size may come from the heap and be cleared there).
 */
static int
alloc_bits (struct bits *b, uint64_t nr)
{
  size_t len = MAX (bits_nr_words (nr), 1) * sizeof (uint64_t);
  void *p = mmap (NULL, len, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

  if (p == MAP_FAILED)
    return -1;
  b->nr_bits = nr;
  b->words = p;
  b->map_base = p;
  b->map_length = len;
  return 0;
}

static void
free_bits (struct bits *b)
{
  if (b->map_base)
    munmap (b->map_base, b->map_length);
  memset (b, 0, sizeof *b);
}

static void
view_free (struct view *v)
{
  free (v->frozen.words);
  free_bits (&v->done);
  free_bits (&v->preserved);
  free_bits (&v->released);
  free_bits (&v->lost);
  free (v->busy);
  scratch_free (v->scratch);
  pthread_mutex_destroy (&v->granules_lock);
  pthread_cond_destroy (&v->cond);
  free (v->name);
  free (v);
}

struct view *
view_create (const char *name, uint64_t size, struct bits *frozen,
             unsigned frozen_gbits, struct scratch *scratch,
             struct bmerr *err)
{
  struct view *v = calloc (1, sizeof *v);

  if (v == NULL) {
    bmerr_set (err, errno, "%s", strerror (errno));
    scratch_free (scratch);
    if (frozen)
      free (frozen->words);
    return NULL;
  }
  pthread_mutex_init (&v->granules_lock, NULL);
  pthread_cond_init (&v->cond, NULL);
  v->refs = 1;
  v->scratch = scratch;
  v->size = size;
  v->full = frozen == NULL;
  v->gbits = v->full ? VIEW_MAX_GBITS : MIN (frozen_gbits, VIEW_MAX_GBITS);
  v->nr = bmf_nr_bits (size, v->gbits);
  if (frozen) {
    v->frozen = *frozen;
    v->frozen_gbits = frozen_gbits;
    memset (frozen, 0, sizeof *frozen);
  }
  if ((v->name = strdup (name)) == NULL ||
      alloc_bits (&v->done, v->nr) == -1 ||
      alloc_bits (&v->preserved, v->nr) == -1 ||
      alloc_bits (&v->released, v->nr) == -1 ||
      alloc_bits (&v->lost, v->nr) == -1) {
    bmerr_set (err, errno, "%s", strerror (errno));
    view_free (v);
    return NULL;
  }
  return v;
}

void
view_ref (struct view *v)
{
  pthread_mutex_lock (&v->granules_lock);
  v->refs++;
  pthread_mutex_unlock (&v->granules_lock);
}

void
view_unref (struct view *v)
{
  bool last;

  pthread_mutex_lock (&v->granules_lock);
  last = --v->refs == 0;
  pthread_mutex_unlock (&v->granules_lock);
  if (last)
    view_free (v);
}

void
view_end (struct view *v)
{
  struct scratch *s;

  pthread_mutex_lock (&v->granules_lock);
  v->ended = true;
  /* Reads and preservations under way finish first. */
  while (v->nr_busy > 0)
    pthread_cond_wait (&v->cond, &v->granules_lock);
  s = v->scratch;
  v->scratch = NULL;
  pthread_mutex_unlock (&v->granules_lock);
  scratch_free (s);
}

void
view_fail (struct view *v, const char *why)
{
  if (!__atomic_exchange_n (&v->failed, true, __ATOMIC_ACQ_REL))
    filter_error ("backup view %s: %s: the backup has failed", v->name, why);
}

const char *
view_name (const struct view *v)
{
  return v->name;
}

uint64_t
view_size (const struct view *v)
{
  return v->size;
}

static uint64_t
granule_bytes (const struct view *v, uint64_t i)
{
  uint64_t start = i << v->gbits;
  return MIN (UINT64_C (1) << v->gbits, v->size - start);
}

/* Whether the frozen bitmap of an incremental view says granule i did
 * not change.  The frozen bits never change once the view exists, so
 * this needs no lock.  (A granule past their end counts as changed.)
 */
static bool
unchanged (const struct view *v, uint64_t i)
{
  uint64_t f;

  if (v->full)
    return false;
  f = i >> (v->frozen_gbits - v->gbits);
  return f < v->frozen.nr_bits && !bits_test (&v->frozen, f);
}

/* Whether a write to granule i has nothing to do first (see the top:
 * settled).  Lock-free; under the lock for a decision that holds.
 */
static bool
settled (const struct view *v, uint64_t i)
{
  return bits_test (&v->done, i) || unchanged (v, i);
}

/* Bytes of the granules set in b. */
static uint64_t
bytes_of (const struct view *v, const struct bits *b)
{
  uint64_t n = bits_count (b), bytes = n << v->gbits;

  /* The last granule may be short. */
  if (v->nr && bits_test (b, v->nr - 1))
    bytes -= (UINT64_C (1) << v->gbits) - granule_bytes (v, v->nr - 1);
  return bytes;
}

void
view_info (struct view *v, struct view_info *info)
{
  pthread_mutex_lock (&v->granules_lock);
  info->size = v->size;
  info->granularity = UINT64_C (1) << v->gbits;
  info->full = v->full;
  info->failed = __atomic_load_n (&v->failed, __ATOMIC_ACQUIRE);
  info->preserved_bytes = bytes_of (v, &v->preserved);
  info->lost_bytes = bytes_of (v, &v->lost);
  info->scratch_bytes = v->scratch ? scratch_allocated (v->scratch) : 0;
  pthread_mutex_unlock (&v->granules_lock);
}

/*----------------------------------------------------------------------
 * Busy granules (lock held).
 */

/* Whether [first, last] overlaps a busy entry (of preservers only, if
 * preservers_only).
 */
static bool
busy_locked (const struct view *v, uint64_t first, uint64_t last,
             bool preservers_only)
{
  size_t i;

  for (i = 0; i < v->nr_busy; ++i)
    if (v->busy[i].first <= last && first <= v->busy[i].last &&
        (!preservers_only || v->busy[i].preserving))
      return true;
  return false;
}

static int
add_busy_locked (struct view *v, uint64_t first, uint64_t last,
                 bool preserving)
{
  if (array_room (&v->busy, &v->cap_busy, v->nr_busy, sizeof *v->busy,
                  16) == -1)
    return -1;
  v->busy[v->nr_busy++] = (struct busy) { first, last, preserving };
  return 0;
}

static void
remove_busy_locked (struct view *v, uint64_t first, uint64_t last,
                    bool preserving)
{
  size_t i;

  for (i = 0; i < v->nr_busy; ++i)
    if (v->busy[i].first == first && v->busy[i].last == last &&
        v->busy[i].preserving == preserving) {
      v->busy[i] = v->busy[--v->nr_busy];
      break;
    }
  pthread_cond_broadcast (&v->cond);
}

/*----------------------------------------------------------------------
 * Copy-before-write.
 */

/* Read from the layer below, within the disk as that connection sees
 * it: a disk that shrank under the view no longer holds what lay past
 * its new end (and nbdkit asserts on a read past the size it knows).
 */
static int
pread_below (nbdkit_next *next, void *buf, uint64_t len, uint64_t offset,
             int *err)
{
  int64_t size = next->get_size (next);

  if (size == -1 || offset + len > (uint64_t) size) {
    *err = size == -1 ? EIO : ENXIO;
    return -1;
  }
  return next->pread (next, buf, len, offset, 0, err);
}

static void
broken (struct view *v, uint64_t i, const char *why, int e)
{
  if (!__atomic_exchange_n (&v->failed, true, __ATOMIC_ACQ_REL))
    filter_error ("backup view %s: the data of granule %"
                  PRIu64 " (offset %" PRIu64 ") could not be kept: %s%s%s: "
                  "the view is broken and the backup has failed (the disk "
                  "itself is not affected)", v->name, i, i << v->gbits,
                  why, e ? ": " : "", e ? strerror (e) : "");
}

/* The buffer of a granule's old data: one per thread, kept from one
 * write to the next, so that the first write of each granule neither
 * allocates nor faults in 64K (freed, that much goes back to the
 * kernel: a heap's top is trimmed), which cost a copy-before-write
 * more than the copy.  NULL if out of memory.
 */
static pthread_once_t buffer_once = PTHREAD_ONCE_INIT;
static pthread_key_t buffer_key;
static bool have_buffer_key;

static void
make_buffer_key (void)
{
  have_buffer_key = pthread_key_create (&buffer_key, free) == 0;
}

static char *
granule_buffer (void)
{
  char *buf;

  pthread_once (&buffer_once, make_buffer_key);
  if (!have_buffer_key)
    return NULL;
  buf = pthread_getspecific (buffer_key);
  if (buf == NULL &&
      (buf = malloc (UINT64_C (1) << VIEW_MAX_GBITS)) != NULL &&
      pthread_setspecific (buffer_key, buf) != 0) {
    free (buf);
    buf = NULL;
  }
  return buf;
}

/* Keep the old data of granule i, unless it is done by now. */
static void
preserve (struct view *v, nbdkit_next *next, uint64_t i, char *buf)
{
  const uint64_t offset = i << v->gbits, len = granule_bytes (v, i);
  int e = 0, r;

  pthread_mutex_lock (&v->granules_lock);
  for (;;) {
    if (settled (v, i)) {
      pthread_mutex_unlock (&v->granules_lock);
      return;
    }
    if (!busy_locked (v, i, i, false))
      break;
    pthread_cond_wait (&v->cond, &v->granules_lock);
  }
  if (v->scratch == NULL || add_busy_locked (v, i, i, true) == -1) {
    /* Ended, or out of memory: the data cannot be kept. */
    bits_set_range (&v->lost, i, i);
    bits_set_range (&v->done, i, i);
    pthread_mutex_unlock (&v->granules_lock);
    broken (v, i, "out of memory", ENOMEM);
    return;
  }
  pthread_mutex_unlock (&v->granules_lock);

  r = pread_below (next, buf, len, offset, &e);
  if (r == -1 && e == 0)
    e = EIO;
  if (r == 0 && scratch_write (v->scratch, buf, len, offset) == -1)
    r = -1, e = errno;

  pthread_mutex_lock (&v->granules_lock);
  bits_set_range (r == 0 ? &v->preserved : &v->lost, i, i);
  bits_set_range (&v->done, i, i);
  remove_busy_locked (v, i, i, true);
  pthread_mutex_unlock (&v->granules_lock);
  if (r == -1)
    broken (v, i, e == ENXIO ? "the disk shrank past it"
            : "the scratch store or the layer below failed",
            e == ENXIO ? 0 : e);
}

void
view_before_write (struct view *v, nbdkit_next *next, uint32_t count,
                   uint64_t offset)
{
  uint64_t first, last, i;
  char *buf = NULL;

  if (count == 0 || offset >= v->size)
    return;
  first = offset >> v->gbits;
  last = MIN ((offset + count - 1) >> v->gbits, v->nr - 1);
  if (bits_all_set (&v->done, first, last))
    return;
  for (i = first; i <= last; ++i) {
    if (settled (v, i))
      continue;
    if (buf == NULL && (buf = granule_buffer ()) == NULL) {
      pthread_mutex_lock (&v->granules_lock);
      for (; i <= last; ++i)
        if (!settled (v, i) && !busy_locked (v, i, i, true)) {
          bits_set_range (&v->lost, i, i);
          bits_set_range (&v->done, i, i);
        }
      pthread_mutex_unlock (&v->granules_lock);
      broken (v, first, "out of memory", ENOMEM);
      return;
    }
    preserve (v, next, i, buf);
  }
}

/*----------------------------------------------------------------------
 * The view's side.
 */

/* Whether the view holds granule i (lock held, or after the granule
 * was registered busy).
 */
static bool
needed (const struct view *v, uint64_t i)
{
  uint64_t f;

  if (bits_test (&v->released, i))
    return false;
  if (v->full)
    return true;
  f = i >> (v->frozen_gbits - v->gbits);
  return f < v->frozen.nr_bits && bits_test (&v->frozen, f);
}

static int
refuse (struct view *v, int *err, const char *fs, ...)
  __attribute__ ((format (printf, 3, 4)));

static int
refuse (struct view *v, int *err, const char *fs, ...)
{
  va_list args;
  char *msg;

  va_start (args, fs);
  if (vasprintf (&msg, fs, args) == -1)
    msg = NULL;
  va_end (args);
  filter_error ("backup view %s: %s", v->name,
                msg ? msg : "cannot be read");
  free (msg);
  *err = EIO;
  return -1;
}

int
view_read (struct view *v, nbdkit_next *next, void *buf, uint32_t count,
           uint64_t offset, int *err)
{
  uint64_t first, last, i, pos, end = offset + count;
  int r = 0;

  if (count == 0)
    return 0;
  first = offset >> v->gbits;
  last = (end - 1) >> v->gbits;
  pthread_mutex_lock (&v->granules_lock);
  while (!v->ended && busy_locked (v, first, last, true))
    pthread_cond_wait (&v->cond, &v->granules_lock);
  if (v->ended) {
    pthread_mutex_unlock (&v->granules_lock);
    return refuse (v, err, "the backup has ended");
  }
  if (add_busy_locked (v, first, last, false) == -1) {
    pthread_mutex_unlock (&v->granules_lock);
    *err = ENOMEM;
    return -1;
  }
  /* What each granule is, now that no write can change it. */
  for (i = first; i <= last; ++i)
    if (bits_test (&v->lost, i) || !needed (v, i))
      break;
  pthread_mutex_unlock (&v->granules_lock);
  if (i <= last) {
    const bool lost = bits_test (&v->lost, i);
    r = refuse (v, err, "offset %" PRIu64 " %s", MAX (offset, i << v->gbits),
                lost ? "was overwritten before its data could be kept "
                "(the view is broken)" :
                bits_test (&v->released, i) ? "was released (trimmed) by "
                "the client" : "did not change since the bitmap started: "
                "this incremental view holds only the changed ranges that "
                "block status reports as data");
    goto out;
  }

  /* Runs of granules from one place. */
  for (pos = offset; r == 0 && pos < end; ) {
    const bool kept = bits_test (&v->preserved, pos >> v->gbits);
    uint64_t run_end = pos;

    while (run_end < end &&
           bits_test (&v->preserved, run_end >> v->gbits) == kept)
      run_end = MIN (((run_end >> v->gbits) + 1) << v->gbits, end);
    if (kept) {
      if (scratch_read (v->scratch, (char *) buf + (pos - offset),
                        run_end - pos, pos) == -1) {
        *err = errno;
        r = refuse (v, err, "reading the scratch store: %m");
      }
    }
    else if (pread_below (next, (char *) buf + (pos - offset),
                          run_end - pos, pos, err) == -1) {
      if (*err == ENXIO) {
        __atomic_store_n (&v->failed, true, __ATOMIC_RELEASE);
        r = refuse (v, err, "offset %" PRIu64 " is past the end of the "
                    "disk, which shrank under the view: what lay there at "
                    "the cut is gone (the view is broken)", pos);
      }
      else
        r = -1;
    }
    pos = run_end;
  }

 out:
  pthread_mutex_lock (&v->granules_lock);
  remove_busy_locked (v, first, last, false);
  pthread_mutex_unlock (&v->granules_lock);
  return r;
}

int
view_release (struct view *v, uint32_t count, uint64_t offset, int *err)
{
  uint64_t first, last, i, kept_first = UINT64_MAX, kept_last = 0;
  struct scratch *s;

  /* Whole granules only. */
  first = DIV_ROUND_UP (offset, UINT64_C (1) << v->gbits);
  last = (offset + count) >> v->gbits;  /* one past */
  if ((offset + count) >= v->size)
    last = v->nr;
  if (first >= last)
    return 0;
  last--;
  pthread_mutex_lock (&v->granules_lock);
  while (!v->ended && busy_locked (v, first, last, false))
    pthread_cond_wait (&v->cond, &v->granules_lock);
  if (v->ended) {
    pthread_mutex_unlock (&v->granules_lock);
    return 0;
  }
  for (i = first; i <= last; ++i)
    if (!bits_test (&v->released, i)) {
      bits_set_range (&v->released, i, i);
      bits_set_range (&v->done, i, i);
      if (bits_test (&v->preserved, i)) {
        kept_first = MIN (kept_first, i);
        kept_last = i;
      }
    }
  if (kept_first == UINT64_MAX) {
    pthread_mutex_unlock (&v->granules_lock);
    return 0;
  }
  /* The store's space goes back in one punch, outside the lock: a
   * punch may wait for the file system (a discard, on one mounted so),
   * and no write preserving another granule, no read, may wait for it.
   * Nothing else touches this space now (the granules are done: no
   * write preserves them; released: no read reads them); registered
   * busy, the range keeps view_end from freeing the store under the
   * punch.  Out of memory to register it, the space stays used.
   */
  if (add_busy_locked (v, kept_first, kept_last, false) == -1) {
    pthread_mutex_unlock (&v->granules_lock);
    return 0;
  }
  s = v->scratch;
  pthread_mutex_unlock (&v->granules_lock);

  scratch_release (s, (kept_last << v->gbits) + granule_bytes (v, kept_last)
                   - (kept_first << v->gbits), kept_first << v->gbits);

  pthread_mutex_lock (&v->granules_lock);
  remove_busy_locked (v, kept_first, kept_last, false);
  pthread_mutex_unlock (&v->granules_lock);
  return 0;
}

int
view_extents (struct view *v, uint32_t count, uint64_t offset,
              uint32_t flags, struct nbdkit_extents *extents, int *err)
{
  const uint64_t end = MIN (v->size, offset + count);
  const uint64_t far = MIN (v->size, end + UINT32_MAX);
  const unsigned g = v->frozen_gbits;
  uint64_t pos = offset;

  if (v->full) {
    if (nbdkit_add_extent (extents, offset, v->size - offset, 0) == -1)
      goto fail;
    return 0;
  }
  /* Changed (data) or not (hole), from the frozen bits.  The last run
   * may go on up to 4G past the request, no further: nbdkit cuts each
   * extent to UINT32_MAX bytes (extents.c), and a search to the end
   * of the disk would make a map of a clean disk cost the square of
   * its size (a 16 TiB one: 4096 requests, each searching up to 256M
   * granules).
   */
  while (pos < end) {
    uint64_t g0 = pos >> g, run_end;
    bool dirty;

    if (g0 >= v->frozen.nr_bits) {
      if (nbdkit_add_extent (extents, pos, v->size - pos, 0) == -1)
        goto fail;
      break;
    }
    run_end = MIN (bits_run (&v->frozen, g0,
                             MIN (v->frozen.nr_bits, ((far - 1) >> g) + 1),
                             &dirty) << g,
                   v->size);
    if (nbdkit_add_extent (extents, pos, run_end - pos,
                           dirty ? 0 : NBDKIT_EXTENT_HOLE) == -1)
      goto fail;
    pos = run_end;
    if (flags & NBDKIT_FLAG_REQ_ONE)
      break;
  }
  return 0;

 fail:
  *err = errno;
  return -1;
}
