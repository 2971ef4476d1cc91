#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The tarball's lists: no file is named twice in a directory's
# EXTRA_DIST, nor there and among what automake distributes anyway
# (sources, Makefile.in, AUTHORS, COPYING, README.md, AC_CONFIG_FILES
# inputs).  The lists are those make expands, += and $(filter ...)
# included.
source ./functions.sh
set -e
set -x

# make is asked for the expanded lists, without the MAKEFLAGS (jobs,
# TESTS=...) of the make check that runs this.
lists ()
{
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
        "${MAKE:-make}" -s --no-print-directory -C "$abs_top_builddir/$1" \
        --eval 'dbm-dist-lists: ; @printf "srcdir %s\n" $(srcdir); printf "extra %s\n" $(EXTRA_DIST); printf "auto %s\n" $(am__DIST_COMMON) $(DIST_SOURCES)' \
        dbm-dist-lists
}

dirs=". lib filter tool man systemd bash-completion tests"
for d in $dirs; do
    lists "$d" > "lists.$(echo "$d" | tr ./ _-)"
done
# It did read them: the tests' EXTRA_DIST holds this very script.
grep -Fx "extra test-dirtybitmap-dist.sh" lists.tests

for f in lists.*; do
    awk -v list="$f" '
        $1 == "srcdir" { srcdir = $2 "/"; next }
        NF < 2 { next }
        {
            p = $2
            if (substr (p, 1, length (srcdir)) == srcdir)
                p = substr (p, length (srcdir) + 1)
            while (substr (p, 1, 2) == "./")
                p = substr (p, 3)
        }
        $1 == "extra" {
            if (p in extra) print list ": twice in EXTRA_DIST: " p
            extra[p] = 1
        }
        $1 == "auto" { auto[p] = 1 }
        END {
            for (p in extra)
                if (p in auto)
                    print list ": in EXTRA_DIST but distributed anyway: " p
        }' "$f"
done > problems
cat problems
test ! -s problems
