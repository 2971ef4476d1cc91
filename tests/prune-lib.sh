# SPDX-License-Identifier: BSD-3-Clause
# prune-lib.sh: what the tests of dirtybitmap prune share, sourced
# after repo-lib.sh.  A point's time is the one its record holds
# (DIR/points/POINT.json, "time"): retime sets it, so that a test
# puts points on a calendar without waiting for one.

# retime POINT=TIME...: set each point's time (2026-01-02T03:00:00Z
# form; microseconds added) in its record.
retime ()
{
    python3 - "$repo" "$@" <<'EOF2'
import json, os, sys
repo = sys.argv[1]
for arg in sys.argv[2:]:
    name, t = arg.split("=", 1)
    path = "%s/points/%s.json" % (repo, name)
    j = json.load(open(path))
    j["time"] = t[:-1] + ".000000Z"
    open(path + ".new", "w").write(json.dumps(j, indent=2) + "\n")
    os.rename(path + ".new", path)
EOF2
}

# sound DISK...: every point of list is exactly what the repository
# holds and nothing more: each point's base is the one before it (the
# first has none), each image backs on its base's image of the same
# disk by relative name with its format (on nothing if the base has no
# such disk), qemu-img check finds nothing wrong, stored-bytes is what
# each image holds itself, and no file of DISK belongs to a point that
# list does not show with it; no prune.json is left.
sound ()
{
    dirtybitmap list --output=json "$repo" > sound.json
    python3 - "$repo" sound.json "$@" <<'EOF2'
import json, os, subprocess, sys
repo, listing, disks = sys.argv[1], sys.argv[2], sys.argv[3:]
points = json.load(open(listing))["points"]
names = [p["name"] for p in points]
prev = None
has = {}                        # point -> its disks
for p in points:
    assert p["base"] == prev, (p["name"], p["base"], prev)
    has[p["name"]] = [d["name"] for d in p["disks"]]
    for d in p["disks"]:
        img = "%s/disks/%s/%s.qcow2" % (repo, d["name"], p["name"])
        info = json.loads(subprocess.check_output(
            ["qemu-img", "info", "-f", "qcow2", "--output=json", img]))
        want = prev + ".qcow2" if prev and d["name"] in has[prev] else None
        assert info.get("backing-filename") == want, (img, info)
        if want:
            assert info["backing-filename-format"] == "qcow2", info
        subprocess.check_call(["qemu-img", "check", "-q", "-f", "qcow2", img])
        m = json.loads(subprocess.check_output(
            ["qemu-img", "map", "-f", "qcow2", "--output=json", img]))
        own = sum(e["length"] for e in m if e["depth"] == 0 and e["present"])
        assert d["stored-bytes"] == own, (img, d["stored-bytes"], own)
    prev = p["name"]
for d in disks:
    mine = [n for n in names if d in has[n]]
    files = sorted(os.listdir("%s/disks/%s" % (repo, d)))
    assert files == sorted(n + ".qcow2" for n in mine), (d, files, mine)
    sums = sorted(f for f in os.listdir(repo + "/sums") if f.startswith(d + "."))
    assert sums == sorted("%s.%s.sums" % (d, n) for n in mine), sums
assert sorted(os.listdir(repo + "/points")) == sorted(n + ".json" for n in names)
assert not os.path.exists(repo + "/prune.json")
EOF2
}

# intact POINT...: each point restores each of the disks a and b
# exactly (one restore of both), verified against its checksums.
intact ()
{
    local p
    for p in "$@"; do
        rm -f out-a.img out-b.img
        dirtybitmap restore "$repo@$p" --disk a=out-a.img --disk b=out-b.img \
                    > restore.out
        cat restore.out
        test "$(grep -c ": verified: all " restore.out)" = 2
        cmp a.$p out-a.img
        cmp b.$p out-b.img
    done
}
