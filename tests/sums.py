#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# sums.py: the checksum files of backups (tool/sums.h), read and made
# without the tool's code: an independent check of what it writes,
# and hostile files for it to read.
#
#   sums.py check SUMS IMAGE CHECKPOINT SOURCE...
#       SUMS is a sound file (magic, version, sizes, both CRC-32Cs) for
#       a disk of IMAGE's size, at CHECKPOINT, of SOURCE, with chunks
#       of 64K (the bitmaps' default granule), and each digest is the XXH3-128
#       of that chunk of IMAGE (a raw file) as Python's xxhash computes
#       it; and so for each group of four arguments.  Its image record
#       (version 2) must be sound: a known format, and where it says
#       the target held the image, an absolute path to a file whose
#       device, inode, size and modification time are the recorded
#       ones now.  Prints what is wrong (each chunk that differs);
#       exits 1 on any problem.
#   sums.py chunk CHUNK SUMS
#       Rewrite SUMS in place as a sound file (both CRCs valid) that
#       claims chunks of CHUNK bytes: the chunk count follows, the
#       digests are the old ones, cut or padded to that count.
#   sums.py flip OFFSET FILE
#       Invert the byte at OFFSET of FILE.
# (The file comes last, for tests that append it to a command.)

import os
import struct
import sys
import time

import xxhash

HEADER = 4096
DIGEST = 16
MAGIC = b"DBMSUMS\n"

# The fields of the header: offset and struct format (little-endian).
FIELDS = {
    "version": (8, "<I"), "header_size": (12, "<I"), "disk_size": (16, "<Q"),
    "chunk": (24, "<Q"), "chunks": (32, "<Q"), "hash": (40, "<I"),
    "digests_crc": (44, "<I"), "written": (48, "<Q"), "zero": (56, "<I"),
    "header_crc": (60, "<I"),
    # The image record (version 2).
    "format": (3136, "<I"), "flags": (3140, "<I"), "dev": (3144, "<Q"),
    "ino": (3152, "<Q"), "size": (3160, "<Q"), "mtime_ns": (3168, "<q"),
}
TARGET = 3176
TARGET_MAX = 912


def crc32c(data):
    """CRC-32C (Castagnoli), reflected, as iSCSI and ext4 use it."""
    table = crc32c.table
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


crc32c.table = _table()
assert crc32c(b"123456789") == 0xE3069283


def get(buf, name):
    off, fmt = FIELDS[name]
    return struct.unpack_from(fmt, buf, off)[0]


def put(buf, name, value):
    off, fmt = FIELDS[name]
    struct.pack_into(fmt, buf, off, value)


def header_crc(buf):
    h = bytearray(buf[:HEADER])
    put(h, "header_crc", 0)
    return crc32c(bytes(h))


def string(buf, off, size):
    raw = bytes(buf[off:off + size])
    assert b"\0" in raw, "a name without its NUL"
    return raw[:raw.index(b"\0")].decode()


def check(path, image, checkpoint, source, chunk=65536):
    buf = open(path, "rb").read()
    data = open(image, "rb").read()
    problems = []

    def want(what, got, expected):
        if got != expected:
            problems.append("%s: %r, expected %r" % (what, got, expected))

    want("magic", buf[:8], MAGIC)
    if len(buf) < HEADER or buf[:8] != MAGIC:
        print("%s: not a checksum file" % path)
        return False
    n = (len(data) + chunk - 1) // chunk
    want("version", get(buf, "version"), 2)
    want("header size", get(buf, "header_size"), HEADER)
    want("disk size", get(buf, "disk_size"), len(data))
    want("chunk size", get(buf, "chunk"), chunk)
    want("chunks", get(buf, "chunks"), n)
    want("hash", get(buf, "hash"), 1)
    want("reserved field", get(buf, "zero"), 0)
    want("file size", len(buf), HEADER + n * DIGEST)
    want("header CRC", get(buf, "header_crc"), header_crc(buf))
    want("digests CRC", get(buf, "digests_crc"), crc32c(buf[HEADER:]))
    want("checkpoint", string(buf, 64, 1024), checkpoint)
    want("source", string(buf, 1088, 2048), source)
    problems += check_record(buf)
    written = get(buf, "written")
    if not time.time() - 3600 < written <= time.time() + 1:
        problems.append("written at %d, not within the last hour" % written)
    for i in range(n):
        digest = buf[HEADER + i * DIGEST:HEADER + (i + 1) * DIGEST]
        mine = xxhash.xxh3_128_digest(data[i * chunk:(i + 1) * chunk])
        if digest != mine:
            problems.append("chunk %d (offset %d): %s, xxhash says %s"
                            % (i, i * chunk, digest.hex(), mine.hex()))
    for p in problems:
        print("%s: %s" % (path, p))
    if not problems:
        print("%s: %d chunks of %d bytes, all equal to the hashes of %s"
              % (path, n, chunk, image))
    return not problems


def check_record(buf):
    """What is wrong with the image record of a set (version 2)."""
    problems = []
    target = string(buf, TARGET, TARGET_MAX)
    if get(buf, "format") not in (0, 1, 2):
        problems.append("format %d unknown" % get(buf, "format"))
    if get(buf, "flags") & ~1:
        problems.append("flags %#x unknown" % get(buf, "flags"))
    if not get(buf, "flags") & 1:
        return problems
    if not target.startswith("/"):
        return problems + ["held, but the target %r is not a path" % target]
    try:
        st = os.stat(target)
    except OSError as e:
        return problems + ["held, but the target %s: %s" % (target, e)]
    now = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    rec = tuple(get(buf, f) for f in ("dev", "ino", "size", "mtime_ns"))
    if now != rec:
        problems.append("held, but %s is %r now, recorded %r"
                        % (target, now, rec))
    return problems


def rechunk(path, chunk):
    buf = bytearray(open(path, "rb").read())
    n = (get(buf, "disk_size") + chunk - 1) // chunk
    digests = bytes(buf[HEADER:HEADER + n * DIGEST])
    digests += bytes(n * DIGEST - len(digests))
    buf = buf[:HEADER] + digests
    put(buf, "chunk", chunk)
    put(buf, "chunks", n)
    put(buf, "digests_crc", crc32c(digests))
    put(buf, "header_crc", header_crc(buf))
    open(path, "wb").write(buf)


def flip(path, offset):
    with open(path, "r+b") as fp:
        fp.seek(offset)
        b = fp.read(1)
        assert len(b) == 1, "offset %d is past the end of %s" % (offset, path)
        fp.seek(offset)
        fp.write(bytes([b[0] ^ 0xFF]))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "check":
        assert args and len(args) % 4 == 0, "check: groups of 4 arguments"
        ok = [check(*args[i:i + 4]) for i in range(0, len(args), 4)]
        sys.exit(0 if all(ok) else 1)
    elif cmd == "chunk":
        rechunk(args[1], int(args[0]))
    elif cmd == "flip":
        flip(args[1], int(args[0]))
    else:
        raise SystemExit("sums.py: unknown command " + cmd)
