/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/plan.c: what a piece read from the source becomes (see
 * copy/worker.c, stage TARGET): its checksums, hashed and compared
 * with those of the previous backup, and its operations on the
 * target, runs of data written and runs of zeroes zeroed, so that the
 * target stays sparse and what did not change is not written.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <sys/types.h>

#include "internal.h"
#include "slot.h"
#include "sums.h"
#include "util.h"

/* With checksums: the digest of each checksum chunk of the piece in s
 * (its data, or zeroes) into the set; with compare, whether it is the
 * same as the one there (s->same).  -1: out of memory.
 */
int
hash_piece (struct copy *c, struct slot *s)
{
  struct copy_sums *sums = c->sums;
  const uint64_t first = s->offset / sums->chunk;
  const uint64_t end = s->offset + s->length;
  size_t nk = DIV_ROUND_UP (s->length, sums->chunk), k;
  uint64_t pos, len;

  if (nk > s->same_cap) {
    bool *same = realloc (s->same, nk * sizeof *same);
    if (same == NULL)
      return -1;
    s->same = same;
    s->same_cap = nk;
  }
  for (pos = s->offset, k = 0; pos < end; pos += len, ++k) {
    uint8_t d[SUMS_DIGEST], *have = sums->digests + (first + k) * SUMS_DIGEST;
    len = MIN (sums->chunk, end - pos);
    if (s->zero)
      memcpy (d, len == sums->chunk ? c->zero_digest : c->zero_digest_last,
              SUMS_DIGEST);
    else
      sums_hash (s->buf + (pos - s->offset), len, d);
    s->same[k] = sums->compare &&
      !(sums->force && sums->force[first + k]) &&
      memcmp (have, d, SUMS_DIGEST) == 0;
    if (sums->compare && sums->differ)
      sums->differ[first + k] = !s->same[k];
    if (s->same[k])
      add_done (&c->unchanged, len);
    memcpy (have, d, SUMS_DIGEST);
  }
  return 0;
}

/* What the target holds in the piece of s, read into s->tbuf: each
 * checksum chunk's digest into the set, for hash_piece to compare
 * with.
 */
void
hash_held (struct copy *c, struct slot *s)
{
  const uint64_t chunk = c->sums->chunk, end = s->offset + s->length;
  uint8_t *d = c->sums->digests + s->offset / chunk * SUMS_DIGEST;
  uint64_t pos, len;

  for (pos = s->offset; pos < end; pos += len, d += SUMS_DIGEST) {
    len = MIN (chunk, end - pos);
    sums_hash (s->tbuf + (pos - s->offset), len, d);
  }
}

/* Is the byte at pos, in the piece of s, in a checksum chunk that is
 * as before?  Then *next is where that chunk ends.
 */
static bool
unchanged_at (struct copy *c, struct slot *s, uint64_t pos, uint64_t *next)
{
  uint64_t k;

  if (c->sums == NULL || !c->sums->compare)
    return false;
  k = pos / c->sums->chunk - s->offset / c->sums->chunk;
  *next = MIN (ROUND_DOWN (pos, c->sums->chunk) + c->sums->chunk,
               s->offset + s->length);
  return s->same[k];
}

/* Add an operation to the plan of s (buf NULL: a zero operation).  A
 * write that follows the last one of a data piece extends it (they are
 * contiguous in the piece's buffer too).
 */
static int
add_op (struct slot *s, size_t *n, uint64_t offset, uint64_t length,
        const char *buf)
{
  struct op *last = *n ? &s->ops[*n - 1] : NULL;

  if (last && !s->zero && buf && last->buf &&
      last->offset + last->length == offset) {
    last->length += length;
    return 0;
  }
  if (array_room (&s->ops, &s->ops_cap, *n, sizeof *s->ops, 4) == -1)
    return -1;
  s->ops[(*n)++] = (struct op) { s, offset, length, buf };
  return 0;
}

/* Where in [offset, end) a zero operation may go on t: [*zs, *ze),
 * the whole blocks of t->zero_align in it, the last block of the disk
 * whole if it ends there.  Empty (*zs >= *ze) if there are none.
 */
static void
zero_span (const struct target *t, uint64_t offset, uint64_t end,
           uint64_t *zs, uint64_t *ze)
{
  uint64_t a = t->zero_align;

  if (a <= 1) {
    *zs = offset;
    *ze = end;
    return;
  }
  *zs = ROUND_UP (offset, a);
  *ze = end == t->size ? end : ROUND_DOWN (end, a);
}

/* Write zeroes over [offset, end): a data piece has them in its
 * buffer; a zero piece writes the target's buffer of zeroes, as often
 * as it takes.
 */
static int
add_zero_writes (struct copy *c, struct slot *s, size_t *n,
                 uint64_t offset, uint64_t end)
{
  const struct target *t = c->dst;
  uint64_t len;

  if (!s->zero)
    return offset < end
      ? add_op (s, n, offset, end - offset, s->buf + (offset - s->offset))
      : 0;
  for (; offset < end; offset += len) {
    len = MIN (end - offset, t->zero_buf_size);
    if (add_op (s, n, offset, len, t->zero_buf) == -1)
      return -1;
  }
  return 0;
}

/* The operations of a run: data is written; zeroes are one zero
 * operation where the target allows it (zero_span), written as data
 * on either side of it.
 */
static int
add_run (struct copy *c, struct slot *s, size_t *n, const struct run *r)
{
  uint64_t zs, ze;

  if (!r->zero)
    return add_op (s, n, r->offset, r->end - r->offset,
                   s->buf + (r->offset - s->offset));
  zero_span (c->dst, r->offset, r->end, &zs, &ze);
  if (zs >= ze)
    return add_zero_writes (c, s, n, r->offset, r->end);
  if (add_zero_writes (c, s, n, r->offset, zs) == -1 ||
      add_op (s, n, zs, ze - zs, NULL) == -1)
    return -1;
  return add_zero_writes (c, s, n, ze, r->end);
}

/* The target operations of the piece in s: its runs of data and of
 * zeroes (one run for a zero piece, data cut at blocks of SPARSE_SIZE
 * that read as zeroes), less, with checksums compared, the chunks that
 * are as before; each run planned by add_run.  Returns their number,
 * or -1 (out of memory).
 */
ssize_t
plan_ops (struct copy *c, struct slot *s)
{
  uint64_t pos = s->offset, end = s->offset + s->length, next;
  struct run r;
  bool open = false;            /* r is a run not yet planned */
  size_t n = 0;

  while (pos < end) {
    bool zero;

    if (unchanged_at (c, s, pos, &next)) {
      pos = next;
      continue;
    }
    if (s->zero)
      next = c->sums && c->sums->compare
        ? MIN (ROUND_DOWN (pos, c->sums->chunk) + c->sums->chunk, end)
        : end;
    else
      next = MIN (ROUND_DOWN (pos, SPARSE_SIZE) + SPARSE_SIZE, end);
    zero = s->zero || buf_is_zero (s->buf + (pos - s->offset), next - pos);
    if (open && r.end == pos && r.zero == zero)
      r.end = next;
    else {
      if (open && add_run (c, s, &n, &r) == -1)
        return -1;
      r = (struct run) { pos, next, zero };
      open = true;
    }
    pos = next;
  }
  if (open && add_run (c, s, &n, &r) == -1)
    return -1;
  return n;
}
