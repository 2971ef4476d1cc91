/* SPDX-License-Identifier: BSD-3-Clause */
/* qcow2.h: a persistent bitmap of a qcow2 image, read through qemu
 * (qemu-img info, qemu-nbd -B), for dirtybitmap bitmap --merge SRC
 * -b IMAGE -F qcow2.
 */

#ifndef DIRTYBITMAP_QCOW2_H
#define DIRTYBITMAP_QCOW2_H

#include "error.h"
#include "txn.h"

/* Read bitmap name of the qcow2 image (both must outlive out).
 * Returns 0 with out filled: its bits, or, if qemu says the image has
 * no such bitmap or that it cannot be used, out->problem in qemu's
 * words, for the merge to report in its turn.  Returns -1 with err
 * if the image cannot be read at all (no qemu, no image, an image in
 * use by another process: qemu's message).  Free out with
 * qcow2_free_bitmap in either case.
 */
extern int qcow2_read_bitmap (const char *image, const char *name,
                              struct bmf_foreign *out, struct bmerr *err);
extern void qcow2_free_bitmap (struct bmf_foreign *b);

#endif /* DIRTYBITMAP_QCOW2_H */
