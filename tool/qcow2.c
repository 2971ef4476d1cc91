/* SPDX-License-Identifier: BSD-3-Clause */
/* qcow2.c: a persistent bitmap of a qcow2 image, read through qemu
 * rather than by parsing qcow2 here (see qcow2.h).
 *
 * Two qemu programs, each a child of this process (qemu.c), whose
 * stderr is read into the error, so that qemu's own message reaches
 * the user:
 *
 *   1. qemu-img info --output=json: what qemu-img bitmap checks of a
 *      merge source.  The image opens (it exists, it is qcow2, no
 *      other process writes it), the bitmap exists and is not
 *      "in-use" (qemu loads such a bitmap, left by a qemu that did not
 *      close the image, as inconsistent); and its granularity and the
 *      disk size.
 *   2. qemu-nbd -r -B NAME: the image served read-only, with the
 *      bitmap as the meta context qemu:dirty-bitmap:NAME.  It is
 *      started by socket activation, on a socket in a private
 *      directory, and read by block status over the whole disk:
 *      extents with NBD_STATE_DIRTY are dirty granules.
 *
 * qemu's extents of a bitmap fall on its granules (but at the end of
 * the disk); one that did not would be rounded outward, never a
 * granule fewer.  The bits are kept at the source's granularity, so
 * that a merge maps them to its target as it maps another bitmap
 * file's (bits_merge).  Memory: one bit per source granule (2 MiB for
 * a 1 TiB disk at 64K).  Neither program writes the image.
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
#include "msg.h"
#include "qcow2.h"
#include "qemu.h"
#include "util.h"

/* The one flag of qemu:dirty-bitmap:NAME (qemu docs/interop/nbd.txt). */
#define NBD_STATE_DIRTY 1

/* The most bytes one block status request asks about. */
#define STATUS_CHUNK (UINT64_C (1) << 30)

/*----------------------------------------------------------------------
 * 1. qemu-img info.
 */

static json_object *
get (json_object *o, const char *key, json_type type)
{
  json_object *v;

  if (o && json_object_object_get_ex (o, key, &v) &&
      json_object_is_type (v, type))
    return v;
  return NULL;
}

/* The entry of bitmap name in the info, or NULL. */
static json_object *
find_bitmap (json_object *info, const char *name)
{
  json_object *bitmaps =
    get (get (get (info, "format-specific", json_type_object),
              "data", json_type_object),
         "bitmaps", json_type_array);
  size_t i;

  for (i = 0; bitmaps && i < json_object_array_length (bitmaps); ++i) {
    json_object *b = json_object_array_get_idx (bitmaps, i);
    json_object *n = get (b, "name", json_type_string);
    if (n && strcmp (json_object_get_string (n), name) == 0)
      return b;
  }
  return NULL;
}

static bool
has_flag (json_object *bitmap, const char *flag)
{
  json_object *flags = get (bitmap, "flags", json_type_array);
  size_t i;

  for (i = 0; flags && i < json_object_array_length (flags); ++i) {
    json_object *f = json_object_array_get_idx (flags, i);
    if (json_object_is_type (f, json_type_string) &&
        strcmp (json_object_get_string (f), flag) == 0)
      return true;
  }
  return false;
}

/* The disk size, and the bitmap's granularity or its problem. */
static int
judge_info (json_object *info, struct bmf_foreign *out, struct bmerr *err)
{
  json_object *size = get (info, "virtual-size", json_type_int), *b, *g;
  int64_t gran;

  b = find_bitmap (info, out->name);
  g = get (b, "granularity", json_type_int);
  if (size == NULL || json_object_get_int64 (size) < 0 || (b && g == NULL)) {
    bmerr_set (err, EINVAL, "%s: qemu-img info gave no %s", out->origin,
               size == NULL ? "virtual-size" : "granularity");
    return -1;
  }
  out->disk_size = json_object_get_int64 (size);
  /* qemu-img bitmap's words (block_dirty_bitmap_lookup,
   * bdrv_dirty_bitmap_check).
   */
  if (b == NULL) {
    bmerr_set (&out->problem, ENOENT, "%s: Dirty bitmap '%s' not found",
               out->origin, out->name);
    return 0;
  }
  if (has_flag (b, "in-use")) {
    bmerr_set (&out->problem, EINVAL, "%s: Bitmap '%s' is inconsistent and "
               "cannot be used (remove it with qemu-img bitmap --remove, "
               "and take a full backup)", out->origin, out->name);
    return 0;
  }
  gran = json_object_get_int64 (g);
  if (gran <= 0 || bmf_granularity_problem (gran)) {
    bmerr_set (&out->problem, EINVAL, "%s: bitmap '%s': granularity %"
               PRIi64 " %s", out->origin, out->name, gran,
               gran <= 0 ? "is not valid" : bmf_granularity_problem (gran));
    return 0;
  }
  out->gbits = log_2 (gran);
  return 0;
}

static int
read_info (const char *image, struct bmf_foreign *out, struct bmerr *err)
{
  json_object *info = qemu_img_info (image, "qcow2", err);
  int r;

  if (info == NULL)
    return -1;
  r = judge_info (info, out, err);
  json_object_put (info);
  return r;
}

/*----------------------------------------------------------------------
 * 2. qemu-nbd -B.
 */

struct walk {
  const char *context;
  struct bmf_foreign *out;
  uint64_t end;                 /* where the extents seen so far end */
};

static int
extent (void *opaque, const char *context, uint64_t offset,
        uint32_t *entries, size_t nr_entries, int *error)
{
  struct walk *w = opaque;
  const uint64_t size = w->out->disk_size;
  const unsigned g = w->out->gbits;
  size_t i;

  if (strcmp (context, w->context) != 0)
    return 0;
  for (i = 0; i + 1 < nr_entries && offset < size; i += 2) {
    uint64_t len = MIN ((uint64_t) entries[i], size - offset);

    if (len == 0)
      break;
    if (entries[i + 1] & NBD_STATE_DIRTY)
      bits_set_range (&w->out->bits, offset >> g, (offset + len - 1) >> g);
    offset += len;
  }
  w->end = MAX (w->end, offset);
  return 0;
}

/* Every extent of the bitmap, from h; -1 with err. */
static int
walk_bitmap (struct nbd_handle *h, const char *context,
             struct bmf_foreign *out, struct bmerr *err)
{
  struct walk w = { .context = context, .out = out };
  uint64_t offset = 0;
  int64_t size;

  if (nbd_can_meta_context (h, context) != 1) {
    bmerr_set (err, EINVAL, "%s: qemu-nbd does not serve %s", out->origin,
               context);
    return -1;
  }
  size = nbd_get_size (h);
  if (size == -1) {
    bmerr_set (err, EIO, "%s: %s", out->origin, nbd_get_error ());
    return -1;
  }
  if ((uint64_t) size != out->disk_size) {
    bmerr_set (err, EAGAIN, "%s: its size changed while it was read (%"
               PRIu64 " bytes, then %" PRIi64 "): try again", out->origin,
               out->disk_size, size);
    return -1;
  }
  while (offset < out->disk_size) {
    w.end = offset;
    if (nbd_block_status (h, MIN (out->disk_size - offset, STATUS_CHUNK),
                          offset,
                          (nbd_extent_callback) { .callback = extent,
                                                  .user_data = &w },
                          0) == -1) {
      bmerr_set (err, EIO, "%s: block status of %s: %s", out->origin,
                 context, nbd_get_error ());
      return -1;
    }
    if (w.end <= offset) {
      bmerr_set (err, EIO, "%s: qemu-nbd gave no extent of %s at offset %"
                 PRIu64, out->origin, context, offset);
      return -1;
    }
    offset = w.end;
  }
  return 0;
}

static int
read_bits (const char *image, struct bmf_foreign *out, struct bmerr *err)
{
  const char *const args[] = { "-r", "-f", "qcow2", "-B", out->name, "--",
                               image, NULL };
  struct qemu_nbd q = { .c = { .pid = -1 } };
  char *context = NULL, *text = NULL;
  struct nbd_handle *h = NULL;
  int status, r = -1;

  out->bits.nr_bits = bmf_nr_bits (out->disk_size, out->gbits);
  out->bits.words = calloc (MAX (bits_nr_words (out->bits.nr_bits), 1), 8);
  if (out->bits.words == NULL ||
      asprintf (&context, "qemu:dirty-bitmap:%s", out->name) == -1) {
    context = NULL;
    bmerr_set (err, errno, "%s", strerror (errno));
    goto out;
  }
  if (qemu_nbd_start (args, &q, err) == -1)
    goto out;
  h = nbd_create ();
  if (h == NULL || nbd_add_meta_context (h, context) == -1) {
    bmerr_set (err, EIO, "%s", nbd_get_error ());
    goto out;
  }
  if (nbd_connect_unix (h, q.sock) == -1) {
    /* qemu-nbd refused: its message, once it has gone. */
    nbd_close (h);
    h = NULL;
    status = qemu_nbd_stop (&q, &text);
    qemu_error (err, "qemu-nbd", text, status);
    goto out;
  }
  r = walk_bitmap (h, context, out, err);
  nbd_shutdown (h, 0);
 out:
  nbd_close (h);
  qemu_nbd_stop (&q, NULL);
  free (text);
  free (context);
  return r;
}

/*----------------------------------------------------------------------
 * The bitmap.
 */

int
qcow2_read_bitmap (const char *image, const char *name,
                   struct bmf_foreign *out, struct bmerr *err)
{
  *out = (struct bmf_foreign) { .name = name, .origin = image };
  if (read_info (image, out, err) == -1)
    return -1;
  if (out->problem.errnum)
    return 0;
  if (read_bits (image, out, err) == -1)
    return -1;
  bm_debug ("%s: bitmap %s: %" PRIu64 " granules of %" PRIu64 " bytes, %"
            PRIu64 " dirty", image, name, out->bits.nr_bits,
            UINT64_C (1) << out->gbits, bits_count (&out->bits));
  return 0;
}

void
qcow2_free_bitmap (struct bmf_foreign *b)
{
  free (b->bits.words);
  memset (&b->bits, 0, sizeof b->bits);
}
