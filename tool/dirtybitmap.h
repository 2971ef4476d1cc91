/* SPDX-License-Identifier: BSD-3-Clause */
/* dirtybitmap.h: what the tool's subcommands share.  Functions here
 * print their own errors; subcommands return the exit status.
 *
 * Errors travel as values, in a struct bmerr (lib/error.h), to whoever
 * reports them; what the tool says on stderr, it says through bm_error
 * (lib/msg.h), which writes the "dirtybitmap: " prefix.  Only the
 * progress display and the summaries (on stdout) are printed as they
 * are.
 */

#ifndef DIRTYBITMAP_TOOL_H
#define DIRTYBITMAP_TOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bmfile.h"
#include "error.h"
#include "msg.h"                /* bm_error */
#include "size.h"               /* parse_size, human_size */
#include "txn.h"

extern const char *prog;
extern bool verbose;

/* Subcommands: argc/argv start at the subcommand name. */
extern int do_info (int argc, char *argv[]);
extern int do_bitmap (int argc, char *argv[]);
extern int do_map (int argc, char *argv[]);
extern int do_check (int argc, char *argv[]);
extern int do_copy (int argc, char *argv[]);
extern int do_backup (int argc, char *argv[]);
extern int do_resize (int argc, char *argv[]);
extern int do_verify (int argc, char *argv[]);
extern int do_list (int argc, char *argv[]);
extern int do_restore (int argc, char *argv[]);
extern int do_rollback (int argc, char *argv[]);
extern int do_serve (int argc, char *argv[]);
extern int do_prune (int argc, char *argv[]);

/* verify DIR[@POINT] (repo-verify.c), from do_verify: the exit status. */
extern int verify_repo (const char *spec, bool progress, bool json,
                        bool resume);

/* The disk file that the bitmap file FILE describes: GIVEN (--disk)
 * if set, else FILE without ".bitmaps" if that is a regular file, else
 * NULL (not found, or out of memory).  Free it.
 */
extern char *find_disk (const char *file, const char *given);

/* Judge whether disk (NULL: unknown) was written without the filter
 * (lib/identity.h) and say so: the enabled bitmaps of f are then
 * inconsistent in memory, which a writing command records.
 */
extern void judge_disk (struct bmf *f, const char *disk, bool writing);

/* The same for a command that only reads f: the disk is found from
 * given (--disk) or f's path, and not judged while a server holds f.
 */
extern void judge_disk_read (struct bmf *f, const char *given);

/* Record disk (NULL: unknown) in t, as judged by judge_disk unless
 * this process wrote it since (lib/identity.h); say why if it cannot
 * be.
 */
extern void disk_seen (struct bmf_txn *t, const char *disk);

/* "--output=human|json": returns 0 human, 1 json, -1 (reported). */
extern int parse_output (const char *sub, const char *value);

/* OPT's value s, a whole number from 1 to max, into *out; -1 after
 * saying what is wrong (bad_usage, for subcommand sub: "copy ").
 */
extern int parse_count (const char *sub, const char *opt, const char *s,
                        unsigned max, unsigned *out);

/* Print a JSON string with quotes and escapes. */
extern void print_json_string (FILE *fp, const char *s);

/* "Try 'dirtybitmap SUB --help' ..." on stderr; returns exit status 1.
 * For option errors that getopt has already described.
 */
extern int try_help (const char *sub);

/* The message (bm_error), then try_help: returns exit status 1. */
extern int bad_usage (const char *sub, const char *fs, ...)
  __attribute__ ((format (printf, 2, 3)));

#endif /* DIRTYBITMAP_TOOL_H */
