#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Hostile checksum files in place of those of the previous backup:
# truncated (in the header, in the digests), another disk's (the same
# size and checkpoint, another source), a wrong chunk size (a sound
# file otherwise), a flipped byte in the digests and in the header, a
# FIFO.  Each disk also loses its base bitmap (a write made without
# the filter), so that only the checksums could spare a full copy: the
# next incremental must not trust them.  It says which file and what
# is wrong with it, makes a full copy, and the backup equals the disk;
# nothing hangs.  dirtybitmap verify of the backup that each file
# claims to describe exits 1 and says why.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/sums-lib.sh"
requires timeout --version

size=$((2 * 1024 * 1024))
disks="short cut other digest header fifo wide"
# (What each is made of, in place of D.c1.sums.)
prepare_short ()  { truncate -s 1000 short.c1.sums; }
prepare_cut ()    { truncate -s $((4096 + 100)) cut.c1.sums; }
prepare_other ()  { cp donor.c1.sums other.c1.sums; }
prepare_wide ()   { python3 "$sums_py" chunk 131072 wide.c1.sums; }
prepare_digest () { python3 "$sums_py" flip $((4096 + 16 * 7 + 3)) digest.c1.sums; }
prepare_header () { python3 "$sums_py" flip 20 header.c1.sums; }
prepare_fifo ()   { rm fifo.c1.sums; mkfifo fifo.c1.sums; }
# (What the backup must say of each.)
problem_short="too short for a checksum file (truncated?)"
problem_cut="its sizes do not agree (truncated or damaged)"
problem_other="the checksums of another disk, checkpoint, size or chunk size (nbd+unix:///?socket=$PWD/donor.sock at c1, 2097152 bytes in chunks of 65536)"
problem_digest="its checksums are damaged (bad CRC)"
problem_header="its header is damaged (bad checksum)"
problem_fifo="not a regular file"

# The written chunk: the disk loses its base bitmap by this write,
# made without the filter.
lost=6
text="written without the filter"

# donor is a disk like other, but with the write of chunk 6 already in
# its backup at c1: its checksums describe other as it will be after
# that write, so trusting them would leave the write out of other's
# backup.
# (The full backups: all at one cut, one command.)
for d in $disks; do head -c $size /dev/urandom > $d.img; done
cp other.img donor.img
outside donor $lost "$text"
all=()
for d in $disks donor; do
    serve $d
    all+=(--disk "control=$PWD/$d.ctl,source=$(uri $d),target=$PWD/$d-base.img,name=$d")
done
dirtybitmap backup --checkpoint c1 "${all[@]}"
for d in $disks donor; do
    cmp $d.img $d-base.img
    test -f $d.c1.sums
done
stop $disks donor

for d in $disks; do
    outside $d $lost "$text"
    prepare_$d
    serve $d
done

# verify: each file against the backup that it claims to describe
# (the backup at c1, as yet).
for d in short cut digest header fifo; do
    problem=problem_$d
    fails "dirtybitmap: verify: $d.c1.sums: ${!problem}" \
          timeout -s KILL 60 dirtybitmap verify $d-base.img $d.c1.sums
done
# Sound files that describe something else: the ranges that differ.
verify_differs ()
{
    local r=0
    timeout -s KILL 60 dirtybitmap verify $1-base.img $1.c1.sums \
            > $1-verify.out || r=$?
    cat $1-verify.out
    test $r = 1
    expect $1-verify.out
}
verify_differs other <<EOF
differs: offset $((lost * chunk)), $chunk bytes
other-base.img: 1 of 32 chunks differ from the checksums of c1
EOF
verify_differs wide <<EOF
differs: offset 0, $size bytes
wide-base.img: 16 of 16 chunks differ from the checksums of c1
EOF

# The incrementals: full copies that say why.
new_sums=()
for d in $disks; do
    timeout -s KILL 60 \
      dirtybitmap backup --output=json --incremental c1 --checkpoint c2 \
        --disk "control=$PWD/$d.ctl,source=$(uri $d),target=$PWD/$d-base.img,name=$d" \
        > $d-inc.json 2> $d-inc.err || { cat $d-inc.json $d-inc.err; exit 1; }
    cat $d-inc.json $d-inc.err
    said="dirtybitmap: backup: disk $d: bitmap c1 is inconsistent and there are no usable checksums of the previous backup ($PWD/$d.c1.sums: "
    if [ $d = wide ]; then
        # (No wording is prescribed: it names the chunk size.)
        grep -F "$said" $d-inc.err | grep -F "): a full copy" | grep -i chunk
    else
        problem=problem_$d
        grep -F "$said${!problem}): a full copy" $d-inc.err
    fi
    report $d-inc.json mode=full written=$size checksums="$PWD/$d.c2.sums"
    cmp $d.img $d-base.img
    new_sums+=($d.c2.sums $d-base.img c2 "$(uri $d)")
done
# The new checksums, each of its backup as it now is.
python3 "$sums_py" check "${new_sums[@]}"

# A set of another chunk size beside a sound base bitmap: the
# incremental copies what the bitmap says and writes no checksums,
# rather than read the view beyond what it holds.
python3 "$sums_py" chunk 131072 wide.c2.sums
change wide:9
timeout -s KILL 60 \
  dirtybitmap backup --output=json --incremental c2 --checkpoint c3 \
    --disk "control=$PWD/wide.ctl,source=$(uri wide),target=$PWD/wide-base.img,name=wide" \
    > wide-inc2.json 2> wide-inc2.err ||
    { cat wide-inc2.json wide-inc2.err; exit 1; }
cat wide-inc2.json wide-inc2.err
grep -F "dirtybitmap: backup: disk wide: no checksums will be written for this backup: those of the previous one are not usable ($PWD/wide.c2.sums: " \
     wide-inc2.err
report wide-inc2.json mode=incremental written=$chunk checksums=null
cmp wide.img wide-base.img
test ! -e wide.c3.sums

# (The servers stopped at once: a clean stop takes a while.)
stop $disks
