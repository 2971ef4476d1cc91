#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The backup repository's restores with a real guest (make check-vm):
# the guest of test-dirtybitmap-vm.sh (tests/vm/guest-lib.sh: Debian's
# kernel under qemu-system-x86_64, TCG, a busybox initramfs, two
# virtio disks each served by its own nbdkit with the filter, ext4 on
# both, a writer on each that says when each file's fsync returned).
#   1. A repository R of both disks while the guest writes: point p1,
#      full, the file systems frozen through the guest agent; p2, an
#      incremental while it writes; then, once it powered off, p3.
#   2. The stopped guest rolled back to p1 (dirtybitmap rollback R@p1,
#      through the servers): it found what to write by the bitmap and
#      wrote exactly the chunks where p1 and p3 differ; each disk is
#      then p1 byte for byte and passes check-set.py as the frozen set
#      p1 (e2fsck -fn clean, every file synced before p1 exact); the
#      next point, p4, is an incremental of at most what the rollback
#      wrote.  The guest boots again on the rolled-back disks, mounts
#      them with no journal to replay, writes (into a directory
#      "again") and powers off: all its files are exact.
#   3. Instant restore of p4 onto two new, empty disk files, each
#      served at a new socket (in a repository a disk is its name, not
#      its URI) by nbdkit with the filter and restore-from= the point (dirtybitmap serve R@p4 --disk diskN)
#      behind nbdkit's rate filter, slow (256 KB/s: the fill of 64M
#      would take over 4 minutes) until the guest has run and written,
#      then fast: the fill is not complete when the guest says it
#      runs, nor once it has written files (asserted, with dirtybitmap
#      info --control).  The guest writes its new files into a
#      directory "new"; after it powered off, every file synced before
#      p1 and every file it wrote during and after the fill is exact.
#      The next point, p5, is an incremental of exactly the bytes the
#      bitmap of restore-checkpoint=p4 has dirty (what the guest
#      wrote, well below the disk size), and p5 restored is the disks
#      byte for byte.
# About a minute on an idle host; a few under load.
source ./functions.sh
set -e
set -x
requires nbdkit --filter=rate null --version
source "$abs_top_srcdir/tests/vm/guest-lib.sh"

t_start=$(now)
since () { awk "BEGIN { printf \"%.1f s\", $(now) - $t_start }"; }
say () { echo "${0##*/}: $*"; }
repo="$PWD/R"
size=$((64 * 1024 * 1024))
chunk=65536

# holds FILE EXPR...: each Python expression EXPR is true of the JSON
# in FILE (j; d is each of j["disks"] in turn when EXPR names it).
holds ()
{
    python3 - "$@" <<'PY'
import json, sys
f, exprs = sys.argv[1], sys.argv[2:]
j = json.load(open(f))
for e in exprs:
    for d in (j.get("disks") or [None]) if "d[" in e else [None]:
        if not eval(e):
            sys.exit("%s: not true%s: %s" %
                     (f, "" if d is None else " of " + d["name"], e))
PY
}

# more_synced K: until the guest's writer on each disk has synced K
# files more than now.
more_synced ()
{
    local d n
    for d in 0 1; do
        n=$(grep -c "^synced disk$d " "$console" || :)
        wait_console "synced disk$d f$((n + $1)) " 120
    done
}

# point NEW [OPTIONS...]: the point NEW of the repository, of the
# disks of ${disks[@]}: its JSON in NEW.json, the console's size when
# it began in upto.NEW.
point ()
{
    local new=$1
    shift
    console_size > upto.$new
    dirtybitmap backup --repo "$repo" --checkpoint $new "${disks[@]}" \
                --output=json "$@" > $new.json
    cat $new.json
    holds $new.json 'j["result"] == "complete"' \
          '[d["name"] for d in j["disks"]] == ["disk0", "disk1"]'
}

# spec D [PREFIX]: the --disk of disk D, served at PREFIXD.sock with
# its control socket PREFIXD.ctl (PREFIX: disk).
spec ()
{
    local p=${2:-disk}
    echo "control=$PWD/$p$1.ctl,source=nbd+unix:///?socket=$PWD/$p$1.sock,name=disk$1"
}

# ---------------------------------------------------------------------
# 1. The repository, while the guest writes.
# Each disk's free blocks hold random data (mkfs writes only its own
# blocks, and does not discard): the points hold 64M of data each, so
# that the instant restore's fill, which writes zero ranges without
# reading them, has the whole disk to read from its slow source.
for d in 0 1; do
    head -c $size /dev/urandom > disk$d.img
    mkfs.ext4 -q -F -E nodiscard -b 4096 -i 4096 -L disk$d disk$d.img
    start_nbdkit -P "$PWD/disk$d.pid" -U "$PWD/disk$d.sock" \
                 --filter="$FILTER" file disk$d.img control="$PWD/disk$d.ctl"
done
disks=(--disk "$(spec 0)" --disk "$(spec 1)")

boot first "$PWD/disk0.sock" "$PWD/disk1.sock"
wait_console "vm: running" 180
say "guest running after $(since)"
more_synced 3
# (The guest is slow under TCG, more so on a busy host: its freeze may
# take longer than the default 10 s.)
point p1 --guest-agent "$PWD/first-qga.sock" --freeze-timeout 60
holds p1.json 'j["frozen-ms"] is not None' 'j["incremental"] is None' \
      'd["mode"] == "full"'
python3 "$vm/qga.py" first-qga.sock guest-fsfreeze-status > status
grep -Fx '"thawed"' status
more_synced 2
point p2
holds p2.json 'j["frozen-ms"] is None' 'j["incremental"] == "p1"' \
      'd["mode"] == "incremental"' 'd["bytes-copied"] > 0'
more_synced 2
power_off
[ "$(grep -c "agent: info: guest-fsfreeze called" "$console")" -eq 1 ]
point p3
holds p3.json 'j["incremental"] == "p2"' 'd["mode"] == "incremental"'
dirtybitmap list "$repo"
say "points p1 to p3 after $(since)"

# ---------------------------------------------------------------------
# 2. The stopped guest back to p1, in place.
for d in 0 1; do
    cp --sparse=always disk$d.img p3-disk$d.img
done
dirtybitmap rollback --output=json "$repo@p1" "${disks[@]}" > rollback.json
cat rollback.json
holds rollback.json 'j["result"] == "complete"' 'j["point"] == "p1"' \
      'j["newest"] == "p3"' \
      '[d["name"] for d in j["disks"]] == ["disk0", "disk1"]' \
      'd["tracking"] == "bitmap"' 'd["tracking-lost"] is None' \
      'd["verified"] is True' 'd["chunks-written"] > 0' \
      'd["bytes-copied"] + d["bytes-zeroed"] == d["chunks-written"] * '$chunk
# p1 as restore writes it, to compare.
dirtybitmap restore "$repo@p1" --disk disk0=p1-disk0.img \
            --disk disk1=p1-disk1.img
# It wrote only what changed: nothing was written after p3, so the
# chunks where p1 and p3 differ, each once.
python3 - $chunk <<'PY'
import json, sys
chunk = int(sys.argv[1])
for i, d in enumerate(json.load(open("rollback.json"))["disks"]):
    a = open("p1-disk%d.img" % i, "rb").read()
    b = open("p3-disk%d.img" % i, "rb").read()
    differ = sum(1 for o in range(0, len(a), chunk)
                 if a[o:o + chunk] != b[o:o + chunk])
    assert d["chunks-written"] == differ, (d["chunks-written"], differ)
    print("%s: rollback to p1: wrote the %d chunks where p1 and p3 differ"
          % (d["name"], differ))
PY
# Each disk is p1, byte for byte, and holds the frozen set p1.
for d in 0 1; do
    cmp disk$d.img p1-disk$d.img
    cp --sparse=always disk$d.img rolled-disk$d.img
    python3 "$vm/check-set.py" rolled-disk$d.img disk$d first.log \
            "$(cat upto.p1)" frozen
done
# The servers recorded the rollback's writes: p4 is an incremental of
# them (of no more).
point p4
holds p4.json 'j["incremental"] == "p3"' 'd["mode"] == "incremental"'
python3 - <<'PY'
import json
rb = {d["name"]: d for d in json.load(open("rollback.json"))["disks"]}
for d in json.load(open("p4.json"))["disks"]:
    wrote = rb[d["name"]]["bytes-copied"] + rb[d["name"]]["bytes-zeroed"]
    assert 0 < d["bytes-total"] <= wrote, (d, wrote)
    print("%s: rollback to p1: %d chunks written (%d bytes); p4 copied "
          "%d bytes" % (d["name"], rb[d["name"]]["chunks-written"], wrote,
                        d["bytes-total"]))
PY

# The guest boots on the rolled-back disks: no journal to replay, no
# error; it writes, and powers off.
boot again "$PWD/disk0.sock" "$PWD/disk1.sock" vmtest.dir=again
wait_console "vm: running" 180
# (Its first line comes after the terminal's reset, on the same line.)
for v in vda vdb; do
    grep -E "kernel: EXT4-fs \($v\): mounted filesystem" "$console"
done
if grep -E "kernel: EXT4-fs.*(recover|error|corrupt|unchecked)" "$console"
then
    echo "$0: the rolled-back file systems were not clean"
    exit 1
fi
more_synced 2
power_off
for d in 0 1; do
    cp --sparse=always disk$d.img again-disk$d.img
    python3 "$vm/check-set.py" again-disk$d.img disk$d again.log \
            "$(stat -c %s again.log)" clean again
    python3 "$vm/check-set.py" again-disk$d.img disk$d first.log \
            "$(cat upto.p1)" clean
done
say "rolled back, booted and checked after $(since)"

# ---------------------------------------------------------------------
# 3. Instant restore of p4 onto new disks, the guest running from them
# at once.  Each point is served, behind the rate filter (2 Mbit/s, so
# that the fill takes minutes, until rateD says faster).  The new
# disks are served at new sockets, newD.sock and newD.ctl: the next
# point of the repository builds on p4 all the same.
for d in 0 1; do
    kill_nbdkit "$(cat disk$d.pid)"
done
for d in 0 1; do
    dirtybitmap serve "$repo@p4" --disk disk$d --socket "$PWD/point$d.sock" \
                > serve$d.out 2>&1 &
    echo $! > serve$d.pid
    cleanup_fn kill_nbdkit "$(cat serve$d.pid)"
done
for d in 0 1; do
    wait_until 30 [ -S point$d.sock ] || :
    cat serve$d.out
    [ -S point$d.sock ]
    start_nbdkit -P "$PWD/slow$d.pid" -U "$PWD/slow$d.sock" --filter=rate \
                 nbd socket="$PWD/point$d.sock" \
                 rate=2M rate-file="$PWD/rate$d"
    truncate -s $size new$d.img
    start_nbdkit -P "$PWD/new$d.pid" -U "$PWD/new$d.sock" \
                 --filter="$FILTER" file new$d.img \
                 restore-from="nbd+unix:///?socket=$PWD/slow$d.sock" \
                 restore-checkpoint=p4 control="$PWD/new$d.ctl"
done

# restore_is D COMPLETE: the restore of disk D is complete (true) or
# not (false), as dirtybitmap info --control says; prints it.
restore_is ()
{
    dirtybitmap info --control "$PWD/new$1.ctl" --output=json |
        python3 -c '
import json, sys
r = json.load(sys.stdin)["restore"]
print("disk%s: restore: %d of %d bytes, complete %s" %
      (sys.argv[1], r["done-bytes"], r["size"], r["complete"]))
assert r["size"] == int(sys.argv[3]), r
assert r["complete"] == (sys.argv[2] == "true"), r
assert r["complete"] or r["done-bytes"] < r["size"], r' "$1" "$2" $size
}

boot new "$PWD/new0.sock" "$PWD/new1.sock" vmtest.dir=new
wait_console "vm: running" 300
restore_is 0 false
restore_is 1 false
say "guest running on the disks being restored after $(since)"
# It writes during the fill: the files synced by upto.fill were.
more_synced 2
console_size > upto.fill
restore_is 0 false
restore_is 1 false
for d in 0 1; do
    echo 10G > rate$d.tmp
    mv rate$d.tmp rate$d
done
for d in 0 1; do
    wait_until 180 restore_is $d true > /dev/null 2>&1 || :
    restore_is $d true
done
say "restores complete after $(since)"
no_errors "the end of the fill"
more_synced 2
power_off
# (The sources can go now; serve ends at SIGTERM, exit 0.)
for d in 0 1; do
    kill_nbdkit "$(cat slow$d.pid)"
    kill_nbdkit "$(cat serve$d.pid)"
    wait "$(cat serve$d.pid)"
    [ ! -e point$d.sock ]
done
for d in 0 1; do
    cp --sparse=always new$d.img check-disk$d.img
    python3 "$vm/check-set.py" check-disk$d.img disk$d new.log \
            "$(cat upto.fill)" clean new
    python3 "$vm/check-set.py" check-disk$d.img disk$d new.log \
            "$(stat -c %s new.log)" clean new
    python3 "$vm/check-set.py" check-disk$d.img disk$d first.log \
            "$(cat upto.p1)" clean
done

# p5: an incremental of what the guest wrote (the bitmap p4 that the
# restore added), which restores to the disks byte for byte.
for d in 0 1; do
    dirtybitmap info --control "$PWD/new$d.ctl" --output=json > info$d.json
    cat info$d.json
done
disks=(--disk "$(spec 0 new)" --disk "$(spec 1 new)")
point p5 --incremental p4
holds p5.json 'j["incremental"] == "p4"' 'd["mode"] == "incremental"'
python3 - $size <<'PY'
import json, sys
size = int(sys.argv[1])
for i, d in enumerate(json.load(open("p5.json"))["disks"]):
    info = json.load(open("info%d.json" % i))
    p4 = [b for b in info["bitmaps"] if b["name"] == "p4"]
    assert len(p4) == 1 and p4[0]["recording"], info
    assert d["bytes-total"] == p4[0]["dirty-bytes"], (d, p4)
    assert 0 < d["bytes-total"] < size // 4, d
    print("%s: p5 copied %d bytes of %d, what the guest wrote since the "
          "restore began" % (d["name"], d["bytes-total"], size))
PY
dirtybitmap restore "$repo@p5" --disk disk0=p5-disk0.img \
            --disk disk1=p5-disk1.img
for d in 0 1; do
    cmp new$d.img p5-disk$d.img
done
dirtybitmap list "$repo"
say "all checked after $(since)"
