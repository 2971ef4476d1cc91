#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The global options, before the subcommand: -v/--verbose prints the
# debug messages that DIRTYBITMAP_DEBUG turns on, --version and
# --verbose are in --help, and an unknown global option is a usage
# error.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

dirtybitmap --help > help.out
for s in "[-v|--verbose] SUBCOMMAND" "--help | --version" \
         "-v, --verbose" "-V, --version" "DIRTYBITMAP_DEBUG" \
         "copy [-p] [--output=human|json]" "[--trim-source]"; do
    grep -F -- "$s" help.out
done

# Without -v and without DIRTYBITMAP_DEBUG: no debug messages.
env -u DIRTYBITMAP_DEBUG dirtybitmap bitmap --add --size 1M a.bitmaps b0 \
    2> quiet.err
test ! -s quiet.err

# -v, --verbose and DIRTYBITMAP_DEBUG say the same.
for v in -v --verbose; do
    env -u DIRTYBITMAP_DEBUG dirtybitmap $v bitmap --add --size 1M \
        f$v.bitmaps b0 2> f$v.err
    cat f$v.err
    grep -F "dirtybitmap: debug: f$v.bitmaps: committed seq " f$v.err
done
DIRTYBITMAP_DEBUG=1 dirtybitmap bitmap --add --size 1M f.bitmaps b0 2> f.err
test "$(sed 's/f\.bitmaps/F/' f.err)" = "$(sed 's/f-v\.bitmaps/F/' f-v.err)"
# Several global options, and --version after -v.
env -u DIRTYBITMAP_DEBUG dirtybitmap -v --verbose info f-v.bitmaps \
    > /dev/null 2> vv.err
grep -F "dirtybitmap: debug: f-v.bitmaps: opened:" vv.err
test "$(dirtybitmap -v --version)" = "$(dirtybitmap --version)"

# A verbose copy says what it does.
yes | head -c 1M > disk.img
nbdkit -U - file disk.img \
       --run 'env -u LIBNBD_DEBUG dirtybitmap -v copy --full "$uri" b.img' \
       > copy.out 2> copy.err
cat copy.out copy.err
cmp disk.img b.img
grep -F "dirtybitmap: debug: copy: size 1048576, request size " copy.err

tool_fails "dirtybitmap: unknown option '--frob'" --frob info x
tool_fails "Try 'dirtybitmap --help' for more information." -v --frob
