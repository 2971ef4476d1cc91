/* SPDX-License-Identifier: BSD-3-Clause */
/* actions.h: the bitmap actions (add, remove, clear, enable, disable,
 * merge:SRC) shared by the filter's action= and the tool's bitmap
 * subcommand: parsing, and applying a list all-or-nothing.
 */

#ifndef DIRTYBITMAP_ACTIONS_H
#define DIRTYBITMAP_ACTIONS_H

#include <stddef.h>

#include "bmfile.h"

enum act_kind { ACT_ADD, ACT_REMOVE, ACT_CLEAR, ACT_ENABLE, ACT_DISABLE,
                ACT_MERGE };

struct action {
  enum act_kind kind;
  const char *src;              /* ACT_MERGE: the source bitmap */
};

struct act_params {
  const char *bitmap;           /* the bitmap the actions apply to */
  unsigned gbits;               /* ACT_ADD: granularity */
  struct bmf *merge_file;       /* ACT_MERGE: source file, or NULL */
};

/* Parse "add", "merge:SRC", ...; returns -1 with the reason in why. */
extern int act_parse (const char *s, struct action *a, const char **why);

/* "add", "merge:SRC", ... into buf. */
extern const char *act_to_string (const struct action *a,
                                  char *buf, size_t len);

/* Check every action against the file with a dry run, then apply
 * them in order to a new transaction, which is returned ready to
 * commit.  On failure reports "action A on bitmap B failed: REASON"
 * and returns NULL with the file untouched.
 */
extern struct bmf_txn *act_begin (struct bmf *f,
                                  const struct action *acts, size_t n,
                                  const struct act_params *p);

#endif /* DIRTYBITMAP_ACTIONS_H */
