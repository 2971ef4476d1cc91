#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# restore-from=: a disk of garbage, served while it is restored from an
# image, reads as the image at once (the fill held back); writes, in
# part of a granule, across granules and whole, land over the image's
# data; the fill completes; the disk file is then the image and the
# writes, the checkpoint holds exactly the writes, query and info say
# the restore is complete, and a start with the same command line,
# the source gone, changes nothing.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
source "$abs_top_srcdir/tests/restore-lib.sh"

# 4M and 12K: the last granule of 64K is short.  Part of the image is
# zero, as a source's holes are.
size=$((4 * 1024 * 1024 + 12288))
head -c $size /dev/urandom > image
dd if=/dev/zero of=image bs=64K seek=16 count=8 conv=notrunc status=none
yes G | head -c $size > disk.img
serve_source image

uri="nbd+unix:///?socket=$PWD/sock"
args=(file disk.img restore-from="$src" restore-checkpoint=pt
      granularity=4K control="$PWD/ctl")
start_nbdkit_paused restore-fill-start -P "$PWD/pid" -U "$PWD/sock" \
                    --filter="$FILTER" "${args[@]}"
reached restore-fill-start

# The image, at once, while nothing is restored.
nbdcopy "$uri" read1.img
cmp read1.img image
python3 "$restore_py" show ctl > restore.json
expect restore.json <<EOF
{"complete": false, "done-bytes": 0, "size": $size, "source": "$src"}
EOF

# Writes land over the image's data, and are read back so.
python3 "$restore_py" write "$uri" w.log 1 40
nbdcopy "$uri" read2.img
python3 "$restore_py" check read2.img image w.log
python3 "$restore_py" show ctl > restore.json
cat restore.json
grep -F '"complete": false' restore.json
if grep -F '"done-bytes": 0,' restore.json; then
    echo "$0: the writes restored no granule"
    exit 1
fi
done_bytes=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["done-bytes"])' restore.json)
dirtybitmap info --control ctl > info
cat info
grep -F "restore: from $src: $done_bytes of $size bytes restored (" info

# A backup cannot begin while the disk is half restored.
python3 "$abs_top_srcdir/tests/control.py" error ctl \
        '{"execute": "backup-begin", "arguments": {"name": "v"}}' \
        GenericError "the disk is being restored from $src ("

release restore-fill-start
python3 "$restore_py" wait ctl > restore.json
expect restore.json <<EOF
{"complete": true, "done-bytes": $size, "size": $size, "source": "$src"}
EOF
nbdcopy "$uri" read3.img
python3 "$restore_py" check read3.img image w.log
kill_nbdkit "$(cat pid)"

# The disk file itself.
python3 "$restore_py" check disk.img image w.log
dirtybitmap info disk.img.bitmaps > info
cat info
grep -Fx "restore: from $src: complete" info
dirtybitmap info --output=json disk.img.bitmaps > info.json
grep -F "\"restore\": {\"source\": \"$src\", \"done-bytes\": $size, \"size\": $size, \"complete\": true}," info.json

# The checkpoint recorded exactly the writes, from the start.
python3 "$restore_py" requests $size w.log |
    python3 "$abs_top_srcdir/tests/dirty-ranges.py" expect $size 4096 > want
dirtybitmap map disk.img.bitmaps pt |
    python3 "$abs_top_srcdir/tests/dirty-ranges.py" map > got
diff -u want got

# Complete is recorded: the same command line, the source gone, does
# nothing more.
stop_source
sum=$(md5sum < disk.img)
nbdkit -U - --filter="$FILTER" "${args[@]}" \
       --run 'nbdcopy "$uri" read4.img' 2> start.err
cat start.err
grep -F "the restore from $src is complete: restore-from= has no effect" \
     start.err
test "$(md5sum < disk.img)" = "$sum"
python3 "$restore_py" check read4.img image w.log
