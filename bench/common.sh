# SPDX-License-Identifier: BSD-3-Clause
# bench/common.sh: what the benches share: finding the built filter
# and tool, telling whether a server still runs, describing the
# machine, the options of the benches of a disk and its backups, the
# programs a bench needs, waiting for a socket, the repository of the
# restore benches and their interleaved rounds.  Sourced; needs
# $prog, $top and $basedir (bench_start sets them).

# bench_start: the shell options and environment of a bench (errors
# end it, C locale, the system's programs first), and $prog, $here,
# $top and $basedir (TMPDIR, or /tmp).
bench_start ()
{
    set -e
    set -o pipefail
    shopt -s inherit_errexit
    export LC_ALL=C
    export PATH="/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
    prog="bench/${0##*/}"
    here="$(cd "$(dirname "$0")" && pwd)"
    top="$(cd "$here/.." && pwd)"
    basedir="${TMPDIR:-/tmp}"
}

# Use the filter and tool of this tree unless FILTER / DIRTYBITMAP
# name others; exit if the filter does not load.
find_built ()
{
    local f
    if [ -z "$FILTER" ]; then
        for f in "$PWD/filter/.libs/nbdkit-dirtybitmap-filter.so" \
                 "$top/filter/.libs/nbdkit-dirtybitmap-filter.so"; do
            if [ -f "$f" ]; then FILTER="$f"; break; fi
        done
    fi
    if [ -z "$DIRTYBITMAP" ]; then
        DIRTYBITMAP="$(dirname "${FILTER:-$top/filter/.libs/x}")/../../tool/dirtybitmap"
    fi
    if [ -z "$FILTER" ] ||
       ! nbdkit --filter="$FILTER" null --version >/dev/null 2>&1; then
        echo "$prog: the filter is not built or does not load (run make, or set FILTER=PATH)" >&2
        exit 1
    fi
}

# True while pid runs (a zombie has finished: the init of some
# machines reaps the daemons slowly).
alive ()
{
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    stat="${stat##*) }"
    [ "${stat%% *}" != Z ]
}

# The tree, the machine and the versions, one "key: value" a line.
machine_info ()
{
    echo "tree: $(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "filter: $FILTER"
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1)," \
         "$(nproc) CPUs ($(lscpu | sed -n 's/^Thread(s) per core: *//p') threads/core)"
    echo "virtualization: $(lscpu | sed -n 's/^Hypervisor vendor: *//p' | head -1) $(systemd-detect-virt 2>/dev/null)"
    echo "memory: $(free -m | awk '/^Mem:/ {print $2 " MiB"}')"
    echo "kernel: $(uname -srm)"
    echo "os: $(. /etc/os-release && echo "$PRETTY_NAME")"
    echo "fs of $basedir: $(findmnt -n -o FSTYPE,OPTIONS -T "$basedir" 2>/dev/null)"
    echo "versions: $(nbdkit --version | head -1); libnbd $(nbdsh --version 2>/dev/null | sed -n 's/^libnbd //p' | head -1);" \
         "$(qemu-nbd --version 2>/dev/null | head -1); $(fio --version)"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# bench_options ARGS...: the options of the benches of a disk and its
# backups (restore.sh, rollback.sh, resync.sh): --rounds=N, --size=MIB,
# --percent=P, --dir=DIR, and --help (the script's head comment).
# rounds, size_mib and percent hold the script's defaults when it
# calls this.
bench_options ()
{
    local arg
    for arg in "$@"; do
        case "$arg" in
            --rounds=*) rounds="${arg#*=}" ;;
            --size=*) size_mib="${arg#*=}" ;;
            --percent=*) percent="${arg#*=}" ;;
            --dir=*) basedir="${arg#*=}" ;;
            -h|--help) sed -n '3,/^[^#]/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
            *) echo "$prog: unknown option $arg (see --help)" >&2; exit 1 ;;
        esac
    done
    case "$rounds$size_mib$percent" in
        *[!0-9]*|'') echo "$prog: --rounds, --size and --percent take whole numbers" >&2; exit 1 ;;
    esac
}

# needs PROGRAM...: exit, saying which, unless each is on the PATH.
needs ()
{
    local p
    for p in "$@"; do
        command -v "$p" >/dev/null || { echo "$prog: needs $p" >&2; exit 1; }
    done
}

# wait_socket PATH: until the Unix socket PATH is there (10 s at most).
wait_socket ()
{
    local i
    for (( i = 0; i < 200; ++i )); do [ -S "$1" ] && return 0; sleep 0.05; done
    echo "$prog: $1 did not appear" >&2; exit 1
}

# bench_change SEED URI: $nchanged of the $nchunks 64K chunks of the
# disk at URI, chosen at random from SEED, rewritten with random data.
bench_change ()
{
    python3 -c "
import random
random.seed('$1')
print('\n'.join(str(k) for k in random.sample(range($nchunks), $nchanged)))
" | nbdsh -u "$2" -c '
import os, sys
for line in sys.stdin:
    h.pwrite(os.urandom(65536), int(line) << 16)
h.flush()
'
}

# bench_repo: a repository $work/R of 8 points of a disk of $size bytes
# (3/4 random data, 1/4 zeroes), served with the filter, $nchanged of
# its $nchunks 64K chunks rewritten at random between two points; the
# disk as it was at points c1 and c8 kept as $work/disk.c1 and
# $work/disk.c8.  The server is stopped at the end, the disk removed.
bench_repo ()
{
    local p uri="nbd+unix:///?socket=$work/sock"
    head -c $(( size / 4 * 3 )) /dev/urandom > "$work/disk.img"
    truncate -s $size "$work/disk.img"
    nbdkit -P "$work/pid" -U "$work/sock" --filter="$FILTER" \
           file "$work/disk.img" control="$work/ctl" 2>> "$work/nbdkit.err"
    wait_socket "$work/ctl"
    for p in 1 2 3 4 5 6 7 8; do
        [ $p = 1 ] || bench_change $p "$uri"
        "$DIRTYBITMAP" backup --repo "$work/R" --control "$work/ctl" \
            --checkpoint c$p "$uri" >> "$log" 2>&1
        case $p in 1|8) cp "$work/disk.img" "$work/disk.c$p" ;; esac
    done
    kill -TERM "$(cat "$work/pid")"
    rm -f "$work/pid" "$work/disk.img"
    "$DIRTYBITMAP" list "$work/R" | tee -a "$log"
    echo | tee -a "$log"
    sync
}

# bench_rounds KEY CELL...: $rounds rounds of the cells, interleaved,
# the order reversed every other round.  Each is a call "cell CELL KEY
# ROUND", whose output starts with its time in seconds, and goes on a
# line "KEY ROUND CELL OUTPUT" of $work/results; the times make a
# table on the terminal and in $log, its rows headed "KEY ROUND".
bench_rounds ()
{
    local key=$1; shift
    local cells=("$@") order r i c v
    local -A t
    printf '%-9s' "$key round" | tee -a "$log"
    printf ' %10s' "${cells[@]}" | tee -a "$log"; echo | tee -a "$log"
    for (( r = 1; r <= rounds; ++r )); do
        order=("${cells[@]}")
        if (( r % 2 == 0 )); then
            order=()
            for (( i = ${#cells[@]} - 1; i >= 0; --i )); do order+=("${cells[i]}"); done
        fi
        t=()
        for c in "${order[@]}"; do
            v=$(cell "$c" "$key" $r)
            echo "$key $r $c $v" >> "$work/results"
            t[$c]=${v%% *}
        done
        printf '%-9s' "$key $r" | tee -a "$log"
        for c in "${cells[@]}"; do printf ' %9ss' "${t[$c]}"; done | tee -a "$log"
        echo | tee -a "$log"
    done
}
