#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The man pages and the unit agree: the command line that the filter's
# page (SYSTEMD) shows is the unit's ExecStart=, the paths they give
# for the configuration and the sockets are the unit's, and every key
# of NAME.conf that the unit or its generator reads is documented, and
# in the example file.
source ./functions.sh
set -e
set -x

unit_in="$abs_top_srcdir/systemd/nbdkit-dirtybitmap@.service.in"
generator_in="$abs_top_srcdir/systemd/nbdkit-dirtybitmap-generator.in"
example="$abs_top_srcdir/systemd/example.conf"
filter_pod="$abs_top_srcdir/man/nbdkit-dirtybitmap-filter.pod"
tool_pod="$abs_top_srcdir/man/dirtybitmap.pod"

# The unit's value of KEY, for instance $1, as the package installs it
# (/etc), ${X} written $X as the man page writes it.
setting ()
{
    sed -n "s/^$2=//p" "$unit_in" |
        sed -e 's|@NBDKIT@|nbdkit|g' -e 's|@sysconfdir@|/etc|g' \
            -e "s|%i|$1|g" -e 's|\${\([A-Z_]*\)}|$\1|g'
}

# The command line, word for word.
setting NAME ExecStart | tr -s ' ' '\n' > unit.argv
sed -n '/^=head2 nbdkit-dirtybitmap@NAME.service/,/^=over/p' "$filter_pod" |
    sed -n '/^ nbdkit /,/^$/p' | tr -d '\\' | tr -s ' \n' '\n\n' |
    sed '/^$/d' > pod.argv
diff -u unit.argv pod.argv

# The configuration file and the sockets, for the instances the pages
# use.
setting NAME EnvironmentFile | tee conf.NAME
grep -F "$(cat conf.NAME)" "$filter_pod"
for name in disk NAME; do
    setting $name Environment | sed -n 's/^\(SOCKET\|CONTROL\)=//p' > paths
    [ "$(wc -l < paths)" = 2 ]
    while read -r p; do grep -F "$p" "$filter_pod"; done < paths
done
for name in vm1-os vm1-db; do
    grep -F "$(setting $name EnvironmentFile)" "$tool_pod"
    setting $name Environment | sed -n 's/^\(SOCKET\|CONTROL\)=//p' > paths
    while read -r p; do grep -F "$p" "$tool_pod"; done < paths
    grep -F "systemctl enable --now nbdkit-dirtybitmap@vm1-os nbdkit-dirtybitmap@vm1-db" \
        "$tool_pod"
done
grep -F 'F<nbdkit-dirtybitmap@.service>' "$filter_pod"
grep -F 'F<nbdkit-dirtybitmap@.service>' "$tool_pod"

# The keys: those the command line and the generator use.
{
    grep -o '\$[{]\{0,1\}[A-Z_]*' unit.argv | tr -d '${'
    grep -o 'value [A-Z_]* "$conf"' "$generator_in" | cut -d' ' -f2
    grep -o '^    for key in [A-Z_ ]*' "$generator_in" | sed 's/^    for key in //' |
        tr ' ' '\n'
} | sed '/^$/d' | sort -u > keys
cat keys
[ "$(wc -l < keys)" -ge 6 ]
while read -r k; do
    grep -E "^=item B<$k=>" "$filter_pod"
    grep -E "^#? ?$k=" "$example"
done < keys
