#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# restore-from= refused, each with a message naming the thing and the
# problem, and nothing written: a source of another size, a source
# that does not answer, a read-only server, restore-checkpoint=
# without restore-from= or naming a bitmap that exists; a restore
# that runs, started without its source, with another source, or
# read-only; a disk of another size behind another plugin.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
source "$abs_top_srcdir/tests/restore-lib.sh"

head -c 4M /dev/urandom > image
head -c 8M /dev/urandom > big
serve_source image
yes G | head -c 4M > disk.img
start ()
{
    nbdkit -U - --filter="$FILTER" file disk.img "$@" --run true
}

# Nothing begins, and no bitmap file is made.
fails -k disk.img -k disk.img.bitmaps \
      "dirtybitmap: restore-from=$src: the source is 4194304 bytes, but the disk $PWD/big is 8388608 bytes: a disk is restored only from a source of its size (resize the disk first)" \
      nbdkit -U - --filter="$FILTER" file big restore-from="$src" \
      bitmap-file=disk.img.bitmaps --run true
fails -k disk.img -k disk.img.bitmaps \
      "dirtybitmap: restore-from=nbd+unix:///?socket=$PWD/none.sock: cannot connect to the source: " \
      start restore-from="nbd+unix:///?socket=$PWD/none.sock"
fails -k disk.img -k disk.img.bitmaps \
      "dirtybitmap: restore-from=$src: a read-only server (-r) cannot restore the disk: the restore writes it" \
      nbdkit -r -U - --filter="$FILTER" file disk.img restore-from="$src" \
      --run true
fails -k disk.img -k disk.img.bitmaps \
      "dirtybitmap: restore-checkpoint= can only be used with restore-from=" \
      start restore-checkpoint=c1
fails -k disk.img -k disk.img.bitmaps \
      "dirtybitmap: restore-from=: the URI must be 1 to 4095 bytes" \
      start restore-from=

# A checkpoint that exists: the start is refused whole.
start bitmap=c1 action=add
fails -k disk.img -k disk.img.bitmaps \
      "dirtybitmap: restore-checkpoint=c1: bitmap c1 already exists" \
      start restore-from="$src" restore-checkpoint=c1

# A restore that runs (held at its start, then killed).
mkfifo restore-fill-start.{reached,release}
DIRTYBITMAP_TEST_PAUSE=restore-fill-start DIRTYBITMAP_TEST_PAUSE_DIR="$PWD" \
    start_nbdkit_child -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
                       file disk.img restore-from="$src"
reached restore-fill-start
kill9 $nbdkit_pid
why="dirtybitmap: $PWD/disk.img.bitmaps: the disk is being restored from $src, and only part of it is restored:"
fails -k disk.img -k disk.img.bitmaps \
      "$why it cannot be served without its source (give restore-from=$src)" \
      start
fails -k disk.img -k disk.img.bitmaps \
      "$why a restore cannot change its source half way (give restore-from=$src)" \
      start restore-from="nbd+unix:///?socket=$PWD/src.sock&x=1"
fails -k disk.img -k disk.img.bitmaps \
      "$why it cannot be served without its source (give restore-from=$src to a writable server)" \
      nbdkit -r -U - --filter="$FILTER" file disk.img --run true
# The file is sound; its disk's size cannot change until the end.
dirtybitmap check disk.img.bitmaps
tool_fails -k disk.img -k disk.img.bitmaps \
           "the disk is being restored from $src, of 4194304 bytes: its size cannot change until the restore is complete" \
           resize --disk disk.img disk.img.bitmaps 8M
# An older reader refuses the file rather than serve it half restored.
dirtybitmap info disk.img.bitmaps > info
grep -F "restore: from $src: 0 of 4194304 bytes restored" info
python3 "$abs_top_srcdir/tests/bmfile-edit.py" disk.img.bitmaps get incompat \
    > incompat
test "$(cat incompat)" = 1

# A disk that is not a file, of another size: refused when nbdkit
# starts to serve (the size is only known then).
fails "dirtybitmap: the disk is 8388608 bytes, but it is being restored from $src, of 4194304 bytes: connection refused" \
      nbdkit -f -U "$PWD/m.sock" --filter="$FILTER" memory 8M \
      bitmap-file=m.bitmaps restore-from="$src"
