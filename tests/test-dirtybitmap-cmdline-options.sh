#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The filter learns whether nbdkit runs read-only (-r) by parsing
# nbdkit's command line again with a copy of nbdkit's option table
# (filter/cmdline.c: nbdkit 1.32 does not say it before a connection).
# (1) The copy must be the installed nbdkit's table: the same short and
# long options, each taking an argument or not alike.  (2) If it is
# wrong anyway (here a shim makes a writable server's command line
# read "-r"), a writable connection is refused with a message, rather
# than served with its writes unrecorded.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires timeout --version

src="$abs_top_srcdir/filter/cmdline.c"

# The filter's table, one "OPTION arg|noarg" a line.
short=$(sed -n 's/^static const char short_options\[\] = "\(.*\)";$/\1/p' \
            "$src")
test -n "$short"
for (( i = 0; i < ${#short}; ++i )); do
    c=${short:i:1}
    [ "$c" != : ] || continue
    if [ "${short:i+1:1}" = : ]; then
        echo "-$c arg"
    else
        echo "-$c noarg"
    fi
done | LC_ALL=C sort > filter.opts
sed -n 's/^ *{ "\([^"]*\)", *no_argument,.*/--\1 noarg/p
        s/^ *{ "\([^"]*\)", *required_argument,.*/--\1 arg/p' "$src" |
    LC_ALL=C sort >> filter.opts
LC_ALL=C sort -o filter.opts filter.opts
test "$(grep -c '^--' filter.opts)" -gt 40

# The installed nbdkit's, asked: an option that needs an argument and
# has none is refused by getopt ("requires an argument"); one that
# takes none and is given one is refused too ("doesn't allow an
# argument").  Without a plugin nbdkit starts nothing.  nbdkit leaves
# --short-options and --long-options out of its own list.
probe_short ()
{
    timeout 10 nbdkit "$1" </dev/null 2>&1 || true
}
probe_long ()
{
    timeout 10 nbdkit "$1=x" </dev/null 2>&1 || true
}
{
    for o in $(nbdkit --short-options); do
        if probe_short "$o" | grep -q 'requires an argument'; then
            echo "$o arg"
        else
            echo "$o noarg"
        fi
    done
    for o in $(nbdkit --long-options) --long-options --short-options; do
        if probe_long "$o" | grep -q "doesn't allow an argument"; then
            echo "$o noarg"
        else
            echo "$o arg"
        fi
    done
} | LC_ALL=C sort > nbdkit.opts
if ! diff -u nbdkit.opts filter.opts; then
    echo "$0: filter/cmdline.c's option table is not nbdkit $(nbdkit --version)'s:"
    echo "$0: update it, or -r may be misread"
    exit 1
fi

# (2) A writable server whose command line the filter misreads as -r.
shim="$abs_top_builddir/tests/.libs/libfakecmdline.so"
truncate -s 1M disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add --run true
sum=$(md5sum < disk.img.bitmaps)
r=0
LD_PRELOAD="$shim" FAKE_CMDLINE="nbdkit -r" \
    nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 \
    --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 0)"' 2> err || r=$?
cat err
test $r != 0
grep -F "dirtybitmap: nbdkit opens this connection writable, but the filter read its command line as read-only (-r)" err
test "$(md5sum < disk.img.bitmaps)" = "$sum"
cmp disk.img <(head -c 1M /dev/zero)

# The same shim on a real -r server changes nothing.
LD_PRELOAD="$shim" FAKE_CMDLINE="nbdkit -r" \
    nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 \
    --run 'nbdinfo --map "$uri"' > map
expect map <<'EOF2'
         0     1048576    1  hole
EOF2
