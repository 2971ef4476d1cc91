#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# hostile-nbd.py: a small NBD server that misbehaves on purpose, for
# the tests of dirtybitmap copy.  Standard library only.
#
#   hostile-nbd.py --socket PATH --pidfile PATH --size BYTES --mode MODE
#
# It speaks the fixed newstyle handshake, accepts structured replies
# (NBD_OPT_STRUCTURED_REPLY), answers NBD_OPT_SET_META_CONTEXT with no
# context (so the client learns no extents), and serves a read-only
# disk whose byte at offset N is b"0123456789abcdef"[N % 16]: never a
# zero byte, so a zero in a copy is a byte the server did not send.
# One client at a time.  MODE:
#
#   short-read  every read is answered with structured reply chunks
#               that cover only the first half of the range asked for,
#               and the reply ends (NBD_REPLY_FLAG_DONE) as if it were
#               complete;
#   keep-open   reads are answered correctly, but after NBD_CMD_DISC
#               the server keeps its side of the connection open
#               instead of closing it, until --timeout.
#
# It exits after --timeout seconds (default 60) whatever happens, so a
# test that goes wrong cannot leave it behind for long.

import argparse
import os
import signal
import socket
import struct
import sys

NBDMAGIC = 0x4e42444d41474943
IHAVEOPT = 0x49484156454f5054
REPLY_MAGIC = 0x3e889045565a9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698
STRUCTURED_REPLY_MAGIC = 0x668e33ef

FLAG_FIXED_NEWSTYLE = 1
FLAG_NO_ZEROES = 2

OPT_EXPORT_NAME = 1
OPT_ABORT = 2
OPT_GO = 7
OPT_STRUCTURED_REPLY = 8
OPT_SET_META_CONTEXT = 10

REP_ACK = 1
REP_INFO = 3
REP_ERR_UNSUP = (1 << 31) + 1
INFO_EXPORT = 0

# Transmission flags: HAS_FLAGS, READ_ONLY.
TFLAGS = 1 | 2

CMD_READ = 0
CMD_DISC = 2

REPLY_FLAG_DONE = 1
REPLY_TYPE_OFFSET_DATA = 1

EINVAL = 22


def data(offset, length):
    pattern = b"0123456789abcdef"
    start = offset % 16
    reps = (start + length) // 16 + 1
    return (pattern * reps)[start:start + length]


def recv_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def opt_reply(conn, opt, rtype, payload=b""):
    conn.sendall(struct.pack(">QIII", REPLY_MAGIC, opt, rtype,
                             len(payload)) + payload)


def handshake(conn, size):
    """Return whether structured replies were negotiated, or None if
    the client went away."""
    conn.sendall(struct.pack(">QQH", NBDMAGIC, IHAVEOPT,
                             FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES))
    (cflags,) = struct.unpack(">I", recv_exact(conn, 4))
    structured = False
    while True:
        magic, opt, length = struct.unpack(">QII", recv_exact(conn, 16))
        if magic != IHAVEOPT:
            return None
        payload = recv_exact(conn, length)
        if opt == OPT_STRUCTURED_REPLY:
            structured = True
            opt_reply(conn, opt, REP_ACK)
        elif opt == OPT_SET_META_CONTEXT:
            opt_reply(conn, opt, REP_ACK)        # no context
        elif opt == OPT_GO:
            opt_reply(conn, opt, REP_INFO,
                      struct.pack(">HQH", INFO_EXPORT, size, TFLAGS))
            opt_reply(conn, opt, REP_ACK)
            return structured
        elif opt == OPT_EXPORT_NAME:
            conn.sendall(struct.pack(">QH", size, TFLAGS))
            if not cflags & FLAG_NO_ZEROES:
                conn.sendall(b"\0" * 124)
            return structured
        elif opt == OPT_ABORT:
            return None
        else:
            opt_reply(conn, opt, REP_ERR_UNSUP)


def serve(conn, size, mode):
    structured = handshake(conn, size)
    if structured is None:
        return
    while True:
        magic, flags, ctype, cookie, offset, length = \
            struct.unpack(">IHHQQI", recv_exact(conn, 28))
        if magic != REQUEST_MAGIC:
            return
        if ctype == CMD_DISC:
            if mode == "keep-open":
                # Never close: not even when the client shuts down its
                # side of the connection (libnbd does after the
                # disconnect request), until --timeout.
                while True:
                    signal.pause()
            return
        if ctype != CMD_READ or offset + length > size:
            conn.sendall(struct.pack(">IIQ", SIMPLE_REPLY_MAGIC, EINVAL,
                                     cookie))
            continue
        if structured:
            # One data chunk: all of the range, or half of it.
            n = length // 2 if mode == "short-read" else length
            chunk = struct.pack(">Q", offset) + data(offset, n)
            conn.sendall(struct.pack(">IHHQI", STRUCTURED_REPLY_MAGIC,
                                     REPLY_FLAG_DONE,
                                     REPLY_TYPE_OFFSET_DATA, cookie,
                                     len(chunk)) + chunk)
        else:
            conn.sendall(struct.pack(">IIQ", SIMPLE_REPLY_MAGIC, 0, cookie)
                         + data(offset, length))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--pidfile", required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--mode", choices=["short-read", "keep-open"],
                   required=True)
    p.add_argument("--timeout", type=int, default=60)
    args = p.parse_args()

    signal.alarm(args.timeout)
    try:
        os.unlink(args.socket)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(args.socket)
    sock.listen(4)
    with open(args.pidfile + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(args.pidfile + ".tmp", args.pidfile)
    while True:
        conn, _ = sock.accept()
        try:
            serve(conn, args.size, args.mode)
        except (EOFError, ConnectionError):
            pass
        finally:
            conn.close()


if __name__ == "__main__":
    sys.exit(main())
