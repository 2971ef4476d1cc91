/* SPDX-License-Identifier: BSD-3-Clause */
/* info.c: dirtybitmap info: the disk size, the file's state and, for
 * each bitmap, its granularity, whether it records, whether it is
 * consistent and how many bytes are dirty: read from the file, or
 * asked of the running filter through its control socket (--control),
 * printed the same way.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <string.h>
#include <errno.h>
#include <getopt.h>

#include "control-client.h"
#include "dirtybitmap.h"
#include "restore-record.h"
#include "util.h"

static void __attribute__ ((noreturn))
info_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s info [--output=human|json] [-U] [--disk DISKFILE] FILE\n"
"       %s info [--output=human|json] --control SOCKET\n"
"\n"
"Show the disk size recorded in the bitmap file FILE and, for each\n"
"bitmap, its granularity, whether it is recording, whether it is\n"
"consistent and how many bytes are dirty.  With --control, ask the\n"
"nbdkit that serves the disk, through its control socket.\n"
"\n"
"  --output=json     machine-readable output (see dirtybitmap(1))\n"
"  -U, --force-share read a file that a running nbdkit holds (a snapshot)\n"
"  --disk DISKFILE   the disk that FILE describes (default: FILE less\n"
"                    \".bitmaps\"), checked for writes made without the\n"
"                    filter\n"
"  --control SOCKET  the control=SOCKET of a running filter\n",
           prog, prog);
  exit (status);
}

/* What info prints, from either source. */
struct info_bitmap {
  char *name;
  uint64_t granularity;
  bool recording, consistent;
  uint64_t dirty;
  bool recovered;               /* after a power loss in coarse mode: */
  uint64_t recovered_bytes;     /* bytes dirty because of it */
};

/* A restore of the disk (restore-record.h), as the query shapes it. */
struct info_restore {
  char *source;                 /* NULL: no restore recorded */
  uint64_t done, size;
  bool complete;
};

struct info {
  char *path;
  bool sized;
  uint64_t size;
  struct info_restore restore;
  const char *state;            /* "closed", "unclean", "in-use" */
  char state_text[128];         /* the human "state:" line */
  size_t nr;
  struct info_bitmap *bm;
};

static void
info_free (struct info *in)
{
  size_t i;

  for (i = 0; i < in->nr; ++i)
    free (in->bm[i].name);
  free (in->bm);
  free (in->path);
  free (in->restore.source);
}

static const char *
durability_name (uint32_t mode)
{
  return mode == BMF_STRICT ? "strict" : mode == BMF_COARSE ? "coarse" :
    "flush";
}

/*----------------------------------------------------------------------
 * From the file.
 */

static void
add_dirty (uint64_t offset, uint64_t length, bool dirty, void *opaque)
{
  if (dirty)
    *(uint64_t *) opaque += length;
}

/* Somebody holds the write lock (only possible with -U): it is in use,
 * whether or not it has recorded a write yet.
 */
static void
file_state (const struct bmf *f, struct info *in)
{
  const struct bmf_state *st = bmf_state (f);

  if (bmf_in_use (f)) {
    in->state = "in-use";
    if (st->open)
      snprintf (in->state_text, sizeof in->state_text,
                "in use (pid %" PRIu64 ", durability=%s)",
                st->open_pid, durability_name (st->open_mode));
    else
      snprintf (in->state_text, sizeof in->state_text, "in use");
  }
  else if (bmf_unclean (f)) {
    in->state = "unclean";
    snprintf (in->state_text, sizeof in->state_text,
              "not closed cleanly (pid %" PRIu64 ", durability=%s, %s)",
              st->open_pid, durability_name (st->open_mode),
              bmf_rebooted (f) ? "machine restarted since" : "same boot");
  }
  else {
    in->state = "closed";
    snprintf (in->state_text, sizeof in->state_text, "closed cleanly");
  }
}

/* The file's restore record: its source, and what is restored. */
static int
file_restore (struct bmf *f, struct info_restore *rs)
{
  const struct bmf_state *st = bmf_state (f);
  struct bmerr err;
  struct bits bits;

  if (st->restore.state == BMF_RESTORE_NONE)
    return 0;
  rs->source = strdup (st->restore.source);
  if (rs->source == NULL) {
    bm_error ("%m");
    return -1;
  }
  rs->size = st->disk_size;
  rs->complete = st->restore.state == BMF_RESTORE_DONE;
  if (rs->complete) {
    rs->done = rs->size;
    return 0;
  }
  if (bmf_map_restored (f, false, &bits, &err) == -1) {
    bm_error ("%s", err.msg);
    return -1;
  }
  rs->done = bmf_restored_bytes (&bits, st->restore.gbits, st->disk_size);
  bmf_unmap (&bits);
  return 0;
}

static int
from_file (const char *path, bool force, const char *given_disk,
           struct info *in)
{
  const struct bmf_state *st;
  struct bmerr err;
  struct bmf *f;
  size_t i;
  int r = -1;

  f = bmf_open (path, force ? BMF_LOCK_NONE : BMF_LOCK_SHARED, &err);
  if (f == NULL) {
    bm_error ("%s", err.msg);
    if (err.errnum == EBUSY)
      bm_error ("use -U to read it while it is in use, or "
                "--control SOCKET to ask the server");
    return -1;
  }
  judge_disk_read (f, given_disk);
  st = bmf_state (f);
  in->path = strdup (bmf_path (f));
  in->bm = calloc (MAX (st->nr_bitmaps, 1), sizeof *in->bm);
  if (in->path == NULL || in->bm == NULL)
    goto nomem;
  in->sized = st->sized;
  in->size = st->disk_size;
  file_state (f, in);
  if (file_restore (f, &in->restore) == -1)
    goto out;
  for (i = 0; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *bm = &st->bitmaps[i];
    struct info_bitmap *b = &in->bm[i];
    struct bits bits;

    if ((b->name = strdup (bm->name)) == NULL)
      goto nomem;
    in->nr++;
    b->granularity = UINT64_C (1) << bm->gbits;
    b->consistent = !(bm->flags & BMF_INCONSISTENT);
    b->recording = (bm->flags & BMF_ENABLED) && b->consistent;
    b->recovered = bm->recovery != BMF_NOT_RECOVERED;
    b->recovered_bytes = bm->recovered;
    if (bmf_read_bits (f, bm, &bits, &err) == -1) {
      bm_error ("%s", err.msg);
      goto out;
    }
    bits_for_each_run (&bits, bm->gbits, st->disk_size, add_dirty,
                       &b->dirty);
    bmf_unmap (&bits);
  }
  r = 0;
  goto out;

 nomem:
  bm_error ("%m");
 out:
  bmf_close (f);
  return r;
}

/*----------------------------------------------------------------------
 * From the server.
 */

static bool
get_bool (json_object *o, const char *key)
{
  json_object *v;
  return json_object_object_get_ex (o, key, &v) && json_object_get_boolean (v);
}

static uint64_t
get_u64 (json_object *o, const char *key)
{
  json_object *v;
  return json_object_object_get_ex (o, key, &v) ?
    (uint64_t) json_object_get_int64 (v) : 0;
}

static const char *
get_str (json_object *o, const char *key)
{
  json_object *v;
  return json_object_object_get_ex (o, key, &v) &&
    json_object_is_type (v, json_type_string) ?
    json_object_get_string (v) : "";
}

/* The query's "restore" (null, or an object). */
static int
server_restore (json_object *ret, struct info_restore *rs)
{
  json_object *o;

  if (!json_object_object_get_ex (ret, "restore", &o) ||
      !json_object_is_type (o, json_type_object))
    return 0;
  rs->source = strdup (get_str (o, "source"));
  if (rs->source == NULL) {
    bm_error ("%m");
    return -1;
  }
  rs->done = get_u64 (o, "done-bytes");
  rs->size = get_u64 (o, "size");
  rs->complete = get_bool (o, "complete");
  return 0;
}

static int
from_server (const char *socket, struct info *in)
{
  json_object *ret, *list, *size;
  struct bmerr err = { 0 };
  size_t i, n;
  int r;

  r = control_call (socket, control_request ("query", NULL), &ret, &err);
  if (r == 1)
    bm_error ("%s", err.msg);
  if (r != 0)
    return -1;
  in->path = strdup (get_str (ret, "file"));
  in->sized = json_object_object_get_ex (ret, "size", &size) &&
    json_object_is_type (size, json_type_int);
  in->size = in->sized ? (uint64_t) json_object_get_int64 (size) : 0;
  in->state = "in-use";
  snprintf (in->state_text, sizeof in->state_text,
            "in use (pid %" PRIu64 ", durability=%s)", get_u64 (ret, "pid"),
            get_str (ret, "durability"));
  if (!json_object_object_get_ex (ret, "bitmaps", &list) ||
      !json_object_is_type (list, json_type_array))
    list = NULL;
  n = list ? json_object_array_length (list) : 0;
  in->bm = calloc (MAX (n, 1), sizeof *in->bm);
  if (in->path == NULL || in->bm == NULL) {
    bm_error ("%m");
    json_object_put (ret);
    return -1;
  }
  if (server_restore (ret, &in->restore) == -1) {
    json_object_put (ret);
    return -1;
  }
  for (i = 0; i < n; ++i) {
    json_object *o = json_object_array_get_idx (list, i);
    struct info_bitmap *b = &in->bm[in->nr];

    if ((b->name = strdup (get_str (o, "name"))) == NULL)
      continue;
    in->nr++;
    b->granularity = get_u64 (o, "granularity");
    b->recording = get_bool (o, "recording");
    b->consistent = get_bool (o, "consistent");
    b->dirty = get_u64 (o, "dirty-bytes");
  }
  json_object_put (ret);
  return 0;
}

/*----------------------------------------------------------------------
 * Printing.
 */

/* A name as text that cannot fake lines or drive the terminal:
 * control characters and backslashes are escaped (\n, \t, \\, \xHH);
 * everything else, UTF-8 included, is printed as it is.
 */
static void
print_escaped (const char *s)
{
  for (; *s; ++s) {
    unsigned char c = *s;
    if (c == '\\')
      fputs ("\\\\", stdout);
    else if (c == '\n')
      fputs ("\\n", stdout);
    else if (c == '\t')
      fputs ("\\t", stdout);
    else if (c < 0x20 || c == 0x7f)
      printf ("\\x%02x", c);
    else
      putchar (c);
  }
}

static void
print_human (const struct info *in)
{
  char hs[32];
  size_t i;

  printf ("file: ");
  print_escaped (in->path);
  putchar ('\n');
  printf ("format version: %d\n", BMF_VERSION);
  if (in->sized)
    printf ("disk size: %" PRIu64 " (%s)\n",
            in->size, human_size (in->size, hs, sizeof hs));
  else
    printf ("disk size: unknown (no client has connected yet)\n");
  printf ("state: %s\n", in->state_text);
  if (in->restore.source) {
    printf ("restore: from ");
    print_escaped (in->restore.source);
    if (in->restore.complete)
      printf (": complete\n");
    else
      printf (": %" PRIu64 " of %" PRIu64 " bytes restored (%s)\n",
              in->restore.done, in->restore.size,
              human_size (in->restore.done, hs, sizeof hs));
  }
  printf ("bitmaps:%s\n", in->nr ? "" : " none");
  for (i = 0; i < in->nr; ++i) {
    const struct info_bitmap *b = &in->bm[i];
    printf ("    [%zu]:\n", i);
    printf ("        name: ");
    print_escaped (b->name);
    putchar ('\n');
    printf ("        granularity: %" PRIu64 "\n", b->granularity);
    printf ("        recording: %s\n", b->recording ? "true" : "false");
    printf ("        consistent: %s\n", b->consistent ? "true" : "false");
    printf ("        dirty bytes: %" PRIu64 " (%s)\n",
            b->dirty, human_size (b->dirty, hs, sizeof hs));
    if (b->recovered)
      printf ("        dirty because the machine stopped: %" PRIu64
              " (%s), from the coarse shadow\n", b->recovered_bytes,
              human_size (b->recovered_bytes, hs, sizeof hs));
  }
}

static void
print_json (const struct info *in)
{
  size_t i;

  printf ("{\n    \"filename\": ");
  print_json_string (stdout, in->path);
  printf (",\n    \"format-version\": %d,\n", BMF_VERSION);
  if (in->sized)
    printf ("    \"disk-size\": %" PRIu64 ",\n", in->size);
  else
    printf ("    \"disk-size\": null,\n");
  printf ("    \"state\": \"%s\",\n", in->state);
  if (in->restore.source) {
    printf ("    \"restore\": {\"source\": ");
    print_json_string (stdout, in->restore.source);
    printf (", \"done-bytes\": %" PRIu64 ", \"size\": %" PRIu64
            ", \"complete\": %s},\n", in->restore.done, in->restore.size,
            in->restore.complete ? "true" : "false");
  }
  printf ("    \"bitmaps\": [");
  for (i = 0; i < in->nr; ++i) {
    const struct info_bitmap *b = &in->bm[i];
    printf ("%s\n        {\n            \"name\": ", i ? "," : "");
    print_json_string (stdout, b->name);
    printf (",\n            \"granularity\": %" PRIu64 ",\n",
            b->granularity);
    printf ("            \"recording\": %s,\n",
            b->recording ? "true" : "false");
    printf ("            \"consistent\": %s,\n",
            b->consistent ? "true" : "false");
    printf ("            \"dirty-bytes\": %" PRIu64, b->dirty);
    if (b->recovered)
      printf (",\n            \"recovered-bytes\": %" PRIu64,
              b->recovered_bytes);
    printf ("\n        }");
  }
  printf ("%s]\n}\n", in->nr ? "\n    " : "");
}

int
do_info (int argc, char *argv[])
{
  enum { CONTROL = 256, DISK };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "output", required_argument, NULL, 'o' },
    { "force-share", no_argument, NULL, 'U' },
    { "control", required_argument, NULL, CONTROL },
    { "disk", required_argument, NULL, DISK },
    { NULL }
  };
  struct info in = { .path = NULL };
  const char *socket = NULL, *disk = NULL;
  int c, json = 0, r;
  bool force = false;

  while ((c = getopt_long (argc, argv, "hU", long_options, NULL)) != -1) {
    switch (c) {
    case 'h': info_usage (EXIT_SUCCESS);
    case 'U': force = true; break;
    case CONTROL: socket = optarg; break;
    case DISK: disk = optarg; break;
    case 'o':
      if ((json = parse_output ("info ", optarg)) == -1)
        return EXIT_FAILURE;
      break;
    default: return try_help ("info ");
    }
  }
  if (socket) {
    if (optind != argc)
      return bad_usage ("info ", "--control SOCKET takes no FILE");
    if (force)
      return bad_usage ("info ", "-U is for FILE, not --control");
    if (disk)
      return bad_usage ("info ", "--disk is for FILE: the server knows "
                        "its disk");
    r = from_server (socket, &in);
  }
  else {
    if (optind != argc - 1)
      return bad_usage ("info ", "expecting one FILE");
    r = from_file (argv[optind], force, disk, &in);
  }
  if (r == 0) {
    if (json)
      print_json (&in);
    else
      print_human (&in);
  }
  info_free (&in);
  return r == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
