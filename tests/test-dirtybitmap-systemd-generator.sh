#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nbdkit-dirtybitmap-generator: for each NAME.conf, the drop-in of
# nbdkit-dirtybitmap@NAME.service that makes writable the directories
# the file names, and nothing for what it cannot use, said on stderr.
source ./functions.sh
set -e
set -x

generator="$abs_top_builddir/systemd/nbdkit-dirtybitmap-generator"
mkdir conf out
gen ()
{
    DIRTYBITMAP_CONFIG_DIR="$PWD/conf" "$generator" "$PWD/out" 2> gen.err
    cat gen.err
}

# A disk, its bitmap file elsewhere, a control socket outside the
# unit's RuntimeDirectory, another directory; quotes as systemd reads
# them, a space in a path, and the later of two settings.
cat > conf/vm1-os.conf <<'EOF2'
# The OS disk of vm1.
DISK=/srv/old/os.img
DISK="/srv/vm 1/os.img"
FILTER_ARGS='durability=strict bitmap-file=/var/lib/dirtybitmap/os.bitmaps'
SOCKET=/run/nbdkit-dirtybitmap/vm1-os/nbd.sock
CONTROL=/run/nbd/vm1-os.ctl
READ_WRITE_PATHS=/var/lib/dirtybitmap /srv/scratch
EOF2
# A block device: /dev is writable anyway.
printf 'DISK=/dev/sdb\nFILTER_ARGS=bitmap-file=/var/lib/dirtybitmap/sdb.bitmaps\n' \
    > conf/sdb.conf
# A disk under /home: ProtectHome=yes would hide it.
echo 'DISK=/home/alice/disk.img' > conf/alice.conf
# What cannot be used.
echo 'DISK=disk.img' > conf/relative.conf
echo 'DISK=/srv/x.img' > 'conf/two words.conf'
echo '# no DISK' > conf/nodisk.conf
echo 'DISK=/srv/y.img' > conf/not-a-conf.txt
gen

expect out/nbdkit-dirtybitmap@vm1-os.service.d/50-read-write-paths.conf <<EOF2
# Made by nbdkit-dirtybitmap-generator from $PWD/conf/vm1-os.conf.
[Service]
ReadWritePaths=-"/srv/vm 1"
ReadWritePaths=-"/var/lib/dirtybitmap"
ReadWritePaths=-"/run/nbd"
ReadWritePaths=-"/srv/scratch"
EOF2
expect out/nbdkit-dirtybitmap@sdb.service.d/50-read-write-paths.conf <<EOF2
# Made by nbdkit-dirtybitmap-generator from $PWD/conf/sdb.conf.
[Service]
ReadWritePaths=-"/var/lib/dirtybitmap"
EOF2
expect out/nbdkit-dirtybitmap@alice.service.d/50-read-write-paths.conf <<EOF2
# Made by nbdkit-dirtybitmap-generator from $PWD/conf/alice.conf.
[Service]
ReadWritePaths=-"/home/alice"
ProtectHome=read-only
EOF2
expect out/nbdkit-dirtybitmap@relative.service.d/50-read-write-paths.conf <<EOF2
# Made by nbdkit-dirtybitmap-generator from $PWD/conf/relative.conf.
[Service]
EOF2

ls out > units
expect units <<'EOF2'
nbdkit-dirtybitmap@alice.service.d
nbdkit-dirtybitmap@nodisk.service.d
nbdkit-dirtybitmap@relative.service.d
nbdkit-dirtybitmap@sdb.service.d
nbdkit-dirtybitmap@vm1-os.service.d
EOF2
grep -Fx "nbdkit-dirtybitmap-generator: $PWD/conf/relative.conf: DISK=disk.img is not an absolute path" gen.err
grep -Fx "nbdkit-dirtybitmap-generator: $PWD/conf/two words.conf: skipped: NAME may only have letters, digits and : _ . -" gen.err
grep -Fx "nbdkit-dirtybitmap-generator: $PWD/conf/nodisk.conf: DISK is not set: nbdkit-dirtybitmap@nodisk will not start" gen.err
[ "$(wc -l < gen.err)" = 3 ]

# A % or a " in a path is written so that systemd reads it as it is.
rm -r conf/* out/*
echo 'DISK=/srv/100%"/disk.img' > conf/odd.conf
gen
[ ! -s gen.err ]
grep -Fx 'ReadWritePaths=-"/srv/100%%\""' \
    out/nbdkit-dirtybitmap@odd.service.d/50-read-write-paths.conf

# No NAME.conf, no drop-in, and never a failure (it runs at boot).
rm -r conf/* out/*
gen
[ -z "$(ls out)" ]
DIRTYBITMAP_CONFIG_DIR=/nonexistent "$generator" "$PWD/out"
