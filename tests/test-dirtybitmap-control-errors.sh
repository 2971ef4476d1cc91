#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Requests that are wrong in any part get an error reply of exactly the
# shape {"error": {"class": CLASS, "desc": TEXT}} (with the request's
# "id", when it had one) and change nothing: neither what query says
# nor a byte of the bitmap file.  The connection stays usable.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

size=$((1024 * 1024))
truncate -s $size disk.img
dirtybitmap bitmap --add -g 4K --size $size disk.img.bitmaps b0
dirtybitmap bitmap --add --disable disk.img.bitmaps b1
ctl="$PWD/ctl.sock"
start_nbdkit -P "$PWD/pid" -U "$PWD/nbd.sock" --filter="$FILTER" \
             file disk.img control="$ctl"

cat > errors.py <<'EOF2'
import hashlib, json, socket, sys
ctl = sys.argv[1]
G = "GenericError"
long = "n" * 1024
add = '{"action": "add", "bitmap": "new"}'
# (request line, class, text the desc must contain)
cases = [
    (b'{"execute": "query"', G, "invalid JSON: unexpected end of line"),
    (b'garbage', G, "invalid JSON"),
    (b'', G, "invalid JSON"),
    (b'{"execute": "query"} x', G, "invalid JSON"),
    (b'{"execute": "query",}', G, "invalid JSON"),
    (b'{"execute": "qu\xffery"}', G, "invalid JSON"),
    (b"{'execute': 'query'}", G, "invalid JSON"),
    # Not UTF-8 (overlong forms, a surrogate, beyond U+10FFFF), though
    # json-c lets them through: refused, and never echoed.
    (b'{"execute": "query", "id": "\xf0\x8f\x98\x80"}', G,
     "invalid JSON: invalid utf-8 string"),
    (b'{"execute": "query", "id": "\xc0\xaf"}', G,
     "invalid JSON: invalid utf-8 string"),
    (b'{"execute": "query", "id": ["\xe0\x80\xaf"]}', G,
     "invalid JSON: invalid utf-8 string"),
    (b'{"execute": "query", "id": "\xed\xa0\x80"}', G,
     "invalid JSON: invalid utf-8 string"),
    (b'{"execute": "transaction", "arguments": {"actions": '
     b'[{"action": "add", "bitmap": "\xf4\x90\x80\x80"}]}}', G,
     "invalid JSON: invalid utf-8 string"),
    (b'[{"execute": "query"}]', G, "a request must be a JSON object"),
    (b'"query"', G, "a request must be a JSON object"),
    (b'{"execute": "nope"}', "CommandNotFound",
     "the command 'nope' has not been found"),
    (b'{"arguments": {}}', G, "argument 'execute' is missing"),
    (b'{"execute": 5}', G, "argument 'execute' must be a string"),
    (b'{"execute": "query", "foo": 1}', G, "unknown argument 'foo'"),
    (b'{"execute": "query", "arguments": []}', G,
     "'arguments' must be an object"),
    (b'{"execute": "query", "arguments": {"x": 1}}', G,
     "query: unknown argument 'x'"),
    (b'{"execute": "resume"}', G, "not paused"),
    (b'{"execute": "select", "arguments": {}}', G,
     "select: argument 'bitmap' is missing"),
    (b'{"execute": "select", "arguments": {"bitmap": 5}}', G,
     "select: argument 'bitmap' must be a string"),
    (b'{"execute": "select", "arguments": {"bitmap": "zz"}}', G,
     "bitmap zz not found"),
    (b'{"execute": "transaction"}', G,
     "transaction: argument 'actions' is missing"),
    (b'{"execute": "transaction", "arguments": {"actions": {}}}', G,
     "transaction: argument 'actions' must be an array"),
    (b'{"execute": "transaction", "arguments": {"actions": [5]}}', G,
     "transaction: action 0: must be an object"),
    (b'{"execute": "transaction", "arguments": {"actions": '
     b'[{"bitmap": "b0"}]}}', G,
     "transaction: action 0: argument 'action' is missing"),
    (b'{"execute": "transaction", "arguments": {"actions": '
     b'[{"action": "frob", "bitmap": "b0"}]}}', G,
     "transaction: action 0: unknown action 'frob'"),
    (b'{"execute": "transaction", "arguments": {"actions": '
     b'[{"action": "add"}]}}', G,
     "transaction: action 0: argument 'bitmap' is missing"),
    (b'{"execute": "transaction", "arguments": {"actions": '
     b'[{"action": "add", "bitmap": 7}]}}', G,
     "transaction: action 0: argument 'bitmap' must be a string"),
    (b'{"execute": "transaction", "arguments": {"actions": '
     b'[{"action": "add", "bitmap": "a\\u0000b"}]}}', G,
     "contains a NUL character"),
    (('{"execute": "transaction", "arguments": {"actions": '
      '[{"action": "add", "bitmap": "%s"}]}}' % long).encode(), G,
     'action add failed: the bitmap name "%s" must be 1 to 1023 bytes' %
     long),
    (b'{"execute": "transaction", "arguments": {"actions": '
     b'[{"action": "merge", "bitmap": "b0", "source": ""}]}}', G,
     "action merge: on bitmap b0 failed: bitmap  not found"),
    (b'{"execute": "transaction", "arguments": {"actions": '
     b'[{"action": "add", "bitmap": "b5", "source": "b0"}]}}', G,
     "transaction: action 0: unknown argument 'source'"),
    (b'{"execute": "transaction", "arguments": {"actions": '
     b'[{"action": "clear", "bitmap": "b0", "granularity": 4096}]}}', G,
     "transaction: action 0: unknown argument 'granularity'"),
    (b'{"execute": "transaction", "arguments": {"actions": '
     b'[{"action": "merge", "bitmap": "b0"}]}}', G,
     "transaction: action 0: argument 'source' is missing"),
    (b'{"execute": "transaction", "arguments": {"actions": '
     b'[{"action": "merge", "bitmap": "b0", "source": "b1", "file": 3}]}}',
     G, "transaction: action 0: argument 'file' must be a string"),
] + [
    (('{"execute": "transaction", "arguments": {"actions": '
      '[{"action": "add", "bitmap": "g", "granularity": %s}]}}' % g).encode(),
     G, "transaction: action 0: argument 'granularity' must be a power "
        "of 2 from 512 to 2G (in bytes)")
    for g in ['"4K"', '1000', '256', '4096.0', '-4096', '4294967296', 'true']
] + [
    # One bad action among good ones: nothing is done.
    (('{"execute": "transaction", "arguments": {"actions": [%s, '
      '{"action": "add", "bitmap": "b0"}]}}' % add).encode(), G,
     "action add on bitmap b0 failed: bitmap b0 already exists"),
    (('{"execute": "transaction", "arguments": {"actions": [%s, '
      '{"action": "disable", "bitmap": "b0"}, '
      '{"action": "enable", "bitmap": "nosuch"}]}}' % add).encode(), G,
     "action enable on bitmap nosuch failed: bitmap nosuch not found"),
    (('{"execute": "transaction", "arguments": {"actions": [%s, '
      '{"action": "merge", "bitmap": "new", "source": "b0", '
      '"file": "/nonexistent.bitmaps"}]}}' % add).encode(), G,
     "/nonexistent.bitmaps"),
    (('{"execute": "transaction", "arguments": {"actions": [%s, '
      '{"action": "remove", "bitmap": "b1"}, '
      '{"action": "frob", "bitmap": "b0"}]}}' % add).encode(), G,
     "transaction: action 2: unknown action 'frob'"),
    (('{"execute": "transaction", "arguments": {"actions": [%s]}}' %
      ", ".join(['{"action": "enable", "bitmap": "b0"}'] * 1025)).encode(),
     G, "transaction: 1025 actions (the limit is 1024)"),
]
ids = [None, '7', '"x"', '{"a": [1, "b"]}', '[null]', '-1.5', 'null']

s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(ctl)
f = s.makefile("rb")

def call(line):
    s.sendall(line + b"\n")
    r = f.readline()
    assert r.endswith(b"\n"), r
    return json.loads(r.decode("utf-8", "strict"))

def state():
    q = call(b'{"execute": "query"}')
    return q, hashlib.md5(open("disk.img.bitmaps", "rb").read()).hexdigest()

before = state()
bad = 0
for i, (line, cls, text) in enumerate(cases):
    rid = ids[i % len(ids)]
    # An id in every request that is JSON (it cannot be echoed from
    # text that does not parse).
    try:
        json.loads(line.decode("utf-8", "strict"))
    except ValueError:          # UnicodeDecodeError is one
        rid = None
    if rid is not None and line.startswith(b'{"execute"'):
        line = b'{"id": ' + rid.encode() + b", " + line[1:]
    else:
        rid = None
    r = call(line)
    want_keys = {"error"} | ({"id"} if rid is not None else set())
    ok = (set(r) == want_keys and isinstance(r["error"], dict) and
          set(r["error"]) == {"class", "desc"} and
          r["error"]["class"] == cls and isinstance(r["error"]["desc"], str)
          and text in r["error"]["desc"] and
          (rid is None or r["id"] == json.loads(rid)))
    after = state()
    print("%s %r -> %s" % ("ok  " if ok else "FAIL", line[:120], r))
    if not ok or after != before:
        if after != before:
            print("     ... and it changed the state: %r" % (after,))
        bad += 1
print("%d error cases, %d wrong" % (len(cases), bad))
sys.exit(1 if bad else 0)
EOF2
python3 errors.py "$ctl"

# After all that, the same connection and a new one still work.
python3 "$abs_top_srcdir/tests/control.py" ok "$ctl" \
        '{"execute": "transaction", "id": 1, "arguments": {"actions": [{"action": "add", "bitmap": "b2"}]}}' 1
# An id of null is an id too: echoed.
python3 "$abs_top_srcdir/tests/control.py" ok "$ctl" \
        '{"execute": "transaction", "id": null, "arguments": {"actions": []}}' null
python3 "$abs_top_srcdir/tests/control.py" query "$ctl" > query
grep -F '"name": "b2"' query
