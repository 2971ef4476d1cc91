/* SPDX-License-Identifier: BSD-3-Clause */
/* actions.c: parse and apply bitmap actions (see actions.h).  The
 * rules are qemu-img bitmap's: add fails on an existing name, every
 * other action on a missing one; inconsistent bitmaps can only be
 * removed.
 */

#include <config.h>

#include <stdio.h>
#include <string.h>

#include "actions.h"

static const char *const names[] = {
  [ACT_ADD] = "add", [ACT_REMOVE] = "remove", [ACT_CLEAR] = "clear",
  [ACT_ENABLE] = "enable", [ACT_DISABLE] = "disable", [ACT_MERGE] = "merge",
};

int
act_kind_of (const char *name)
{
  size_t i;

  for (i = 0; i < sizeof names / sizeof names[0]; ++i)
    if (strcmp (name, names[i]) == 0)
      return i;
  return -1;
}

const char *
act_kind_name (enum act_kind kind)
{
  return names[kind];
}

int
act_parse (const char *s, struct action *a, const char **why)
{
  int k;

  *a = (struct action) { .kind = ACT_ADD };
  if (strncmp (s, "merge:", 6) == 0) {
    if (bmf_name_problem (s + 6)) {
      *why = "the source bitmap name after merge: must be 1 to 1023 bytes";
      return -1;
    }
    a->kind = ACT_MERGE;
    a->src = s + 6;
    return 0;
  }
  k = act_kind_of (s);
  if (k == -1 || k == ACT_MERGE) {
    *why = "unknown action (expected add, remove, clear, enable, disable "
      "or merge:SRC)";
    return -1;
  }
  a->kind = k;
  return 0;
}

const char *
act_to_string (const struct action *a, char *buf, size_t len)
{
  if (a->kind == ACT_MERGE)
    snprintf (buf, len, "merge:%s", a->src);
  else
    snprintf (buf, len, "%s", names[a->kind]);
  return buf;
}

bool
act_discards (const struct action *a)
{
  return a->kind == ACT_CLEAR || a->kind == ACT_REMOVE;
}

static int
apply_one (struct bmf_txn *t, const struct action *a, struct bmerr *err)
{
  switch (a->kind) {
  case ACT_ADD:     return bmf_txn_add (t, a->bitmap, a->gbits, err);
  case ACT_REMOVE:  return bmf_txn_remove (t, a->bitmap, err);
  case ACT_CLEAR:   return bmf_txn_clear (t, a->bitmap, err);
  case ACT_ENABLE:  return bmf_txn_enable (t, a->bitmap, true, err);
  case ACT_DISABLE: return bmf_txn_enable (t, a->bitmap, false, err);
  case ACT_MERGE:
    if (a->foreign)
      return bmf_txn_merge_foreign (t, a->bitmap, a->foreign, err);
    return bmf_txn_merge (t, a->bitmap, a->src_file, a->src, err);
  }
  return -1;
}

static int
apply_all (struct bmf_txn *t, const struct action *acts, size_t n,
           struct bmerr *err)
{
  char buf[BMF_MAX_NAME + 16];
  const char *why;
  size_t i;

  for (i = 0; i < n; ++i) {
    const struct action *a = &acts[i];
    if ((why = bmf_name_problem (a->bitmap)) != NULL) {
      bmerr_set (err, EINVAL, "action %s failed: the bitmap name \"%s\" %s",
                 act_to_string (a, buf, sizeof buf), a->bitmap, why);
      return -1;
    }
    if (apply_one (t, a, err) == -1) {
      bmerr_prefix (err, "action %s on bitmap %s failed",
                    act_to_string (a, buf, sizeof buf), a->bitmap);
      return -1;
    }
  }
  return 0;
}

struct bmf_txn *
act_begin (struct bmf *f, const struct action *acts, size_t n,
           struct bmerr *err)
{
  struct bmf_txn *t;
  int r;

  /* All or nothing: find any rule broken before writing a byte. */
  t = bmf_txn_begin (f, true, err);
  if (t == NULL)
    return NULL;
  r = apply_all (t, acts, n, err);
  bmf_txn_abort (t);
  if (r == -1)
    return NULL;

  t = bmf_txn_begin (f, false, err);
  if (t == NULL)
    return NULL;
  if (apply_all (t, acts, n, err) == -1) {
    bmf_txn_abort (t);
    return NULL;
  }
  return t;
}
