#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap backup refuses two --disk that share a place, before
# anything changes on any server, naming both disks and what they
# share: one target (however spelled: "..", a symlink, a hard link,
# two URIs of one NBD export), one name, one file of checksums (NBD
# targets whose sockets have one name, with --sums-dir), one control
# socket.  Disk a keeps a checkpoint c1 that an incomplete backup would
# have left: a run that got as far as its checks would remove it.
# Targets of one name in two directories do not clash.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires python3 -c 'import nbd'
source "$abs_top_srcdir/tests/machine-lib.sh"

disks="a b"
start_disk a 8M
start_disk b 8M
write_some 1 $disks
dirtybitmap bitmap --add --control "$PWD/a.ctl" c1
states $disks > before.states
mkdir sub d1 d2 sums

# clash MESSAGE DISK-A DISK-B [OPTIONS]: the backup of --disk DISK-A
# --disk DISK-B to c1 is refused with MESSAGE, and nothing changed.
clash ()
{
    local msg=$1 da=$2 db=$3
    shift 3
    fails -k a.img.bitmaps -k b.img.bitmaps "dirtybitmap: $msg" \
          dirtybitmap backup --disk "$da" --disk "$db" --checkpoint c1 "$@"
    states $disks > after.states
    diff -u before.states after.states
    no_leftovers $disks
    test ! -e "$PWD/t.bak"
}
ctl () { echo "control=$PWD/$1.ctl,source=$(uri "$1")"; }

# One target file.
clash "disks a and b have one target, $PWD/t.bak (given as $PWD/t.bak and sub/../t.bak): each disk needs a target of its own" \
      "$(disk a "$PWD/t.bak")" "$(disk b sub/../t.bak)"
ln -s t.bak link.bak                    # dangling: t.bak does not exist
clash "disks a and b have one target, $PWD/t.bak (given as t.bak and $PWD/link.bak)" \
      "$(disk a t.bak)" "$(disk b "$PWD/link.bak")"
truncate -s 8M h.bak
ln h.bak hard.bak
clash "disks a and b have one target, $PWD/h.bak (given as h.bak and hard.bak)" \
      "$(disk a h.bak)" "$(disk b hard.bak)"
# One NBD export, two URIs.
clash "disks a and b have one target, export \"\" of the server at $PWD/t.sock (given as nbd+unix:///?socket=$PWD/t.sock and nbd+unix://?socket=sub/../t.sock)" \
      "$(disk a "nbd+unix:///?socket=$PWD/t.sock")" \
      "$(disk b "nbd+unix://?socket=sub/../t.sock")"

# One name.
clash "--disk 1 and --disk 2: both disks are named x: each disk needs a name of its own" \
      "$(ctl a),target=d1/t.bak,name=x" "$(ctl b),target=d2/t.bak,name=x"
clash "--disk 1 and --disk 2: both disks are named disk1 (name= or by default)" \
      "$(ctl a),target=d1/t.bak,name=disk1" "$(ctl b),target=d2/t.bak"

# One file of checksums: NBD targets whose sockets have one name.
clash "disks disk0 and disk1: their checksums would both be $PWD/sums/t.sock.c1.sums: give each disk a name= of its own" \
      "$(ctl a),target=nbd+unix:///?socket=$PWD/d1/t.sock" \
      "$(ctl b),target=nbd+unix:///?socket=$PWD/d2/t.sock" \
      --sums-dir sums
clash "disks disk0 and disk1: their checksums would both be $PWD/sums/t.bak.c1.sums" \
      "$(ctl a),target=d1/t.bak" "$(ctl b),target=d2/t.bak" --sums-dir sums

# One control socket.
clash "disks a and b have one control socket, $PWD/a.ctl (given as $PWD/a.ctl and a.ctl): one server is one disk" \
      "$(disk a d1/t.bak)" "control=a.ctl,source=$(uri b),target=d2/t.bak,name=b"

# Targets of one name in two directories, checksums beside each: a
# backup (which removes the leftover c1 first).
backup --disk "$(ctl a),target=d1/t.bak" --disk "$(ctl b),target=d2/t.bak" \
       --checkpoint c1 2> ok.err
cat ok.err
grep -F "disk disk0: removed checkpoint c1 left by an incomplete backup" ok.err
cmp a.img d1/t.bak
cmp b.img d2/t.bak
test -e d1/t.bak.c1.sums
test -e d2/t.bak.c1.sums
bitmaps_are c1 $disks
