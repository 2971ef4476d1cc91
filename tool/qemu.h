/* SPDX-License-Identifier: BSD-3-Clause */
/* qemu.h: qemu's programs (qemu-img, qemu-nbd) run as children of
 * the tool, their stderr kept so that qemu's own words reach the user;
 * qemu-nbd socket-activated on a socket in a private directory; and
 * the one rule for opening a qcow2 image with its backing chain: the
 * format of every link is declared, never probed.
 */

#ifndef DIRTYBITMAP_QEMU_H
#define DIRTYBITMAP_QEMU_H

#include <stdbool.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "error.h"

/* A qemu program running as a child of this process. */
struct qemu_child {
  const char *name;             /* argv[0] */
  pid_t pid;
  int out;                      /* its stdout, or -1 */
  int err;                      /* its stderr */
};

/* Start argv (argv[0] found in PATH), killed if this process ends
 * first (even by SIGKILL), its stdin /dev/null, its stderr
 * into c->err, its stdout into c->out if want_out (else /dev/null),
 * and, when listen_fd >= 0, socket-activated: listen_fd is its
 * descriptor 3.  Returns -1 with err if it could not be run.
 */
extern int qemu_spawn (char *const argv[], bool want_out, int listen_fd,
                       struct qemu_child *c, struct bmerr *err);

/* Read the child's stdout (into *out, if it was wanted) and stderr
 * (into *text) to their ends, and reap it.  Returns its wait status,
 * or -1 if it could not be reaped.  Free *out and *text.
 */
extern int qemu_finish (struct qemu_child *c, char **out, char **text);

/* The same, the child asked to end first: SIGTERM, again until it has
 * ended (a qemu-nbd that is still starting loses the first), SIGKILL
 * after 10 seconds.  A child that SIGTERM killed (before it handled
 * it: it had not started) ended well: 0.
 */
extern int qemu_stop (struct qemu_child *c, char **text);

/* What a qemu program said on stderr, as the error: each line without
 * its "PROGRAM: " prefix; or, if it said nothing, how it ended.
 */
extern void qemu_error (struct bmerr *err, const char *name,
                        const char *text, int status);

/* qemu-img info -f fmt of image, parsed: only image itself is opened,
 * not its backing file.  NULL with err (qemu's message) on failure.
 */
extern json_object *qemu_img_info (const char *image, const char *fmt,
                                   struct bmerr *err);

/* A qemu-nbd serving on sock, a socket in the private directory dir,
 * until qemu_nbd_stop.
 */
struct qemu_nbd {
  char *dir;
  char *sock;
  char *uri;                    /* nbd+unix:///?socket=SOCK */
  bool listening;               /* fd listens on sock, not yet passed on */
  int fd;
  struct qemu_child c;
};

/* Start "qemu-nbd ARGS..." (args: its arguments, NULL-terminated, not
 * argv[0]) socket-activated.  The socket listens when this returns, so
 * a client may connect at once; if qemu-nbd could not open its image,
 * the connection fails and qemu_nbd_stop tells why.  -1 with err.
 */
extern int qemu_nbd_start (const char *const args[], struct qemu_nbd *q,
                           struct bmerr *err);

/* The same in two steps: qemu_nbd_listen makes the socket (q->uri is
 * known, and a client may connect: it waits) before the image exists;
 * qemu_nbd_run starts qemu-nbd on it.  -1 with err; qemu_nbd_stop
 * undoes either.
 */
extern int qemu_nbd_listen (struct qemu_nbd *q, struct bmerr *err);
extern int qemu_nbd_run (const char *const args[], struct qemu_nbd *q,
                         struct bmerr *err);

/* Stop it (SIGTERM), reap it, remove its socket and directory.  What
 * it said on stderr goes to *text (free it) if text is not NULL.
 * Returns its wait status, or -1.  Harmless on a zeroed struct, or
 * twice.
 */
extern int qemu_nbd_stop (struct qemu_nbd *q, char **text);

/* Serve image, a qcow2 file, read-only with its backing chain, on a
 * new qemu_nbd (see qemu_nbd_start), for several clients at once.
 * Before qemu opens anything, every link of the chain must name the
 * format of its backing file, raw or qcow2: a format left out would
 * be probed from the backing file's content, and a raw image whose
 * content is a qcow2 header (a guest's data) would make qemu open
 * whatever file that header names.  qemu 6.1 and later refuse to
 * create such a link (qemu-img create -F).  -1 with err otherwise.
 */
extern int qemu_nbd_serve_qcow2 (const char *image, struct qemu_nbd *q,
                                 struct bmerr *err);

/* The check that qemu_nbd_serve_qcow2 makes first, alone: every link
 * of image's chain declares its backing file's format.  -1 with err.
 */
extern int qemu_check_chain (const char *image, struct bmerr *err);

/* The reads of a qcow2 image served by qemu-nbd: it serves reads of
 * 256K with much less work than reads of 1M, the copy engine's default
 * (it maps and unmaps a buffer for each); bench/restore.sh measured a
 * restore of 1G a quarter faster, and verify of a point of 1G went
 * from 1.6 seconds to 1.0.  A multiple of every checksum chunk.
 */
#define QEMU_NBD_READ_SIZE (256 * 1024)

/* The program name and arguments that serve a qcow2 image (and its
 * checked chain) read-only to several clients: for a caller that
 * starts qemu-nbd itself (qemu_spawn).  NULL-terminated; image last.
 */
#define QEMU_NBD_READ_ONLY_ARGS "-r", "-f", "qcow2", "-t", "-e", "16", "--"

#endif /* DIRTYBITMAP_QEMU_H */
