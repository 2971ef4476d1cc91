/* SPDX-License-Identifier: BSD-3-Clause */
/* params.h: the filter's parameters. */

#ifndef DIRTYBITMAP_PARAMS_H
#define DIRTYBITMAP_PARAMS_H

#include <stddef.h>
#include <sys/types.h>

#include <nbdkit-filter.h>

#include "actions.h"
#include "store.h"

struct params {
  const char *bitmap;           /* bitmap= or NULL */
  struct action *actions;       /* action=, targets set to bitmap= */
  size_t nr_actions;
  const char *bitmap_file;      /* absolute */
  const char *merge_file;       /* absolute, or NULL */
  const char *disk_file;        /* the plugin's regular file, or NULL */
  mode_t disk_mode;             /* its permission bits (else 0600) */
  enum extents_mode extents;
  enum bmf_durability durability;
  unsigned cgbits;              /* durability=coarse: coarse granule */
  const char *export_name;      /* the export the bitmaps track */
  const char *control_path;     /* absolute, or NULL */
  const char *restore_from;     /* restore-from=URI, or NULL */
  const char *restore_checkpoint; /* restore-checkpoint=NAME, or NULL */
  unsigned checkpoint_gbits;    /* its granularity= */
};

/* Complete once .config_complete has succeeded. */
extern struct params params;

extern int params_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                          const char *key, const char *value);
extern int params_config_complete (nbdkit_next_config_complete *next,
                                   nbdkit_backend *nxdata);
extern void params_free (void);

#define PARAMS_HELP \
  "bitmap=NAME              The bitmap to act on and to answer extents.\n" \
  "action=ACTION            add|remove|clear|enable|disable|merge:SRC\n" \
  "                         (repeatable, applied in order at startup).\n" \
  "granularity=SIZE         Granularity of a new bitmap (default 64K).\n" \
  "bitmap-file=PATH         Where bitmaps persist (default FILE.bitmaps).\n" \
  "merge-file=PATH          Take merge sources from this bitmap file.\n" \
  "extents=bitmap|passthrough  Answer extents from bitmap= or from below.\n" \
  "durability=flush|strict|coarse\n" \
  "                         When bits reach stable storage (default coarse).\n" \
  "coarse-granularity=SIZE  Coarse granule of durability=coarse (default 16M).\n" \
  "export=NAME              The export the bitmaps track (default \"\").\n" \
  "control=PATH             Serve the control channel on this socket.\n" \
  "restore-from=URI         Restore the disk from this NBD URI, live.\n" \
  "restore-checkpoint=NAME  A bitmap added as the restore begins."

#endif /* DIRTYBITMAP_PARAMS_H */
