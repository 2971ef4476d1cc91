#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# control=PATH: the socket is made 0600 whatever the umask, and
# removed at exit; anything at PATH but a stale socket (a file, a
# directory, a FIFO, a symbolic link, a socket a server listens on)
# is refused with a message naming it, and left exactly as it was; a
# socket left by a server killed with kill -9 is replaced; a server
# that exits never removes a socket that is not its own.  A start
# refused for its control=PATH leaves the bitmap file as it was; one
# that fails for its actions leaves no socket.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires stat --version

truncate -s 1M disk.img
ctl="$PWD/ctl.sock"
control="$abs_top_srcdir/tests/control.py"

# refused MESSAGE: nbdkit with control=$ctl must not start, and its
# failed start must not have created the bitmap file, or applied its
# actions to it.
refused ()
{
    fails -k disk.img.bitmaps "$1" \
          nbdkit -U - --filter="$FILTER" file disk.img \
          bitmap=b0 action=add control="$ctl" --run true
}

# A regular file, a directory, a FIFO: refused, untouched.
echo "precious" > "$ctl"
refused "dirtybitmap: control=$ctl: exists and is not a socket: refused (it is left as it is)"
grep -Fx precious "$ctl"
rm "$ctl"
mkdir "$ctl"
touch "$ctl/inside"
refused "dirtybitmap: control=$ctl: exists and is not a socket"
test -f "$ctl/inside"
rm -r "$ctl"
mkfifo "$ctl"
refused "dirtybitmap: control=$ctl: exists and is not a socket"
test -p "$ctl"
rm "$ctl"

# The same with a bitmap file: it stays as it was.
dirtybitmap bitmap --add --size 1M disk.img.bitmaps b1
echo "precious" > "$ctl"
refused "dirtybitmap: control=$ctl: exists and is not a socket"
rm "$ctl"

# Symbolic links, dangling or not: refused, and nothing is made at
# their target.
ln -s "$PWD/target.sock" "$ctl"
refused "dirtybitmap: control=$ctl: is a symbolic link: refused"
test "$(readlink "$ctl")" = "$PWD/target.sock"
if [ -e target.sock ]; then
    echo "$0: something was made at the target of the link"
    exit 1
fi
rm "$ctl"
echo "precious" > target
ln -s "$PWD/target" "$ctl"
refused "dirtybitmap: control=$ctl: is a symbolic link: refused"
grep -Fx precious target
rm "$ctl"

# A start that fails for its actions leaves no socket behind.
fails -k disk.img.bitmaps "dirtybitmap: action remove on bitmap nosuch failed: bitmap nosuch not found" \
      nbdkit -U - --filter="$FILTER" file disk.img bitmap=nosuch \
      action=remove control="$ctl" --run true
if [ -e "$ctl" ]; then
    echo "$0: a failed start left $ctl behind"
    exit 1
fi

# Too long for a socket address.
long="$PWD/$(printf 'x%.0s' {1..120})"
fails "dirtybitmap: control=$long: longer than 107 bytes" \
      nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
      control="$long" --run true

# 0600 whatever the umask; a second server on the same PATH is refused
# while the first listens.
(umask 000; start_nbdkit_child -P "$PWD/pid" -U "$PWD/nbd.sock" \
                               --filter="$FILTER" file disk.img \
                               bitmap=b0 action=add control="$ctl";
 echo $nbdkit_pid > nbdkit.pid; wait $nbdkit_pid) &
wait_until 10 [ -S "$ctl" ]
test "$(stat -c %a "$ctl")" = 600
truncate -s 1M disk2.img
fails "dirtybitmap: control=$ctl: in use by a running server" \
      nbdkit -U - --filter="$FILTER" file disk2.img bitmap=b0 action=add \
      control="$ctl" --run true
python3 "$control" query "$ctl" > query
grep -F '"name": "b0"' query

# kill -9 leaves the socket behind: the next server replaces it.
kill -9 "$(cat nbdkit.pid)"
wait
test -S "$ctl"
rm -f nbd.sock
start_nbdkit -P "$PWD/pid2" -U "$PWD/nbd.sock" --filter="$FILTER" \
             file disk.img control="$ctl"
python3 "$control" query "$ctl" > query
grep -F '"name": "b0"' query

# Someone removes the socket and another server takes the path: the
# first one, at exit, leaves the new socket alone.
rm "$ctl"
start_nbdkit -P "$PWD/pid3" -U "$PWD/nbd2.sock" --filter="$FILTER" \
             file disk2.img bitmap=b0 action=add control="$ctl"
kill_nbdkit "$(cat pid2)"
test -S "$ctl"
python3 "$control" query "$ctl" > query
grep -F "disk2.img.bitmaps" query
# And its own, it removes.
kill_nbdkit "$(cat pid3)"
if [ -e "$ctl" ]; then
    echo "$0: $ctl is left behind"
    exit 1
fi
