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
#include "msg.h"

static const struct {
  const char *name;
  enum act_kind kind;
} names[] = {
  { "add", ACT_ADD }, { "remove", ACT_REMOVE }, { "clear", ACT_CLEAR },
  { "enable", ACT_ENABLE }, { "disable", ACT_DISABLE },
};

int
act_parse (const char *s, struct action *a, const char **why)
{
  size_t i;

  a->src = NULL;
  for (i = 0; i < sizeof names / sizeof names[0]; ++i)
    if (strcmp (s, names[i].name) == 0) {
      a->kind = names[i].kind;
      return 0;
    }
  if (strncmp (s, "merge:", 6) == 0) {
    size_t len = strlen (s + 6);
    if (len == 0 || len > BMF_MAX_NAME) {
      *why = "the source bitmap name after merge: must be 1 to 1023 bytes";
      return -1;
    }
    a->kind = ACT_MERGE;
    a->src = s + 6;
    return 0;
  }
  *why = "unknown action (expected add, remove, clear, enable, disable "
    "or merge:SRC)";
  return -1;
}

const char *
act_to_string (const struct action *a, char *buf, size_t len)
{
  size_t i;

  if (a->kind == ACT_MERGE)
    snprintf (buf, len, "merge:%s", a->src);
  else
    for (i = 0; i < sizeof names / sizeof names[0]; ++i)
      if (names[i].kind == a->kind)
        snprintf (buf, len, "%s", names[i].name);
  return buf;
}

static int
apply_one (struct bmf_txn *t, const struct action *a,
           const struct act_params *p)
{
  switch (a->kind) {
  case ACT_ADD:     return bmf_txn_add (t, p->bitmap, p->gbits);
  case ACT_REMOVE:  return bmf_txn_remove (t, p->bitmap);
  case ACT_CLEAR:   return bmf_txn_clear (t, p->bitmap);
  case ACT_ENABLE:  return bmf_txn_enable (t, p->bitmap, true);
  case ACT_DISABLE: return bmf_txn_enable (t, p->bitmap, false);
  case ACT_MERGE:
    return bmf_txn_merge (t, p->bitmap, p->merge_file, a->src);
  }
  return -1;
}

static int
apply_all (struct bmf_txn *t, const struct action *acts, size_t n,
           const struct act_params *p)
{
  char buf[BMF_MAX_NAME + 16];
  size_t i;

  for (i = 0; i < n; ++i)
    if (apply_one (t, &acts[i], p) == -1) {
      bm_error ("action %s on bitmap %s failed: %s",
                act_to_string (&acts[i], buf, sizeof buf), p->bitmap,
                t->err);
      return -1;
    }
  return 0;
}

struct bmf_txn *
act_begin (struct bmf *f, const struct action *acts, size_t n,
           const struct act_params *p)
{
  struct bmf_txn *t;
  int r;

  /* All or nothing: find any rule broken before writing a byte. */
  t = bmf_txn_begin (f, true);
  if (t == NULL)
    return NULL;
  r = apply_all (t, acts, n, p);
  bmf_txn_abort (t);
  if (r == -1)
    return NULL;

  t = bmf_txn_begin (f, false);
  if (t == NULL)
    return NULL;
  if (apply_all (t, acts, n, p) == -1) {
    bmf_txn_abort (t);
    return NULL;
  }
  return t;
}
