#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap verify -f FMT: a file is raw unless -f says otherwise,
# never what its content looks like.  A chain of two qcow2 overlays
# over a raw base, read with -f qcow2 (and --format=qcow2), matches
# the checksums of the image it restores to; the top overlay read as
# raw (by default, and with -f raw) matches the checksums of its own
# bytes and not those of the image.  A link that does not record its
# backing file's format is refused, naming it; a missing backing file
# is refused in qemu-nbd's words; an unknown -f and -f qcow2 for an
# NBD URI are usage errors.
source ./functions.sh
set -e
set -x
requires qemu-img --version
requires qemu-io --version
requires qemu-nbd --version
requires nbdkit --version

# sums FILE SUMS: the checksums of FILE's bytes, as a full copy of it
# (served raw by nbdkit) writes them.
sums ()
{
    nbdkit -U - file "$1" \
           --run "dirtybitmap copy --full --sums $2 \"\$uri\" $2.copy"
    rm "$2.copy"
}

head -c $((1024 * 1024)) /dev/urandom > base.img
qemu-img create -q -f qcow2 -b base.img -F raw inc1.qcow2
qemu-io -f qcow2 -c "write -P 0x61 65536 4096" inc1.qcow2
qemu-img create -q -f qcow2 -b inc1.qcow2 -F qcow2 inc2.qcow2
qemu-io -f qcow2 -c "write -P 0x62 200000 70000" inc2.qcow2
qemu-img convert -f qcow2 -O raw inc2.qcow2 image.img
sums image.img image.sums
sums inc2.qcow2 file.sums
n=$(( ($(stat -c %s inc2.qcow2) + 65535) / 65536 ))

# The chain, as qcow2.
dirtybitmap verify -f qcow2 inc2.qcow2 image.sums > qcow2.out
dirtybitmap verify --format=qcow2 inc2.qcow2 image.sums >> qcow2.out
expect qcow2.out <<EOF2
inc2.qcow2: all 16 chunks match the checksums of the backup
inc2.qcow2: all 16 chunks match the checksums of the backup
EOF2

# The top overlay as raw: its bytes.
dirtybitmap verify inc2.qcow2 file.sums > raw.out
dirtybitmap verify -f raw inc2.qcow2 file.sums >> raw.out
expect raw.out <<EOF2
inc2.qcow2: all $n chunks match the checksums of the backup
inc2.qcow2: all $n chunks match the checksums of the backup
EOF2
wrong="dirtybitmap: verify: inc2.qcow2 is $(stat -c %s inc2.qcow2) bytes, but image.sums has the checksums of a disk of 1048576 bytes"
fails "$wrong" dirtybitmap verify inc2.qcow2 image.sums
fails "$wrong" dirtybitmap verify -f raw inc2.qcow2 image.sums

# A link below the top that does not record its backing file's format
# (as qemu-img before 6.1 could leave it): the backing file would be
# probed.
cp inc2.qcow2 nofmt.qcow2
python3 - nofmt.qcow2 <<'EOF2'
import struct, sys
# Its backing format header extension gets a type that qemu does not
# know, and so ignores.
with open(sys.argv[1], "r+b") as f:
    h = bytearray(f.read(65536))
    off = struct.unpack_from(">I", h, 100)[0]     # header_length (v3)
    while True:
        kind, length = struct.unpack_from(">II", h, off)
        assert kind != 0, "no backing format extension"
        if kind == 0xE2792ACA:
            struct.pack_into(">I", h, off, 0x6e6f666d)
            break
        off += 8 + (length + 7) // 8 * 8
    f.seek(0)
    f.write(h)
EOF2
if qemu-img info --output=json nofmt.qcow2 | grep -F backing-filename-format; then
    echo "$0: nofmt.qcow2 still records its backing format"
    exit 1
fi
qemu-img create -q -f qcow2 -b nofmt.qcow2 -F qcow2 inc3.qcow2
fails "dirtybitmap: verify: nofmt.qcow2: the format of its backing file inc1.qcow2 is not recorded, and it is never guessed from the file's content (a guest chooses what a raw image holds): record it with qemu-img rebase -u -b inc1.qcow2 -F raw|qcow2 nofmt.qcow2" \
      dirtybitmap verify -f qcow2 inc3.qcow2 image.sums
qemu-img rebase -u -b inc1.qcow2 -F qcow2 nofmt.qcow2
dirtybitmap verify -f qcow2 inc3.qcow2 image.sums > rebased.out
expect rebased.out <<EOF2
inc3.qcow2: all 16 chunks match the checksums of the backup
EOF2

# A backing file that is missing: qemu-nbd's words.
qemu-img create -q -f qcow2 -u -b missing.img -F raw lost.qcow2 1M
fails "Could not open backing file: Could not open 'missing.img': No such file or directory" \
      dirtybitmap verify -f qcow2 lost.qcow2 image.sums

# Usage errors.
tool_fails "dirtybitmap: -f vmdk: the image format is raw (the default) or qcow2" \
           verify -f vmdk inc2.qcow2 image.sums
tool_fails "dirtybitmap: -f QCOW2: the image format is raw (the default) or qcow2" \
           verify --format=QCOW2 inc2.qcow2 image.sums
tool_fails "Try 'dirtybitmap verify --help' for more information." \
           verify -f "" inc2.qcow2 image.sums
tool_fails "dirtybitmap: -f qcow2: nbd+unix:///?socket=$PWD/none is an NBD URI, which is read as the server presents it (raw)" \
           verify -f qcow2 "nbd+unix:///?socket=$PWD/none" image.sums
