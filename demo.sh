#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# demo.sh: install what is needed (Debian 12), build, then show
# changed-block tracking and an incremental backup, step by step:
# a full backup, writes through the filter, the dirty map, an
# incremental copy that makes the backup equal the disk, and a new
# checkpoint.
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
work="$(mktemp -d /tmp/dirtybitmap-demo.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cd "$work"

step () { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run () { printf '$ %s\n' "$*"; "$@"; }

step "A 1 GiB disk with some data on it, and a full backup of it"
truncate -s 1G disk.img
nbdkit -U - file disk.img --run 'nbdsh -u "$uri" -c "
import os
for i in range(0, 1 << 30, 64 << 20):
    h.pwrite(os.urandom(1 << 20), i)
"'
run cp --sparse=always disk.img backup.img

step "Serve it with changed-block tracking (bitmap b0); a client writes"
run nbdkit -U - --filter="$filter" file disk.img bitmap=b0 action=add \
    --run 'nbdsh -u "$uri" -c "
import os
h.pwrite(os.urandom(300000), 5000000)       # 300 KB at 5 MB
h.pwrite(b\"x\", 700 << 20)                  # one byte at 700 MiB
h.zero(4 << 20, 64 << 20)                   # zero 4 MiB at 64 MiB
"'

step "What changed since the checkpoint"
run dirtybitmap info disk.img.bitmaps
run nbdkit -r -U - --filter="$filter" file disk.img bitmap=b0 \
    --run 'nbdinfo --map "$uri"'

step "Incremental backup: copy only the dirty ranges into backup.img"
run nbdkit -r -U - --filter="$filter" file disk.img bitmap=b0 \
    --run 'dirtybitmap copy "$uri" backup.img'
run cmp disk.img backup.img
echo "backup.img equals disk.img"

step "Next checkpoint: clear b0 as the disk is served again; more writes"
run nbdkit -U - --filter="$filter" file disk.img bitmap=b0 action=clear \
    --run 'nbdsh -u "$uri" -c "h.pwrite(b\"y\" * 8192, 123456789)"'
run nbdkit -r -U - --filter="$filter" file disk.img bitmap=b0 \
    --run 'nbdinfo --map "$uri"'
run nbdkit -r -U - --filter="$filter" file disk.img bitmap=b0 \
    --run 'dirtybitmap copy "$uri" backup.img'
run cmp disk.img backup.img
echo "backup.img equals disk.img again"
