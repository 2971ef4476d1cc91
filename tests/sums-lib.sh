# SPDX-License-Identifier: BSD-3-Clause
# sums-lib.sh: what the tests of backup checksums, resyncs and verify
# share (sourced after functions.sh).  A disk D is the file D.img,
# served with the filter on the socket D.sock with the control socket
# D.ctl; its backups name it D (name=D), so that the checksums of its
# backup at checkpoint C are D.C.sums in the directory of the target.
# The chunks of the checksums are 64K (the bitmaps' default granule).

requires_dirtybitmap_filter
requires qemu-img --version
requires qemu-nbd --version
requires python3 -c 'import nbd, xxhash'

sums_py="$abs_top_srcdir/tests/sums.py"
chunk=65536

# uri D: the NBD URI of disk D.
uri ()
{
    echo "nbd+unix:///?socket=$PWD/$1.sock"
}

# serve D [ARGS...]: serve D.img with the filter and a control socket
# (ARGS: more nbdkit arguments), stopped at exit.
serve ()
{
    local d=$1
    shift
    rm -f "$d.sock" "$d.ctl"            # (what a stopped server left)
    start_nbdkit -P "$PWD/$d.pid" -U "$PWD/$d.sock" --filter="$FILTER" \
                 file "$d.img" control="$PWD/$d.ctl" "$@"
}

# stop D...: clean stops of the servers of the disks D..., all at once
# (a clean stop takes a while).
stop ()
{
    local d
    for d in "$@"; do kill "$(cat "$d.pid")"; done
    for d in "$@"; do kill_nbdkit "$(cat "$d.pid")"; done
}

# change D:N... : through the filter, overwrite 4K of chunk N of disk
# D ("D:N"; "D:N:B" with the byte B instead of "w") or zero all of it
# ("D:zN"), for each argument in turn (one program for all: a Python
# start is slow on a loaded machine).
change ()
{
    python3 - "$PWD" $chunk "$@" <<'EOF2'
import sys
import nbd
where, chunk = sys.argv[1], int(sys.argv[2])
handles = {}
for spec in sys.argv[3:]:
    d, n, *byte = spec.split(":")
    if d not in handles:
        handles[d] = nbd.NBD()
        handles[d].connect_uri("nbd+unix:///?socket=%s/%s.sock" % (where, d))
    h = handles[d]
    if n.startswith("z"):
        h.zero(chunk, int(n[1:]) * chunk)
    else:
        h.pwrite((byte[0] if byte else "w").encode() * 4096,
                 int(n) * chunk + 512)
for h in handles.values():
    h.shutdown()
EOF2
}

# outside D N [TEXT]: write chunk N of D.img with another program, the
# disk stopped (TEXT, default "outside", at byte 100 of the chunk).
outside ()
{
    printf %s "${3:-outside}" |
        dd of="$1.img" bs=1 seek=$(( $2 * chunk + 100 )) conv=notrunc \
           status=none
}

# backup D OUT TARGET ARGS...: dirtybitmap backup of D to TARGET (a
# file or an NBD URI) with ARGS, its JSON into OUT and its standard
# error into OUT.err (both shown); the test stops unless it exits 0.
backup ()
{
    local d=$1 out=$2 target=$3
    shift 3
    dirtybitmap backup --output=json "$@" \
        --disk "control=$PWD/$d.ctl,source=$(uri "$d"),target=$target,name=$d" \
        > "$out" 2> "$out.err" || { cat "$out" "$out.err"; return 1; }
    cat "$out" "$out.err"
}

# report OUT KEY=VALUE...: the JSON summary OUT of a backup of one
# disk says each KEY is VALUE (strings as they are, numbers in decimal,
# null as null).  KEY "written" is bytes-copied plus bytes-zeroed.
report ()
{
    python3 - "$@" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
j["written"] = j["bytes-copied"] + j["bytes-zeroed"]
bad = 0
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    got = j[k] if isinstance(j[k], str) else json.dumps(j[k])
    if got != v:
        print("%s: %s is %s, expected %s" % (sys.argv[1], k, got, v))
        bad = 1
sys.exit(bad)
EOF
}

# overlay NEW BACKING FMT: a qcow2 overlay NEW over BACKING (of format
# FMT), with clusters of a chunk, served by qemu-nbd (no syncs: a
# test needs none, and a loaded machine makes them slow) on NEW.sock in
# this directory until its one client (a backup) disconnects
# (overlay_done waits for that); sets $target to its URI.
overlay ()
{
    qemu-img create -q -f qcow2 -o cluster_size=$chunk -b "$2" -F "$3" "$1"
    qemu-nbd -f qcow2 --cache=unsafe -k "$PWD/$1.sock" --fork \
             --pid-file="$PWD/$1.pid" "$1"
    cleanup_fn kill_nbdkit "$(cat "$1.pid")"
    target="nbd+unix:///?socket=$PWD/$1.sock"
}

# overlay_done NEW: wait until the qemu-nbd serving NEW has exited
# (and so released the image).
overlay_done ()
{
    wait_gone "$(cat "$1.pid")"
}

# top_bytes QCOW2: the bytes allocated in QCOW2 itself, not in its
# backing chain (clusters of data or of zeroes).
top_bytes ()
{
    qemu-img map --output=json "$1" | python3 -c '
import json, sys
print(sum(e["length"] for e in json.load(sys.stdin) if e["depth"] == 0))'
}

# restored IMAGE OUT: IMAGE (with its backing chain) as a raw file.
restored ()
{
    qemu-img convert -O raw "$1" "$2"
}
