# SPDX-License-Identifier: BSD-3-Clause
# coarse-strace-events.py: the log of strace -f -y as lines "sync
# bitmaps", "sync disk" (an fdatasync, when it returned), "sync range"
# (an msync: only the bitmap file is synced so) and "write disk
# OFFSET" (a pwrite, when it started).
import re, sys
pending = {}
def name(path):
    return "bitmaps" if path.endswith(".bitmaps") else "disk"
for line in open(sys.argv[1]):
    m = re.match(r"(\d+) +(.*)", line)
    if not m:
        continue
    pid, rest = m.groups()
    m = re.match(r"fdatasync\(\d+<([^>]*)>\)\s*= 0", rest)
    if m:
        print("sync", name(m.group(1)))
        continue
    m = re.match(r"fdatasync\(\d+<([^>]*)> <unfinished", rest)
    if m:
        pending[pid] = m.group(1)
        continue
    if re.match(r"<\.\.\. fdatasync resumed>\)\s*= 0", rest):
        print("sync", name(pending.pop(pid)))
        continue
    if re.match(r"msync\(.*\)\s*= 0", rest) or \
       re.match(r"<\.\.\. msync resumed>\)\s*= 0", rest):
        print("sync range")
        continue
    m = re.match(r"pwrite64\(\d+<([^>]*disk\.img)>, .*, (\d+)\)", rest) or \
        re.match(r"pwrite64\(\d+<([^>]*disk\.img)>, .*, (\d+) <unfinished", rest)
    if m:
        print("write disk", m.group(2))
