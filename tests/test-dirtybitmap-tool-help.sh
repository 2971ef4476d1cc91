#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap --help, --version, each subcommand's --help, and the
# usage errors: exit 1 with a message naming the problem.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

dirtybitmap --help > help.out
for s in "info [--output=human|json] [-U] [--disk DISKFILE] FILE" \
         "bitmap (--add | --remove | --clear | --enable | --disable |" \
         "--merge SRC)... [-b SOURCE_FILE [-F SOURCE_FMT]]" \
         "[-g GRANULARITY] [--size SIZE] [--disk DISKFILE]" \
         "map [--output=human|json] [-U] [--disk DISKFILE] FILE BITMAP" \
         "check FILE" \
         "resize [--shrink] [--disk DISKFILE] FILE [+|-]SIZE" \
         "copy " "see dirtybitmap(1)"; do
    grep -F -- "$s" help.out
done
dirtybitmap -h > h.out
cmp h.out help.out

version="$(sed -n 's/^PACKAGE_VERSION = //p' "$abs_top_builddir/Makefile")"
test -n "$version"
dirtybitmap --version > version.out
test "$(cat version.out)" = "dirtybitmap $version"
dirtybitmap -V > version.out
test "$(cat version.out)" = "dirtybitmap $version"

for sub in info bitmap map check resize; do
    dirtybitmap $sub --help > $sub.help
    head -n1 $sub.help | grep -F "Usage: dirtybitmap $sub "
    dirtybitmap $sub -h > $sub.h
    cmp $sub.h $sub.help
done
for o in --output=json -U --force-share "--disk DISKFILE"; do
    grep -F -- "$o" info.help
    grep -F -- "$o" map.help
done
for o in --shrink "--disk DISKFILE"; do
    grep -F -- "$o" resize.help
done
for o in --add --remove --clear --enable --disable "--merge SRC" \
         "-b, --source-file SOURCE_FILE" "-F, --source-format SOURCE_FMT" \
         "-g, --granularity GRANULARITY" \
         "--size SIZE" "--disk DISKFILE"; do
    grep -F -- "$o" bitmap.help
done

# No subcommand: the usage, on stderr.
tool_fails "Usage:"
tool_fails "dirtybitmap: unknown subcommand 'frob'" frob
tool_fails "Try 'dirtybitmap --help' for more information." frob

# Options getopt rejects: its message names the subcommand.
tool_fails "dirtybitmap info: unrecognized option '--frob'" info --frob x
tool_fails "Try 'dirtybitmap info --help' for more information." info --frob x
tool_fails "dirtybitmap map: invalid option -- 'x'" map -x f b0
tool_fails "dirtybitmap check: unrecognized option '--force-share'" \
      check --force-share f
tool_fails "dirtybitmap bitmap: option '--merge' requires an argument" \
      bitmap --merge
tool_fails "Try 'dirtybitmap bitmap --help' for more information." \
      bitmap --merge

# Operands and values.
tool_fails "dirtybitmap: expecting one FILE" info
tool_fails "dirtybitmap: expecting one FILE" info a b
tool_fails "dirtybitmap: expecting FILE and BITMAP" map f
tool_fails "dirtybitmap: expecting FILE and BITMAP" map f b0 b1
tool_fails "dirtybitmap: expecting one FILE" check
tool_fails "dirtybitmap: expecting one FILE" check a b
tool_fails "dirtybitmap: --output=xml: must be human or json" info --output=xml f
tool_fails "Try 'dirtybitmap info --help' for more information." \
      info --output=xml f
tool_fails "dirtybitmap: --output=yaml: must be human or json" \
      map --output=yaml f b0
tool_fails "dirtybitmap: Expecting filename and bitmap name" bitmap --add f
tool_fails "dirtybitmap: -g 12x: invalid granularity" bitmap --add -g 12x f b0
tool_fails "dirtybitmap: --size ten: invalid size" bitmap --add --size ten f b0
# None of that created a file.
test ! -e f
