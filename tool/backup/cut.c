/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/cut.c: one cut through every disk of a machine, and its undo.
 *
 * The order, exactly (dirtybitmap(1), BACKING UP A VIRTUAL MACHINE):
 * backup-prepare on every server (what each begin needs that does not
 * depend on the instant, the guest running); freeze the guest; pause
 * every server (each reply means its requests in flight are done;
 * nothing is synced); backup-begin on each (a view and NEW, at that
 * point); resume every server; thaw; a query of each, which each server
 * answers once it has committed NEW (its begin left that for after
 * the resume).  A write completed before the first pause was sent is
 * in every view; one started after the last resume was answered is in
 * none; in between, no write runs at all.  The window is bounded by
 * --cut-timeout.
 *
 * All or nothing: on any failure every server is resumed, the guest
 * thawed, every view ended and NEW removed from every disk where this
 * run may have added it, so every disk stays at B.  Before anything,
 * cut_check looks for what a run killed with SIGKILL leaves behind.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include <unistd.h>

#include "control-client.h"
#include "dirtybitmap.h"
#include "internal.h"
#include "util.h"

/* What query says of one disk. */
struct state {
  bool has_new, has_base, base_consistent;
  uint64_t base_granularity;
  const char *view;             /* the open view's name, or NULL */
  uint64_t size, granularity;
};

static void
read_state (const struct set *s, json_object *q, struct state *st)
{
  json_object *bitmaps, *b, *v;
  size_t i;

  memset (st, 0, sizeof *st);
  if (json_object_object_get_ex (q, "size", &v))
    st->size = json_object_get_uint64 (v);
  if (json_object_object_get_ex (q, "backup", &b) && b &&
      json_object_object_get_ex (b, "name", &v))
    st->view = json_object_get_string (v);
  if (!json_object_object_get_ex (q, "bitmaps", &bitmaps))
    return;
  for (i = 0; i < json_object_array_length (bitmaps); ++i) {
    const char *name;
    b = json_object_array_get_idx (bitmaps, i);
    if (!json_object_object_get_ex (b, "name", &v))
      continue;
    name = json_object_get_string (v);
    if (strcmp (name, s->checkpoint) == 0) {
      st->has_new = true;
      if (json_object_object_get_ex (b, "granularity", &v))
        st->granularity = json_object_get_uint64 (v);
    }
    if (s->incremental && strcmp (name, s->incremental) == 0) {
      st->has_base = true;
      st->base_consistent =
        json_object_object_get_ex (b, "consistent", &v) &&
        json_object_get_boolean (v);
      if (json_object_object_get_ex (b, "granularity", &v))
        st->base_granularity = json_object_get_uint64 (v);
    }
  }
}

static json_object *
remove_args (const char *bitmap)
{
  json_object *args = json_object_new_object ();
  json_object *list = json_object_new_array ();
  json_object *a = json_object_new_object ();

  json_object_object_add (a, "action", json_object_new_string ("remove"));
  json_object_object_add (a, "bitmap", json_object_new_string (bitmap));
  json_object_array_add (list, a);
  json_object_object_add (args, "actions", list);
  return args;
}

static json_object *
remove_new (const struct set *s, const struct disk *d)
{
  (void) d;
  return remove_args (s->checkpoint);
}

static json_object *
remove_base (const struct set *s, const struct disk *d)
{
  (void) d;
  return remove_args (s->incremental);
}

/* Which disks a step concerns. */
static bool is_leftover (const struct disk *d) { return d->leftover; }
static bool is_paused (const struct disk *d) { return d->paused; }
static bool is_begun (const struct disk *d) { return d->begun; }
static bool has_base (const struct disk *d)
{
  return d->base_granularity != 0;
}

static double
control_deadline (void)
{
  return clock_seconds (CLOCK_MONOTONIC) + CONTROL_TIMEOUT_SECONDS;
}

/* Every disk's query, into rets (NULL where it failed). */
static int
query_all (struct set *s, json_object **rets)
{
  return servers_call (s, "query", NULL, NULL, control_deadline (), true,
                       rets);
}

static void
put_all (struct set *s, json_object **rets)
{
  size_t i;

  for (i = 0; i < s->n; ++i)
    json_object_put (rets[i]);
  free (rets);
}

int
cut_check (struct set *s)
{
  json_object **rets = calloc (s->n, sizeof *rets);
  struct state st;
  size_t i, with_new = 0, without_base = 0, without_sums = 0;
  int r = -1;

  if (rets == NULL) {
    set_fail (s, "out of memory");
    return -1;
  }
  if (query_all (s, rets) == -1)
    goto out;
  for (i = 0; i < s->n; ++i) {
    read_state (s, rets[i], &st);
    if (st.view) {
      disk_fail (&s->disks[i], "a backup view \"%s\" is open on it: "
                 "another backup is running (a view lasts as long as the "
                 "backup that began it)", st.view);
      goto out;
    }
    s->disks[i].leftover = st.has_new;
    s->disks[i].size_before = st.size;
    s->disks[i].base_granularity = st.base_granularity;
    with_new += st.has_new;
    without_base += s->incremental && !st.has_base;
  }
  for (i = 0; i < s->n; ++i) {
    checksums_find (s, &s->disks[i]);
    without_sums += s->disks[i].prev == NULL;
  }
  if (s->incremental && !s->sums_required &&
      without_base == s->n && without_sums == s->n) {
    /* Most likely a wrong name: nothing to build on anywhere.  (In a
     * repository B is the newest point, not a name given: what cannot
     * be built on is copied in full, said by checksums_plan.)
     */
    set_fail (s, "bitmap %s is on no disk, and no disk has the checksums "
              "of a backup at %s: an incremental backup needs one or the "
              "other (a full backup, without --incremental, starts a new "
              "chain)", s->incremental, s->incremental);
    goto out;
  }
  for (i = 0; i < s->n; ++i) {
    read_state (s, rets[i], &st);
    checksums_plan (s, &s->disks[i], st.has_base, st.base_consistent);
  }
  if (with_new == s->n) {
    set_fail (s, "bitmap %s exists on every disk: a backup to %s was "
              "taken already, or one was killed after its cut.  If no "
              "backup of this set is meant to start from %s, remove it "
              "and run again:", s->checkpoint, s->checkpoint,
              s->checkpoint);
    for (i = 0; i < s->n; ++i)
      disk_fail (&s->disks[i], "to remove it: %s bitmap --remove "
                 "--control %s %s", prog, s->disks[i].control,
                 s->checkpoint);
    goto out;
  }
  if (with_new) {
    /* A complete backup leaves NEW on every disk: on some only, it is
     * what an incomplete one left.  B (or, for a full backup, nothing)
     * still covers every change, so removing it loses nothing.
     */
    if (servers_call (s, "transaction", remove_new, is_leftover,
                      control_deadline (), true, NULL) == -1)
      goto out;
    for (i = 0; i < s->n; ++i)
      if (s->disks[i].leftover)
        bm_error ("backup: disk %s: removed checkpoint %s left by an "
                  "incomplete backup", s->disks[i].name, s->checkpoint);
  }
  r = 0;

 out:
  put_all (s, rets);
  return r;
}

static json_object *
begin_args (const struct set *s, const struct disk *d)
{
  json_object *args = json_object_new_object ();

  json_object_object_add (args, "name", json_object_new_string (s->view));
  if (d->mode == MODE_INCREMENTAL)
    json_object_object_add (args, "bitmap",
                            json_object_new_string (s->incremental));
  json_object_object_add (args, "checkpoint",
                          json_object_new_string (s->checkpoint));
  if (d->scratch)
    json_object_object_add (args, "scratch",
                            json_object_new_string (d->scratch));
  json_object_object_add (args, "end-on-disconnect",
                          json_object_new_boolean (true));
  return args;
}

static json_object *
end_args (const struct set *s, const struct disk *d)
{
  json_object *args = json_object_new_object ();

  (void) d;
  json_object_object_add (args, "name", json_object_new_string (s->view));
  return args;
}

/* One step of the cut on every disk that want says (wake: a signal
 * ends it); each disk that answered gets its flag (paused, begun) set
 * to to.
 */
static int
step (struct set *s, const char *command, args_fn args,
      bool (*want) (const struct disk *d), double deadline, bool wake,
      bool *(*flag) (struct disk *d), bool to)
{
  json_object **rets = calloc (s->n, sizeof *rets);
  size_t i;
  int r;

  if (rets == NULL) {
    set_fail (s, "out of memory");
    return -1;
  }
  r = servers_call (s, command, args, want, deadline, wake, rets);
  for (i = 0; i < s->n; ++i)
    if (rets[i])
      *flag (&s->disks[i]) = to;
  put_all (s, rets);
  return r;
}

/* A pause for a cut: no request in flight, nothing synced (what must
 * be durable is made so by each server after the resume, before its
 * next reply: read_sizes waits for it).
 */
static json_object *
pause_args (const struct set *s, const struct disk *d)
{
  json_object *args = json_object_new_object ();

  (void) s;
  (void) d;
  json_object_object_add (args, "sync", json_object_new_boolean (false));
  return args;
}

static bool *paused_flag (struct disk *d) { return &d->paused; }
static bool *begun_flag (struct disk *d) { return &d->begun; }

static void
mark_added (struct set *s)
{
  size_t i;

  for (i = 0; i < s->n; ++i)
    s->disks[i].added = true;
}

/* Each disk's size and NEW's granularity, for the manifest; the
 * reply comes once the server has committed NEW (its begin, inside the
 * pause, left that for after the resume): -1 if it could not.
 */
static int
read_sizes (struct set *s)
{
  json_object **rets = calloc (s->n, sizeof *rets);
  json_object *b, *f;
  struct state st;
  size_t i;
  int r;

  if (rets == NULL) {
    set_fail (s, "out of memory");
    return -1;
  }
  r = servers_call (s, "query", NULL, NULL, control_deadline (), false,
                    rets);
  for (i = 0; i < s->n; ++i) {
    if (rets[i] == NULL)
      continue;
    read_state (s, rets[i], &st);
    s->disks[i].size = st.size;
    s->disks[i].granularity = st.granularity;
    if (json_object_object_get_ex (rets[i], "backup", &b) && b &&
        json_object_object_get_ex (b, "failure", &f) && f) {
      disk_fail (&s->disks[i], "the backup failed after its cut: %s",
                 json_object_get_string (f));
      s->disks[i].commit_failed = true;
      r = -1;
    }
    else if (!st.has_new) {
      disk_fail (&s->disks[i], "checkpoint %s is not on the disk after "
                 "the cut", s->checkpoint);
      r = -1;
    }
  }
  put_all (s, rets);
  return r;
}

int
cut_make (struct set *s)
{
  double deadline;
  int r;

  /* What each begin needs that does not depend on the instant, the
   * guest running: inside the window each server only publishes.
   */
  if (servers_call (s, "backup-prepare", begin_args, NULL,
                    control_deadline (), true, NULL) == -1)
    return -1;
  /* From the freeze to the thaw, every wait is bounded and nothing
   * must be cut short: a second signal does not end the process.
   */
  copy_signals_firm (true);
  if (s->freeze != FREEZE_NONE && freeze_guest (s) == -1) {
    copy_signals_firm (false);
    return -1;
  }
  if (copy_interrupted ()) {
    s->interrupted = true;
    copy_signals_firm (false);
    return -1;
  }
  s->cut_start = clock_seconds (CLOCK_MONOTONIC);
  s->cut_wall = clock_seconds (CLOCK_REALTIME);
  s->cut_made = true;
  deadline = s->cut_start + s->cut_timeout;
  r = step (s, "pause", pause_args, NULL, deadline, true, paused_flag,
            true);
  if (r == 0) {
    /* From the request on, NEW may exist: the undo looks for it. */
    mark_added (s);
    r = step (s, "backup-begin", begin_args, NULL, deadline, true,
              begun_flag, true);
  }
  /* Resumed even after a failure: the guest's writes wait until then. */
  if (step (s, "resume", NULL, is_paused, deadline, false, paused_flag,
            false) == -1)
    r = -1;
  s->cut_ms = (clock_seconds (CLOCK_MONOTONIC) - s->cut_start) * 1000;
  if (r == -1 && clock_seconds (CLOCK_MONOTONIC) >= deadline)
    set_fail (s, "the cut took longer than --cut-timeout (%g seconds): "
              "every server was resumed", s->cut_timeout);
  if (thaw_guest (s) == -1)
    r = -1;
  copy_signals_firm (false);
  if (r == 0)
    r = read_sizes (s);
  return r;
}

int
cut_views_ok (struct set *s)
{
  json_object **rets = calloc (s->n, sizeof *rets);
  json_object *b, *f;
  size_t i;
  int r;

  if (rets == NULL) {
    set_fail (s, "out of memory");
    return -1;
  }
  r = servers_call (s, "query", NULL, is_begun, control_deadline (), false,
                    rets);
  for (i = 0; i < s->n; ++i)
    if (rets[i] && json_object_object_get_ex (rets[i], "backup", &b) && b &&
        json_object_object_get_ex (b, "failed", &f) &&
        json_object_get_boolean (f)) {
      disk_fail (&s->disks[i], "the view broke while it was copied (the "
                 "server's scratch store failed): the copy is not the "
                 "disk at one point in time");
      r = -1;
    }
  put_all (s, rets);
  return r;
}

int
cut_end (struct set *s)
{
  size_t i;

  if (step (s, "backup-end", end_args, is_begun, control_deadline (),
            false, begun_flag, false) == -1)
    return -1;
  /* The backup is complete: from here on, NEW is meant to stay. */
  for (i = 0; i < s->n; ++i)
    s->disks[i].added = false;
  if (s->remove_incremental)
    cut_remove_base (s);
  return 0;
}

void
cut_remove_base (struct set *s)
{
  size_t i;

  /* B is removed where it is: on a disk that lost it (a resync, or a
   * full copy), there is nothing to remove.
   */
  if (servers_call (s, "transaction", remove_base, has_base,
                    control_deadline (), false, NULL) == 0)
    return;
  for (i = 0; i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    if (!bmerr_failed (&d->error))
      continue;
    bm_error ("backup: disk %s: %s", d->name, d->error.msg);
    bm_error ("backup: the backup is complete; remove bitmap %s "
              "yourself: %s bitmap --remove --control %s %s",
              s->incremental, prog, d->control, s->incremental);
    bmerr_clear (&d->error);
  }
}

/* The bitmaps of names that d's query ret lists, as a transaction's
 * arguments removing them (NULL if none).
 */
static json_object *
stale_args (const struct disk *d, json_object *ret, char *const *names,
            size_t n)
{
  json_object *bitmaps, *b, *v, *list = NULL, *args;
  size_t i, k;

  if (ret == NULL || !json_object_object_get_ex (ret, "bitmaps", &bitmaps))
    return NULL;
  for (i = 0; i < json_object_array_length (bitmaps); ++i) {
    b = json_object_array_get_idx (bitmaps, i);
    if (!json_object_object_get_ex (b, "name", &v))
      continue;
    for (k = 0; k < n; ++k)
      if (strcmp (json_object_get_string (v), names[k]) == 0)
        break;
    if (k == n)
      continue;
    if (list == NULL)
      list = json_object_new_array ();
    args = remove_args (names[k]);
    json_object_object_get_ex (args, "actions", &v);
    json_object_array_add (list, json_object_get (
                             json_object_array_get_idx (v, 0)));
    json_object_put (args);
    bm_error ("backup: disk %s: removed checkpoint %s, left by a backup "
              "that did not complete", d->name, names[k]);
  }
  if (list == NULL)
    return NULL;
  args = json_object_new_object ();
  json_object_object_add (args, "actions", list);
  return args;
}

int
cut_remove_stale (struct set *s, char *const *names, size_t n)
{
  json_object **rets = calloc (s->n, sizeof *rets), *args, *ret;
  struct bmerr e = { 0 };
  size_t i;
  int r = -1;

  if (rets == NULL) {
    set_fail (s, "out of memory");
    return -1;
  }
  if (n == 0 || query_all (s, rets) == 0)
    r = 0;
  for (i = 0; r == 0 && n > 0 && i < s->n; ++i) {
    struct disk *d = &s->disks[i];
    if ((args = stale_args (d, rets[i], names, n)) == NULL)
      continue;
    ret = NULL;
    bmerr_clear (&e);
    if (control_call_on (d->fd, d->control,
                         control_request ("transaction", args), &ret,
                         &e) != 0) {
      disk_fail (d, "%s", bmerr_failed (&e) ? e.msg
                 : "the control connection failed");
      r = -1;
    }
    json_object_put (ret);
  }
  put_all (s, rets);
  return r;
}

/* Remove NEW from d, on a new connection if its own is out of step
 * (the server then ends the view by itself; NEW is left to remove).
 */
static void
undo_new (struct set *s, struct disk *d)
{
  json_object *ret = NULL;
  struct state st;
  struct bmerr e = { 0 };
  int fd = d->fd;

  if (fd == -1 && (fd = control_connect (d->control)) == -1)
    goto fail;
  if (control_call_on (fd, d->control, control_request ("query", NULL),
                       &ret, &e) != 0)
    goto fail;
  read_state (s, ret, &st);
  json_object_put (ret);
  ret = NULL;
  if (st.has_new &&
      control_call_on (fd, d->control,
                       control_request ("transaction",
                                        remove_args (s->checkpoint)),
                       &ret, &e) != 0)
    goto fail;
  json_object_put (ret);
  d->added = false;
  if (fd != d->fd)
    close (fd);
  return;

 fail:
  bm_error ("backup: disk %s: could not remove checkpoint %s%s%s: the "
            "next backup removes it, or: %s bitmap --remove --control %s "
            "%s", d->name, s->checkpoint, bmerr_failed (&e) ? ": " : "",
            e.msg, prog, d->control, s->checkpoint);
  if (fd >= 0 && fd != d->fd)
    close (fd);
}

void
cut_forget (struct set *s)
{
  size_t i;

  copy_signals_firm (true);
  for (i = 0; i < s->n; ++i) {
    s->disks[i].added = true;
    undo_new (s, &s->disks[i]);
  }
  copy_signals_firm (false);
}

void
cut_undo (struct set *s)
{
  const double deadline =
    clock_seconds (CLOCK_MONOTONIC) + BACKUP_UNDO_SECONDS;
  size_t i;

  copy_signals_firm (true);
  /* The guest first: its writes wait while a server is paused. */
  step (s, "resume", NULL, is_paused, deadline, false, paused_flag, false);
  thaw_guest (s);
  step (s, "backup-end", end_args, is_begun, deadline, false, begun_flag,
        false);
  for (i = 0; i < s->n; ++i)
    if (s->disks[i].added)
      undo_new (s, &s->disks[i]);
  copy_signals_firm (false);
}
