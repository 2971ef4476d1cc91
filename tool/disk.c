/* SPDX-License-Identifier: BSD-3-Clause */
/* disk.c: the disk that a bitmap file describes, as the tool finds
 * it, and what the tool says when that disk was written without the
 * filter, or cannot be recorded (the rule itself is lib/identity.c's).
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dirtybitmap.h"
#include "identity.h"

char *
find_disk (const char *file, const char *given)
{
  static const char suffix[] = ".bitmaps";
  const size_t n = strlen (file), s = sizeof suffix - 1;
  struct stat sb;
  char *disk;

  if (given)
    return strdup (given);
  if (n <= s || strcmp (file + n - s, suffix) != 0)
    return NULL;
  disk = strndup (file, n - s);
  if (disk && (stat (disk, &sb) == -1 || !S_ISREG (sb.st_mode))) {
    free (disk);
    disk = NULL;
  }
  return disk;
}

void
judge_disk (struct bmf *f, const char *disk, bool writing)
{
  struct bmerr why;

  switch (bmf_check_disk (f, disk, &why)) {
  case BMF_DISK_WRITTEN:
  case BMF_DISK_UNKNOWN:
    bm_error ("%s: every enabled bitmap is %s inconsistent: "
              "take a full backup", why.msg,
              writing ? "now" : "to be taken as");
    break;
  case BMF_DISK_SAME:
  case BMF_DISK_UNCHECKED:
    break;
  }
}

void
judge_disk_read (struct bmf *f, const char *given)
{
  char *disk;

  /* A server that holds the file is the judge of its disk. */
  if (bmf_in_use (f))
    return;
  disk = find_disk (bmf_path (f), given);
  judge_disk (f, disk, false);
  free (disk);
}

void
disk_seen (struct bmf_txn *t, const char *disk)
{
  struct bmerr why;

  if (bmf_txn_disk_seen (t, disk, &why) == -1)
    bm_error ("warning: %s", why.msg);
}
