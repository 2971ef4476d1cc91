/* SPDX-License-Identifier: BSD-3-Clause */
/* connections.h: the filter's per-connection and per-request
 * callbacks (see connections.c).
 */

#ifndef DIRTYBITMAP_CONNECTIONS_H
#define DIRTYBITMAP_CONNECTIONS_H

#include <stdint.h>

#include <nbdkit-filter.h>

extern const char *conn_default_export (nbdkit_next_default_export *next,
                                        nbdkit_backend *nxdata,
                                        int readonly, int is_tls);
extern int conn_list_exports (nbdkit_next_list_exports *next,
                              nbdkit_backend *nxdata, int readonly,
                              int is_tls, struct nbdkit_exports *exports);
extern void *conn_open (nbdkit_next_open *next, nbdkit_context *nxdata,
                        int readonly, const char *exportname, int is_tls);
extern void conn_close (void *handle);
extern int conn_prepare (nbdkit_next *next, void *handle, int readonly);
extern int64_t conn_get_size (nbdkit_next *next, void *handle);
extern int conn_can_write (nbdkit_next *next, void *handle);
extern int conn_can_trim (nbdkit_next *next, void *handle);
extern int conn_can_zero (nbdkit_next *next, void *handle);
extern int conn_can_fua (nbdkit_next *next, void *handle);
extern int conn_can_flush (nbdkit_next *next, void *handle);
extern int conn_can_cache (nbdkit_next *next, void *handle);
extern int conn_can_multi_conn (nbdkit_next *next, void *handle);
extern int conn_can_extents (nbdkit_next *next, void *handle);
extern int conn_pread (nbdkit_next *next, void *handle, void *buf,
                       uint32_t count, uint64_t offset, uint32_t flags,
                       int *err);
extern int conn_pwrite (nbdkit_next *next, void *handle, const void *buf,
                        uint32_t count, uint64_t offset, uint32_t flags,
                        int *err);
extern int conn_zero (nbdkit_next *next, void *handle, uint32_t count,
                      uint64_t offset, uint32_t flags, int *err);
extern int conn_trim (nbdkit_next *next, void *handle, uint32_t count,
                      uint64_t offset, uint32_t flags, int *err);
extern int conn_flush (nbdkit_next *next, void *handle, uint32_t flags,
                       int *err);
extern int conn_extents (nbdkit_next *next, void *handle, uint32_t count,
                         uint64_t offset, uint32_t flags,
                         struct nbdkit_extents *extents, int *err);
extern int conn_cache (nbdkit_next *next, void *handle, uint32_t count,
                       uint64_t offset, uint32_t flags, int *err);

#endif /* DIRTYBITMAP_CONNECTIONS_H */
