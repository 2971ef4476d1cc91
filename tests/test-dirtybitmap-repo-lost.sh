#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A repository whose newest point can be built on neither by its
# bitmap (removed from the disk) nor by its checksums (the disk was
# resized since, so they no longer describe it): the next backup is a
# full point, said, not a refusal (the repository chose the base, not
# the user: a refusal would stop every later backup too); the one
# after it an incremental again.  Each restores to the disk.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/repo-lib.sh"

size=$((8 * 1024 * 1024))
start_disk a $size
write_some 1 a
rbackup p1 a
snapshot a p1

# The disk grows while its server is stopped, and loses the bitmap.
kill_nbdkit "$(cat a.pid)"
truncate -s $((size + 1024 * 1024)) a.img
start_disk a $size
dirtybitmap bitmap --remove --control "$PWD/a.ctl" p1
write_some 2 a

r=0
rbackup p2 a -- --output=json > p2.json 2> p2.err || r=$?
cat p2.json p2.err
test $r = 0
grep -F "backup: disk a: bitmap p1 is missing and there are no usable checksums of the previous backup" p2.err
grep -F "a full copy" p2.err
python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["disks"][0]; assert d["mode"] == "full", d' p2.json
snapshot a p2
restored p2 a p2.img

write_some 3 a
rbackup p3 a -- --output=json > p3.json
python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["disks"][0]; assert d["mode"] == "incremental", d' p3.json
snapshot a p3
restored p3 a p3.img
restored p1 a p1.img
