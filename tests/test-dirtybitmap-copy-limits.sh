#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap copy keeps to what the servers allow: --connections N
# opens N connections to each side when both allow multi-conn, and one
# (with a note naming the server) when either does not; no read or
# write is larger than the maximum block size a server advertises.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires nbdkit --filter=log null --version
requires nbdkit --filter=multi-conn null --version
requires nbdkit --filter=blocksize-policy null --version

size=$((4 * 1024 * 1024))
yes | head -c $size > disk.img
cp disk.img backup.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run 'nbdsh -u "$uri" -c "
for i in range(0, 4 << 20, 256 << 10):
    h.pwrite(b\"%d\" % i * 20000, i)
"'

# connects LOG: the number of connections a log filter saw.
connects () { grep -c " Connect export=" "$1"; }

# largest NAME LOG: the largest count of the NAME requests in LOG.
largest ()
{
    local n max=0
    for n in $(sed -n "s/.* $1 id=[0-9]* offset=0x[0-9a-f]* count=0x\([0-9a-f]*\) .*/\1/p" "$2"); do
        n=$((16#$n))
        [ $n -le $max ] || max=$n
    done
    echo $max
}

# copy ROUND [COPY_OPTIONS...]: serve backup.img with the log filter
# (and the filters and parameters in dst_f and dst_p), copy to it from
# the disk through the dirtybitmap filter (and src_f, src_p) and a log
# filter, stop the target, check the copy.
src_f=() src_p=() dst_f=() dst_p=()
copy ()
{
    local round=$1
    shift
    sock="$tmpdir/t$round.sock"
    cp old.img backup.img
    start_nbdkit -P "$tmpdir/t$round.pid" -U "$sock" "${dst_f[@]}" \
                 --filter=log file backup.img "${dst_p[@]}" \
                 logfile="$tmpdir/t$round.log"
    nbdkit -U - -r --filter="$FILTER" "${src_f[@]}" --filter=log \
           file disk.img bitmap=b0 "${src_p[@]}" \
           logfile="$tmpdir/s$round.log" \
           --run "env -u LIBNBD_DEBUG dirtybitmap copy $* \"\$uri\" \
                  'nbd+unix:///?socket=$sock'" > out 2> err
    cat out err
    kill_nbdkit "$(cat t$round.pid)"
    cmp disk.img backup.img
}
cp backup.img old.img

# Both sides allow multi-conn: three connections each.
copy 1 --connections 3
test "$(connects s1.log)" -eq 3
test "$(connects t1.log)" -eq 3
test "$(grep -c "multi-conn" err)" -eq 0
# By default, one per CPU up to 4.
cpus=$(nproc)
[ $cpus -le 4 ] || cpus=4
copy 1d
test "$(connects s1d.log)" -eq $cpus
test "$(connects t1d.log)" -eq $cpus
test "$(grep -c "multi-conn" err)" -eq 0

# The target does not: one connection each, and a note.
dst_f=(--filter=multi-conn) dst_p=(multi-conn-mode=disable)
copy 2 --connections 3
test "$(connects s2.log)" -eq 1
test "$(connects t2.log)" -eq 1
grep -F "dirtybitmap: copy: nbd+unix:///?socket=$tmpdir/t2.sock does not allow multi-conn: using 1 connection" err
# By default: one, without a note.
copy 2d
test "$(connects s2d.log)" -eq 1
test "$(connects t2d.log)" -eq 1
test ! -s err

# The source does not.
dst_f=() dst_p=()
src_f=(--filter=multi-conn) src_p=(multi-conn-mode=disable)
copy 3 --connections 3
test "$(connects s3.log)" -eq 1
grep -F "does not allow multi-conn: using 1 connection" err

# Maximum block sizes: 16K on the source, then 8K on the target.
src_f=(--filter=blocksize-policy) src_p=(blocksize-maximum=16K)
copy 4 --request-size 1M
test "$(largest Read s4.log)" -eq 16384
test "$(largest Write t4.log)" -eq 16384
src_f=() src_p=()
dst_f=(--filter=blocksize-policy) dst_p=(blocksize-maximum=8K)
copy 5 --request-size 1M
test "$(largest Read s5.log)" -eq 8192
test "$(largest Write t5.log)" -eq 8192
# Without limits, reads follow --request-size.
dst_f=() dst_p=()
copy 6 --request-size 64K
test "$(largest Read s6.log)" -eq 65536
