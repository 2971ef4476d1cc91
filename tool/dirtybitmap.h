/* SPDX-License-Identifier: BSD-3-Clause */
/* dirtybitmap.h: what the tool's subcommands share.  Functions here
 * print their own errors; subcommands return the exit status.
 */

#ifndef DIRTYBITMAP_TOOL_H
#define DIRTYBITMAP_TOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bmfile.h"
#include "error.h"

extern const char *prog;
extern bool verbose;

/* Subcommands: argc/argv start at the subcommand name. */
extern int do_info (int argc, char *argv[]);
extern int do_bitmap (int argc, char *argv[]);
extern int do_map (int argc, char *argv[]);
extern int do_check (int argc, char *argv[]);
extern int do_copy (int argc, char *argv[]);

/* "1M", "64K", "512": sizes with optional K/M/G/T/P/E (powers of
 * 1024) and an optional B or iB; -1 on error (not reported).
 */
extern int64_t parse_size (const char *s);

/* "--output=human|json": returns 0 human, 1 json, -1 (reported). */
extern int parse_output (const char *sub, const char *value);

/* Print a JSON string with quotes and escapes. */
extern void print_json_string (FILE *fp, const char *s);

/* Print an error of lib/ ("dirtybitmap: MESSAGE") on stderr. */
extern void report_error (const struct bmerr *err);

/* "1 MiB": at most three significant digits and a binary unit, as
 * qemu-img info prints sizes.  Returns buf.
 */
extern char *human_size (uint64_t bytes, char *buf, size_t len);

/* "Try 'dirtybitmap SUB --help' ..." on stderr; returns exit status 1.
 * For option errors that getopt has already described.
 */
extern int try_help (const char *sub);

/* The message, then try_help: returns exit status 1. */
extern int bad_usage (const char *sub, const char *fs, ...)
  __attribute__ ((format (printf, 2, 3)));

#endif /* DIRTYBITMAP_TOOL_H */
