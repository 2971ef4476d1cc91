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

static void
print_json (FILE *fp, const struct copy_options *o,
            const struct copy_result *r)
{
  fprintf (fp, "{\n");
  fprintf (fp, "    \"result\": \"%s\",\n",
           r->ok ? "complete" : r->interrupted ? "interrupted" : "failed");
  fprintf (fp, "    \"source\": ");
  print_json_string (fp, o->source);
  fprintf (fp, ",\n    \"target\": ");
  print_json_string (fp, o->target);
  fprintf (fp, ",\n    \"full\": %s,\n", o->full ? "true" : "false");
  fprintf (fp, "    \"stage\": \"%s\",\n", stage_name (r->stage));
  if (r->sizes_known) {
    fprintf (fp, "    \"bytes-total\": %" PRIu64 ",\n", r->total);
    fprintf (fp, "    \"ranges\": %zu,\n", r->ranges);
  }
  else {
    fprintf (fp, "    \"bytes-total\": null,\n");
    fprintf (fp, "    \"ranges\": null,\n");
  }
  fprintf (fp, "    \"bytes-copied\": %" PRIu64 ",\n", r->copied);
  fprintf (fp, "    \"bytes-zeroed\": %" PRIu64 ",\n", r->zeroed);
  fprintf (fp, "    \"seconds\": %.3f,\n", r->seconds);
  fprintf (fp, "    \"error\": ");
  if (r->error)
    print_json_string (fp, r->error);
  else
    fprintf (fp, "null");
  fprintf (fp, "\n}\n");
}

void
copy_print_summary (FILE *fp, const struct copy_options *o,
                    const struct copy_result *r, bool json)
{
  if (json)
    print_json (fp, o, r);
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
  if (r->error)
    bm_error ("copy: %s", r->error);
  if (r->interrupted) {
    if (r->sizes_known)
      bm_error ("copy interrupted: %" PRIu64 " of %" PRIu64 " %sbytes "
                "copied", r->copied + r->zeroed, r->total, dirty);
    else
      bm_error ("copy interrupted before copying started");
  }
  else if (r->stage == COPY_STAGE_COPY)
    bm_error ("copy incomplete: %" PRIu64 " of %" PRIu64 " %sbytes copied",
              r->copied + r->zeroed, r->total, dirty);
  else if (r->stage == COPY_STAGE_FLUSH)
    bm_error ("copy incomplete: the target could not be flushed and put "
              "in place");
  else if (r->error == NULL)
    bm_error ("copy: failed");
}
