/* SPDX-License-Identifier: BSD-3-Clause */
/* protocol.h: the control protocol's messages (nbdkit-dirtybitmap-
 * filter(1), CONTROL): a request line parsed and checked into a
 * struct, and replies built.  No I/O and no nbdkit: this is what the
 * control fuzzer exercises.
 */

#ifndef DIRTYBITMAP_PROTOCOL_H
#define DIRTYBITMAP_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "actions.h"

#define PROTO_MAX_LINE      65536       /* bytes, without the newline */
#define PROTO_MAX_ACTIONS   1024        /* in one transaction */

enum proto_cmd {
  CMD_QUERY, CMD_TRANSACTION, CMD_SELECT, CMD_PAUSE, CMD_RESUME,
  CMD_BACKUP_BEGIN, CMD_BACKUP_END, CMD_BACKUP_PREPARE,
};

struct proto_action {
  enum act_kind kind;
  const char *bitmap;
  uint64_t granularity;         /* add: bytes, 0 for the default */
  const char *source;           /* merge */
  const char *file;             /* merge: another bitmap file, or NULL */
};

/* The strings point into root, which the request owns. */
struct proto_request {
  json_object *root;
  bool has_id;                  /* an "id" came: echoed in the reply */
  json_object *id;              /* its value (NULL for null) */
  enum proto_cmd cmd;
  struct proto_action *actions; /* transaction */
  size_t nr_actions;
  /* bitmap: select (NULL: none); the rest backup-begin and
   * backup-prepare (name backup-end too).
   */
  const char *bitmap;
  const char *name;
  const char *checkpoint;       /* or NULL */
  const char *scratch;          /* or NULL */
  bool end_on_disconnect;       /* backup-begin */
  bool sync;                    /* pause (true unless "sync": false) */
};

struct proto_error {
  const char *cls;              /* "GenericError", "CommandNotFound" */
  char desc[1024];
};

/* Parse one request line (len bytes, no newline, not NUL-terminated)
 * and check its command and arguments.  On error returns -1 with err
 * set; req->has_id is still set when the line was an object with an "id",
 * so that the error reply can carry it.
 */
extern int proto_parse (const char *line, size_t len,
                        struct proto_request *req, struct proto_error *err);
extern void proto_request_free (struct proto_request *req);

/* Replies: one line of JSON (without the newline), malloced, with
 * the id of req (NULL: a reply to no request).  ret is consumed (NULL:
 * {}).
 */
extern char *proto_reply (const struct proto_request *req,
                          json_object *ret);
extern char *proto_error_reply (const struct proto_request *req,
                                const char *cls, const char *desc);

/* A JSON string of s, made valid UTF-8 (utf8.h). */
extern json_object *proto_string (const char *s);

#endif /* DIRTYBITMAP_PROTOCOL_H */
