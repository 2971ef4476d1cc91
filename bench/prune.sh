#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/prune.sh: what retention costs: a year of daily backups into a
# repository, pruned after each one, and what the prunes write against
# what they fold, the repository's size against what its points hold
# that is their own, and how long the chains grow.
#
#   bench/prune.sh [--days=N] [--size=MIB] [--percent=P]
#                  [--keep="--keep-daily 7 ..."] [--max-chain=N]
#                  [--dir=DIR]
#
# A disk of --size MiB (1024; 64 for a quick run) of random data,
# served through the filter; each day (--days, 365): P% (1) of its 64K
# chunks rewritten with new random data through the filter, a backup
# into the repository (dirtybitmap backup --repo), its point's time
# set to that day at 01:00 UTC in its record (the point's time is its
# record's: this puts a year on the calendar in minutes), and a prune
# with the keep options (--keep-daily 7 --keep-weekly 4
# --keep-monthly 6).  Measured, summed over the prunes:
#
#   written      the data the folds wrote into images (prune's
#                written-bytes)
#   written-sys  what the prunes and their qemu-img children passed to
#                write system calls (wchar of /proc/self/io, which
#                counts reaped children): the data, qcow2's own tables,
#                the records, and a few KiB of pipes (the kernel's
#                count of blocks written is no use here: an fsync on
#                ext4 commits the journal, and with it the dirty data
#                of every process on the file system)
#   folded       the increments folded (prune's folded-bytes)
#
# and at the end: the repository's images (list's stored-bytes) against
# the kept points' own data (the chunks that changed between a kept
# point and the kept point before it, from the bench's own account of
# what it wrote; all of the disk for the first), and, every day, the
# longest backing chain (each point's chain of bases, from list).  The
# last kept point's image is checked with a restore of the newest
# point, compared with the disk.
#
# Needs nbdkit, nbdsh (Python's nbd module), qemu-img, qemu-nbd, and
# the filter and tool built in this tree.
. "$(dirname "$0")/common.sh"
bench_start

days=365
size_mib=1024
percent=1
keep="--keep-daily 7 --keep-weekly 4 --keep-monthly 6"
max_chain=
for arg in "$@"; do
    case "$arg" in
        --days=*) days="${arg#*=}" ;;
        --size=*) size_mib="${arg#*=}" ;;
        --percent=*) percent="${arg#*=}" ;;
        --keep=*) keep="${arg#*=}" ;;
        --max-chain=*) max_chain="${arg#*=}" ;;
        --dir=*) basedir="${arg#*=}" ;;
        -h|--help) sed -n '3,/^[^#]/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
        *) echo "$prog: unknown option $arg (see --help)" >&2; exit 1 ;;
    esac
done
case "$days$size_mib$percent$max_chain" in
    *[!0-9]*|'') echo "$prog: --days, --size, --percent and --max-chain take whole numbers" >&2; exit 1 ;;
esac
find_built
for p in nbdkit nbdsh python3 qemu-img qemu-nbd cmp; do
    command -v $p >/dev/null || { echo "$prog: needs $p" >&2; exit 1; }
done

work="$(mktemp -d "$basedir/dirtybitmap-prune.XXXXXX")"
cleanup ()
{
    [ -s "$work/pid" ] && kill -TERM "$(cat "$work/pid")" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
log="$work/log"

{
    echo "# dirtybitmap: a year of daily points, pruned daily"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "command: $prog $*"
    machine_info
    echo "disk: $size_mib MiB of random data in $basedir; $days days," \
         "$percent% of its 64K chunks rewritten each day; prune $keep" \
         "${max_chain:+; --max-chain $max_chain}"
    echo
} | tee "$log"

head -c $(( size_mib << 20 )) /dev/urandom > "$work/disk.img"
nbdkit -P "$work/pid" -U "$work/sock" --filter="$FILTER" \
       file "$work/disk.img" control="$work/ctl" 2>> "$work/nbdkit.err"
for (( i = 0; i < 200; ++i )); do [ -S "$work/ctl" ] && break; sleep 0.05; done

python3 - "$DIRTYBITMAP" "$work" "$days" "$size_mib" "$percent" \
        "$keep" "$max_chain" <<'EOF' | tee -a "$log"
import datetime, json, os, random, subprocess, sys
import nbd

tool, work, days, size_mib, percent, keep, max_chain = sys.argv[1:]
days, size, percent = int(days), int(size_mib) << 20, int(percent)
chain_args = ["--max-chain", max_chain] if max_chain else []
repo, chunk = work + "/R", 65536
nchunks = size // chunk
nchanged = (nchunks * percent + 99) // 100
uri = "nbd+unix:///?socket=%s/sock" % work
start = datetime.datetime(2026, 1, 1, 1, 0)
changed = {}                    # day -> the chunks rewritten that day
rnd = random.Random(1)

def run(args):
    return subprocess.run(args, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True).stdout

def retime(name, t):
    path = "%s/points/%s.json" % (repo, name)
    j = json.load(open(path))
    j["time"] = t.strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    open(path + ".new", "w").write(json.dumps(j, indent=2) + "\n")
    os.rename(path + ".new", path)

def wchar():
    for line in open("/proc/self/io"):
        if line.startswith("wchar: "):
            return int(line.split()[1])

def chain_lengths(points):
    depth = {}
    for p in points:            # oldest first
        depth[p["name"]] = 1 + depth.get(p["base"], 0)
    return max(depth.values())

h = nbd.NBD()
h.connect_uri(uri)
tot = {"written": 0, "written-sys": 0, "folded": 0, "removed": 0}
longest = 0
for day in range(days):
    name = "d%03d" % day
    if day > 0:
        changed[day] = rnd.sample(range(nchunks), nchanged)
        for k in changed[day]:
            h.pwrite(os.urandom(chunk), k * chunk)
        h.flush()
    run([tool, "backup", "--repo", repo, "--control", work + "/ctl",
         "--checkpoint", name] + chain_args + [uri])
    retime(name, start + datetime.timedelta(days=day))
    before = wchar()
    j = json.loads(run([tool, "prune", "--output=json"] + keep.split() +
                       chain_args + [repo]))
    tot["written-sys"] += wchar() - before
    tot["written"] += j["written-bytes"]
    tot["folded"] += j["folded-bytes"]
    tot["removed"] += j["removed"]
    points = json.loads(run([tool, "list", "--output=json", repo]))["points"]
    longest = max(longest, chain_lengths(points))
h.shutdown()

# The kept points' own data: what changed between two kept points.
kept = [int(p["name"][1:]) for p in points]
own = size
for a, b in zip(kept, kept[1:]):
    own += len(set().union(*(changed[d] for d in range(a + 1, b + 1)))) * chunk
stored = json.loads(run([tool, "list", "--output=json", repo]))["stored-bytes"]
mib = lambda b: "%.1f MiB" % (b / 2**20)
print("points kept at the end: %d (%s)" % (len(kept),
      " ".join(p["name"] for p in points)))
print("points removed: %d" % tot["removed"])
print("prunes wrote: %s of data (%s in write calls); the increments "
      "folded: %s; written / folded: %.3f (write calls: %.3f)"
      % (mib(tot["written"]), mib(tot["written-sys"]), mib(tot["folded"]),
         tot["written"] / max(tot["folded"], 1),
         tot["written-sys"] / max(tot["folded"], 1)))
print("repository's images: %s; the kept points' own data: %s; "
      "ratio %.3f" % (mib(stored), mib(own), stored / own))
print("longest backing chain, on any day: %d" % longest)
EOF

# The newest point restores the disk as it is now.
kill -TERM "$(cat "$work/pid")"
rm -f "$work/pid"
"$DIRTYBITMAP" restore "$work/R" "$work/out.img" > /dev/null
cmp "$work/disk.img" "$work/out.img"
echo "restore of the newest point: equal to the disk" | tee -a "$log"
"$DIRTYBITMAP" list "$work/R" | tee -a "$log"
