#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/powerloss.sh: what a power loss costs in durability=coarse.
#
#   bench/powerloss.sh [--writes=N,N,...] [--coarse=SIZE,SIZE,...]
#
# For each number of writes N and each coarse granularity: a 1 TiB
# null disk behind the filter (granularity 64K), N random 4K writes
# (fio, QD16), SIGKILL, then the bitmap file read as on another boot
# of the machine (a boot id of its own, bind-mounted in a private
# mount namespace, as tests/test-dirtybitmap-crash-reboot.sh does).
# Reported: the bytes the recovered bitmap calls dirty, against the
# bytes written, the dirty bytes before the power loss, and a full
# backup (1 TiB).  A flush-mode run would need the full backup.
#
# Needs root (unshare -m), nbdkit, fio with the nbd engine, and the
# filter and tool built in this tree.

set -e
set -o pipefail
shopt -s inherit_errexit
export LC_ALL=C
export PATH="/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

prog=bench/powerloss.sh
here="$(cd "$(dirname "$0")" && pwd)"
top="$(cd "$here/.." && pwd)"
. "$here/common.sh"

writes="1000,10000,100000"
coarse="16M,64M"
for arg in "$@"; do
    case "$arg" in
        --writes=*) writes="${arg#*=}" ;;
        --coarse=*) coarse="${arg#*=}" ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "$prog: unknown option $arg" >&2; exit 1 ;;
    esac
done

find_built
SIZE=$((1024 * 1024 * 1024 * 1024))
work="$(mktemp -d "${TMPDIR:-/tmp}/dirtybitmap-powerloss.XXXXXX")"
pid=
cleanup ()
{
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

echo 0f0f0f0f-1111-4222-8333-444444444444 > "$work/boot-id"
rebooted ()
{
    unshare -m -- sh -c \
      'mount --bind "$1" /proc/sys/kernel/random/boot_id && shift && exec "$@"' \
      sh "$work/boot-id" "$@"
}

dirty_of ()
{
    sed -n 's/^ *dirty bytes: *\([0-9]*\).*/\1/p' | head -1
}

echo "# durability=coarse: dirty bytes after a simulated power loss"
machine_info
echo "disk: nbdkit null 1T, granularity 64K, 4K random writes (fio, QD16)"
echo
printf '%-8s %8s %14s %14s %16s %10s %10s\n' coarse writes "written" \
       "dirty before" "dirty after" "/written" "/full"
for cg in ${coarse//,/ }; do
    for n in ${writes//,/ }; do
        d="$work/cell"
        rm -rf "$d"; mkdir "$d"
        nbdkit -f -U "$d/sock" -P "$d/pid" --filter="$FILTER" null 1T \
               bitmap=b0 action=add bitmap-file="$d/bitmaps" \
               durability=coarse coarse-granularity=$cg &
        pid=$!
        for ((i = 0; i < 200; ++i)); do
            [ -S "$d/sock" ] && break
            sleep 0.05
        done
        fio --name=pl --ioengine=nbd --uri="nbd+unix:///?socket=$d/sock" \
            --rw=randwrite --bs=4k --iodepth=16 --norandommap \
            --randrepeat=1 --number_ios=$n --size=1T \
            --output-format=json --output="$d/fio.json" >/dev/null
        before=$("$DIRTYBITMAP" info -U "$d/bitmaps" | dirty_of)
        kill -9 $pid
        { wait $pid; } 2>/dev/null || :
        pid=
        after=$(rebooted "$DIRTYBITMAP" info "$d/bitmaps" | dirty_of)
        awk -v cg=$cg -v n=$n -v b=$before -v a=$after -v full=$SIZE '
            function h(x) {
                if (x >= 2^40) return sprintf ("%.2f TiB", x / 2^40)
                if (x >= 2^30) return sprintf ("%.1f GiB", x / 2^30)
                return sprintf ("%.1f MiB", x / 2^20) }
            BEGIN { printf "%-8s %8d %14s %14s %16s %10.0fx %9.1f%%\n",
                           cg, n, h(n * 4096), h(b), h(a),
                           a / (n * 4096), 100 * a / full }'
    done
done
