/* SPDX-License-Identifier: BSD-3-Clause */
/* actions.h: the bitmap actions (add, remove, clear, enable, disable,
 * merge) shared by the filter's action=, its control channel and the
 * tool's bitmap subcommand: parsing, and applying a list of them
 * all-or-nothing.
 */

#ifndef DIRTYBITMAP_ACTIONS_H
#define DIRTYBITMAP_ACTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "bmfile.h"
#include "error.h"
#include "txn.h"

enum act_kind { ACT_ADD, ACT_REMOVE, ACT_CLEAR, ACT_ENABLE, ACT_DISABLE,
                ACT_MERGE };

struct action {
  enum act_kind kind;
  const char *bitmap;           /* the bitmap it applies to */
  unsigned gbits;               /* ACT_ADD: granularity */
  const char *src;              /* ACT_MERGE: the source bitmap */
  struct bmf *src_file;         /* ACT_MERGE: its file, NULL: this one */
  /* ACT_MERGE: if set, src is this bitmap of an image (txn.h). */
  const struct bmf_foreign *foreign;
};

/* Parse "add", "merge:SRC", ... (the filter's action=); returns -1
 * with the reason in why.  Only kind and src are set.
 */
extern int act_parse (const char *s, struct action *a, const char **why);

/* The kind by name ("add", "merge", ...); -1 if unknown. */
extern int act_kind_of (const char *name);
extern const char *act_kind_name (enum act_kind kind);

/* "add", "merge:SRC", ... into buf. */
extern const char *act_to_string (const struct action *a,
                                  char *buf, size_t len);

/* Whether the action throws bits away (clear, remove). */
extern bool act_discards (const struct action *a);

/* Check every action against the file with a dry run, then apply
 * them in order to a new transaction, which is returned ready to
 * commit.  On failure returns NULL with the file untouched and err
 * saying "action A on bitmap B failed: REASON".
 */
extern struct bmf_txn *act_begin (struct bmf *f, const struct action *acts,
                                  size_t n, struct bmerr *err);

#endif /* DIRTYBITMAP_ACTIONS_H */
