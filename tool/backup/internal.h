/* SPDX-License-Identifier: BSD-3-Clause */
/* backup/internal.h: what the parts of dirtybitmap backup share.
 * backup/main.c reads the command line and runs the steps; the other
 * files of this folder are the steps:
 *
 * backup/main.c      dirtybitmap backup, the subcommand
 * backup/set.c       the set and its disks: --disk read, the views'
 *                    URIs, errors recorded
 * backup/places.c    no two disks in one place: names, control
 *                    sockets, targets, checksums compared
 * backup/servers.c   one control connection per disk: a request sent
 *                    to every server at once, the replies awaited
 *                    together until a deadline
 * backup/cut.c       the machine-wide cut and its undo: leftovers of
 *                    an earlier run, freeze, pause, begin, resume,
 *                    thaw; end; undo on failure
 * backup/freeze.c    quiescing the guest: its agent, or commands
 * backup/agent.c     a qemu-guest-agent client
 * backup/checksums.c the checksums of each disk's backup, and how each
 *                    disk is copied (full, incremental, resync)
 * backup/copies.c    the disks copied in parallel, one thread each
 * backup/report.c    the summary, and the manifest
 * backup/points.c    a backup into a repository (--repo): each disk's
 *                    image made and served, the point's record
 * backup/heal.c      what verify found bad in the newest point copied
 *                    again
 * backup/heal-mark.c those chunks made dirty in the base bitmap
 * backup/older.c     a point built on the newest from an older point's
 *                    checkpoint: the chunks that changed between them
 *
 * Everything here runs on the main thread but copies.c's threads,
 * which each own one disk's copy_options and copy_result while they
 * run.  Errors are values: each step returns -1 after recording what
 * went wrong in the disk it concerns (disk.error) or in the set
 * (set.error); backup/main.c says them.
 */

#ifndef DIRTYBITMAP_BACKUP_INTERNAL_H
#define DIRTYBITMAP_BACKUP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#include "copy/copy.h"

#define BACKUP_DEFAULT_VIEW "backup"
#define BACKUP_DEFAULT_CUT_TIMEOUT 5.0          /* seconds */
#define BACKUP_DEFAULT_FREEZE_TIMEOUT 10.0      /* what Windows VSS allows */
#define BACKUP_UNDO_SECONDS 10                  /* for each undo request */


enum copy_mode { MODE_FULL, MODE_INCREMENTAL, MODE_RESYNC };

struct sums;
struct repo_point;
struct points;
struct heal;
struct repo;

/* One disk of the set. */
struct disk {
  /* From the command line. */
  char *name;                   /* how messages name it */
  bool named;                   /* name= was given */
  char *control;                /* the filter's control socket */
  char *source;                 /* the disk's NBD URI */
  char *target;
  char *scratch;                /* absolute, or NULL */

  /* The view's URI (source with the view's export name), and the copy
   * of the view to target.
   */
  char *view_uri;
  struct copy_options o;
  struct copy_result r;

  /* What the cut did on the server.  fd is the control connection
   * kept for the whole run (the view is begun with end-on-disconnect:
   * it lives as long as this connection), or -1.
   */
  int fd;
  bool broken;                  /* a request on fd went unanswered: the
                                 * connection is out of step */
  bool leftover;                /* NEW was there before this run */
  bool paused;
  bool begun;                   /* a view is open, NEW added */
  bool added;                   /* NEW may exist because of this run */
  bool commit_failed;           /* NEW's commit failed after the cut:
                                 * the server's bitmaps are condemned */
  uint64_t size;                /* the disk's size at the cut */
  uint64_t granularity;         /* NEW's granularity */
  uint64_t size_before;         /* the disk's size before the cut */
  uint64_t base_granularity;    /* B's, or 0 if it is missing */
  struct bmerr error;           /* the first error, if any */

  /* Checksums (backup/checksums.c). */
  enum copy_mode mode;
  struct sums *prev;            /* the disk at B, if a set says so */
  char *prev_sums_path;
  bool prev_holds;              /* target provably holds prev's image */
  struct bmerr prev_why;        /* why prev is NULL */
  struct sums *sums;            /* this backup's, or NULL: none */
  char *sums_path;
  bool sums_held;               /* the target will hold what sums says */
  bool sums_staged;             /* written as sums_path.tmp */
  bool sums_written;            /* and put in place */
  struct copy_sums cs;
  uint8_t *force;               /* chunks healed (heal.c): cs.force */
  uint64_t nforce;
};

enum freeze_kind { FREEZE_NONE, FREEZE_AGENT, FREEZE_COMMANDS };

/* The whole run. */
struct set {
  struct disk *disks;
  size_t n;

  const char *checkpoint;       /* NEW */
  const char *incremental;      /* B, or NULL for a full backup */
  bool remove_incremental;
  const char *view;             /* the views' export name */
  const char *sums_dir;         /* --sums-dir, or NULL */
  double cut_timeout, freeze_timeout;

  enum freeze_kind freeze;
  const char *agent;            /* --guest-agent SOCKET */
  const char *freeze_command, *thaw_command;
  int agent_fd;                 /* -1 when not connected */
  bool freeze_sent;             /* a thaw is owed */
  bool thawed;

  /* The cut: when the first pause was sent (monotonic and wall-clock)
   * and the window up to the last resume answered; the guest frozen
   * from the freeze sent to the thaw answered.
   */
  bool cut_made;
  double cut_start;
  double cut_wall;
  double cut_ms;
  double freeze_start;
  double frozen_ms;             /* < 0: not frozen */

  bool interrupted;             /* SIGINT or SIGTERM */
  struct bmerr error;           /* the first error of the set, if any */

  /* A backup into a repository (backup/points.c), or NULL. */
  struct points *points;
  bool sums_required;           /* every disk must get its checksums */
  struct heal *heal;            /* backup/heal.c, or NULL */
};

/* Record an error (the first one is kept). */
extern void set_fail (struct set *s, const char *fs, ...)
  __attribute__ ((format (printf, 2, 3)));
extern void disk_fail (struct disk *d, const char *fs, ...)
  __attribute__ ((format (printf, 2, 3)));

/* backup/set.c */

/* Parse one --disk value (control=...,source=...,target=...[,name=]
 * [,scratch=]; ",," is a literal comma; no target= in a repository)
 * into d.  -1 with err.
 */
extern int disk_parse (const char *spec, bool repo, struct disk *d,
                       struct bmerr *err);
/* d->view_uri, d->scratch made absolute, d->o from the template. */
extern int disk_prepare (struct disk *d, const char *view,
                         const char *default_scratch,
                         const struct copy_options *template,
                         struct bmerr *err);
/* What set.c gave d (checksums_free frees the rest). */
extern void disk_free (struct disk *d);

/* backup/places.c */

/* Before anything: no two disks of s share a name, a control socket,
 * a target or a place for their checksums.  -1 with err naming both
 * disks and what they share.
 */
extern int set_check_disks (const struct set *s, struct bmerr *err);

/* backup/servers.c */

/* Connect to every disk's control socket. */
extern int servers_connect (struct set *s);

/* The arguments of command for disk d, or NULL for none. */
typedef json_object *(*args_fn) (const struct set *s,
                                 const struct disk *d);

/* Send command to every disk for which want (may be NULL: all) says
 * so, at once, then await the replies until deadline (monotonic
 * seconds; interrupted by a signal when wake).  Each disk's reply
 * (a new reference, or NULL) goes to rets[i] if rets is not NULL.  A
 * refusal or a silence is that disk's error; a silence or a broken
 * connection marks it broken.  0 if every disk asked answered with a
 * return value.
 */
extern int servers_call (struct set *s, const char *command, args_fn args,
                         bool (*want) (const struct disk *d),
                         double deadline, bool wake, json_object **rets);

/* backup/cut.c */

/* Before anything changes: B on every disk, no view open, NEW nowhere
 * (removed where an incomplete run left it on some disks only).
 */
extern int cut_check (struct set *s);
/* freeze, pause all, begin all, resume all, thaw. */
extern int cut_make (struct set *s);
/* Whether every view held to the end (none broke). */
extern int cut_views_ok (struct set *s);
/* End every view; then with --remove-incremental remove B where it is. */
extern int cut_end (struct set *s);
/* Remove B where it is (what cut_end does with --remove-incremental);
 * a failure is said, and is not the backup's.
 */
extern void cut_remove_base (struct set *s);
/* Before cut_check: the bitmaps of names (what backups that did not
 * complete left) removed from every disk where they are, said.
 */
extern int cut_remove_stale (struct set *s, char *const *names, size_t n);
/* After cut_end, when the backup fails after all: NEW removed from
 * every disk, so that each stays at B.
 */
extern void cut_forget (struct set *s);
/* After a failure: every server resumed, every view ended, NEW
 * removed where this run added it, the guest thawed.
 */
extern void cut_undo (struct set *s);

/* backup/freeze.c */

extern int freeze_guest (struct set *s);
/* Once a freeze was sent, thaw (again: it is idempotent) and say how
 * it went; nothing otherwise.
 */
extern int thaw_guest (struct set *s);

/* backup/agent.c: a qemu-guest-agent on a Unix socket.  Every wait
 * ends at deadline (monotonic seconds) or, with wake, on a signal.
 * err says why on failure.
 */

/* What a request came to. */
enum agent_result {
  AGENT_OK = 0,                 /* answered: *ret is its return value */
  AGENT_REFUSED = -1,           /* answered with an error */
  AGENT_SILENT = -2,            /* no answer by the deadline (or a
                                 * signal): what was sent stays queued,
                                 * the connection is out of step */
  AGENT_GONE = -3,              /* the connection failed: what was sent
                                 * may not have reached the agent */
};

/* Connect and send a 0xFF (which resets the agent's parser), awaiting
 * nothing: 0, or -1.
 */
extern int agent_open (const char *path, double deadline, bool wake,
                       int *fd, struct bmerr *err);
/* agent_open, then guest-sync-delimited awaited: the channel in step,
 * the agent alive.  0, or -1.
 */
extern int agent_connect (const char *path, double deadline, bool wake,
                          int *fd, struct bmerr *err);
/* Send command and await its reply (on a connection in step). */
extern int agent_execute (int fd, const char *command, double deadline,
                          bool wake, json_object **ret, struct bmerr *err);
/* Send command, then a guest-sync, and take as command's reply the one
 * just before the sync's: right even while earlier requests on fd (a
 * freeze that has not answered) still owe theirs.  *sent: command was
 * written on the channel, so the agent runs it after them.
 */
extern int agent_execute_after (int fd, const char *command,
                                double deadline, bool wake,
                                json_object **ret, bool *sent,
                                struct bmerr *err);

/* backup/checksums.c */

/* Load the previous backup's checksums of d, if usable. */
extern void checksums_find (struct set *s, struct disk *d);
/* How d is copied, from the state of its base bitmap and the previous
 * checksums (said on stderr when it is not a plain incremental).
 */
extern void checksums_plan (struct set *s, struct disk *d, bool base_there,
                            bool base_consistent);
/* After the cut, before d's target is written: every set that
 * describes the target, or an older NEW of this disk, made unusable;
 * d's new set, and d->o set to keep it.
 */
extern int checksums_prepare (struct set *s, struct disk *d);
/* Once every copy is complete: every disk's set written under its
 * temporary name, not yet in place.
 */
extern int checksums_write (struct set *s);
/* Once the servers have committed NEW (cut_end): the sets put in
 * place.  What fails is said, and costs the next backup its
 * checksums, never the backup.
 */
extern void checksums_publish (struct set *s);
/* The backup failed after all: remove the sets written. */
extern void checksums_undo (struct set *s);
extern void checksums_free (struct disk *d);
/* Where d's checksums at checkpoint live (malloced), or NULL: nowhere. */
extern char *checksums_path (const struct set *s, const struct disk *d,
                             const char *checkpoint);


/* backup/copies.c: every disk's view copied to its target, one thread
 * per disk; the first failure stops the others.
 */
extern int copies_run (struct set *s, bool progress);

/* backup/report.c */

extern void report_summary (FILE *fp, const struct set *s, bool ok,
                            bool json);
/* The manifest, atomically (FILE.tmp, then renamed). */
extern int report_manifest (const struct set *s, bool ok,
                            const char *path);
/* Before anything: whether the manifest can be written at path (its
 * FILE.tmp created, FILE replaced).  -1 with err.
 */
extern int report_manifest_ready (const char *path, struct bmerr *err);
/* A wall-clock time as the manifest writes it: UTC,
 * 2026-12-05T21:40:00.123456Z.
 */
extern void report_time (double t, char *buf, size_t n);
/* "full", "incremental", "resync". */
extern const char *backup_mode_name (enum copy_mode m);

/* backup/points.c: a backup into a repository (--repo). */

/* Before the servers: DIR open and locked, leftovers removed, the base
 * (the newest point) chosen as B, each disk's target a socket.
 */
extern int points_open (struct set *s, const char *dir);
/* Before cut_check: the leftovers' bitmaps removed from the servers. */
extern int points_servers (struct set *s);
/* After the cut and checksums_prepare (each disk's size and chunk
 * known): each disk's image created and served.
 */
extern int points_images (struct set *s);
/* After cut_end and checksums_publish: the servers of the images
 * stopped, the images synced, the point's record written; then B
 * removed from the disks.  -1: no point (cut_forget, points_undo).
 */
extern int points_commit (struct set *s);
/* After a failure: the servers stopped, NEW's files removed. */
extern void points_undo (struct set *s);
/* Before the summary: each disk's target named by its image. */
extern void points_report (struct set *s);
extern void points_close (struct set *s);
/* The repository, open for writing. */
extern const struct repo *points_repo (const struct set *s);

/* backup/heal.c: in a repository, after cut_check, before the cut:
 * the chunks that verify found bad in what the newest point reads
 * chosen (d->force) and made dirty in B on the servers (or the disk
 * made a resync).
 */
extern int heal_plan (struct set *s);
/* Once each disk's checksums are prepared: d->cs.force. */
extern void heal_apply (struct set *s);
/* Once the point exists: what was healed, said on stderr. */
extern void heal_report (const struct set *s);
extern void heal_free (struct set *s);
/* backup/older.c: where B is an older point than the newest, n (a
 * repository's), the chunks of d whose checksums differ between the
 * two forced too (d->force), and said; a full copy where they cannot
 * be compared.  -1 when out of memory.
 */
extern int older_plan (struct set *s, struct disk *d,
                       const struct repo_point *n);

/* backup/heal-mark.c: d->force's n chunks (of chunk bytes) merged into
 * B on d's server, before the cut.  -1 with err.
 */
extern int heal_mark (const struct set *s, const struct disk *d,
                      uint64_t chunk, uint64_t n, struct bmerr *err);

#endif /* DIRTYBITMAP_BACKUP_INTERNAL_H */
