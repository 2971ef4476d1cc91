/* SPDX-License-Identifier: BSD-3-Clause */
/* commands.c: the control commands (nbdkit-dirtybitmap-filter(1),
 * CONTROL): a checked request (protocol.c) run against the live
 * bitmaps (store.c) and the requests in flight (inflight.c).  They run
 * one at a time, on the control thread.
 *
 * pause closes the gate: requests that arrive wait, and the reply
 * comes once none is in flight, the bitmaps are synced and the layer
 * below is flushed: a consistent point for a storage snapshot (or,
 * with sync false, at once: a cut, for backup-begin).  The pause
 * belongs to the client that asked for it: its resume (once its reply
 * is sent), or its going away, opens the gate again.  A backup-begin under its own client's
 * pause replies at its cut and commits its checkpoint once the pause
 * ends (commands_after), or before any other command.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "backup.h"
#include "commands.h"
#include "inflight.h"
#include "protocol.h"
#include "report.h"
#include "restore.h"
#include "store.h"
#include "util.h"

static int (*flush_plugin) (struct bmerr *err);
static struct session *paused_by;
/* A resume whose gate opens once its reply is sent (commands_after):
 * the requests it lets go would otherwise compete with the reply for
 * the CPUs, and the pause would look longer than the writers waited.
 */
static bool open_after_reply;

/* Open the gate of a resume now, if one waits. */
static void
open_gate (void)
{
  if (open_after_reply) {
    open_after_reply = false;
    inflight_open ();
  }
}

void
commands_init (int (*fn) (struct bmerr *err))
{
  flush_plugin = fn;
}

static const char *
durability_name (enum bmf_durability d)
{
  return d == BMF_STRICT ? "strict" : d == BMF_COARSE ? "coarse" : "flush";
}

/* The running backup, or null. */
static json_object *
backup_json (void)
{
  struct backup_info b;
  json_object *o;

  backup_query (&b);
  if (!b.active || (o = json_object_new_object ()) == NULL) {
    backup_info_free (&b);
    return NULL;
  }
  json_object_object_add (o, "name", proto_string (b.name));
  json_object_object_add (o, "bitmap",
                          b.bitmap ? proto_string (b.bitmap) : NULL);
  json_object_object_add (o, "checkpoint",
                          b.checkpoint ? proto_string (b.checkpoint) : NULL);
  json_object_object_add (o, "failed", json_object_new_boolean (b.view.failed));
  json_object_object_add (o, "failure",
                          b.failure ? proto_string (b.failure) : NULL);
  json_object_object_add (o, "size", json_object_new_int64 (b.view.size));
  json_object_object_add (o, "granularity",
                          json_object_new_int64 (b.view.granularity));
  json_object_object_add (o, "preserved-bytes",
                          json_object_new_int64 (b.view.preserved_bytes));
  json_object_object_add (o, "lost-bytes",
                          json_object_new_int64 (b.view.lost_bytes));
  json_object_object_add (o, "scratch-bytes",
                          json_object_new_int64 (b.view.scratch_bytes));
  backup_info_free (&b);
  return o;
}

/* The restore, or null. */
static json_object *
restore_json (void)
{
  struct restore_info ri;
  struct bmerr err;
  json_object *o;

  if (restore_query (&ri, &err) == -1 || ri.source == NULL ||
      (o = json_object_new_object ()) == NULL) {
    restore_info_free (&ri);
    return NULL;
  }
  json_object_object_add (o, "source", proto_string (ri.source));
  json_object_object_add (o, "done-bytes",
                          json_object_new_int64 (ri.done_bytes));
  json_object_object_add (o, "size", json_object_new_int64 (ri.size));
  json_object_object_add (o, "complete",
                          json_object_new_boolean (ri.complete));
  restore_info_free (&ri);
  return o;
}

static json_object *
query (struct bmerr *err)
{
  struct store_info info;
  json_object *r, *list;
  size_t i;

  if (store_query (&info, err) == -1)
    return NULL;
  r = json_object_new_object ();
  list = json_object_new_array ();
  if (r == NULL || list == NULL) {
    json_object_put (r);
    json_object_put (list);
    store_info_free (&info);
    bmerr_set (err, ENOMEM, "out of memory");
    return NULL;
  }
  json_object_object_add (r, "file", proto_string (info.path));
  json_object_object_add (r, "size", info.sized ?
                          json_object_new_int64 (info.size) : NULL);
  json_object_object_add (r, "durability",
                          json_object_new_string (durability_name
                                                  (info.durability)));
  json_object_object_add (r, "state", json_object_new_string (info.state));
  json_object_object_add (r, "pid", json_object_new_int64 (getpid ()));
  json_object_object_add (r, "read-only",
                          json_object_new_boolean (info.readonly));
  json_object_object_add (r, "paused",
                          json_object_new_boolean (paused_by != NULL));
  for (i = 0; i < info.nr; ++i) {
    const struct store_bitmap_info *b = &info.bitmaps[i];
    json_object *o = json_object_new_object ();

    if (o == NULL)
      continue;
    json_object_object_add (o, "name", proto_string (b->name));
    json_object_object_add (o, "granularity",
                            json_object_new_int64 (b->granularity));
    json_object_object_add (o, "recording",
                            json_object_new_boolean (b->recording));
    json_object_object_add (o, "consistent",
                            json_object_new_boolean (b->consistent));
    json_object_object_add (o, "dirty-bytes",
                            json_object_new_int64 (b->dirty_bytes));
    json_object_object_add (o, "selected",
                            json_object_new_boolean (b->selected));
    json_object_array_add (list, o);
  }
  json_object_object_add (r, "bitmaps", list);
  json_object_object_add (r, "backup", backup_json ());
  json_object_object_add (r, "restore", restore_json ());
  store_info_free (&info);
  return r;
}

/* Open the other bitmap files that merges name (read-only), or point
 * them at this one.
 */
static int
transaction (const struct proto_request *req, struct bmerr *err)
{
  struct action *acts = calloc (req->nr_actions ? req->nr_actions : 1,
                                sizeof *acts);
  struct bmf **files = calloc (req->nr_actions ? req->nr_actions : 1,
                               sizeof *files);
  size_t i;
  int r = -1;

  if (acts == NULL || files == NULL) {
    bmerr_set (err, ENOMEM, "out of memory");
    goto out;
  }
  for (i = 0; i < req->nr_actions; ++i) {
    const struct proto_action *p = &req->actions[i];
    acts[i] = (struct action) {
      .kind = p->kind, .bitmap = p->bitmap, .src = p->source,
      .gbits = p->granularity ? log_2 (p->granularity)
                              : BMF_DEFAULT_GBITS,
    };
    if (p->file && !store_is_bitmap_file (p->file)) {
      /* Its error names the file, as dirtybitmap bitmap -b does. */
      files[i] = bmf_open (p->file, BMF_LOCK_SHARED, err);
      if (files[i] == NULL)
        goto out;
      acts[i].src_file = files[i];
    }
  }
  r = store_transaction (acts, req->nr_actions, err);

 out:
  for (i = 0; files && i < req->nr_actions; ++i)
    bmf_close (files[i]);
  free (files);
  free (acts);
  return r;
}

/* With sync false, only the cut: no request in flight.  A backup's
 * cut needs no more (see the man page, pause).
 */
static int
pause_disk (struct session *s, bool sync, struct bmerr *err)
{
  if (paused_by) {
    bmerr_set (err, EBUSY, "already paused%s",
               paused_by == s ? "" : " by another control client");
    return -1;
  }
  inflight_close ();
  if (sync && (store_sync (err) == -1 ||
               (flush_plugin && flush_plugin (err) == -1))) {
    inflight_open ();
    return -1;
  }
  paused_by = s;
  s->paused = true;
  filter_debug ("paused");
  return 0;
}

/* With later, the gate opens after the reply (open_gate). */
static int
resume_disk (struct session *s, bool later, struct bmerr *err)
{
  if (!s->paused) {
    bmerr_set (err, EINVAL, "not paused%s",
               paused_by ? " by this control client" : "");
    return -1;
  }
  s->paused = false;
  paused_by = NULL;
  if (later)
    open_after_reply = true;
  else
    inflight_open ();
  filter_debug ("resumed");
  return 0;
}

char *
commands_execute (struct session *s, const char *line, size_t len)
{
  struct proto_request req;
  struct proto_error perr;
  struct bmerr err = { 0 };
  json_object *ret = NULL;
  char *reply;
  int r = 0;

  if (proto_parse (line, len, &req, &perr) == -1) {
    reply = proto_error_reply (&req, perr.cls, perr.desc);
    proto_request_free (&req);
    return reply;
  }
  /* A resume's gate opens before the next command; a checkpoint whose
   * commit waits holds the store's lock: it is committed before
   * anything but the resume that lets it go.
   */
  open_gate ();
  if (req.cmd != CMD_RESUME)
    backup_finish_pending ();
  switch (req.cmd) {
  case CMD_QUERY:
    ret = query (&err);
    r = ret ? 0 : -1;
    break;
  case CMD_TRANSACTION:
    r = transaction (&req, &err);
    break;
  case CMD_SELECT:
    r = store_select (req.bitmap, &err);
    break;
  case CMD_PAUSE:
    r = pause_disk (s, req.sync, &err);
    break;
  case CMD_RESUME:
    r = resume_disk (s, true, &err);
    break;
  case CMD_BACKUP_PREPARE:
  case CMD_BACKUP_BEGIN: {
    const struct backup_params p = {
      .name = req.name, .bitmap = req.bitmap,
      .checkpoint = req.checkpoint, .scratch = req.scratch,
    };
    r = req.cmd == CMD_BACKUP_PREPARE ? backup_prepare (&p, s, &err)
      : backup_begin (&p, s, req.end_on_disconnect, s->paused, &err);
    break;
  }
  case CMD_BACKUP_END:
    r = backup_end (req.name, &err);
    break;
  }
  reply = r == 0 ? proto_reply (&req, ret)
    : proto_error_reply (&req, "GenericError", err.msg);
  proto_request_free (&req);
  return reply;
}

void
commands_after (void)
{
  open_gate ();
  if (paused_by == NULL)
    backup_finish_pending ();
}

void
commands_end (struct session *s)
{
  struct bmerr err;

  backup_owner_gone (s);
  if (s->paused) {
    filter_debug ("the control client that paused has gone: "
                  "resuming");
    resume_disk (s, false, &err);
  }
}
