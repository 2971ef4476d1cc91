/* SPDX-License-Identifier: BSD-3-Clause */
/* repo-mend.c: a fold that did not complete, checked and mended
 * before it is done again (repo-fold.c).
 *
 * A fold of P/D into S/D by qemu-img rebase writes into S/D the
 * clusters P/D holds and S/D does not.  qemu does not order a new
 * cluster's data before the table entry that points to it, so a power
 * loss while it runs may leave S/D holding a cluster whose data is not
 * what it read through P/D; a rebase done again skips every cluster
 * S/D holds.  So, when a removal is finished after an interruption,
 * before S/D is rebased: every chunk that both P/D and S/D hold (the
 * only ones the rebase can have written) is read through S and
 * compared with S's checksums, which describe S's whole disk.  A chunk
 * that differs is read through P and, if that matches S's checksum
 * (S had not changed it since P: the fold was writing it), written
 * into S/D again; otherwise S's own data is damaged, and that is an
 * error, nothing written.
 *
 * The cost: a read of the chunks both images hold (at most P's
 * increment), only after an interruption.  Writing a chunk S reads
 * through P back into S changes nothing S reads.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>

#include <json-c/json.h>
#include <libnbd.h>

#include "dirtybitmap.h"
#include "qemu.h"
#include "repo.h"
#include "repo-impl.h"
#include "sums.h"

/* The chunks an image holds itself: a bit per chunk. */
struct held {
  uint8_t *bits;
  uint64_t n;                   /* chunks */
  uint64_t chunk;               /* bytes */
};

static void
hold_range (uint64_t start, uint64_t len, void *opaque)
{
  struct held *h = opaque;
  uint64_t i;

  for (i = start / h->chunk; i < h->n && i * h->chunk < start + len; ++i)
    h->bits[i / 8] |= 1 << (i % 8);
}

/* What image holds itself (qemu-img map, depth 0, present). */
static int
held_by (const char *image, uint64_t chunk, struct held *h,
         struct bmerr *err)
{
  h->chunk = chunk;
  return repo_own_extents (image, hold_range, h, err);
}

static bool
held (const struct held *h, uint64_t i)
{
  return h->bits[i / 8] & (1 << (i % 8));
}

/* A qemu-nbd of image (writable or not) and a handle connected to it. */
static struct nbd_handle *
serve (const char *image, bool writable, struct qemu_nbd *q,
       struct bmerr *err)
{
  const char *args[] = { "-f", "qcow2", "-t", "--", image, NULL };
  struct nbd_handle *h;
  int r = writable ? qemu_nbd_start (args, q, err)
    : qemu_nbd_serve_qcow2 (image, q, err);

  if (r == -1)
    return NULL;
  if ((h = nbd_create ()) == NULL || nbd_connect_unix (h, q->sock) == -1) {
    bmerr_set (err, EIO, "%s: %s", image, nbd_get_error ());
    nbd_close (h);
    return NULL;
  }
  return h;
}

/* Does chunk i, read from h into buf, match its checksum in s? */
static int
matches (struct nbd_handle *h, const struct sums *s, uint64_t i,
         uint8_t *buf, size_t len, bool *yes, struct bmerr *err)
{
  uint8_t digest[SUMS_DIGEST];

  if (nbd_pread (h, buf, len, i * s->chunk, 0) == -1) {
    bmerr_set (err, EIO, "%s", nbd_get_error ());
    return -1;
  }
  sums_hash (buf, len, digest);
  *yes = memcmp (digest, s->digests + i * SUMS_DIGEST, SUMS_DIGEST) == 0;
  return 0;
}

/* Check and mend chunk i, which both images hold. */
static int
mend_chunk (struct nbd_handle *sh, struct nbd_handle *ph,
            const struct sums *s, uint64_t i, uint8_t *buf,
            const char *s_image, uint64_t *mended, struct bmerr *err)
{
  size_t len = s->disk_size - i * s->chunk < s->chunk
    ? s->disk_size - i * s->chunk : s->chunk;
  bool ok;

  if (matches (sh, s, i, buf, len, &ok, err) == -1)
    return -1;
  if (ok)
    return 0;
  if (matches (ph, s, i, buf, len, &ok, err) == -1)
    return -1;
  if (!ok) {
    bmerr_set (err, EINVAL, "%s: the chunk at offset %" PRIu64 " matches "
               "neither its checksum nor what the point before held: the "
               "repository is damaged", s_image, i * s->chunk);
    return -1;
  }
  if (nbd_pwrite (sh, buf, len, i * s->chunk, 0) == -1) {
    bmerr_set (err, EIO, "%s: %s", s_image, nbd_get_error ());
    return -1;
  }
  ++*mended;
  return 0;
}

/* Every chunk both images hold, checked and mended. */
static int
mend_all (const char *p_image, const char *s_image, const struct sums *s,
          const struct held *ph_held, const struct held *sh_held,
          uint64_t *mended, struct bmerr *err)
{
  struct qemu_nbd pq = { .c = { .pid = -1 } }, sq = { .c = { .pid = -1 } };
  struct nbd_handle *ph = NULL, *sh = NULL;
  uint8_t *buf = malloc (s->chunk);
  uint64_t i;
  int r = -1;

  if (buf == NULL)
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  else if ((ph = serve (p_image, false, &pq, err)) != NULL &&
           (sh = serve (s_image, true, &sq, err)) != NULL) {
    for (i = 0, r = 0; r == 0 && i < s->n; ++i)
      if (held (ph_held, i) && held (sh_held, i))
        r = mend_chunk (sh, ph, s, i, buf, s_image, mended, err);
    if (r == 0 && *mended && nbd_flush (sh, 0) == -1) {
      bmerr_set (err, EIO, "%s: %s", s_image, nbd_get_error ());
      r = -1;
    }
  }
  if (sh)
    nbd_shutdown (sh, 0);
  if (ph)
    nbd_shutdown (ph, 0);
  nbd_close (sh);
  nbd_close (ph);
  if (qemu_nbd_stop (&sq, NULL) != 0 && r == 0) {
    bmerr_set (err, EIO, "qemu-nbd serving %s did not end cleanly", s_image);
    r = -1;
  }
  qemu_nbd_stop (&pq, NULL);
  free (buf);
  return r;
}

int
repo_mend_fold (const struct repo *r, const char *disk, const char *point,
                const char *p_image, const char *s_image, uint64_t *mended,
                struct bmerr *err)
{
  char *rel = repo_sums_rel (disk, point), *path = NULL;
  struct held ph = { 0 }, sh = { 0 };
  struct sums *s = NULL;
  int ret = -1;

  *mended = 0;
  if (rel == NULL || (path = repo_path (r, rel)) == NULL)
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  else if (sums_load (path, &s, err) == -1)
    bmerr_prefix (err, "point %s, disk %s", point, disk);
  else if ((ph.bits = calloc (s->n / 8 + 1, 1)) == NULL ||
           (sh.bits = calloc (s->n / 8 + 1, 1)) == NULL)
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
  else {
    ph.n = sh.n = s->n;
    if (held_by (p_image, s->chunk, &ph, err) == 0 &&
        held_by (s_image, s->chunk, &sh, err) == 0)
      ret = mend_all (p_image, s_image, s, &ph, &sh, mended, err);
  }
  free (ph.bits);
  free (sh.bits);
  sums_free (s);
  free (path);
  free (rel);
  return ret;
}
