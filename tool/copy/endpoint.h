/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/endpoint.h: what a source or target named on the command line
 * is, decided once.  An endpoint is an NBD export (a URI: its server,
 * a Unix socket or a host and port, and its export name) or a local
 * file (a regular file, a block device, or a file not there yet).
 * Everything the tool derives from that is here: the kind, the place
 * (compared by what it is, not by how it is spelled), how a message
 * names it, and where a file or a Unix socket lives.
 *
 * A file is its absolute path with symlinks, "." and ".." resolved
 * (also when it does not exist yet: its directory resolved and its name
 * appended, a dangling symlink followed), and, when it exists, its
 * device and inode (a hard link is the same file).  An NBD target is
 * its server (its Unix socket, as a file; or "tcp:HOST:PORT",
 * "vsock:CID:PORT") and its export name.
 */

#ifndef DIRTYBITMAP_COPY_ENDPOINT_H
#define DIRTYBITMAP_COPY_ENDPOINT_H

#include <stdbool.h>
#include <sys/types.h>

struct endpoint {
  bool nbd;                     /* an NBD export (export is set) */
  char *path;                   /* a file, or an NBD server's Unix
                                 * socket, as given (decoded); NULL for
                                 * a server over TCP or vsock */
  char *where;                  /* the file or socket, canonical; or
                                 * "tcp:HOST:PORT", "vsock:CID:PORT" */
  bool exists;                  /* where is a file that exists */
  dev_t dev;
  ino_t ino;
  char *export;                 /* an NBD export's name */
};

/* Does s start with one of libnbd's NBD URI schemes (nbd://,
 * nbd+unix://, ...)?
 */
extern bool is_nbd_uri (const char *s);

/* What name is: -1 when out of memory. */
extern int endpoint_of (const char *name, struct endpoint *e);
extern void endpoint_free (struct endpoint *e);

/* The same place, however spelled. */
extern bool endpoint_same (const struct endpoint *a,
                           const struct endpoint *b);

/* How a message names it: malloced (NULL on ENOMEM). */
extern char *endpoint_name (const struct endpoint *e);

/* uri with its export name replaced by name: nbd+unix:///?socket=S
 * and export VIEW give nbd+unix:///VIEW?socket=S.  Malloced, NULL on
 * ENOMEM or when uri is not a URI.
 */
extern char *endpoint_with_export (const char *uri, const char *name);

#endif /* DIRTYBITMAP_COPY_ENDPOINT_H */
