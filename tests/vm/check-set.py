#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# check-set.py IMG NAME LOG UPTO STATE [DIR]: check one restored disk
# of the test-dirtybitmap-vm*.sh tests, the raw image IMG (a copy: the
# journal is replayed in it) of the guest's disk NAME (disk0, disk1),
# whose writer wrote its files into the directory DIR of the file
# system (the top by default).
#
# 1. Its ext4 superblock: with STATE "live" (a backup of a mounted,
#    unfrozen file system) it must say needs_recovery, and the journal
#    is then replayed (e2fsck -p -E journal_only), after which it must
#    not; with STATE "frozen" (taken while the guest agent had the file
#    systems frozen) or "clean" (after the guest unmounted them) it
#    must not need recovery at all.
# 2. e2fsck -fn: no error at all.
# 3. Every file that the console log LOG, in its first UPTO bytes (the
#    log as it was when the backup started), says was synced on NAME
#    ("synced NAME fN SIZE": the guest's fsync of it had returned) is
#    in IMG, in DIR, with exactly the bytes writer.sh wrote.  At least
#    one such file, or the check proves nothing.
import os
import re
import shutil
import subprocess
import sys

if len(sys.argv) not in (6, 7):
    sys.exit("usage: check-set.py IMG NAME LOG UPTO STATE [DIR]")
img, name, log, upto, state = sys.argv[1:6]
where = sys.argv[6].strip("/") if len(sys.argv) == 7 else ""
upto = int(upto)
if state not in ("live", "frozen", "clean"):
    sys.exit("check-set.py: STATE is live, frozen or clean")


def fail(msg):
    sys.exit("check-set.py: %s (%s): %s" % (img, name, msg))


def run(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def needs_recovery():
    rc, out = run("dumpe2fs", "-h", img)
    if rc != 0:
        fail("dumpe2fs -h failed:\n" + out)
    m = re.search(r"^Filesystem features:(.*)$", out, re.M)
    if not m:
        fail("dumpe2fs -h shows no features:\n" + out)
    return "needs_recovery" in m.group(1).split()


# 1. The journal.
if needs_recovery():
    if state != "live":
        fail("needs journal recovery, but the file system was %s" % state)
    rc, out = run("e2fsck", "-p", "-E", "journal_only", img)
    if rc not in (0, 1):
        fail("the journal replay failed (%d):\n%s" % (rc, out))
    if needs_recovery():
        fail("still needs recovery after the journal replay")
    print("%s: journal replayed" % name)
elif state == "live":
    fail("a backup of a mounted file system that needs no recovery: "
         "was the guest frozen?")

# 2. The file system.
rc, out = run("e2fsck", "-fn", img)
if rc != 0:
    fail("e2fsck -fn exits %d:\n%s" % (rc, out))

# 3. The files.
with open(log, "rb") as f:
    text = f.read(upto)
text = text[:text.rfind(b"\n") + 1].decode(errors="replace")
synced = []
for line in text.splitlines():
    m = re.fullmatch(r"synced (\S+) f(\d+) (\d+)\r?", line)
    if m and m.group(1) == name:
        synced.append((int(m.group(2)), int(m.group(3))))
if not synced:
    fail("no file synced on %s in the first %d bytes of %s" %
         (name, upto, log))

files = img + ".files"
shutil.rmtree(files, ignore_errors=True)
os.mkdir(files)
rc, out = run("debugfs", "-R", "rdump / " + files, img)
if rc != 0:
    fail("debugfs rdump failed:\n" + out)
for n, size in synced:
    line = ("%s file %d\n" % (name, n)).encode()
    want = (line * (size // len(line) + 1))[:size]
    fname = os.path.join(where, "f%d" % n)
    try:
        with open(os.path.join(files, fname), "rb") as f:
            got = f.read()
    except FileNotFoundError:
        fail("%s was synced before the backup began, and is missing" % fname)
    if got != want:
        at = next((i for i in range(min(len(got), len(want)))
                   if got[i] != want[i]), min(len(got), len(want)))
        fail("%s was synced before the backup began: it holds %d bytes "
             "(%d expected), the first wrong one at %d" %
             (fname, len(got), size, at))
present = len([f for f in os.listdir(os.path.join(files, where))
               if re.fullmatch(r"f\d+", f)])
shutil.rmtree(files)
print("%s: %s, e2fsck clean, %d synced files of %d present exact (%sf%d..f%d)"
      % (name, state, len(synced), present, where + "/" if where else "",
         synced[0][0], synced[-1][0]))
