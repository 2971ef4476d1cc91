/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/heal-mark.c: the chunks a backup heals (backup/heal.c) made
 * dirty in the base bitmap B on the disk's server, before the cut, so
 * that an incremental view holds them (it holds only what B says
 * changed: a clean granule cannot be read from it).
 *
 * The chunks go into a bitmap file of our own, "heal" in
 * TMPDIR/dirtybitmap-heal-XXXXXX/heal.bitmaps (granules of the chunk,
 * the disk's size, disabled: a bitmap that does not record is
 * consistent), which the server merges into B by a transaction
 * ({"action": "merge", "bitmap": B, "source": "heal", "file": PATH});
 * the file is removed once the reply has come.  B then says more
 * changed than did: an over-approximation, which costs the next
 * incremental those chunks if this backup fails, never a byte missed.
 * A server that cannot do it (it cannot see the file: a private /tmp)
 * is said, and the disk gets a resync instead: the whole disk read,
 * what differs and the chunks found bad written.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "bits.h"
#include "control-client.h"
#include "dirtybitmap.h"
#include "internal.h"
#include "txn.h"
#include "util.h"

#define HEAL_BITMAP "heal"

static unsigned
log2_of (uint64_t v)
{
  unsigned g = 0;

  while ((UINT64_C (1) << g) < v)
    ++g;
  return g;
}

/* The file at path: bitmap "heal" of d's size, granules of chunk
 * bytes, the chunks force marks set.
 */
static int
write_marks (const char *path, const struct disk *d, uint64_t chunk,
             uint64_t n, struct bmerr *err)
{
  struct bmf_foreign src = {
    .name = HEAL_BITMAP, .origin = path, .disk_size = d->size_before,
    .gbits = log2_of (chunk), .bits = { .nr_bits = n },
  };
  struct bmf_txn *t = NULL;
  struct bmf *f;
  uint64_t i;
  int r = -1;

  src.bits.words = calloc (MAX (bits_nr_words (n), 1), sizeof (uint64_t));
  if (src.bits.words == NULL) {
    bmerr_set (err, ENOMEM, "%s", strerror (ENOMEM));
    return -1;
  }
  for (i = 0; i < n; ++i)
    if (d->force[i])
      src.bits.words[i / 64] |= UINT64_C (1) << (i & 63);
  if ((f = bmf_create (path, 0644, true, d->size_before, err)) != NULL &&
      (t = bmf_txn_begin (f, false, err)) != NULL &&
      bmf_txn_add (t, HEAL_BITMAP, src.gbits, err) == 0 &&
      bmf_txn_merge_foreign (t, HEAL_BITMAP, &src, err) == 0 &&
      bmf_txn_enable (t, HEAL_BITMAP, false, err) == 0 &&
      bmf_txn_commit (t, err) == 0) {
    t = NULL;
    r = bmf_publish (f, err);
  }
  if (t)
    bmf_txn_abort (t);
  if (f)
    bmf_close (f);
  free (src.bits.words);
  return r;
}

/* Ask d's server to merge the file at path into B: -1 with err. */
static int
merge_marks (const struct set *s, const struct disk *d, const char *path,
             struct bmerr *err)
{
  json_object *action = json_object_new_object ();
  json_object *actions = json_object_new_array ();
  json_object *args = json_object_new_object (), *ret = NULL;
  struct bmerr why = { 0 };
  int r;

  json_object_object_add (action, "action", json_object_new_string ("merge"));
  json_object_object_add (action, "bitmap",
                          json_object_new_string (s->incremental));
  json_object_object_add (action, "source",
                          json_object_new_string (HEAL_BITMAP));
  json_object_object_add (action, "file", json_object_new_string (path));
  json_object_array_add (actions, action);
  json_object_object_add (args, "actions", actions);
  r = control_call_on (d->fd, d->control,
                       control_request ("transaction", args), &ret, &why);
  json_object_put (ret);
  if (r != 0)
    bmerr_set (err, EIO, "%s", bmerr_failed (&why) ? why.msg
               : "the control connection failed");
  return r == 0 ? 0 : -1;
}

int
heal_mark (const struct set *s, const struct disk *d, uint64_t chunk,
           uint64_t n, struct bmerr *err)
{
  const char *tmp = getenv ("TMPDIR");
  char *dir = NULL, *path = NULL;
  int r = -1;

  /* The server takes an absolute path only (it runs in /). */
  if (asprintf (&dir, "%s/dirtybitmap-heal-XXXXXX",
                tmp && *tmp == '/' ? tmp : "/tmp") == -1)
    dir = NULL;
  if (dir == NULL || mkdtemp (dir) == NULL || chmod (dir, 0755) == -1 ||
      asprintf (&path, "%s/heal.bitmaps", dir) == -1) {
    bmerr_set (err, errno, "%s", strerror (errno));
    path = NULL;
  }
  else if (write_marks (path, d, chunk, n, err) == 0)
    r = merge_marks (s, d, path, err);
  if (path)
    unlink (path);
  if (dir)
    rmdir (dir);
  free (path);
  free (dir);
  return r;
}
