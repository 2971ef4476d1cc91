#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# prune-model.py: the keep rules of dirtybitmap prune, modelled after
# the text of Proxmox Backup Server's mark_selections (and
# dirtybitmap(1), prune), written apart from tool/keep.c: checked
# against "dirtybitmap prune --dry-run --output=json" on repositories
# of records alone, whose points sit on a simulated calendar.
#
#   prune-model.py BINARY WORKDIR SEED CASES
#
# Each case: a new repository of points at random times (zero to four
# a day, over 3, 40 or 560 days that begin anywhere in a year and a
# bit, so that the turn of a year and ISO week 53 fall in reach of the
# options), random keep options; the tool's marks and reasons must be
# the model's exactly.  Some fixed cases, worked by hand, come first.

import datetime, json, os, random, shutil, subprocess, sys

RULES = ["last", "hourly", "daily", "weekly", "monthly", "yearly"]


def period(rule, t, index):
    if rule == "last":
        return index
    if rule == "hourly":
        return (t.year, t.month, t.day, t.hour)
    if rule == "daily":
        return t.date()
    if rule == "weekly":
        return t.isocalendar()[:2]
    if rule == "monthly":
        return (t.year, t.month)
    return t.year


def model(times, options):
    """times oldest first; options {rule: n}: [(keep, reason)]."""
    n = len(times)
    if not any(options.get(r, 0) for r in RULES):
        return [(True, "no keep option")] * n
    mark = {}                   # index -> "keep" / "remove"
    reason = {}
    for rule in RULES:
        keep = options.get(rule, 0)
        if not keep:
            continue
        ids = [period(rule, times[i], i) for i in range(n)]
        already = {ids[i] for i in range(n) if mark.get(i) == "keep"}
        counted = []
        for i in reversed(range(n)):          # newest first
            if i in mark or ids[i] in already:
                continue
            if ids[i] not in counted:
                if len(counted) >= keep:
                    break
                counted.append(ids[i])
                mark[i] = "keep"
                reason[i] = "keep-" + rule
            else:
                mark[i] = "remove"
    out = [(mark.get(i) == "keep", reason.get(i)) for i in range(n)]
    if n and not out[-1][0]:
        out[-1] = (True, "newest")
    return out


def make_repo(path, times):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path + "/points")
    json.dump({"format": 1}, open(path + "/repository.json", "w"))
    names = []
    for i, t in enumerate(times):
        name = "p%04d" % i
        names.append(name)
        rec = {"format": 1, "name": name,
               "time": t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
               "base": names[i - 1] if i else None,
               "disks": [{"name": "d", "size": 1 << 20, "chunk": 65536,
                          "image": "disks/d/%s.qcow2" % name,
                          "sums": "sums/d.%s.sums" % name,
                          "mode": "incremental" if i else "full",
                          "stored-bytes": 0}],
               "verified": None}
        json.dump(rec, open("%s/points/%s.json" % (path, name), "w"))
    return names


def tool(binary, path, options):
    args = [binary, "prune", "--dry-run", "--output=json"]
    for rule, n in options.items():
        args += ["--keep-" + rule, str(n)]
    j = json.loads(subprocess.check_output(args + [path]))
    return [(p["keep"], p["reason"]) for p in j["points"]], j


def check(binary, path, times, options, want=None):
    names = make_repo(path, times)
    got, j = tool(binary, path, options)
    expected = model(times, options)
    assert [p["name"] for p in j["points"]] == names
    if want is not None:        # a case worked by hand
        assert expected == want, ("model", options, expected, want)
    if got != expected:
        for i, t in enumerate(times):
            print(names[i], t, got[i], expected[i],
                  "" if got[i] == expected[i] else "<-- differs")
        sys.exit("%s: options %s: the tool and the model differ"
                 % (sys.argv[0], options))


def at(s):
    return datetime.datetime.strptime(s, "%Y-%m-%d %H:%M")


def fixed(binary, path):
    K, R = True, False
    # Two a day over three days: the newest of each day.
    days = [at("2026-03-0%d %02d:00" % (d, h)) for d in (1, 2, 3)
            for h in (8, 20)]
    check(binary, path, days, {"daily": 3},
          [(R, None), (K, "keep-daily")] * 3)
    # keep-last keeps the newest two; daily skips their day (it holds a
    # point kept already), keeps the newest of each day before, and
    # marks the older point of a day it counted removed.
    check(binary, path, days, {"last": 2, "daily": 2},
          [(R, None), (K, "keep-daily"), (R, None), (K, "keep-daily"),
           (K, "keep-last"), (K, "keep-last")])
    # A point that weekly marked removed is not kept by monthly:
    # Friday 2026-01-30 and Sunday 2026-02-01 share ISO week 5.
    check(binary, path, [at("2026-01-30 10:00"), at("2026-02-01 10:00")],
          {"weekly": 1, "monthly": 2}, [(R, None), (K, "keep-weekly")])
    # A period of a later option that holds a point kept by an earlier
    # one is skipped, its points left unmarked: 2026-03-01 is a Sunday
    # (week 9), the days after it in week 10.
    check(binary, path, days, {"daily": 1, "weekly": 1},
          [(R, None), (K, "keep-weekly"), (R, None), (R, None), (R, None),
           (K, "keep-daily")])
    # Nothing kept by a rule: the newest still is.
    check(binary, path, days, {"hourly": 0, "yearly": 0},
          [(K, "no keep option")] * 6)
    # ISO weeks: 2026-12-31 (Thursday) and 2027-01-03 (Sunday) are
    # both in week 53 of 2026; 2027-01-04 begins week 1 of 2027.
    wk = [at("2026-12-28 10:00"), at("2026-12-31 10:00"),
          at("2027-01-03 10:00"), at("2027-01-04 10:00")]
    check(binary, path, wk, {"weekly": 2},
          [(R, None), (R, None), (K, "keep-weekly"), (K, "keep-weekly")])
    check(binary, path, [at("2026-12-21 10:00"), at("2026-12-31 10:00"),
                         at("2027-01-03 10:00")], {"weekly": 2},
          [(K, "keep-weekly"), (R, None), (K, "keep-weekly")])
    check(binary, path, wk, {"yearly": 5},
          [(R, None), (K, "keep-yearly"), (R, None), (K, "keep-yearly")])


def calendar(rnd):
    t = at("2026-06-01 00:00") + datetime.timedelta(days=rnd.randrange(400))
    times = []
    for day in range(rnd.choice([3, 40, 560])):
        for _ in range(rnd.choice([0, 1, 1, 1, 2, 4])):
            times.append(t + datetime.timedelta(
                days=day, minutes=rnd.randrange(24 * 60)))
    times.sort()
    return times or [t]


def main():
    binary, work, seed, cases = sys.argv[1], sys.argv[2], sys.argv[3], \
        int(sys.argv[4])
    path = os.path.join(work, "R")
    fixed(binary, path)
    rnd = random.Random(seed)
    for case in range(cases):
        options = {r: rnd.choice([0, 1, 2, 3, 7, 12])
                   for r in rnd.sample(RULES, rnd.randrange(1, 5))}
        check(binary, path, calendar(rnd), options)
    print("the fixed cases and %d random ones: the tool is the model"
          % cases)


main()
