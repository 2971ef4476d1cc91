/* SPDX-License-Identifier: BSD-3-Clause */
/* util.h: tiny helpers shared by the filter and the tool: rounding,
 * powers of two, a clock in nanoseconds, little-endian field access,
 * a growing array, a test for zeroes and a scoped mutex.
 */

#ifndef DIRTYBITMAP_UTIL_H
#define DIRTYBITMAP_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Round up or down to a multiple of a power of two. */
#define ROUND_UP(n, pow2) (((n) + (pow2) - 1) & ~((uint64_t) (pow2) - 1))
#define ROUND_DOWN(n, pow2) ((n) & ~((uint64_t) (pow2) - 1))
#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))

static inline bool
is_power_of_2 (uint64_t v)
{
  return v && (v & (v - 1)) == 0;
}

static inline unsigned
log_2 (uint64_t v)
{
  return 63 - __builtin_clzll (v);
}

/* Room for one more element of elem_size bytes at the end of the
 * array whose pointer is at ptr_addr (a T **), which holds n of *cap:
 * the array doubled when full, first elements when it has none.  0,
 * or -1 with errno and the array as it was.
 */
static inline int
array_room (void *ptr_addr, size_t *cap, size_t n, size_t elem_size,
            size_t first)
{
  void *p;
  size_t c;

  if (n < *cap)
    return 0;
  c = *cap ? *cap * 2 : first;
  memcpy (&p, ptr_addr, sizeof p);
  if ((p = realloc (p, c * elem_size)) == NULL)
    return -1;
  memcpy (ptr_addr, &p, sizeof p);
  *cap = c;
  return 0;
}

/* Whether the n bytes at p are all zero: the first 16 one by one,
 * then the rest against themselves 16 bytes on.
 */
static inline bool
buf_is_zero (const void *buf, size_t n)
{
  const char *p = buf;
  size_t i;

  for (i = 0; i < n && i < 16; ++i)
    if (p[i])
      return false;
  return n <= 16 || memcmp (p, p + 16, n - 16) == 0;
}

/* The time on clock, in nanoseconds. */
static inline int64_t
clock_ns (clockid_t clock)
{
  struct timespec ts;

  clock_gettime (clock, &ts);
  return ts.tv_sec * INT64_C (1000000000) + ts.tv_nsec;
}

/* The same in seconds: CLOCK_MONOTONIC for deadlines and durations,
 * CLOCK_REALTIME for a time that is shown or recorded.
 */
static inline double
clock_seconds (clockid_t clock)
{
  return clock_ns (clock) / 1e9;
}

/* Little-endian loads and stores for the on-disk structures (the
 * configure script refuses big-endian hosts, so these are memcpy).
 */
static inline uint64_t
get_le64 (const unsigned char *p)
{
  uint64_t v;
  memcpy (&v, p, 8);
  return v;
}

static inline uint32_t
get_le32 (const unsigned char *p)
{
  uint32_t v;
  memcpy (&v, p, 4);
  return v;
}

static inline uint16_t
get_le16 (const unsigned char *p)
{
  uint16_t v;
  memcpy (&v, p, 2);
  return v;
}

static inline void
put_le64 (unsigned char *p, uint64_t v)
{
  memcpy (p, &v, 8);
}

static inline void
put_le32 (unsigned char *p, uint32_t v)
{
  memcpy (p, &v, 4);
}

static inline void
put_le16 (unsigned char *p, uint16_t v)
{
  memcpy (p, &v, 2);
}

/* A mutex held until the end of the enclosing scope. */
static inline void
unlock_cleanup (pthread_mutex_t **m)
{
  pthread_mutex_unlock (*m);
}
#define SCOPED_LOCK_CONCAT_(a, b) a##b
#define SCOPED_LOCK_CONCAT(a, b) SCOPED_LOCK_CONCAT_ (a, b)
#define SCOPED_LOCK(m)                                                  \
  __attribute__ ((cleanup (unlock_cleanup)))                            \
  pthread_mutex_t *SCOPED_LOCK_CONCAT (scoped_lock_, __LINE__) = (m);   \
  pthread_mutex_lock (SCOPED_LOCK_CONCAT (scoped_lock_, __LINE__))

#endif /* DIRTYBITMAP_UTIL_H */
