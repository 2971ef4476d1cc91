#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# make-regressions.sh: (re)make tests/fuzz/regressions/, bitmap files
# shaped like those that once crashed the loader, made it misbehave,
# or made a commit corrupt a file (see the log of lib/bmfile.c).  The
# files are kept in git; make check replays them (fuzz/replay).
#
#   PATH=TOP_BUILDDIR/tool:$PATH tests/fuzz/make-regressions.sh
set -e
here="$(cd "$(dirname "$0")" && pwd)"
edit="$here/../bmfile-edit.py"
out="$here/regressions"
mkdir -p "$out"
cd "$out"
rm -f ./*.bitmaps

# A file a durability=flush run left open, on another boot: opening
# marks the enabled bitmap inconsistent, and the first commit after
# that (the filter's startup) once reused the old directory under the
# new checksum, so that every later open failed.
dirtybitmap bitmap --add -g 4K --size 1M reboot-first-start.bitmaps rec
dirtybitmap bitmap --add reboot-first-start.bitmaps off
dirtybitmap bitmap --disable reboot-first-start.bitmaps off
python3 "$edit" reboot-first-start.bitmaps word 0 0 0x5
python3 "$edit" reboot-first-start.bitmaps set flags 3
python3 "$edit" reboot-first-start.bitmaps set open_mode 0
python3 "$edit" reboot-first-start.bitmaps set open_pid 4242
python3 "$edit" reboot-first-start.bitmaps set boot_id \
        00000000-0000-0000-0000-000000000000

# Shorter than the header says: loading stopped between the header and
# the directory, and freeing the state walked a NULL array (SIGSEGV).
dirtybitmap bitmap --add --size 1M truncated-data.bitmaps b0
truncate -s 12288 truncated-data.bitmaps
dirtybitmap bitmap --add --size 1M truncated-dir.bitmaps b0
dirtybitmap bitmap --add -g 4K truncated-dir.bitmaps b1
truncate -s 8192 truncated-dir.bitmaps
head -c 100 truncated-data.bitmaps > short-100.bitmaps
: > empty.bitmaps

# Granularities out of range (with right checksums): check once used
# them as shift counts (undefined for 64 and more).
for g in 8 64 200; do
    dirtybitmap bitmap --add -g 4K --size 1M gbits-$g.bitmaps b0
    python3 "$edit" gbits-$g.bitmaps entry 0 gbits $g
done

# A data region outside the file, and one of the wrong length: check
# once read a word outside them.
dirtybitmap bitmap --add -g 4K --size 1M region-outside.bitmaps b0
python3 "$edit" region-outside.bitmaps entry 0 data_offset 1048576
dirtybitmap bitmap --add -g 4K --size 1M region-length.bitmaps b0
python3 "$edit" region-length.bitmaps entry 0 data_length 8192

# The newest header slot sound but with an unknown incompatible
# feature: the loader once fell back to the older slot.
dirtybitmap bitmap --add --size 1M incompat-newest.bitmaps b0
dirtybitmap bitmap --add incompat-newest.bitmaps b1
python3 "$edit" incompat-newest.bitmaps set incompat 1

# Bits in the padding after a bitmap's last word (4M at 64K: 64
# granules, one word), which check once missed.
dirtybitmap bitmap --add --size 4M padding-bits.bitmaps b0
python3 "$edit" padding-bits.bitmaps word 0 1 1

ls -l
