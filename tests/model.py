#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# model.py: random sequences of what users do to a disk served through
# the filter, checked against a model of its contents.
#
#   model.py FIRST_SEED COUNT STEPS
#
# Each sequence (seeds FIRST_SEED .. FIRST_SEED+COUNT-1) draws a
# durability mode and STEPS operations among: start, clean stop,
# kill -9, power loss (a new boot id, as a bind mount over
# /proc/sys/kernel/random/boot_id), writes, zeroes, trims and reads
# through NBD, bitmaps added, cleared and removed live by transaction,
# full and incremental backups that add a checkpoint, bitmaps added,
# cleared and removed offline with the tool (or their whole file
# deleted), writes and size changes made without the filter while it
# is stopped, size changes made with dirtybitmap resize, and a cp -p of
# the disk and its bitmap file together.
#
# And backups where the checksums beside a target could lie: their
# checkpoint names drawn from a small pool (mon, tue, wed), reused in
# turn, so older sets of a name stay behind; their base a checkpoint
# that has sets, often one whose bitmap is lost (removed live, offline
# or by --remove-incremental, or inconsistent after a power loss): a
# resync; their target the file that holds the base's backup, or
# another one, or none; the tool killed (SIGKILL, from gdb stopped at
# a breakpoint) at each step: before the cut, before the first write,
# after the Nth write, with the copy complete, with its set written
# before backup-end, with the backup complete; the killed run run
# again later; targets deleted, renamed and copied, their sets left;
# and granules put back as they were at one of the last backups, where
# a set describing an older image matches the disk again.
#
# And a backup repository (dirtybitmap backup --repo): points added,
# each incremental on the newest (or a resync where its checkpoint was
# lost), restored to a file at once: the point's image; and the live
# disk rolled back to a point (dirtybitmap rollback), through the
# server, with the newest checkpoint's bitmap or with tracking lost.
#
# The oracle: a copy of the disk taken when each bitmap was made or
# last cleared (its shadow).  After every start, every bitmap that the
# server's query reports consistent must have every granule dirty in
# which the disk differs from its shadow; after every tool info, the
# same for what the tool reports.  Whenever a backup exits 0 (or is
# killed once complete), its target equals the disk, which no client
# writes during a backup, but for what its base may have missed (the
# excuse below, and where the backup it built on lagged); for the
# pool's backups, exactly when the base is missing or inconsistent (a
# resync or a full copy owes nothing to the base), and nothing when the
# base is consistent but the target does not hold its backup (an
# incremental needs that: the man page's misuse).  Where the target is
# checked, the set of checksums the backup wrote passes dirtybitmap
# verify against it.  A backup killed before its end leaves no
# checkpoint on the server.  A point's image equals the disk at its
# backup but where its base's bitmap may have missed a write (excused)
# or its base's image lagged; a rollback that exits 0 leaves the disk
# equal to the point's image but where the newest checkpoint may have
# missed a write or the newest point's image lagged (nothing, with
# tracking lost); a repository backup never fails, and a rollback only
# when the disk is not the size of the point.  On a failure it prints the
# seed and the steps, and exits 1.
#
# What the man page admits stays unseen is excused, and only that: a
# write made without the filter within the liveness lease (a second)
# of a crash of nbdkit.  Most such writes come that soon here; some
# sequences wait out the lease first, and then the write must be found.
#
# The environment gives FILTER (the built filter) and a PATH with the
# built tool first, and may give MODEL_COARSE_DIR: a directory on a
# file system whose times are whole seconds (ext4 with 128-byte
# inodes), where one sequence in COARSE_EVERY keeps its disk.

import json
import multiprocessing
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

import nbd

G = 65536
LEASE = 1.0                     # BMF_ALIVE_LEASE
FILTER = os.environ["FILTER"]
COARSE_DIR = os.environ.get("MODEL_COARSE_DIR")
COARSE_EVERY = 16
UNSHARE = ["unshare", "-m", "sh", "-c",
           'mount --bind "$1" /proc/sys/kernel/random/boot_id && shift && '
           'exec "$@"', "sh"]
# Checkpoint names that backups reuse in turn, as a weekly rotation
# does, and the target files they go to (beside the disk, with the c*.img
# of the plain backups): so sets of checksums of one name pile up and
# outlive the images and bitmaps they describe.
POOL = ["mon", "tue", "wed"]
TARGETS = ["t1.img", "t2.img", "t3.img"]
# Where a backup is killed (SIGKILL, from gdb stopped at a breakpoint):
# before the cut; after it, before any write; after the Nth write or
# zero on the target; with the copy flushed and committed; with the new
# checksums written, backup-end not sent; with backup-end answered (NEW
# kept) but the set not yet put in place, where the tool has that step;
# with the backup complete.  From the last two on, the backup is done.
# Thrice as often where the target is partly written, or a set is
# left for a checkpoint the server drops.
KILL_POINTS = ["cut_make", "copies_run", "target_done", "target_done",
               "target_done", "checksums_write", "cut_end", "cut_end",
               "cut_end", "checksums_publish", "report_summary"]
DONE_POINTS = ["checksums_publish", "report_summary"]
# gdb reads only the tool's ELF symbols: enough for a breakpoint at a
# function, and three times quicker than its debugging information.
# Without gdb, the backups meant to be killed run whole.
GDB = shutil.which("gdb") and [
    "env", "SHELL=/bin/sh", "gdb", "-q", "-batch", "-nx", "-readnever",
    "-iex", "set auto-solib-add off",
    "-iex", "set libthread-db-search-path /nonexistent"]


class Failure(Exception):
    pass


def where(seed, top):
    """The directory under which sequence seed works, and what to say
    of its file system."""
    if COARSE_DIR and seed % COARSE_EVERY == 0:
        return COARSE_DIR, ", on ext4 -I 128 (times in whole seconds)"
    return top, ""


def stamp(path):
    """Which file is at path (a rename in place makes another), or None."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


class Sequence:
    def __init__(self, seed, steps, top):
        self.rng = random.Random(seed)
        self.seed = seed
        self.steps = steps
        top, fs = where(seed, top)
        self.dir = os.path.join(top, "s%d" % seed)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.disk = os.path.join(self.dir, "disk.img")
        self.bitmaps = self.disk + ".bitmaps"
        self.sock = os.path.join(self.dir, "sock")
        self.ctl = os.path.join(self.dir, "ctl")
        self.pidfile = os.path.join(self.dir, "pid")
        self.mode = self.rng.choice(["flush", "strict", "coarse"])
        self.boot = None            # a boot id file after a power loss
        self.proc = None
        self.h = None
        self.shadows = {}           # bitmap -> the disk when it began
        self.excused = {}           # bitmap -> granules it may miss
        self.crashed = None         # when the server last died serving
        self.targets = {}           # checkpoint -> its backup image
        self.stale = {}             # checkpoint -> where its image may lag
        self.images = {}            # target file -> (checkpoint, its shadow)
        self.rerun = None           # a killed backup, to run again
        self.past = []              # the disk at the last backups
        self.repo = os.path.join(self.dir, "R")
        self.points = {}            # point -> its image, restored
        self.lag = {}               # point -> where its image lags, or
                                    # None: unknown
        self.origin = {}            # point -> the shadow of its bitmap
        self.newest = None          # the repository's newest point
        self.counter = 0
        self.log = ["durability=%s%s" % (self.mode, fs)]
        with open(self.disk, "wb") as f:
            f.truncate(16 * G)

    # -- helpers --------------------------------------------------------

    def say(self, what):
        self.log.append(what)

    def wrap(self, cmd):
        return UNSHARE + [self.boot] + cmd if self.boot else cmd

    def run(self, cmd, ok=True):
        r = subprocess.run(self.wrap(cmd), cwd=self.dir,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
        if ok and r.returncode != 0:
            raise Failure("%s: exit %d: %s" % (" ".join(cmd), r.returncode,
                                               r.stderr.strip()))
        return r

    def contents(self):
        with open(self.disk, "rb") as f:
            return f.read()

    def began(self, name):
        self.shadows[name] = self.contents()
        self.excused[name] = set()
        # A backup is the base of the bitmap that began with it only.
        self.targets.pop(name, None)

    def name(self, prefix):
        self.counter += 1
        return "%s%d" % (prefix, self.counter)

    def control(self, execute, arguments=None):
        req = {"execute": execute}
        if arguments is not None:
            req["arguments"] = arguments
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(self.ctl)
            s.sendall((json.dumps(req) + "\n").encode())
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    raise Failure("control %s: no reply" % execute)
                buf += chunk
        return json.loads(buf)

    def handle(self):
        if self.h is None:
            self.h = nbd.NBD()
            self.h.connect_unix(self.sock)
        return self.h

    def drop_handle(self):
        if self.h is not None:
            try:
                self.h.shutdown()
            except nbd.Error:
                pass
            self.h = None

    # -- the oracle -----------------------------------------------------

    def changed(self, shadow, disk):
        n = (len(disk) + G - 1) // G
        return {g for g in range(n)
                if disk[g * G:(g + 1) * G] != shadow[g * G:(g + 1) * G]}

    def check(self, who, name, dirty):
        missing = sorted(self.changed(self.shadows[name], self.contents())
                         - dirty - self.excused.get(name, set()))
        if missing:
            raise Failure("%s reports bitmap %s consistent, but granules %s "
                          "changed since it began and are clean in it"
                          % (who, name, missing))

    def served_dirty(self, name):
        r = self.control("select", {"bitmap": name})
        if "error" in r:
            raise Failure("select %s: %s" % (name, r))
        h = nbd.NBD()
        h.add_meta_context("base:allocation")
        h.connect_unix(self.sock)
        size = h.get_size()
        dirty = set()
        pos = 0

        def f(ctx, offset, entries, err):
            nonlocal pos
            for i in range(0, len(entries), 2):
                length, flags = entries[i], entries[i + 1]
                if not flags & 1:
                    dirty.update(range(pos // G, (pos + length - 1) // G + 1))
                pos += length
            return 0
        while pos < size:
            h.block_status(min(size - pos, 1 << 30), pos, f)
        h.shutdown()
        return dirty

    def check_server(self):
        q = self.control("query")["return"]
        for b in q["bitmaps"]:
            if b["consistent"] and b["name"] in self.shadows:
                self.check("the server", b["name"],
                           self.served_dirty(b["name"]))

    def check_tool(self):
        if not os.path.exists(self.bitmaps):
            return
        info = json.loads(self.run(["dirtybitmap", "info", "--output=json",
                                    self.bitmaps]).stdout)
        for b in info["bitmaps"]:
            if not b["consistent"] or b["name"] not in self.shadows:
                continue
            ranges = json.loads(self.run(["dirtybitmap", "map",
                                          "--output=json", self.bitmaps,
                                          b["name"]]).stdout)
            # Past the size it records, the disk is new to the file: the
            # filter makes it dirty when it sees it.
            dirty = set(range(-(-(info["disk-size"] or 0) // G),
                              len(self.contents()) // G))
            for r in ranges:
                if r["type"] != 1:
                    dirty.update(range(r["offset"] // G,
                                       (r["offset"] + r["length"] - 1) // G
                                       + 1))
            self.check("the tool", b["name"], dirty)

    # -- operations while serving ---------------------------------------

    def op_start(self):
        for p in (self.sock, self.ctl, self.pidfile):
            if os.path.exists(p):
                os.unlink(p)
        cmd = ["nbdkit", "-f", "-U", self.sock, "-P", self.pidfile,
               "--filter=" + FILTER, "file", self.disk,
               "control=" + self.ctl, "durability=" + self.mode]
        self.proc = subprocess.Popen(self.wrap(cmd), cwd=self.dir,
                                     stderr=subprocess.PIPE,
                                     universal_newlines=True)
        for _ in range(3000):
            if os.path.exists(self.ctl) and os.path.exists(self.pidfile):
                break
            if self.proc.poll() is not None:
                raise Failure("nbdkit did not start: %s"
                              % self.proc.stderr.read().strip())
            time.sleep(0.002)
        else:
            raise Failure("nbdkit did not start in 6 s")
        self.say("start")
        self.crashed = None
        self.check_server()

    def stopped(self, how):
        self.drop_handle()
        self.proc.send_signal(how)
        self.proc.communicate(timeout=30)
        self.proc = None

    def op_stop(self):
        self.say("stop")
        self.stopped(signal.SIGTERM)

    def op_kill(self):
        self.say("kill -9")
        self.stopped(signal.SIGKILL)
        self.crashed = time.monotonic()

    def op_power_loss(self):
        self.say("power loss" + (" (serving)" if self.proc else ""))
        if self.proc:
            self.stopped(signal.SIGKILL)
            self.crashed = time.monotonic()
        self.boot = os.path.join(self.dir, "boot_id")
        with open(self.boot, "w") as f:
            f.write(str(uuid.UUID(int=self.rng.getrandbits(128))) + "\n")

    def op_io(self):
        h = self.handle()
        size = h.get_size()
        g = self.rng.randrange(size // G)
        off = g * G + self.rng.randrange(G - 4096)
        kind = self.rng.choice(["write", "write", "zero", "trim", "read"])
        self.say("%s granule %d" % (kind, g))
        if kind == "write":
            h.pwrite(bytes([self.rng.randrange(1, 256)]) * 512, off)
        elif kind == "zero":
            h.zero(4096, off)
        elif kind == "trim":
            h.trim(G, g * G)
        else:
            h.pread(512, off)

    def transaction(self, action, name):
        r = self.control("transaction",
                         {"actions": [{"action": action, "bitmap": name}]})
        self.say("live %s %s: %s" % (action, name,
                                     "ok" if "return" in r else "refused"))
        return "return" in r

    def op_live_add(self):
        name = self.name("l")
        if self.transaction("add", name):
            self.began(name)

    def op_live_clear(self):
        if self.shadows:
            name = self.rng.choice(sorted(self.shadows))
            if self.transaction("clear", name):
                self.began(name)

    def op_live_remove(self):
        if self.shadows:
            name = self.rng.choice(sorted(self.shadows))
            if self.transaction("remove", name):
                del self.shadows[name]
                del self.excused[name]

    def op_backup(self):
        self.drop_handle()
        new = self.name("c")
        target = os.path.join(self.dir, new + ".img")
        uri = "nbd+unix:///?socket=" + self.sock
        base = [b for b in sorted(self.targets) if b in self.shadows]
        allowed = set()
        if base and self.rng.random() < 0.7:
            b = self.rng.choice(base)
            shutil.copyfile(self.targets[b], target)
            r = self.run(["dirtybitmap", "backup", "--control", self.ctl,
                          "--incremental", b, "--checkpoint", new, uri,
                          target], ok=False)
            self.say("incremental backup %s -> %s: exit %d"
                     % (b, new, r.returncode))
            # What b may have missed, and what its base lacked.
            allowed = self.excused[b] | self.stale[b]
        else:
            r = self.run(["dirtybitmap", "backup", "--control", self.ctl,
                          "--checkpoint", new, uri, target], ok=False)
            self.say("full backup -> %s: exit %d" % (new, r.returncode))
        if r.returncode != 0:
            self.say("  " + r.stderr.strip().replace("\n", "\n  "))
            return
        with open(target, "rb") as f:
            got = f.read()
        disk = self.contents()
        wrong = self.changed(got, disk) if len(got) == len(disk) else None
        if wrong is None or wrong - allowed:
            raise Failure("backup %s exited 0 but differs from the disk%s"
                          % (new, " at granules %s" % sorted(wrong - allowed)
                             if wrong is not None else " in size"))
        self.began(new)
        self.targets[new] = target
        self.stale[new] = wrong

    # -- backups whose checksums could lie ------------------------------

    def held(self, path):
        """The checkpoint whose backup the file holds, or None.  It may
        differ from the disk at that checkpoint where the disk changed
        since (what a failed run writes there is the disk too), and
        where that backup was excused (its stale granules)."""
        image = self.images.get(path)
        # The shadow itself: a bitmap cleared or made again has another.
        if image and self.shadows.get(image[0]) is image[1]:
            return image[0]
        for c, p in self.targets.items():
            if p == path and c in self.shadows:
                return c
        return None

    def last_backup(self, path):
        """The checkpoint of the last backup the file is known to hold,
        its bitmap gone since or not, or None."""
        if path in self.images:
            return self.images[path][0]
        return next((c for c, p in self.targets.items() if p == path), None)

    def forget(self, path):
        """The file no longer holds the backup it held."""
        self.images.pop(path, None)
        for c in [c for c, p in self.targets.items() if p == path]:
            del self.targets[c]

    def target_files(self):
        return sorted(os.path.join(self.dir, n) for n in os.listdir(self.dir)
                      if n.endswith(".img") and n != "disk.img")

    def server_bitmaps(self):
        """Once no view is open (the server ends one whose backup was
        killed when its control connection drops): name -> consistent."""
        for _ in range(1000):
            q = self.control("query")["return"]
            if q["backup"] is None:
                return {b["name"]: b["consistent"] for b in q["bitmaps"]}
            time.sleep(0.01)
        raise Failure("a backup view is still open 10 s after its backup "
                      "was killed")

    def draw_backup(self):
        """(B or None, NEW, target, --remove-incremental): the last run
        killed or failed, again; or B among the checkpoints with sets,
        lost ones first (a resync), and trusted bitmaps; NEW from the
        pool; a file that holds B's backup, mostly, when B is trusted."""
        if self.rerun and self.rng.random() < 0.5:
            drawn, self.rerun = self.rerun, None
            return drawn
        bitmaps = self.server_bitmaps()
        sets = {n[:-5].rsplit(".", 1)[-1] for n in os.listdir(self.dir)
                if n.endswith(".sums")}
        lost = sorted(c for c in sets if not bitmaps.get(c))
        trusted = sorted(c for c in sets | set(self.targets)
                         if bitmaps.get(c))
        pick = self.rng.random()
        base = None
        if lost and pick < 0.45:
            base = self.rng.choice(lost)
        elif trusted and pick < 0.85:
            base = self.rng.choice(trusted)
        new = self.rng.choice([p for p in POOL if p != base])
        files = self.target_files()
        # For a lost B, the files that held its backup when it was lost
        # (only a preference: a resync's target must be the disk anyway).
        holders = [t for t in files if base and
                   (self.held(t) == base or
                    base in lost and self.last_backup(t) == base)]
        if holders and self.rng.random() < (0.85 if base in trusted
                                            else 0.6):
            target = self.rng.choice(holders)
        else:
            target = self.rng.choice(sorted(
                set(files) | {os.path.join(self.dir, t) for t in TARGETS}))
        return base, new, target, bool(base) and self.rng.random() < 0.5

    def expect(self, base, target):
        """What the target must hold if the backup exits 0: the granules
        where it may differ from the disk, or None when nothing can be
        said (an incremental from a consistent bitmap into a file that
        does not hold its backup: the man page's misuse).  Without a
        consistent B the backup is a resync or a full copy: exactly the
        disk.  And how to say so in the log."""
        bitmaps = self.server_bitmaps()
        if base is None:
            return set(), "full"
        if not bitmaps.get(base):
            return set(), "%s %s" % (base, "inconsistent" if base in bitmaps
                                     else "missing")
        if self.held(target) == base:
            return self.excused[base] | self.stale.get(base, set()), \
                "%s consistent, held" % base
        return None, "%s consistent, not held: unchecked" % base

    def free_name(self, new):
        """NEW reused: its bitmap removed first, as a rotation does."""
        if new in self.server_bitmaps() and not self.transaction("remove",
                                                                 new):
            return False
        self.shadows.pop(new, None)
        self.excused.pop(new, None)
        return True

    def backup_args(self, base, new, target, remove, extra=()):
        args = ["backup", "--output=json", "--control", self.ctl,
                "--checkpoint", new] + list(extra)
        if base:
            args += ["--incremental", base]
        if remove:
            args += ["--remove-incremental"]
        return args + ["nbd+unix:///?socket=" + self.sock, target]

    def judge(self, drawn, allowed, disk, sums):
        """A backup that completed: the oracle, then the model."""
        base, new, target, remove = drawn
        got = b""
        if os.path.exists(target):
            with open(target, "rb") as f:
                got = f.read()
        if len(got) != len(disk):
            raise Failure("backup %s exited 0 but %s has %d bytes, the disk "
                          "%d" % (new, target, len(got), len(disk)))
        wrong = self.changed(got, disk)
        if allowed is not None and wrong - allowed:
            raise Failure("backup %s exited 0 but %s differs from the disk "
                          "at granules %s" % (new, os.path.basename(target),
                                              sorted(wrong - allowed)))
        # Where the target is not known to hold B's backup, the set may
        # describe the disk rather than the target (recording that the
        # target does not hold it).
        if sums and allowed is not None:
            r = self.run(["dirtybitmap", "verify", target, sums], ok=False)
            if r.returncode != 0:
                raise Failure("backup %s wrote %s, which does not describe "
                              "%s: %s" % (new, sums, target,
                                          (r.stdout + r.stderr).strip()))
        self.forget(target)
        self.began(new)
        if allowed is not None:
            self.images[target] = (new, self.shadows[new])
            self.targets[new] = target
            self.stale[new] = wrong
        if remove and base not in self.server_bitmaps():
            self.shadows.pop(base, None)
            self.excused.pop(base, None)

    def describe(self, drawn, what):
        base, new, target, remove = drawn
        return "%s -> %s into %s%s (%s)" % (
            "incremental " + base if base else "full", new,
            os.path.basename(target),
            ", --remove-incremental" if remove else "", what)

    def op_chain_backup(self):
        self.drop_handle()
        drawn = self.draw_backup()
        if not self.free_name(drawn[1]):
            return
        allowed, what = self.expect(drawn[0], drawn[2])
        disk = self.instant()
        r = self.run(["dirtybitmap"] + self.backup_args(*drawn), ok=False)
        report = json.loads(r.stdout) if r.stdout.startswith("{") else {}
        self.say("backup %s: exit %d, %s" % (self.describe(drawn, what),
                                             r.returncode,
                                             report.get("mode")))
        if r.returncode != 0:
            self.say("  " + r.stderr.strip().replace("\n", "\n  "))
            if "nothing was changed" not in r.stderr:
                self.rerun = drawn
            return
        self.judge(drawn, allowed, disk, report.get("checksums"))

    def op_killed_backup(self):
        """A backup killed at one of KILL_POINTS, where gdb holds it."""
        if not GDB:
            self.op_chain_backup()
            return
        self.drop_handle()
        drawn = self.draw_backup()
        base, new, target, remove = drawn
        if not self.free_name(new):
            return
        allowed, what = self.expect(base, target)
        point = self.rng.choice(KILL_POINTS)
        skip = self.rng.randrange(4) if point == "target_done" else 0
        out = os.path.join(self.dir, "backup.json")
        sums = target + "." + new + ".sums"
        before = stamp(sums)
        disk = self.instant()
        # One request in flight per connection: nbdkit before 1.33.10
        # aborts when a client dies with several (its commit 9d82aa4f).
        args = " ".join(shlex.quote(a) for a in
                        self.backup_args(*drawn, extra=["--requests=1"]))
        r = self.run(GDB + ["-ex", "break " + point,
                            "-ex", "ignore 1 %d" % skip,
                            "-ex", "run %s > %s" % (args, shlex.quote(out)),
                            "-ex", "kill", shutil.which("dirtybitmap")],
                     ok=False)
        where = "%s%s" % (point, " after %d" % skip if skip else "")
        if "Breakpoint 1, " not in r.stdout:
            self.op_backup_ended(drawn, what, where, r.stdout, allowed,
                                 disk, out)
            return
        # Complete: backup-end was answered (NEW stays), only the
        # report is lost.
        complete = new in self.server_bitmaps()
        self.say("backup %s: killed at %s%s" % (
            self.describe(drawn, what), where,
            ", complete" if complete else ""))
        if complete and point not in DONE_POINTS:
            raise Failure("the server kept checkpoint %s of a backup killed "
                          "before its end" % new)
        if complete:
            self.judge(drawn, allowed, disk,
                       sums if stamp(sums) not in (None, before) else None)
        else:
            self.rerun = drawn

    def op_backup_ended(self, drawn, what, where, said, allowed, disk, out):
        """A run under gdb that ended before its breakpoint."""
        codes = [line for line in said.splitlines()
                 if line.startswith("[Inferior 1 ")]
        if not codes:
            raise Failure("gdb: %s" % said.strip())
        code = 0 if "exited normally" in codes[-1] \
            else int(codes[-1].split()[-1].rstrip("]"), 8)
        with open(out) as f:
            text = f.read()
        report = json.loads(text) if text.startswith("{") else {}
        self.say("backup %s: not killed at %s: exit %d, %s"
                 % (self.describe(drawn, what), where, code,
                    report.get("mode")))
        if code == 0:
            self.judge(drawn, allowed, disk, report.get("checksums"))

    def instant(self):
        """The disk at a backup's instant, remembered for op_revert."""
        disk = self.contents()
        self.past = self.past[-5:] + [disk]
        return disk

    def op_revert(self):
        """A granule put back as it was at one of the last backups (a
        file restored, a change undone), through NBD: where a set of
        checksums left describing an older image matches the disk, but
        its target no longer holds that image."""
        disk = self.contents()
        old = self.rng.choice(self.past) if self.past else disk
        n = min(len(old), len(disk)) // G
        differ = [g for g in range(n)
                  if old[g * G:(g + 1) * G] != disk[g * G:(g + 1) * G]]
        if differ:
            g = self.rng.choice(differ)
            self.say("granule %d put back as it was" % g)
            self.handle().pwrite(old[g * G:(g + 1) * G], g * G)

    def op_target_file(self):
        """A target deleted, renamed or copied, its sets left as they
        are."""
        files = self.target_files()
        if not files:
            return
        src = self.rng.choice(files)
        kind = self.rng.choice(["rm", "mv", "cp"])
        if kind == "rm":
            self.say("rm %s" % os.path.basename(src))
            os.unlink(src)
            self.forget(src)
            return
        dst = self.rng.choice(sorted(
            (set(files) | {os.path.join(self.dir, t) for t in TARGETS})
            - {src}))
        self.say("%s %s %s" % (kind, os.path.basename(src),
                               os.path.basename(dst)))
        image = self.held(src)
        self.forget(dst)
        if kind == "mv":
            os.rename(src, dst)
            self.forget(src)
        else:
            shutil.copyfile(src, dst)
        if image:
            self.images[dst] = (image, self.shadows[image])

    # -- the repository -------------------------------------------------

    def restore_point(self, name):
        """The point's image, as restore writes it (verified)."""
        out = os.path.join(self.dir, "restored.raw")
        if os.path.exists(out):
            os.unlink(out)
        r = self.run(["dirtybitmap", "restore", "%s@%s" % (self.repo, name),
                      out], ok=False)
        if r.returncode != 0:
            raise Failure("restore of point %s: exit %d: %s"
                          % (name, r.returncode, r.stderr.strip()))
        with open(out, "rb") as f:
            image = f.read()
        os.unlink(out)
        return image

    def since(self, point):
        """Where the disk may differ from the newest point's image though
        the point's bitmap says clean: what the bitmap may have missed,
        and where the image lags; None when nothing can be said (the
        bitmap was cleared, or removed and added again, by hand since
        the point: the man page's misuse, as for backup --incremental)."""
        if self.shadows.get(point) is not self.origin[point] or \
           self.lag[point] is None:
            return None
        return self.excused.get(point, set()) | self.lag[point]

    def op_repo_backup(self):
        """A point of the repository: an incremental on the newest, or a
        resync where its bitmap was lost, or the first, full."""
        self.drop_handle()
        base = self.newest
        bitmaps = self.server_bitmaps()
        allowed = set()
        if base and bitmaps.get(base):
            allowed = self.since(base)
        new = self.name("r")
        disk = self.instant()
        r = self.run(["dirtybitmap", "backup", "--output=json", "--repo",
                      self.repo, "--control", self.ctl, "--checkpoint", new,
                      "nbd+unix:///?socket=" + self.sock], ok=False)
        report = json.loads(r.stdout) if r.stdout.startswith("{") else {}
        self.say("repository backup %s -> %s (%s): exit %d, %s"
                 % (base, new, "bitmap %s" % ("consistent" if bitmaps.get(base)
                                              else "lost")
                    if base else "first", r.returncode, report.get("mode")))
        if r.returncode != 0:
            raise Failure("repository backup %s: exit %d: %s"
                          % (new, r.returncode, r.stderr.strip()))
        image = self.restore_point(new)
        wrong = self.changed(image, disk) if len(image) == len(disk) else None
        if allowed is not None and (wrong is None or wrong - allowed):
            raise Failure("point %s differs from the disk at its backup%s"
                          % (new, " at granules %s" % sorted(wrong - allowed)
                             if wrong is not None else " in size"))
        self.began(new)
        self.points[new] = image
        self.lag[new] = wrong if allowed is not None else None
        self.origin[new] = self.shadows[new]
        self.newest = new
        # The base's checkpoint is removed from the disk.
        if base and base not in self.server_bitmaps():
            self.shadows.pop(base, None)
            self.excused.pop(base, None)

    def op_rollback(self):
        """The live disk back to a point of the repository."""
        if not self.points:
            return
        self.drop_handle()
        older = sorted(set(self.points) - {self.newest})
        name = self.rng.choice(older) if older and self.rng.random() < 0.8 \
            else self.newest
        bitmaps = self.server_bitmaps()
        tracked = bool(bitmaps.get(self.newest)) and \
            len(self.points[self.newest]) == len(self.points[name])
        allowed = set()
        if tracked:
            allowed = self.since(self.newest)
        r = self.run(["dirtybitmap", "rollback", "--output=json",
                      "%s@%s" % (self.repo, name), "--control", self.ctl,
                      "nbd+unix:///?socket=" + self.sock], ok=False)
        report = json.loads(r.stdout) if r.stdout.startswith("{") else {}
        disks = report.get("disks") or [{}]
        self.say("rollback to %s (newest %s, %s): exit %d, %s chunks"
                 % (name, self.newest, ("tracked" if allowed is not None
                                        else "tracked, unchecked")
                    if tracked else "lost",
                    r.returncode, disks[0].get("chunks-written")))
        disk = self.contents()
        image = self.points[name]
        if r.returncode != 0:
            self.say("  " + r.stderr.strip().replace("\n", "\n  "))
            if len(image) == len(disk):
                raise Failure("rollback to %s failed" % name)
            return
        if disks[0].get("tracking") != ("bitmap" if tracked else "checksums"):
            raise Failure("rollback to %s: tracking %s, expected %s"
                          % (name, disks[0].get("tracking"),
                             "bitmap" if tracked else "checksums"))
        wrong = self.changed(image, disk) if len(image) == len(disk) else None
        if allowed is not None and (wrong is None or wrong - allowed):
            raise Failure("rollback to %s exited 0 but the disk differs "
                          "from the point%s" % (
                              name, " at granules %s" % sorted(wrong - allowed)
                              if wrong is not None else " in size"))

    # -- operations while stopped ---------------------------------------

    def blind(self, granules):
        """Before a change made without the filter: wait out the lease
        of a crash, or excuse the granules it changes (the bound that
        the man page states)."""
        if self.crashed is None:
            return ""
        left = self.crashed + LEASE + 0.05 - time.monotonic()
        if left <= 0:
            return ""
        if self.rng.random() < 0.15:
            time.sleep(left)
            return ""
        for e in self.excused.values():
            e.update(granules)
        return " (within the lease of a crash: may be missed)"

    def op_outside_write(self):
        size = len(self.contents())
        g = self.rng.randrange(size // G)
        blind = self.blind({g})
        self.say("outside write granule %d%s" % (g, blind))
        fd = os.open(self.disk, os.O_WRONLY)
        os.pwrite(fd, os.urandom(64), g * G + self.rng.randrange(G - 64))
        os.close(fd)

    def op_outside_resize(self):
        n = len(self.contents()) // G + self.rng.choice([-2, -1, 1, 3])
        n = max(4, min(n, 32))
        old = len(self.contents()) // G
        blind = self.blind(set(range(min(n, old), max(n, old))))
        self.say("outside truncate to %d granules%s" % (n, blind))
        os.truncate(self.disk, n * G)

    def op_tool_resize(self):
        if not os.path.exists(self.bitmaps):
            return
        n = len(self.contents()) // G + self.rng.choice([-2, -1, 1, 3])
        n = max(4, min(n, 32))
        r = self.run(["dirtybitmap", "resize", "--shrink", self.bitmaps,
                      str(n * G)], ok=False)
        self.say("dirtybitmap resize to %d granules: exit %d"
                 % (n, r.returncode))

    def tool_bitmap(self, action, name):
        cmd = ["dirtybitmap", "bitmap", "--" + action]
        if not os.path.exists(self.bitmaps):
            cmd += ["--size", str(len(self.contents()))]
        r = self.run(cmd + [self.bitmaps, name], ok=False)
        self.say("offline %s %s: exit %d" % (action, name, r.returncode))
        return r.returncode == 0

    def op_offline_add(self):
        name = self.name("o")
        if self.tool_bitmap("add", name):
            self.began(name)

    def op_offline_clear(self):
        if self.shadows:
            name = self.rng.choice(sorted(self.shadows))
            if self.tool_bitmap("clear", name):
                self.began(name)

    def op_offline_remove(self):
        """A bitmap lost offline: removed with the tool, or its whole
        file deleted."""
        if self.rng.random() < 0.2:
            if os.path.exists(self.bitmaps):
                self.say("rm the bitmap file")
                os.unlink(self.bitmaps)
                self.shadows.clear()
                self.excused.clear()
        elif self.shadows:
            name = self.rng.choice(sorted(self.shadows))
            if self.tool_bitmap("remove", name):
                del self.shadows[name]
                del self.excused[name]

    def op_copy(self):
        self.say("cp -p of the disk and its bitmap file")
        for p in (self.disk, self.bitmaps):
            if os.path.exists(p):
                subprocess.run(["cp", "-p", p, p + ".copy"], check=True)
                os.rename(p + ".copy", p)

    def op_info(self):
        self.say("tool info")
        self.check_tool()

    # -- the sequence ---------------------------------------------------

    SERVING = [(op_io, 8), (op_live_add, 2), (op_live_clear, 1),
               (op_live_remove, 1), (op_backup, 2), (op_stop, 3),
               (op_kill, 2), (op_power_loss, 1),
               (op_chain_backup, 1.2), (op_killed_backup, 0.2),
               (op_revert, 0.5), (op_target_file, 0.5),
               (op_repo_backup, 3), (op_rollback, 2)]
    STOPPED = [(op_start, 6), (op_outside_write, 3), (op_outside_resize, 1),
               (op_tool_resize, 1),
               (op_offline_add, 2), (op_offline_clear, 1), (op_copy, 1),
               (op_info, 2), (op_power_loss, 1),
               (op_offline_remove, 0.5), (op_target_file, 0.5)]

    def play(self):
        for _ in range(self.steps):
            ops = self.SERVING if self.proc else self.STOPPED
            op = self.rng.choices([o for o, _ in ops],
                                  [w for _, w in ops])[0]
            op(self)
        if self.proc:
            self.op_stop()
        self.op_start()
        self.op_stop()
        self.check_tool()

    def close(self):
        """Kill a server still running; returns what it said."""
        if not self.proc:
            return ""
        self.drop_handle()
        self.proc.kill()
        return self.proc.communicate()[1].strip()


def one(args):
    """Play one sequence: (seed, what to print if it failed, or None)."""
    seed, steps, top = args
    s = Sequence(seed, steps, top)
    out = None
    try:
        s.play()
        shutil.rmtree(s.dir)
    except (Failure, nbd.Error, subprocess.TimeoutExpired, OSError,
            ValueError, KeyError) as e:
        out = ["FAIL: seed %d: %s" % (seed, e)]
        out += ["  %2d. %s" % (i, step) for i, step in enumerate(s.log)]
    finally:
        err = s.close()
        if out is not None and err:
            out.append("  nbdkit said:\n  " + err.replace("\n", "\n  "))
    return seed, out


def main():
    first, count, steps = (int(a) for a in sys.argv[1:4])
    top = os.path.join(os.getcwd(), "model")
    # Sequences wait out leases and servers: several at once keep both
    # cores busy.
    with multiprocessing.Pool(int(os.environ.get("MODEL_JOBS", "4"))) as p:
        results = sorted(p.imap_unordered(
            one, [(seed, steps, top)
                  for seed in range(first, first + count)]))
    failed = [out for _, out in results if out]
    for out in failed:
        print("\n".join(out))
    if not GDB:
        print("(no gdb: no backup was killed)")
    print("%d sequences of %d steps, %d failed" % (count, steps, len(failed)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
