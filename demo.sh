#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# demo.sh: install what is needed (Debian 12), build, then show a live
# backup, step by step: a disk served with a control socket, a writer
# that never stops, a full backup and an incremental backup taken while
# it writes (each the disk at one point in time, checked block by
# block), and a last incremental that makes the backup equal the disk.
set -e
top="$(cd "$(dirname "$0")" && pwd)"
cd "$top"
.ci/deps
if [ ! -f Makefile ]; then
    autoreconf -fi >/dev/null
    ./configure >/dev/null
fi
make -j"$(nproc)" >/dev/null

export PATH="$top/tool:/usr/sbin:/usr/bin:/sbin:/bin"
filter="$top/filter/.libs/nbdkit-dirtybitmap-filter.so"
oracle="$top/tests/backup-oracle.py"
work="$(mktemp -d /tmp/dirtybitmap-demo.XXXXXX)"
cleanup () {
    touch "$work/stop"
    [ -z "$writer" ] || wait "$writer" 2>/dev/null || :
    [ ! -s "$work/pid" ] || kill "$(cat "$work/pid")" 2>/dev/null || :
    rm -rf "$work"
}
writer=
trap cleanup EXIT
cd "$work"

step () { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run () { printf '$ %s\n' "$*"; "$@"; }
now () { python3 -c 'import time; print(time.monotonic_ns())'; }

blocks=65536                                    # 256 MiB of 4K blocks
hot=8192                                        # the writer's first 32 MiB
uri="nbd+unix:///?socket=$work/sock"

step "Serve a 256 MiB disk with changed-block tracking and a control socket"
echo "(no bitmap records yet, as the warning says: the first backup adds one)"
truncate -s $((blocks * 4096)) disk.img
run nbdkit -P "$work/pid" -U "$work/sock" --filter="$filter" \
    file disk.img control="$work/ctl"

step "A writer starts, and does not stop: 4K blocks tagged (block, version)"
echo "(it writes at random in the first 32 MiB, as fast as it can)"
python3 "$oracle" write "$uri" 0 $hot writes.log stop &
writer=$!
sleep 1

step "A full backup of the live disk; the bitmap c1 records from its cut on"
t0=$(now)
run dirtybitmap backup --control ctl --checkpoint c1 "$uri" full.img
echo "cut $t0 $(now)" > cut.full
cp --sparse=always full.img backup.img
sleep 1

step "What changed since (the writer goes on)"
run dirtybitmap info --control ctl

step "An incremental backup into backup.img: only what c1 recorded"
echo "(at most the writer's 32 MiB, however big the disk)"
t0=$(now)
run dirtybitmap backup --control ctl --incremental c1 --checkpoint c2 \
    --remove-incremental "$uri" backup.img
echo "cut $t0 $(now)" > cut.inc

step "Stop the writer; is each backup the disk at one point in time?"
touch stop
wait "$writer"
writer=
run python3 "$oracle" check --window full.img $blocks cut.full writes.log
run python3 "$oracle" check --window backup.img $blocks cut.inc writes.log

step "One more incremental, now that nothing writes: backup.img is the disk"
run dirtybitmap backup --control ctl --incremental c2 --checkpoint c3 \
    --remove-incremental "$uri" backup.img
run cmp disk.img backup.img
echo "backup.img equals disk.img; c3 records from here on"
