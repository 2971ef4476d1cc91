#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The filter's man page documents what the code accepts, and nothing
# else: every -D dirtybitmap.* debug flag (a dirtybitmap_debug_*
# variable) in DEBUG FLAGS, and every parameter that .config takes
# for itself in PARAMETERS and in the SYNOPSIS.
source ./functions.sh
set -e
set -x

pod="$abs_top_srcdir/man/nbdkit-dirtybitmap-filter.pod"
src="$abs_top_srcdir/filter"

# A =head1 section of the page, without its heading.
section ()
{
    awk -v want="$1" '
        /^=head1 / { on = (substr ($0, 8) == want); next }
        on' "$pod"
}

# The debug flags: variables in the code, items in DEBUG FLAGS.
grep -ohE '\bdirtybitmap_debug_[a-z0-9_]+\b' "$src"/*.c |
    sed 's/^dirtybitmap_debug_//' | sort -u > flags.code
section "DEBUG FLAGS" |
    sed -n 's/^=item B<-D dirtybitmap\.\([a-z0-9_]*\)=.*/\1/p' |
    sort -u > flags.doc
test -s flags.code
diff -u flags.code flags.doc || {
    echo "$0: DEBUG FLAGS of $pod and the code's flags (-) differ"
    exit 1
}

# The parameters: the keys of params_config's strcmp branches,
# less those passed on to the plugin (file=, which the filter only
# looks at); the =item B<KEY=> entries of PARAMETERS.
awk '
    /^params_config \(/ { on = 1 }
    on && /^}/ { on = 0 }
    !on { next }
    match ($0, /strcmp \(key, "[^"]*"\)/) {
        key = substr ($0, RSTART + 14, RLENGTH - 16)
        keys[key] = 1
    }
    key != "" && /next \(nxdata, key, value\)/ { passed[key] = 1 }
    END { for (k in keys) if (!(k in passed)) print k }
' "$src/params.c" | sort > params.code
section PARAMETERS | sed -n 's/^=item B<\([a-z-]*\)=.*/\1/p' |
    sort -u > params.doc
cat params.code
test "$(wc -l < params.code)" -ge 9
diff -u params.code params.doc || {
    echo "$0: PARAMETERS of $pod and params_config (-) differ"
    exit 1
}
section SYNOPSIS > synopsis
while read -r p; do
    grep -F "[$p=" synopsis || {
        echo "$0: $p= is not in the SYNOPSIS of $pod"
        exit 1
    }
done < params.code
