/* SPDX-License-Identifier: BSD-3-Clause */
/* control-client.h: one request to a running filter's control socket. */

#ifndef DIRTYBITMAP_CONTROL_CLIENT_H
#define DIRTYBITMAP_CONTROL_CLIENT_H

#include <json-c/json.h>

#include "error.h"

#define CONTROL_TIMEOUT_SECONDS 60
#define CONTROL_TIMEOUT_TEXT "60 seconds"

/* {"execute": command, "arguments": arguments} (consumed; may be
 * NULL).
 */
extern json_object *control_request (const char *command,
                                     json_object *arguments);

/* Send request (consumed) on a new connection and wait for the reply:
 * 0 with its "return" value in *ret (a new reference), 1 with the
 * server's "desc" in err, or -1 after printing what went wrong with
 * the socket.
 */
extern int control_call (const char *path, json_object *request,
                         json_object **ret, struct bmerr *err);

/* The same on one connection kept for several requests (what a client
 * holds, such as a pause, lasts as long as it): control_connect gives
 * its descriptor (-1 after printing why), close it when done.
 */
extern int control_connect (const char *path);
extern int control_call_on (int fd, const char *path, json_object *request,
                            json_object **ret, struct bmerr *err);

/* The two halves of control_call_on, for one request sent to several
 * servers at once and their replies awaited together.  Deadlines are
 * clock_seconds (CLOCK_MONOTONIC) (util.h).
 * control_send sends request (consumed); control_receive waits for
 * its reply until deadline, or until wake_fd (if >= 0) is readable.
 * Both return 0 (with *ret, a new reference), 1 (err is the server's
 * "desc") or -1 (err says what went wrong with the connection: errnum
 * ETIMEDOUT "no reply in time", EINTR "interrupted", ...); they print
 * nothing.
 */
extern int control_send (int fd, json_object *request, double deadline,
                         struct bmerr *err);
extern int control_receive (int fd, double deadline, int wake_fd,
                            json_object **ret, struct bmerr *err);

#endif /* DIRTYBITMAP_CONTROL_CLIENT_H */
