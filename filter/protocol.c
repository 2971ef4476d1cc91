/* SPDX-License-Identifier: BSD-3-Clause */
/* protocol.c: the control protocol's messages (see protocol.h).
 *
 * Requests are QMP-shaped: {"execute": NAME, "arguments": {...}}, with
 * an optional "id" that the reply echoes.  Everything is checked here,
 * before anything runs: the command, every argument's name and type,
 * and the shape of each action of a transaction, so that a request
 * that is wrong in any part changes nothing.  The JSON text must be
 * strict (json-c's tokener checks) and valid UTF-8 (utf8_valid, which
 * is stricter than json-c).
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>

#include "format.h"
#include "protocol.h"
#include "utf8.h"

static const char *const cmd_names[] = {
  [CMD_QUERY] = "query", [CMD_TRANSACTION] = "transaction",
  [CMD_SELECT] = "select", [CMD_PAUSE] = "pause", [CMD_RESUME] = "resume",
  [CMD_BACKUP_BEGIN] = "backup-begin", [CMD_BACKUP_END] = "backup-end",
  [CMD_BACKUP_PREPARE] = "backup-prepare",
};

static int __attribute__ ((format (printf, 3, 4)))
fail (struct proto_error *err, const char *cls, const char *fs, ...)
{
  va_list args;

  err->cls = cls;
  va_start (args, fs);
  vsnprintf (err->desc, sizeof err->desc, fs, args);
  va_end (args);
  return -1;
}

/* Every key of obj must be one of allowed (NULL-terminated). */
static int
only_keys (json_object *obj, const char *what, const char *const *allowed,
           struct proto_error *err)
{
  json_object_object_foreach (obj, key, val) {
    size_t i;
    (void) val;
    for (i = 0; allowed[i]; ++i)
      if (strcmp (key, allowed[i]) == 0)
        break;
    if (allowed[i] == NULL)
      return fail (err, "GenericError", "%s: unknown argument '%s'",
                   what, key);
  }
  return 0;
}

/* A string member: required or not. */
static int
get_string (json_object *obj, const char *what, const char *key,
            bool required, const char **out, struct proto_error *err)
{
  json_object *v;

  *out = NULL;
  if (!json_object_object_get_ex (obj, key, &v) ||
      json_object_is_type (v, json_type_null)) {
    if (required)
      return fail (err, "GenericError", "%s: argument '%s' is missing",
                   what, key);
    return 0;
  }
  if (!json_object_is_type (v, json_type_string))
    return fail (err, "GenericError", "%s: argument '%s' must be a string",
                 what, key);
  *out = json_object_get_string (v);
  if (strlen (*out) != (size_t) json_object_get_string_len (v))
    return fail (err, "GenericError", "%s: argument '%s' contains a NUL "
                 "character", what, key);
  return 0;
}

/* An optional absolute path (the server runs in "/"). */
static int
get_path (json_object *obj, const char *what, const char *key,
          const char **out, struct proto_error *err)
{
  if (get_string (obj, what, key, false, out, err) == -1)
    return -1;
  if (*out && (*out)[0] != '/')
    return fail (err, "GenericError", "%s: argument '%s' must be an "
                 "absolute path", what, key);
  return 0;
}

static int
get_bool (json_object *obj, const char *what, const char *key, bool *out,
          struct proto_error *err)
{
  json_object *v;

  *out = false;
  if (!json_object_object_get_ex (obj, key, &v) ||
      json_object_is_type (v, json_type_null))
    return 0;
  if (!json_object_is_type (v, json_type_boolean))
    return fail (err, "GenericError", "%s: argument '%s' must be true or "
                 "false", what, key);
  *out = json_object_get_boolean (v);
  return 0;
}

static int
get_name (json_object *obj, const char *what, const char *key, bool required,
          const char **out, struct proto_error *err)
{
  const char *why;

  if (get_string (obj, what, key, required, out, err) == -1)
    return -1;
  if (*out && (why = bmf_name_problem (*out)) != NULL)
    return fail (err, "GenericError", "%s: argument '%s': the name %s",
                 what, key, why);
  return 0;
}

static int
parse_action (json_object *a, size_t i, struct proto_action *out,
              struct proto_error *err)
{
  static const char *const add_keys[] =
    { "action", "bitmap", "granularity", NULL };
  static const char *const plain_keys[] = { "action", "bitmap", NULL };
  static const char *const merge_keys[] =
    { "action", "bitmap", "source", "file", NULL };
  char what[64];
  const char *kind;
  json_object *g;
  int k;

  snprintf (what, sizeof what, "transaction: action %zu", i);
  if (!json_object_is_type (a, json_type_object))
    return fail (err, "GenericError", "%s: must be an object", what);
  if (get_string (a, what, "action", true, &kind, err) == -1)
    return -1;
  k = act_kind_of (kind);
  if (k == -1)
    return fail (err, "GenericError", "%s: unknown action '%s' (expected "
                 "add, remove, clear, enable, disable or merge)", what, kind);
  out->kind = k;
  /* The names' lengths are checked by the actions (act_begin), before
   * anything is done, in the words of dirtybitmap bitmap offline.
   */
  if (only_keys (a, what, k == ACT_ADD ? add_keys :
                 k == ACT_MERGE ? merge_keys : plain_keys, err) == -1 ||
      get_string (a, what, "bitmap", true, &out->bitmap, err) == -1)
    return -1;
  if (k == ACT_MERGE &&
      (get_string (a, what, "source", true, &out->source, err) == -1 ||
       get_path (a, what, "file", &out->file, err) == -1))
    return -1;
  if (k == ACT_ADD && json_object_object_get_ex (a, "granularity", &g) &&
      !json_object_is_type (g, json_type_null)) {
    int64_t v;
    if (!json_object_is_type (g, json_type_int) ||
        (v = json_object_get_int64 (g)) <= 0 ||
        bmf_granularity_problem (v))
      return fail (err, "GenericError", "%s: argument 'granularity' %s "
                   "(in bytes)", what, bmf_granularity_problem (0));
    out->granularity = v;
  }
  return 0;
}

static int
parse_arguments (struct proto_request *req, json_object *args,
                 struct proto_error *err)
{
  static const char *const none[] = { NULL };
  static const char *const transaction_keys[] = { "actions", NULL };
  static const char *const select_keys[] = { "bitmap", NULL };
  static const char *const begin_keys[] =
    { "name", "bitmap", "checkpoint", "scratch", "end-on-disconnect",
      NULL };
  static const char *const end_keys[] = { "name", NULL };
  static const char *const pause_keys[] = { "sync", NULL };
  const char *what = cmd_names[req->cmd];
  json_object *list;
  size_t i, n;

  switch (req->cmd) {
  case CMD_QUERY:
  case CMD_RESUME:
    return only_keys (args, what, none, err);

  case CMD_PAUSE:
    req->sync = true;
    if (only_keys (args, what, pause_keys, err) == -1)
      return -1;
    /* Left out, or null: true. */
    if (json_object_object_get_ex (args, "sync", &list) && list &&
        get_bool (args, what, "sync", &req->sync, err) == -1)
      return -1;
    return 0;

  case CMD_SELECT:
    if (only_keys (args, what, select_keys, err) == -1)
      return -1;
    if (!json_object_object_get_ex (args, "bitmap", NULL))
      return fail (err, "GenericError", "select: argument 'bitmap' is "
                   "missing (null selects none)");
    return get_name (args, what, "bitmap", false, &req->bitmap, err);

  case CMD_TRANSACTION:
    if (only_keys (args, what, transaction_keys, err) == -1)
      return -1;
    if (!json_object_object_get_ex (args, "actions", &list))
      return fail (err, "GenericError", "transaction: argument 'actions' "
                   "is missing");
    if (!json_object_is_type (list, json_type_array))
      return fail (err, "GenericError", "transaction: argument 'actions' "
                   "must be an array");
    n = json_object_array_length (list);
    if (n > PROTO_MAX_ACTIONS)
      return fail (err, "GenericError", "transaction: %zu actions (the "
                   "limit is %d)", n, PROTO_MAX_ACTIONS);
    req->actions = calloc (n ? n : 1, sizeof *req->actions);
    if (req->actions == NULL)
      return fail (err, "GenericError", "out of memory");
    for (i = 0; i < n; ++i) {
      if (parse_action (json_object_array_get_idx (list, i), i,
                        &req->actions[i], err) == -1)
        return -1;
      req->nr_actions++;
    }
    return 0;

  case CMD_BACKUP_BEGIN:
  case CMD_BACKUP_PREPARE:
    if (only_keys (args, what, begin_keys, err) == -1 ||
        get_name (args, what, "name", true, &req->name, err) == -1 ||
        get_name (args, what, "bitmap", false, &req->bitmap, err) == -1 ||
        get_name (args, what, "checkpoint", false, &req->checkpoint,
                  err) == -1 ||
        get_path (args, what, "scratch", &req->scratch, err) == -1)
      return -1;
    return get_bool (args, what, "end-on-disconnect",
                     &req->end_on_disconnect, err);

  case CMD_BACKUP_END:
    if (only_keys (args, what, end_keys, err) == -1)
      return -1;
    return get_name (args, what, "name", true, &req->name, err);
  }
  return fail (err, "GenericError", "internal error");
}

int
proto_parse (const char *line, size_t len, struct proto_request *req,
             struct proto_error *err)
{
  static const char *const top_keys[] =
    { "execute", "arguments", "id", NULL };
  struct json_tokener *tok;
  enum json_tokener_error jerr;
  json_object *args = NULL, *empty = NULL;
  const char *name;
  size_t i;
  int r;

  memset (req, 0, sizeof *req);
  if (len > PROTO_MAX_LINE)
    return fail (err, "GenericError", "request longer than %d bytes",
                 PROTO_MAX_LINE);
  /* json-c's check lets overlong forms, surrogates and code points
   * beyond U+10FFFF through: the id would carry them into the reply.
   */
  if (!utf8_valid (line, len))
    return fail (err, "GenericError", "invalid JSON: invalid utf-8 string");
  tok = json_tokener_new ();
  if (tok == NULL)
    return fail (err, "GenericError", "out of memory");
  json_tokener_set_flags (tok, JSON_TOKENER_STRICT |
                          JSON_TOKENER_VALIDATE_UTF8);
  req->root = json_tokener_parse_ex (tok, line, len);
  jerr = json_tokener_get_error (tok);
  if (req->root && (size_t) json_tokener_get_parse_end (tok) < len) {
    /* Only blanks may follow the object. */
    for (i = json_tokener_get_parse_end (tok); i < len; ++i)
      if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
        break;
    if (i < len)
      jerr = json_tokener_error_parse_unexpected;
  }
  json_tokener_free (tok);
  if (req->root == NULL || jerr != json_tokener_success)
    return fail (err, "GenericError", "invalid JSON: %s",
                 jerr == json_tokener_continue ? "unexpected end of line" :
                 json_tokener_error_desc (jerr));
  if (!json_object_is_type (req->root, json_type_object))
    return fail (err, "GenericError", "a request must be a JSON object");
  req->has_id = json_object_object_get_ex (req->root, "id", &req->id);
  if (only_keys (req->root, "request", top_keys, err) == -1)
    return -1;
  if (get_string (req->root, "request", "execute", true, &name, err) == -1)
    return -1;
  for (i = 0; i < sizeof cmd_names / sizeof cmd_names[0]; ++i)
    if (strcmp (name, cmd_names[i]) == 0)
      break;
  if (i == sizeof cmd_names / sizeof cmd_names[0])
    return fail (err, "CommandNotFound", "the command '%s' has not been "
                 "found", name);
  req->cmd = i;
  if (json_object_object_get_ex (req->root, "arguments", &args) &&
      !json_object_is_type (args, json_type_object))
    return fail (err, "GenericError", "'arguments' must be an object");
  if (args == NULL && (args = empty = json_object_new_object ()) == NULL)
    return fail (err, "GenericError", "out of memory");
  r = parse_arguments (req, args, err);
  json_object_put (empty);
  return r;
}

void
proto_request_free (struct proto_request *req)
{
  free (req->actions);
  json_object_put (req->root);
  memset (req, 0, sizeof *req);
}

static char *
finish (json_object *reply, const struct proto_request *req)
{
  char *s = NULL;

  if (reply == NULL)
    return NULL;
  /* (An id of null is a NULL json_object, and is echoed too.) */
  if (req && req->has_id)
    json_object_object_add (reply, "id", json_object_get (req->id));
  s = strdup (json_object_to_json_string_ext (reply,
                                              JSON_C_TO_STRING_PLAIN |
                                              JSON_C_TO_STRING_NOSLASHESCAPE));
  json_object_put (reply);
  return s;
}

char *
proto_reply (const struct proto_request *req, json_object *ret)
{
  json_object *reply = json_object_new_object ();

  if (ret == NULL)
    ret = json_object_new_object ();
  if (reply == NULL || ret == NULL) {
    json_object_put (reply);
    json_object_put (ret);
    return NULL;
  }
  json_object_object_add (reply, "return", ret);
  return finish (reply, req);
}

char *
proto_error_reply (const struct proto_request *req, const char *cls,
                   const char *desc)
{
  json_object *reply = json_object_new_object ();
  json_object *e = json_object_new_object ();

  if (reply == NULL || e == NULL) {
    json_object_put (reply);
    json_object_put (e);
    return NULL;
  }
  json_object_object_add (e, "class", json_object_new_string (cls));
  json_object_object_add (e, "desc", proto_string (desc));
  json_object_object_add (reply, "error", e);
  return finish (reply, req);
}

json_object *
proto_string (const char *s)
{
  char *valid = utf8_valid_copy (s);
  json_object *o = valid ? json_object_new_string (valid) : NULL;

  free (valid);
  return o;
}
