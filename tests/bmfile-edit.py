#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# bmfile-edit.py: read and change fields of a bitmap file, for tests
# that need hostile or unusual files.  The layout is the one of
# nbdkit-dirtybitmap-filter(1), FILE FORMAT (lib/bmfile.c H_* and E_*).
#
#   bmfile-edit.py FILE current
#       the number (0 or 1) of the current header slot
#   bmfile-edit.py FILE get FIELD
#       a field of the current header
#   bmfile-edit.py FILE set FIELD VALUE [SLOT]
#       set a field of the current header (or of SLOT) and fix its CRC
#   bmfile-edit.py FILE set-raw FIELD VALUE [SLOT]
#       the same, leaving the CRC as it was
#   bmfile-edit.py FILE entry I FIELD VALUE
#       set a field of directory entry I (or its name, keeping its
#       length), fix the directory CRC in the current header and the
#       header's CRC
#   bmfile-edit.py FILE entry-raw I FIELD VALUE
#       the same, leaving both CRCs as they were
#   bmfile-edit.py FILE entry-get I FIELD
#       a field of directory entry I
#   bmfile-edit.py FILE word I N VALUE
#       set 64 bit word N of the data of bitmap I
#   bmfile-edit.py FILE data-from SNAPSHOT
#       put the data of every bitmap of the current header back as it
#       is in SNAPSHOT, a copy of FILE taken when those bits were
#       synced: what a power loss leaves of bits that only the page
#       cache held (the headers, directory and shadows stay as they are)
#
# Numbers may be given in hex (0x...).  Strings (magic, boot_id, name)
# are given as text.
import struct
import sys

HEADER = {                      # name: (offset, struct format)
    "magic": (0, "8s"), "version": (8, "<I"), "length": (12, "<I"),
    "seq": (16, "<Q"), "disk_size": (24, "<Q"), "flags": (32, "<I"),
    "open_mode": (36, "<I"), "dir_offset": (40, "<Q"),
    "dir_length": (48, "<I"), "nr_bitmaps": (52, "<I"),
    "dir_crc": (56, "<I"), "incompat": (60, "<I"),
    "file_length": (64, "<Q"), "open_pid": (72, "<Q"),
    "boot_id": (80, "40s"), "compat": (120, "<I"),
    "restore_offset": (192, "<Q"), "restore_length": (200, "<Q"),
    "restore_gbits": (208, "<I"), "restore_source_length": (212, "<I"),
    "restore_crc": (216, "<I"), "crc": (252, "<I"),
}
ENTRY = {
    "data_offset": (0, "<Q"), "data_length": (8, "<Q"), "gbits": (16, "<I"),
    "flags": (20, "<I"), "name_length": (24, "<H"),
}
SLOT = 4096

def crc32c(data):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF

def get(buf, base, fields, name):
    off, fmt = fields[name]
    return struct.unpack_from(fmt, buf, base + off)[0]

def put(buf, base, fields, name, value):
    off, fmt = fields[name]
    if fmt.endswith("s"):
        value = value.encode()
    else:
        value = int(value, 0)
    struct.pack_into(fmt, buf, base + off, value)

def slot_ok(buf, s):
    base = s * SLOT
    return (len(buf) >= base + 256 and buf[base:base + 8] == b"DIRTYBMP"
            and get(buf, base, HEADER, "crc") == crc32c(buf[base:base + 252]))

def current(buf):
    ok = [slot_ok(buf, s) for s in (0, 1)]
    if ok[0] and (not ok[1] or get(buf, 0, HEADER, "seq") >=
                  get(buf, SLOT, HEADER, "seq")):
        return 0
    if ok[1]:
        return 1
    sys.exit("bmfile-edit.py: no valid header slot")

def fix_header_crc(buf, s):
    base = s * SLOT
    struct.pack_into("<I", buf, base + 252, crc32c(buf[base:base + 252]))

def entries(buf, s):
    """Offsets of the directory entries of slot s."""
    base = s * SLOT
    off = get(buf, base, HEADER, "dir_offset")
    out = []
    for _ in range(get(buf, base, HEADER, "nr_bitmaps")):
        out.append(off)
        n = struct.unpack_from("<H", buf, off + 24)[0]
        off += 32 + (n + 7) // 8 * 8
    return out

def main():
    path, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    buf = bytearray(open(path, "rb").read())
    s = current(buf)
    if cmd == "current":
        print(s)
        return
    if cmd == "get":
        v = get(buf, s * SLOT, HEADER, args[0])
        print(v.rstrip(b"\0").decode() if isinstance(v, bytes) else v)
        return
    if cmd == "entry-get":
        e = entries(buf, s)[int(args[0])]
        print(get(buf, e, ENTRY, args[1]))
        return
    if cmd in ("set", "set-raw"):
        slot = int(args[2]) if len(args) > 2 else s
        put(buf, slot * SLOT, HEADER, args[0], args[1])
        if cmd == "set":
            fix_header_crc(buf, slot)
    elif cmd in ("entry", "entry-raw"):
        e = entries(buf, s)[int(args[0])]
        if args[1] == "name":       # the same length as before
            n = struct.unpack_from("<H", buf, e + 24)[0]
            assert len(args[2].encode()) == n, "name: not the same length"
            buf[e + 32:e + 32 + n] = args[2].encode()
        else:
            put(buf, e, ENTRY, args[1], args[2])
        if cmd == "entry":
            base = s * SLOT
            d = get(buf, base, HEADER, "dir_offset")
            n = get(buf, base, HEADER, "dir_length")
            struct.pack_into("<I", buf, base + 56, crc32c(buf[d:d + n]))
            fix_header_crc(buf, s)
    elif cmd == "word":
        e = entries(buf, s)[int(args[0])]
        d = get(buf, e, ENTRY, "data_offset")
        struct.pack_into("<Q", buf, d + 8 * int(args[1]), int(args[2], 0))
    elif cmd == "data-from":
        old = open(args[0], "rb").read()
        for e in entries(buf, s):
            d = get(buf, e, ENTRY, "data_offset")
            n = get(buf, e, ENTRY, "data_length")
            assert d + n <= len(old), "data-from: the snapshot is too short"
            buf[d:d + n] = old[d:d + n]
    else:
        sys.exit("bmfile-edit.py: unknown command " + cmd)
    with open(path, "r+b") as f:
        f.write(buf)

main()
