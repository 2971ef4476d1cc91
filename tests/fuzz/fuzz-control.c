/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz-control.c: libFuzzer target for the control protocol's parser,
 * proto_parse (filter/protocol.c), and its replies ("make fuzz" in
 * tests/; replayed on fuzz/control-corpus/ by make check).  Each input
 * is one request line, as the control thread hands it over (the
 * bytes before a newline; an input holding a newline is cut there).
 *
 *   - proto_parse returns 0 with a request, or -1 with an error of a
 *     known class and a non-empty description; a line over
 *     PROTO_MAX_LINE bytes is always an error;
 *   - a request holds only what the protocol allows: a known command;
 *     at most PROTO_MAX_ACTIONS actions, each of a known kind, with a
 *     bitmap, a source exactly for merge, a file only for merge, a
 *     granularity only for add and then a power of 2 from 512 to 2G;
 *     every string without a NUL and no longer than the line; the
 *     names of select and backup-begin/end 1 to 1023 bytes; a
 *     non-empty scratch path;
 *   - the reply, an error reply (for an error) or a reply echoing every
 *     string of the request (for a request), is one line (no newline
 *     in it) of strict JSON in valid UTF-8 (json-c parses it back with
 *     both checks), shaped {"return": ...} or {"error": {"class",
 *     "desc"}}, with the request's "id" echoed exactly when it had
 *     one, and every string as it was given (made valid UTF-8).
 *
 * Any violation aborts, which libFuzzer reports with the input.  With
 * FUZZ_CONTROL_TRACE set, each input's outcome is printed ("-> parsed
 * COMMAND" or "-> error CLASS"), for make check to compare.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <json-c/json.h>

#include "format.h"
#include "msg.h"
#include "protocol.h"
#include "util.h"
#include "utf8.h"

void
bm_error (const char *fs, ...)
{
}

void
bm_debug (const char *fs, ...)
{
}

static void
die (const char *what, const char *detail)
{
  fprintf (stderr, "fuzz-control: %s%s%s\n", what,
           detail ? ": " : "", detail ? detail : "");
  abort ();
}

static bool trace;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  trace = getenv ("FUZZ_CONTROL_TRACE") != NULL;
  return 0;
}

static const char *
cmd_name (enum proto_cmd cmd)
{
  switch (cmd) {
  case CMD_QUERY: return "query";
  case CMD_TRANSACTION: return "transaction";
  case CMD_SELECT: return "select";
  case CMD_PAUSE: return "pause";
  case CMD_RESUME: return "resume";
  case CMD_BACKUP_BEGIN: return "backup-begin";
  case CMD_BACKUP_END: return "backup-end";
  case CMD_BACKUP_PREPARE: return "backup-prepare";
  }
  return "?";
}

/* A string of a request: inside the line's length, no NUL (the
 * strlen is what the code uses); a name also 1 to 1023 bytes.
 */
static void
check_string (const char *s, size_t line_len, bool name, const char *what)
{
  size_t n;

  if (s == NULL)
    return;
  n = strlen (s);
  if (n > line_len)
    die ("a string longer than the line", what);
  if (name && (n == 0 || n > BMF_MAX_NAME))
    die ("a name out of limits", what);
}

static void
check_request (const struct proto_request *req, size_t len)
{
  size_t i;

  switch (req->cmd) {
  case CMD_QUERY: case CMD_PAUSE: case CMD_RESUME:
    if (req->nr_actions || req->bitmap || req->name || req->checkpoint ||
        req->scratch)
      die ("arguments on a command that takes none", NULL);
    break;
  case CMD_SELECT:
    check_string (req->bitmap, len, true, "select bitmap");
    break;
  case CMD_TRANSACTION:
    if (req->nr_actions > PROTO_MAX_ACTIONS)
      die ("too many actions", NULL);
    for (i = 0; i < req->nr_actions; ++i) {
      const struct proto_action *a = &req->actions[i];
      if (a->kind > ACT_MERGE)
        die ("an unknown action kind", NULL);
      if (a->bitmap == NULL)
        die ("an action without a bitmap", NULL);
      check_string (a->bitmap, len, false, "action bitmap");
      check_string (a->source, len, false, "action source");
      check_string (a->file, len, false, "action file");
      if ((a->kind == ACT_MERGE) != (a->source != NULL))
        die ("a source on an action other than merge, or none on merge",
             NULL);
      if (a->file && a->kind != ACT_MERGE)
        die ("a file on an action other than merge", NULL);
      if (a->granularity &&
          (a->kind != ACT_ADD || bmf_granularity_problem (a->granularity)))
        die ("a granularity out of place or out of limits", NULL);
    }
    break;
  case CMD_BACKUP_BEGIN:
  case CMD_BACKUP_PREPARE:
    if (req->name == NULL)
      die ("backup-begin without a name", NULL);
    check_string (req->name, len, true, "backup-begin name");
    check_string (req->bitmap, len, true, "backup-begin bitmap");
    check_string (req->checkpoint, len, true, "backup-begin checkpoint");
    check_string (req->scratch, len, false, "backup-begin scratch");
    if (req->scratch && req->scratch[0] == '\0')
      die ("an empty scratch path", NULL);
    break;
  case CMD_BACKUP_END:
    if (req->name == NULL)
      die ("backup-end without a name", NULL);
    check_string (req->name, len, true, "backup-end name");
    break;
  default:
    die ("an unknown command", NULL);
  }
}

/* proto_string (s) as the reply carries it: valid UTF-8. */
static json_object *
echo (const char *s)
{
  json_object *o;

  if (s == NULL)
    return NULL;
  o = proto_string (s);
  if (o == NULL)
    die ("proto_string failed", s);
  return o;
}

/* A return value holding every string of the request. */
static json_object *
echo_request (const struct proto_request *req)
{
  json_object *r = json_object_new_object (), *list;
  size_t i;

  json_object_object_add (r, "bitmap", echo (req->bitmap));
  json_object_object_add (r, "name", echo (req->name));
  json_object_object_add (r, "checkpoint", echo (req->checkpoint));
  json_object_object_add (r, "scratch", echo (req->scratch));
  list = json_object_new_array ();
  for (i = 0; i < req->nr_actions; ++i) {
    json_object *a = json_object_new_object ();
    json_object_object_add (a, "bitmap", echo (req->actions[i].bitmap));
    json_object_object_add (a, "source", echo (req->actions[i].source));
    json_object_object_add (a, "file", echo (req->actions[i].file));
    json_object_array_add (list, a);
  }
  json_object_object_add (r, "actions", list);
  return r;
}

/* Whether o's string member key is s, made valid UTF-8 (or both are
 * absent).
 */
static bool
same_string (json_object *o, const char *key, const char *s)
{
  json_object *v;
  char *want;
  bool r;

  if (!json_object_object_get_ex (o, key, &v) || v == NULL)
    return s == NULL;
  if (s == NULL || !json_object_is_type (v, json_type_string))
    return false;
  want = utf8_valid_copy (s);
  if (want == NULL)
    die ("out of memory", NULL);
  r = strcmp (json_object_get_string (v), want) == 0;
  free (want);
  return r;
}

/* Parse a reply back, strictly: one line, valid JSON, valid UTF-8, an
 * object with the id echoed.  Returns the reply's object (without its
 * id), to free.
 */
static json_object *
parse_reply (const char *reply, const struct proto_request *req,
             const char *top)
{
  struct json_tokener *tok;
  json_object *o, *v;
  size_t n;

  if (reply == NULL)
    die ("no reply", NULL);
  n = strlen (reply);
  if (memchr (reply, '\n', n))
    die ("a newline in a reply", reply);
  if (!utf8_valid (reply, n))
    die ("a reply that is not valid UTF-8", reply);
  tok = json_tokener_new ();
  json_tokener_set_flags (tok, JSON_TOKENER_STRICT |
                          JSON_TOKENER_VALIDATE_UTF8);
  o = json_tokener_parse_ex (tok, reply, n);
  if (o == NULL || json_tokener_get_error (tok) != json_tokener_success ||
      (size_t) json_tokener_get_parse_end (tok) != n)
    die ("a reply that is not strict JSON", reply);
  json_tokener_free (tok);
  if (!json_object_is_type (o, json_type_object))
    die ("a reply that is not an object", reply);
  if (json_object_object_get_ex (o, "id", &v)) {
    /* (json_object_equal takes two nulls as equal.) */
    if (!req->has_id || !json_object_equal (req->id, v))
      die ("an id in the reply that the request did not have", reply);
    json_object_object_del (o, "id");
  }
  else if (req->has_id)
    die ("the request's id is not echoed", reply);
  if (json_object_object_length (o) != 1 ||
      !json_object_object_get_ex (o, top, NULL))
    die ("a reply of the wrong shape", reply);
  return o;
}

static void
check_error_reply (const struct proto_request *req,
                   const struct proto_error *err)
{
  json_object *o, *e;
  char *reply;

  reply = proto_error_reply (req, err->cls, err->desc);
  o = parse_reply (reply, req, "error");
  json_object_object_get_ex (o, "error", &e);
  if (!json_object_is_type (e, json_type_object) ||
      json_object_object_length (e) != 2 ||
      !same_string (e, "class", err->cls) ||
      !same_string (e, "desc", err->desc))
    die ("an error reply of the wrong shape", reply);
  json_object_put (o);
  free (reply);
}

static void
check_reply (const struct proto_request *req)
{
  json_object *o, *r, *list;
  char *reply;
  size_t i;

  reply = proto_reply (req, echo_request (req));
  o = parse_reply (reply, req, "return");
  json_object_object_get_ex (o, "return", &r);
  if (!same_string (r, "bitmap", req->bitmap) ||
      !same_string (r, "name", req->name) ||
      !same_string (r, "checkpoint", req->checkpoint) ||
      !same_string (r, "scratch", req->scratch) ||
      !json_object_object_get_ex (r, "actions", &list) ||
      json_object_array_length (list) != req->nr_actions)
    die ("a string of the request is not echoed as it was", reply);
  for (i = 0; i < req->nr_actions; ++i) {
    json_object *a = json_object_array_get_idx (list, i);
    if (!same_string (a, "bitmap", req->actions[i].bitmap) ||
        !same_string (a, "source", req->actions[i].source) ||
        !same_string (a, "file", req->actions[i].file))
      die ("a string of an action is not echoed as it was", reply);
  }
  json_object_put (o);
  free (reply);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const char *line = (const char *) data;
  const char *nl = memchr (data, '\n', size);
  const size_t len = nl ? (size_t) (nl - line) : size;
  struct proto_request req;
  struct proto_error err;
  int r;

  memset (&err, 0x55, sizeof err);
  r = proto_parse (line, len, &req, &err);
  if (r == 0) {
    if (len > PROTO_MAX_LINE)
      die ("a line over the limit parsed", NULL);
    check_request (&req, len);
    check_reply (&req);
    if (trace)
      printf ("-> parsed %s\n", cmd_name (req.cmd));
  }
  else if (r == -1) {
    if (err.cls == NULL || (strcmp (err.cls, "GenericError") != 0 &&
                            strcmp (err.cls, "CommandNotFound") != 0))
      die ("an error of an unknown class", NULL);
    if (memchr (err.desc, '\0', sizeof err.desc) == NULL ||
        err.desc[0] == '\0')
      die ("an error without a description", NULL);
    check_error_reply (&req, &err);
    if (trace)
      printf ("-> error %s\n", err.cls);
  }
  else
    die ("proto_parse returned neither 0 nor -1", NULL);
  proto_request_free (&req);
  return 0;
}
