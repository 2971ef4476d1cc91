#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The checksums of a backup chain: a full backup to a raw file, two
# incrementals into qcow2 overlays (served by qemu-nbd on a socket in
# the same directory), then a resync after a write made without the
# filter, into a third.  The disk ends with a short chunk (12800
# bytes).  Each link's checksum file is that of the image restored
# from the chain at that point (its header as tool/sums.h says, each
# digest the XXH3-128 of Python's xxhash over qemu-img's raw copy),
# and that image is the disk as it was; dirtybitmap verify of each
# link (the qcow2 file itself, read with -f qcow2 with its backing
# chain) exits 0.
# Against a later link's checksums it lists the chunks changed since,
# as ranges; a byte flipped in a copy of a link (raw, then qcow2) is
# reported as that chunk's range exactly, in text and in JSON, and
# verify exits 1.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/sums-lib.sh"

size=$((64 * chunk + 12800))            # 65 chunks, the last short
last=$((64 * chunk))
head -c $size /dev/urandom > vda.img
serve vda
uri=$(uri vda)

# c1: the full backup.
backup vda c1.json "$PWD/base.img" --checkpoint c1
report c1.json mode=full written=$size checksums="$PWD/vda.c1.sums"
cp vda.img disk1.img                    # the disk at c1

# c2: data in chunks 2 and 64 (the short one), zeroes over chunk 7.
change vda:2 vda:z7 vda:64
overlay inc1.qcow2 base.img raw
backup vda c2.json "$target" --incremental c1 --checkpoint c2
report c2.json mode=incremental written=$((2 * chunk + 12800)) \
       checksums="$PWD/vda.c2.sums"
cp vda.img disk2.img

# c3: chunk 2 again, and chunks 30 and 31.
change vda:2:x vda:30 vda:31
overlay inc2.qcow2 inc1.qcow2 qcow2
backup vda c3.json "$target" --incremental c2 --checkpoint c3
report c3.json mode=incremental written=$((3 * chunk)) \
       checksums="$PWD/vda.c3.sums"
cp vda.img disk3.img

# c4: chunks 40 and 64 written without the filter: a resync.
stop vda
outside vda 40
outside vda 64
serve vda
overlay inc3.qcow2 inc2.qcow2 qcow2
backup vda c4.json "$target" --incremental c3 --checkpoint c4
grep -F "dirtybitmap: backup: disk vda: bitmap c3 is inconsistent: a resync (the whole disk read, only what differs from what $target holds written, as nothing shows that it holds the image of $PWD/vda.c3.sums)" \
     c4.json.err
report c4.json mode=resync written=$((chunk + 12800)) bytes-read=$size \
       bytes-unchanged=$((size - chunk - 12800)) checksums="$PWD/vda.c4.sums"
cp vda.img disk4.img

# Each link restored is the disk at its point, and its checksums are
# those of the restored image.
for q in inc1 inc2 inc3; do overlay_done $q.qcow2; done
cp base.img restored1.img
restored inc1.qcow2 restored2.img
restored inc2.qcow2 restored3.img
restored inc3.qcow2 restored4.img
for k in 1 2 3 4; do cmp disk$k.img restored$k.img; done
python3 "$sums_py" check \
        $(for k in 1 2 3 4; do echo vda.c$k.sums restored$k.img c$k "$uri"; done)

# verify: each link against its own checksums, and the disk itself
# (an NBD URI) against those of the last.
links=(- base.img inc1.qcow2 inc2.qcow2 inc3.qcow2)
formats=(- raw qcow2 qcow2 qcow2)
for k in 1 2 3 4; do
    dirtybitmap verify -f ${formats[k]} ${links[k]} vda.c$k.sums > verify$k.out
    expect verify$k.out <<EOF
${links[k]}: all 65 chunks match the checksums of c$k
EOF
done
dirtybitmap verify "$uri" vda.c4.sums > verify-uri.out
expect verify-uri.out <<EOF
$uri: all 65 chunks match the checksums of c4
EOF

# differs IMAGE SUMS: verify IMAGE against SUMS (a qcow2 IMAGE, named
# *.qcow2, with -f qcow2), which must exit 1 and print what follows on
# standard input (the text; --output=json is checked by the caller
# from IMAGE.json).
differs ()
{
    local r=0 f=raw
    case "$1" in *.qcow2) f=qcow2 ;; esac
    dirtybitmap verify -f $f "$1" "$2" > "$1.out" || r=$?
    cat "$1.out"
    test $r = 1
    expect "$1.out"
    r=0
    dirtybitmap verify --output=json --format=$f "$1" "$2" > "$1.json" || r=$?
    cat "$1.json"
    test $r = 1
}

# The link at c2 against the checksums of c4: the chunks changed since
# (2, 30 and 31, 40, the short 64), as ranges.
differs inc1.qcow2 vda.c4.sums <<EOF
differs: offset $((2 * chunk)), $chunk bytes
differs: offset $((30 * chunk)), $((2 * chunk)) bytes
differs: offset $((40 * chunk)), $chunk bytes
differs: offset $last, 12800 bytes
inc1.qcow2: 5 of 65 chunks differ from the checksums of c4
EOF

# json FILE CHECKPOINT N [OFFSET LENGTH]...: verify's JSON in FILE says
# N chunks differ, in exactly these ranges.
json ()
{
    python3 - "$@" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
args = [int(a) for a in sys.argv[3:]]
ranges = [{"offset": args[i], "length": args[i + 1]}
          for i in range(1, len(args), 2)]
want = {"result": "differs", "checkpoint": sys.argv[2], "chunk-size": 65536,
        "chunks": 65, "chunks-differing": args[0], "differing": ranges}
got = {k: j[k] for k in want}
assert got == want, (got, want)
EOF
}
json inc1.qcow2.json c4 5 $((2 * chunk)) $chunk $((30 * chunk)) $((2 * chunk)) \
     $((40 * chunk)) $chunk $last 12800

# A byte flipped in a copy of the full backup, in chunk 20.
cp base.img bad.img
python3 "$sums_py" flip $((20 * chunk + 777)) bad.img
differs bad.img vda.c1.sums <<EOF
differs: offset $((20 * chunk)), $chunk bytes
bad.img: 1 of 65 chunks differ from the checksums of c1
EOF
json bad.img.json c1 1 $((20 * chunk)) $chunk

# A byte flipped in a copy of the last overlay, where it holds the
# short chunk (the resync wrote it there): found through the overlay's
# own map of where the chunk's cluster is in the file.
cp inc3.qcow2 bad.qcow2
at=$(qemu-img map --output=json bad.qcow2 | python3 -c '
import json, sys
for e in json.load(sys.stdin):
    if e["depth"] == 0 and e["data"] and e["start"] == int(sys.argv[1]):
        print(e["offset"] + 5000)' $last)
test -n "$at"
python3 "$sums_py" flip $at bad.qcow2
differs bad.qcow2 vda.c4.sums <<EOF
differs: offset $last, 12800 bytes
bad.qcow2: 1 of 65 chunks differ from the checksums of c4
EOF
json bad.qcow2.json c4 1 $last 12800

stop vda
