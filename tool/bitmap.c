/* SPDX-License-Identifier: BSD-3-Clause */
/* bitmap.c: dirtybitmap bitmap: the actions of the filter's action=
 * (and of qemu-img bitmap) on a file offline, several in one call,
 * applied in order, all or nothing.  Merge sources come from the file
 * itself, another bitmap file, or a qcow2 image (qcow2.c).
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
#include <sys/stat.h>

#include "actions.h"
#include "control-client.h"
#include "dirtybitmap.h"
#include "identity.h"
#include "qcow2.h"
#include "util.h"

static void __attribute__ ((noreturn))
bitmap_usage (int status)
{
  fprintf (status ? stderr : stdout,
"Usage: %s bitmap (--add | --remove | --clear | --enable | --disable |\n"
"                  --merge SRC)... [-b SOURCE_FILE [-F SOURCE_FMT]]\n"
"                  [-g GRANULARITY] [--size SIZE] [--disk DISKFILE]\n"
"                  FILE BITMAP\n"
"       %s bitmap ACTIONS... --control SOCKET BITMAP\n"
"\n"
"Apply the actions, in order, to bitmap BITMAP of the bitmap file FILE,\n"
"or, with --control, of the nbdkit that serves the disk, through its\n"
"control socket.  Either all of them take effect or none does.\n"
"\n"
"  --add            create BITMAP, empty and recording\n"
"  --remove         delete BITMAP\n"
"  --clear          mark every granule of BITMAP clean\n"
"  --enable         make BITMAP record writes\n"
"  --disable        stop BITMAP recording (it still answers)\n"
"  --merge SRC      BITMAP |= SRC\n"
"  -b, --source-file SOURCE_FILE\n"
"                   take the --merge sources from this bitmap file\n"
"  -F, --source-format SOURCE_FMT\n"
"                   qcow2: SOURCE_FILE is a qcow2 image, whose persistent\n"
"                   bitmaps are read through qemu-img and qemu-nbd;\n"
"                   raw (the default): it is a bitmap file\n"
"  -g, --granularity GRANULARITY\n"
"                   granularity of --add: a power of 2 from 512 to 2G\n"
"                   (default 64K)\n"
"  --size SIZE      create FILE, for a disk of SIZE bytes, if it does\n"
"                   not exist; else SIZE must be its disk size\n"
"  --disk DISKFILE  the disk that FILE describes (default: FILE less\n"
"                   \".bitmaps\"), checked for writes made without the\n"
"                   filter\n"
"  --control SOCKET the control=SOCKET of a running filter\n"
"\n"
"Examples:\n"
"  %s bitmap --add --size 10G disk.img.bitmaps b0\n"
"  %s bitmap --clear --merge b1 disk.img.bitmaps b0\n"
"  %s bitmap --merge b0 -b disk.qcow2 -F qcow2 disk.img.bitmaps b0\n"
"  %s bitmap --add --control /run/disk.ctl b1\n",
           prog, prog, prog, prog, prog, prog);
  exit (status);
}

struct opts {
  struct action *acts;
  size_t n;
  const char *source_file;
  bool qcow2;                   /* -F qcow2: source_file is an image */
  int64_t granularity;          /* -1: not given */
  int64_t size;                 /* -1: not given */
  const char *control;          /* --control SOCKET, or NULL */
  const char *disk;             /* --disk DISKFILE, or NULL */
};

static int
push (struct opts *o, enum act_kind kind, const char *src)
{
  struct action *a = realloc (o->acts, (o->n + 1) * sizeof *a);

  if (a == NULL) {
    bm_error ("%m");
    return -1;
  }
  o->acts = a;
  a[o->n++] = (struct action) { .kind = kind, .src = src };
  return 0;
}

static bool
has (const struct opts *o, enum act_kind kind)
{
  size_t i;

  for (i = 0; i < o->n; ++i)
    if (o->acts[i].kind == kind)
      return true;
  return false;
}

static int check_options (struct opts *o, int argc, const char *fmt,
                          const char *gran);

/* Parse the options; returns 0, or the exit status.  The checks
 * (check_options) and their order (and wording) are qemu-img bitmap's.
 */
static int
parse (int argc, char *argv[], struct opts *o)
{
  enum { ADD = 256, REMOVE, CLEAR, ENABLE, DISABLE, MERGE, SIZE, CONTROL,
         DISK };
  static const struct option long_options[] = {
    { "help", no_argument, NULL, 'h' },
    { "add", no_argument, NULL, ADD },
    { "remove", no_argument, NULL, REMOVE },
    { "clear", no_argument, NULL, CLEAR },
    { "enable", no_argument, NULL, ENABLE },
    { "disable", no_argument, NULL, DISABLE },
    { "merge", required_argument, NULL, MERGE },
    { "granularity", required_argument, NULL, 'g' },
    { "source-file", required_argument, NULL, 'b' },
    { "source-format", required_argument, NULL, 'F' },
    { "size", required_argument, NULL, SIZE },
    { "control", required_argument, NULL, CONTROL },
    { "disk", required_argument, NULL, DISK },
    { NULL }
  };
  const char *gran = NULL, *fmt = NULL;
  int c, r = 0;

  while (r == 0 &&
         (c = getopt_long (argc, argv, "hb:F:g:", long_options, NULL))
         != -1) {
    switch (c) {
    case 'h': bitmap_usage (EXIT_SUCCESS);
    case ADD: r = push (o, ACT_ADD, NULL); break;
    case REMOVE: r = push (o, ACT_REMOVE, NULL); break;
    case CLEAR: r = push (o, ACT_CLEAR, NULL); break;
    case ENABLE: r = push (o, ACT_ENABLE, NULL); break;
    case DISABLE: r = push (o, ACT_DISABLE, NULL); break;
    case MERGE: r = push (o, ACT_MERGE, optarg); break;
    case 'b': o->source_file = optarg; break;
    case 'F': fmt = optarg; break;
    case CONTROL: o->control = optarg; break;
    case DISK: o->disk = optarg; break;
    case 'g':
      gran = optarg;
      if ((o->granularity = parse_size (optarg)) == -1)
        return bad_usage ("bitmap ", "-g %s: invalid granularity (a size "
                          "such as 4096 or 64K)", optarg);
      break;
    case SIZE:
      if ((o->size = parse_size (optarg)) == -1)
        return bad_usage ("bitmap ", "--size %s: invalid size (a size "
                          "such as 1048576 or 10G)", optarg);
      break;
    default:
      return try_help ("bitmap ");
    }
  }
  if (r)
    return EXIT_FAILURE;
  return check_options (o, argc, fmt, gran);
}

/* The options, read, make sense together: an exit status (0: yes). */
static int
check_options (struct opts *o, int argc, const char *fmt, const char *gran)
{
  if (o->n == 0)
    return bad_usage ("bitmap ", "Need at least one of --add, --remove, "
                      "--clear, --enable, --disable, or --merge");
  if (o->granularity != -1 && !has (o, ACT_ADD))
    return bad_usage ("bitmap ", "granularity only supported with --add");
  if (fmt && !o->source_file)
    return bad_usage ("bitmap ", "-F only supported with -b");
  if (fmt && strcmp (fmt, "qcow2") != 0 && strcmp (fmt, "raw") != 0)
    return bad_usage ("bitmap ", "-F %s: the source format is qcow2 (a "
                      "qcow2 image) or raw (a bitmap file, the default)",
                      fmt);
  o->qcow2 = fmt && strcmp (fmt, "qcow2") == 0;
  if (o->source_file && !has (o, ACT_MERGE))
    return bad_usage ("bitmap ", "Merge bitmap source file only supported "
                      "with --merge");
  if (o->control && o->disk)
    return bad_usage ("bitmap ", "--disk is for FILE: the server knows "
                      "its disk");
  if (o->control && o->qcow2)
    return bad_usage ("bitmap ", "-F qcow2 is not with --control: merge "
                      "the image's bitmap into a bitmap file, and that "
                      "file's with -b (see dirtybitmap(1))");
  if (o->control && o->size != -1)
    return bad_usage ("bitmap ", "--size creates FILE: not with --control");
  if (o->control && optind != argc - 1)
    return bad_usage ("bitmap ", "Expecting a bitmap name after --control "
                      "SOCKET");
  if (!o->control && optind != argc - 2)
    return bad_usage ("bitmap ", "Expecting filename and bitmap name");
  if (o->granularity != -1 &&
      bmf_granularity_problem (o->granularity))
    return bad_usage ("bitmap ", "-g %s: granularity %s", gran,
                      bmf_granularity_problem (o->granularity));
  return 0;
}

/* What opening the file found after the machine stopped under a
 * server, and what this command will keep in the file with its
 * commit: said, since a bitmap must not lose trust (or gain dirty
 * bytes) silently.
 */
static void
crash_notices (struct bmf *f)
{
  const struct bmf_state *st = bmf_state (f);
  size_t i;

  if (!bmf_rebooted (f))
    return;
  for (i = 0; i < st->nr_bitmaps; ++i) {
    const struct bmf_bitmap *b = &st->bitmaps[i];
    if (b->recovery != BMF_NOT_RECOVERED)
      bm_error ("%s: the machine stopped while "
                "durability=coarse was recording: bitmap %s: %" PRIu64
                " bytes are dirty because of it (from its coarse shadow)",
                bmf_path (f), b->name, b->recovered);
    else if (b->flags & BMF_INCONSISTENT)
      bm_error ("%s: bitmap %s is inconsistent: %s; remove it "
                "and take a full backup", bmf_path (f), b->name,
                bmf_inconsistent_reason (f));
  }
}

/* Open FILE for writing, or create it (privately, until it is
 * complete) when --size says so and it does not exist.
 */
static struct bmf *
open_target (const char *path, int64_t size)
{
  const struct bmf_state *st;
  struct bmerr err;
  struct bmf *f;

  f = bmf_open (path, BMF_LOCK_EXCLUSIVE, &err);
  if (f == NULL && err.errnum == ENOENT && size >= 0)
    f = bmf_create (path, 0600, true, size, &err);
  if (f == NULL) {
    bm_error ("%s", err.msg);
    if (err.errnum == ENOENT)
      bm_error ("use --size SIZE to create it");
    if (err.errnum == EBUSY)
      bm_error ("to change the bitmaps of a served disk, use "
                "--control SOCKET, the filter's control=SOCKET (see "
                "nbdkit-dirtybitmap-filter(1), CONTROL)");
    return NULL;
  }
  st = bmf_state (f);
  if (size >= 0 && st->sized && st->disk_size != (uint64_t) size) {
    bm_error ("%s: --size %" PRIi64 " does not match the disk "
              "size recorded in the file, %" PRIu64 " bytes",
              path, size, st->disk_size);
    bmf_close (f);
    return NULL;
  }
  return f;
}

/* Open the -b SOURCE_FILE, read-only.  When it is FILE itself, merges
 * read FILE's bitmaps as the earlier actions left them, as without -b
 * (*src stays NULL).
 */
static int
open_source (struct bmf *f, const char *path, struct bmf **src)
{
  struct bmerr err;

  *src = NULL;
  if (bmf_same_file (f, path))
    return 0;
  *src = bmf_open (path, BMF_LOCK_SHARED, &err);
  if (*src == NULL) {
    bm_error ("%s", err.msg);
    return -1;
  }
  return 0;
}

/* -F qcow2: read each --merge source from the image, through qemu,
 * into images (one per action; a source named twice is read once).
 * A source qemu says is missing or unusable fails its merge in its
 * turn; an image that cannot be read fails here.
 */
static int
read_images (struct opts *o, struct bmf_foreign **images)
{
  struct bmerr err;
  size_t i, j;

  *images = calloc (o->n, sizeof **images);
  if (*images == NULL) {
    bm_error ("%m");
    return -1;
  }
  for (i = 0; i < o->n; ++i) {
    struct action *a = &o->acts[i];
    if (a->kind != ACT_MERGE)
      continue;
    for (j = 0; j < i; ++j)
      if (o->acts[j].foreign && strcmp (o->acts[j].src, a->src) == 0)
        a->foreign = o->acts[j].foreign;
    if (a->foreign)
      continue;
    if (qcow2_read_bitmap (o->source_file, a->src, &(*images)[i],
                           &err) == -1) {
      bm_error ("%s", err.msg);
      return -1;
    }
    a->foreign = &(*images)[i];
  }
  return 0;
}

static void
free_images (struct bmf_foreign *images, size_t n)
{
  size_t i;

  for (i = 0; images && i < n; ++i)
    qcow2_free_bitmap (&images[i]);
  free (images);
}

/* A merge from another file or an image gives a file of unknown size
 * the source's size: it must be --size.  Says so if not.
 */
static bool
size_mismatch (const struct opts *o, struct bmf *src, const char *path)
{
  const struct bmf_state *sst = src ? bmf_state (src) : NULL;
  const uint64_t size = o->size;
  bool differs = false;
  uint64_t other = 0;
  size_t i;

  if (o->size < 0)
    return false;
  if (sst && sst->sized && sst->disk_size != size) {
    differs = true;
    other = sst->disk_size;
  }
  for (i = 0; i < o->n; ++i) {
    const struct bmf_foreign *b = o->acts[i].foreign;
    if (b && b->problem.errnum == 0 && b->disk_size != size) {
      differs = true;
      other = b->disk_size;
    }
  }
  if (!differs)
    return false;
  bm_error ("%s: --size %" PRIi64 " does not match the disk "
            "size of %s, %" PRIu64 " bytes",
            path, o->size, o->source_file, other);
  return true;
}

/* The server's error, which names the -b file by the absolute path it
 * was sent (file): print it naming the file as the user did (given),
 * as offline.
 */
static void
print_server_error (const char *error, const char *file, const char *given)
{
  const size_t n = file ? strlen (file) : 0;
  const char *whole = error;
  char *said = NULL;
  size_t len = 0;
  FILE *fp = open_memstream (&said, &len);
  const char *p;

  if (fp == NULL) {
    bm_error ("%s", whole);
    return;
  }
  while (n && (p = strstr (error, file)) != NULL) {
    fwrite (error, 1, p - error, fp);
    fputs (given, fp);
    error = p + n;
  }
  fputs (error, fp);
  bm_error ("%s", fclose (fp) == 0 ? said : whole);
  free (said);
}

/* The same actions, through a running filter's control socket. */
static int
live (const struct opts *o, const char *bitmap)
{
  json_object *actions = json_object_new_array (), *args, *ret;
  struct bmerr err = { 0 };
  char *file = NULL;
  size_t i;
  int r;

  if (o->source_file && (file = realpath (o->source_file, NULL)) == NULL) {
    bm_error ("%s: %s", o->source_file,
              strerror (errno));
    json_object_put (actions);
    return EXIT_FAILURE;
  }
  for (i = 0; i < o->n; ++i) {
    const struct action *a = &o->acts[i];
    json_object *j = json_object_new_object ();

    json_object_object_add (j, "action",
                            json_object_new_string (act_kind_name (a->kind)));
    json_object_object_add (j, "bitmap", json_object_new_string (bitmap));
    if (a->kind == ACT_ADD && o->granularity != -1)
      json_object_object_add (j, "granularity",
                              json_object_new_int64 (o->granularity));
    if (a->kind == ACT_MERGE) {
      json_object_object_add (j, "source", json_object_new_string (a->src));
      if (file)
        json_object_object_add (j, "file", json_object_new_string (file));
    }
    json_object_array_add (actions, j);
  }
  args = json_object_new_object ();
  json_object_object_add (args, "actions", actions);
  r = control_call (o->control, control_request ("transaction", args),
                    &ret, &err);
  json_object_put (ret);
  if (r == 1)
    print_server_error (err.msg, file, o->source_file);
  free (file);
  return r == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int
do_bitmap (int argc, char *argv[])
{
  struct opts o = { .granularity = -1, .size = -1 };
  struct bmf *f = NULL, *src = NULL;
  struct bmf_foreign *images = NULL;
  struct bmf_txn *t = NULL;
  struct bmerr err;
  const char *path;
  char *disk = NULL;
  size_t i;
  int r;

  if ((r = parse (argc, argv, &o)) != 0)
    goto out;
  if (o.control) {
    r = live (&o, argv[optind]);
    goto out;
  }
  r = EXIT_FAILURE;
  path = argv[optind];
  /* Like qemu-img, FILE first, then SOURCE_FILE. */
  f = open_target (path, o.size);
  if (f == NULL)
    goto out;
  crash_notices (f);
  disk = find_disk (path, o.disk);
  judge_disk (f, disk, true);
  if (o.source_file && !o.qcow2 &&
      open_source (f, o.source_file, &src) == -1)
    goto out;
  if (o.qcow2 && read_images (&o, &images) == -1)
    goto out;
  for (i = 0; i < o.n; ++i) {
    o.acts[i].bitmap = argv[optind + 1];
    o.acts[i].gbits = o.granularity == -1 ?
      BMF_DEFAULT_GBITS : log_2 (o.granularity);
    o.acts[i].src_file = src;
  }
  /* Checked before anything is written, so that the file stays as it
   * was.
   */
  if (size_mismatch (&o, src, path))
    goto out;
  t = act_begin (f, o.acts, o.n, &err);
  if (t == NULL ||
      (o.size >= 0 && !bmf_txn_state (t)->sized &&
       bmf_txn_resize (t, o.size, &err) == -1)) {
    bm_error ("%s", err.msg);
    goto out;
  }
  /* Every bit of an earlier run is on stable storage once this
   * commits (it syncs the file), so its "open" mark can go, as when
   * the filter starts.
   */
  bmf_txn_set_open (t, false, BMF_FLUSH);
  /* What the bitmaps hold from now on, judged above (identity.h). */
  disk_seen (t, disk);
  r = bmf_txn_commit (t, &err);
  t = NULL;                     /* freed by commit */
  if (r == 0)
    r = bmf_publish (f, &err);
  if (r == -1)
    bm_error ("%s", err.msg);
  r = r == 0 ? EXIT_SUCCESS : EXIT_FAILURE;

 out:
  bmf_txn_abort (t);
  /* All or nothing: a file this call created, and did not publish,
   * goes with it.
   */
  bmf_close (f);
  bmf_close (src);
  free_images (images, o.n);
  free (disk);
  free (o.acts);
  return r;
}
