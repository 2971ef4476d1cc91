/* SPDX-License-Identifier: BSD-3-Clause */
/* open.c: a bitmap file opened for use, with what an unclean stop
 * means applied.  The loader (bmfile.c) reads the file as it is; the
 * policy is here, above it and above what it uses: the disk's records
 * (identity.c) and the recovery from coarse shadows (recover.c).
 *
 * An unclean stop (the file still says it is open): after a reboot,
 * bitmaps that were recording in a flush-mode run may have lost bits
 * and are marked inconsistent; those of a coarse-mode run are
 * recovered from their shadows, in place with the write lock, or else
 * each time their bits are read (bmf_map, bmf_read_bits); a strict
 * run lost nothing.  The disk's records judge, in any case, whether
 * the disk was written without the filter.
 */

#include <config.h>

#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "bmfile-impl.h"
#include "identity.h"
#include "msg.h"
#include "recover.h"

static const char *
mode_name (uint32_t mode)
{
  return mode == BMF_STRICT ? "durability=strict" :
    mode == BMF_COARSE ? "durability=coarse" : "durability=flush";
}

/* Apply what an unclean stop means (see the top of this file). */
static void
mark_after_crash (struct bmf *f)
{
  char boot[BMF_BOOT_ID_LEN];
  unsigned char alive[BMF_ALIVE_LENGTH];
  size_t i;

  if (!f->st.open)
    return;
  f->unclean = true;
  bmf_boot_id (boot);
  f->rebooted = boot[0] == '\0' || strcmp (boot, f->st.boot_id) != 0;
  bm_debug ("%s: was not closed cleanly (pid %" PRIu64 ", %s, %s)",
            f->path, f->st.open_pid,
            f->rebooted ? "machine restarted since" : "same boot",
            mode_name (f->st.open_mode));
  bmf_disk_after_crash (&f->st, f->rebooted,
                        pread (f->fd, alive, sizeof alive, BMF_ALIVE_OFFSET)
                        == sizeof alive ? alive : NULL);
  if (!f->rebooted || f->st.open_mode == BMF_STRICT)
    return;
  if (f->st.open_mode == BMF_COARSE) {
    bmf_recover_coarse (f);
    return;
  }
  for (i = 0; i < f->st.nr_bitmaps; ++i) {
    struct bmf_bitmap *bm = &f->st.bitmaps[i];
    if (bmf_flags_unsettled (bm->flags)) {
      bm->flags |= BMF_INCONSISTENT;
      bm_debug ("%s: bitmap %s is now inconsistent", f->path, bm->name);
    }
  }
}

struct bmf *
bmf_open (const char *path, enum bmf_lock lock, struct bmerr *err)
{
  struct bmf *f = bmf_open_file (path, lock, err);

  if (f == NULL)
    return NULL;
  mark_after_crash (f);
  /* With the write lock, the run that left an open record is gone and
   * its consequences are applied above: the next commit drops the
   * record (its first fdatasync makes that run's bits durable, and
   * its marks persist), so that it cannot condemn bitmaps that this
   * process adds or enables.
   */
  if (lock == BMF_LOCK_EXCLUSIVE && f->st.open) {
    f->st.open = false;
    f->st.open_mode = 0;
    f->st.open_pid = 0;
    memset (f->st.boot_id, 0, sizeof f->st.boot_id);
  }
  bm_debug ("%s: opened: %zu bitmaps, disk size %" PRIu64 "%s, seq %"
            PRIu64, path, f->st.nr_bitmaps, f->st.disk_size,
            f->st.sized ? "" : " (unknown)", f->st.seq);
  return f;
}

/* A copy of bm's bits in malloced words, the recovery of a power loss
 * applied if it is pending.
 */
static int
read_recovered (struct bmf *f, const struct bmf_state *st,
                const struct bmf_bitmap *bm, struct bits *out,
                struct bmerr *err)
{
  if (bmf_copy_bits (f, st, bm, out, err) == -1)
    return -1;
  if (bm->recovery == BMF_RECOVER_ON_READ &&
      bmf_recover_read (f, st, bm, out, err) == -1) {
    bmf_unmap (out);
    return -1;
  }
  return 0;
}

int
bmf_map (struct bmf *f, const struct bmf_state *st,
         const struct bmf_bitmap *bm, bool writable, struct bits *out,
         struct bmerr *err)
{
  /* Bits recovered in memory only: a copy. */
  if (!writable && bm->recovery == BMF_RECOVER_ON_READ)
    return read_recovered (f, st, bm, out, err);
  return bmf_map_data (f, st, bm, writable, out, err);
}

int
bmf_read_bits (struct bmf *f, const struct bmf_bitmap *bm, struct bits *out,
               struct bmerr *err)
{
  if (f->lock != BMF_LOCK_NONE)
    return bmf_map (f, &f->st, bm, false, out, err);
  return read_recovered (f, &f->st, bm, out, err);
}
