/* SPDX-License-Identifier: BSD-3-Clause */
/* backup.c: dirtybitmap backup: a whole consistent backup of a live
 * disk in one command.  On one control connection, kept for the whole
 * job: backup-begin (a frozen view of the disk, and a new checkpoint
 * bitmap, at one cut), then the view's changed ranges copied to TARGET
 * with the copy engine (copy.h), each range released on the view once
 * it is on the target, then backup-end.
 *
 * On any failure (including SIGINT or SIGTERM) the view is ended and
 * the checkpoint removed, so that the next run starts again from the
 * same bitmap and nothing is lost; the view is begun with
 * end-on-disconnect, so the server does the same if this process dies
 * before it can.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <getopt.h>
#include <unistd.h>

#include "control-client.h"
#include "copy/copy.h"
#include "dirtybitmap.h"
#include "util.h"

#define DEFAULT_VIEW "backup"

static void __attribute__ ((noreturn))
backup_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s backup --control SOCKET [--incremental BITMAP]\n"
"                      --checkpoint NEW [--remove-incremental]\n"
"                      [--name VIEW] [--scratch DIR] [-p]\n"
"                      [--output=human|json] [--requests N]\n"
"                      [--connections N] [--request-size SIZE]\n"
"                      SOURCE_URI TARGET\n"
"\n"
"Back up the disk that SOURCE_URI serves (through\n"
"nbdkit-dirtybitmap-filter with control=SOCKET) at one point in time,\n"
"while it goes on being written: freeze a view of it and add the\n"
"bitmap NEW at one cut, copy the view to TARGET, and end the view.\n"
"With --incremental, only what BITMAP recorded is copied, to a TARGET\n"
"that holds the previous backup; without it, everything, and a missing\n"
"TARGET file is created.  On failure the view is ended and NEW is\n"
"removed, so that the next run starts again from BITMAP.\n"
"\n"
"  --control SOCKET      the filter's control socket\n"
"  --incremental BITMAP  copy only what BITMAP says changed\n"
"  --checkpoint NEW      the bitmap that records from the cut on: the\n"
"                        next incremental starts from it\n"
"  --remove-incremental  after success, remove BITMAP\n"
"  --name VIEW           the view's export name (default " DEFAULT_VIEW ")\n"
"  --scratch DIR         where the server keeps what the view needs\n"
"  -p, --output, --requests, --connections, --request-size\n"
"                        as for copy\n"
"\n"
"Example:\n"
"  %s backup --control /run/vm1.ctl --incremental b3 --checkpoint b4 \\\n"
"      --remove-incremental nbd+unix:///?socket=/run/vm1.sock b4.qcow2.nbd\n",
           prog, prog);
  exit (status);
}

/* uri with its export name replaced by name: nbd+unix:///?socket=S
 * and export VIEW give nbd+unix:///VIEW?socket=S.
 */
static char *
with_export (const char *uri, const char *name)
{
  const char *p = strstr (uri, "://"), *slash, *end;
  char *out = NULL;
  size_t i;
  FILE *fp;
  size_t len;

  if (p == NULL)
    return NULL;
  slash = strchr (p + 3, '/');
  end = slash ? slash + strcspn (slash, "?#") : uri + strcspn (uri, "?#");
  fp = open_memstream (&out, &len);
  if (fp == NULL)
    return NULL;
  fwrite (uri, 1, (slash ? slash : end) - uri, fp);
  fputc ('/', fp);
  /* Percent-encode all but unreserved characters. */
  for (i = 0; name[i]; ++i) {
    unsigned char c = name[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9') || strchr ("-._~", c))
      fputc (c, fp);
    else
      fprintf (fp, "%%%02X", c);
  }
  fputs (end, fp);
  fclose (fp);
  return out;
}

struct job {
  const char *socket;
  int fd;                       /* the control connection */
  const char *incremental, *checkpoint, *name, *scratch;
  bool remove_incremental;
};

/* One request on the job's connection; prints the server's error. */
static int
call (struct job *j, const char *command, json_object *args,
      const char *what)
{
  json_object *ret;
  char *error;
  int r;

  r = control_call_on (j->fd, j->socket, control_request (command, args),
                       &ret, &error);
  json_object_put (ret);
  if (r == 1) {
    fprintf (stderr, "%s: backup: %s: %s\n", prog, what, error);
    free (error);
  }
  return r == 0 ? 0 : -1;
}

static json_object *
one_action (const char *action, const char *bitmap)
{
  json_object *args = json_object_new_object ();
  json_object *list = json_object_new_array ();
  json_object *a = json_object_new_object ();

  json_object_object_add (a, "action", json_object_new_string (action));
  json_object_object_add (a, "bitmap", json_object_new_string (bitmap));
  json_object_array_add (list, a);
  json_object_object_add (args, "actions", list);
  return args;
}

static int
begin (struct job *j)
{
  json_object *args = json_object_new_object ();

  json_object_object_add (args, "name", json_object_new_string (j->name));
  if (j->incremental)
    json_object_object_add (args, "bitmap",
                            json_object_new_string (j->incremental));
  json_object_object_add (args, "checkpoint",
                          json_object_new_string (j->checkpoint));
  if (j->scratch)
    json_object_object_add (args, "scratch",
                            json_object_new_string (j->scratch));
  json_object_object_add (args, "end-on-disconnect",
                          json_object_new_boolean (true));
  return call (j, "backup-begin", args, "backup-begin");
}

static int
end (struct job *j)
{
  json_object *args = json_object_new_object ();

  json_object_object_add (args, "name", json_object_new_string (j->name));
  return call (j, "backup-end", args, "backup-end");
}

/* Whether the view broke (its scratch store failed) while it lived. */
static int
view_failed (struct job *j, bool *failed)
{
  json_object *ret, *b, *f;
  char *error;
  int r;

  *failed = false;
  r = control_call_on (j->fd, j->socket, control_request ("query", NULL),
                       &ret, &error);
  if (r == 1) {
    fprintf (stderr, "%s: backup: query: %s\n", prog, error);
    free (error);
  }
  if (r != 0)
    return -1;
  if (json_object_object_get_ex (ret, "backup", &b) && b &&
      json_object_object_get_ex (b, "failed", &f))
    *failed = json_object_get_boolean (f);
  json_object_put (ret);
  return 0;
}

static int
parse_count (const char *opt, const char *s, unsigned max, unsigned *out)
{
  char *end;
  unsigned long v;

  errno = 0;
  v = strtoul (s, &end, 10);
  if (errno || end == s || *end || *s == '-' || v < 1 || v > max) {
    bad_usage ("backup ", "%s %s: must be a number from 1 to %u", opt, s,
               max);
    return -1;
  }
  *out = v;
  return 0;
}

/* The options and arguments, into j, o and *json: 0, or the exit
 * status (the problem said).
 */
static int
parse_backup (int argc, char *argv[], struct job *j,
              struct copy_options *o, int *json)
{
  enum { CONTROL = 256, INCREMENTAL, CHECKPOINT, REMOVE, NAME, SCRATCH,
         OUTPUT, REQUESTS, CONNECTIONS, REQUEST_SIZE };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "control", required_argument, NULL, CONTROL },
    { "incremental", required_argument, NULL, INCREMENTAL },
    { "checkpoint", required_argument, NULL, CHECKPOINT },
    { "remove-incremental", no_argument, NULL, REMOVE },
    { "name", required_argument, NULL, NAME },
    { "scratch", required_argument, NULL, SCRATCH },
    { "progress", no_argument, NULL, 'p' },
    { "output", required_argument, NULL, OUTPUT },
    { "requests", required_argument, NULL, REQUESTS },
    { "connections", required_argument, NULL, CONNECTIONS },
    { "request-size", required_argument, NULL, REQUEST_SIZE },
    { NULL }
  };
  int opt;
  int64_t v;

  while ((opt = getopt_long (argc, argv, "hp", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': backup_usage (EXIT_SUCCESS);
    case 'p': o->progress = true; break;
    case CONTROL: j->socket = optarg; break;
    case INCREMENTAL: j->incremental = optarg; break;
    case CHECKPOINT: j->checkpoint = optarg; break;
    case REMOVE: j->remove_incremental = true; break;
    case NAME: j->name = optarg; break;
    case SCRATCH: j->scratch = optarg; break;
    case OUTPUT:
      if ((*json = parse_output ("backup ", optarg)) == -1)
        return EXIT_FAILURE;
      break;
    case REQUESTS:
      if (parse_count ("--requests", optarg, COPY_MAX_REQUESTS,
                       &o->requests) == -1)
        return EXIT_FAILURE;
      break;
    case CONNECTIONS:
      if (parse_count ("--connections", optarg, COPY_MAX_CONNECTIONS,
                       &o->connections) == -1)
        return EXIT_FAILURE;
      break;
    case REQUEST_SIZE:
      v = parse_size (optarg);
      if (v < COPY_MIN_REQUEST_SIZE || v > COPY_MAX_REQUEST_SIZE ||
          !is_power_of_2 (v))
        return bad_usage ("backup ", "--request-size %s: must be a power "
                          "of 2 from 512 to 32M", optarg);
      o->request_size = v;
      break;
    default:
      return try_help ("backup ");
    }
  }
  if (optind != argc - 2)
    return bad_usage ("backup ", "expecting SOURCE_URI and TARGET");
  if (j->socket == NULL)
    return bad_usage ("backup ", "--control SOCKET is required");
  if (j->checkpoint == NULL)
    return bad_usage ("backup ", "--checkpoint NEW is required: the bitmap "
                      "the next incremental backup starts from");
  if (j->remove_incremental && j->incremental == NULL)
    return bad_usage ("backup ", "--remove-incremental needs --incremental");
  if (!is_nbd_uri (argv[optind]))
    return bad_usage ("backup ", "%s: SOURCE_URI must be an NBD URI "
                      "(nbd://... or nbd+unix://...)", argv[optind]);
  return 0;
}

int
do_backup (int argc, char *argv[])
{
  struct job j = { .name = DEFAULT_VIEW, .fd = -1 };
  struct copy_options o = { .requests = COPY_DEFAULT_REQUESTS,
                            .trim_source = true };
  struct copy_result r = { .ok = false };
  char *view_uri = NULL, *scratch = NULL;
  bool begun = false, ever_begun = false, failed = false;
  int json = 0, status = EXIT_FAILURE;

  if ((status = parse_backup (argc, argv, &j, &o, &json)) != 0)
    return status;
  status = EXIT_FAILURE;
  view_uri = with_export (argv[optind], j.name);
  /* The server runs in "/": a relative scratch directory is ours. */
  if (j.scratch && (scratch = realpath (j.scratch, NULL)) == NULL) {
    fprintf (stderr, "%s: backup: --scratch %s: %s\n", prog, j.scratch,
             strerror (errno));
    goto out;
  }
  j.scratch = scratch;
  if (view_uri == NULL) {
    perror (prog);
    goto out;
  }
  o.source = view_uri;
  o.target = argv[optind + 1];
  o.full = j.incremental == NULL;

  j.fd = control_connect (j.socket);
  if (j.fd == -1 || begin (&j) == -1)
    goto out;
  begun = ever_begun = true;
  copy_run (&o, &r);
  if (view_failed (&j, &failed) == -1)
    failed = true;
  else if (failed)
    fprintf (stderr, "%s: backup: the view broke while it was copied (the "
             "server's scratch store failed): the copy is not the disk at "
             "one point in time\n", prog);
  if (r.ok && !failed && end (&j) == 0) {
    begun = false;
    if (j.remove_incremental &&
        call (&j, "transaction", one_action ("remove", j.incremental),
              "removing the incremental bitmap") == -1)
      fprintf (stderr, "%s: backup: the backup is complete; remove bitmap "
               "%s yourself\n", prog, j.incremental);
    status = EXIT_SUCCESS;
  }

 out:
  if (begun) {
    /* Nothing is lost: the old bitmap still records everything. */
    end (&j);
    call (&j, "transaction", one_action ("remove", j.checkpoint),
          "removing the checkpoint");
  }
  if (status != EXIT_SUCCESS) {
    if (r.error || r.interrupted)
      copy_print_failure (&o, &r);
    if (!ever_begun)
      fprintf (stderr, "%s: backup incomplete: nothing was changed\n",
               prog);
    else
      fprintf (stderr, "%s: backup incomplete: the view is ended and the "
               "checkpoint %s removed: the next backup starts again from "
               "%s\n", prog, j.checkpoint,
               j.incremental ? j.incremental : "scratch (a full backup)");
  }
  if (o.source && (r.ok || json))
    copy_print_summary (stdout, &o, &r, json);
  copy_result_free (&r);
  if (j.fd >= 0)
    close (j.fd);
  free (view_uri);
  free (scratch);
  if (fflush (stdout) == EOF)
    status = EXIT_FAILURE;
  return status;
}
