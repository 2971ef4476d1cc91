/* SPDX-License-Identifier: BSD-3-Clause */
/* copy/summary.c: what a copy reports once it has ended, apart from
 * running it: the summary on stdout (one line of text after a
 * success, or one JSON object whatever happened, described in the JSON
 * OUTPUT section of dirtybitmap(1)), and the lines on stderr that say
 * why and how far a failed or interrupted copy got.
 */

#include <config.h>

#include <stdio.h>
#include <stdint.h>
#include <inttypes.h>

#include "dirtybitmap.h"
#include "msg.h"
#include "copy.h"

static const char *
stage_name (enum copy_stage s)
{
  switch (s) {
  case COPY_STAGE_SETUP: return "setup";
  case COPY_STAGE_COPY: return "copy";
  case COPY_STAGE_FLUSH: return "flush";
  case COPY_STAGE_DONE: return "done";
  }
  return "unknown";
}

json_object *
copy_summary_json (const struct copy_options *o, const struct copy_result *r)
{
  json_object *j = json_object_new_object ();
  char secs[32];

  if (j == NULL)
    return NULL;
  snprintf (secs, sizeof secs, "%.3f", r->seconds);
  json_object_object_add (j, "result", json_object_new_string (
    r->ok ? "complete" : r->interrupted ? "interrupted" : "failed"));
  json_object_object_add (j, "source", json_object_new_string (o->source));
  json_object_object_add (j, "target", json_object_new_string (o->target));
  json_object_object_add (j, "full", json_object_new_boolean (o->full));
  json_object_object_add (j, "stage",
                          json_object_new_string (stage_name (r->stage)));
  json_object_object_add (j, "bytes-total", r->sizes_known
                          ? json_object_new_uint64 (r->total) : NULL);
  json_object_object_add (j, "ranges", r->sizes_known
                          ? json_object_new_uint64 (r->ranges) : NULL);
  json_object_object_add (j, "bytes-copied",
                          json_object_new_uint64 (r->copied));
  json_object_object_add (j, "bytes-zeroed",
                          json_object_new_uint64 (r->zeroed));
  json_object_object_add (j, "bytes-read", json_object_new_uint64 (r->read));
  json_object_object_add (j, "bytes-unchanged",
                          json_object_new_uint64 (r->unchanged));
  json_object_object_add (j, "seconds",
                          json_object_new_double_s (r->seconds, secs));
  json_object_object_add (j, "error", bmerr_failed (&r->error)
                          ? json_object_new_string (r->error.msg) : NULL);
  return j;
}

void
copy_print_json (FILE *fp, json_object *j)
{
  fprintf (fp, "%s\n",
           json_object_to_json_string_ext (j, JSON_C_TO_STRING_PRETTY |
                                           JSON_C_TO_STRING_SPACED |
                                           JSON_C_TO_STRING_NOSLASHESCAPE));
}

void
copy_print_summary (FILE *fp, const struct copy_options *o,
                    const struct copy_result *r, bool json)
{
  json_object *j;

  if (json) {
    j = copy_summary_json (o, r);
    copy_print_json (fp, j);
    json_object_put (j);
  }
  else if (r->ok)
    fprintf (fp, "copied %" PRIu64 " bytes, zeroed %" PRIu64 " bytes, "
             "%zu range%s, %.3f seconds\n",
             r->copied, r->zeroed, r->ranges, r->ranges == 1 ? "" : "s",
             r->seconds);
}

void
copy_print_failure (const struct copy_options *o,
                    const struct copy_result *r)
{
  const char *dirty = o->full ? "" : "dirty ";

  if (r->ok)
    return;
  if (bmerr_failed (&r->error))
    bm_error ("copy: %s", r->error.msg);
  if (r->interrupted) {
    if (r->sizes_known)
      bm_error ("copy interrupted: %" PRIu64 " of %" PRIu64 " %sbytes "
                "copied", r->copied + r->zeroed + r->unchanged, r->total, dirty);
    else
      bm_error ("copy interrupted before copying started");
  }
  else if (r->stage == COPY_STAGE_COPY)
    bm_error ("copy incomplete: %" PRIu64 " of %" PRIu64 " %sbytes copied",
              r->copied + r->zeroed + r->unchanged, r->total, dirty);
  else if (r->stage == COPY_STAGE_FLUSH)
    bm_error ("copy incomplete: the target could not be flushed and put "
              "in place");
  else if (!bmerr_failed (&r->error))
    bm_error ("copy: failed");
}
