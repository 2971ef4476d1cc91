#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Paths in control requests are the server's, which runs in "/": a
# relative merge file or scratch directory is refused, naming the
# argument, and nothing changes.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter

truncate -s 1M disk.img
dirtybitmap bitmap --add --size 1M other.bitmaps o
start_nbdkit -P "$PWD/pid" -U "$PWD/sock" --filter="$FILTER" \
             file disk.img bitmap=b0 action=add control="$PWD/ctl"
nbdinfo --size "nbd+unix:///?socket=$PWD/sock"
send () {
    python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect("ctl")
f = s.makefile("rw"); f.write(sys.argv[1] + "\n"); f.flush()
print(f.readline().strip())' "$1"
}
send '{"execute": "transaction", "arguments": {"actions": [{"action": "merge", "bitmap": "b0", "source": "o", "file": "other.bitmaps"}]}}' > r1
cat r1
grep -Fx '{"error":{"class":"GenericError","desc":"transaction: action 0: argument '"'"'file'"'"' must be an absolute path"}}' r1
send '{"execute": "backup-begin", "arguments": {"name": "v", "scratch": "tmp"}}' > r2
cat r2
grep -Fx '{"error":{"class":"GenericError","desc":"backup-begin: argument '"'"'scratch'"'"' must be an absolute path"}}' r2
send '{"execute": "query"}' > q
grep -F '"backup":null' q
send "{\"execute\": \"transaction\", \"arguments\": {\"actions\": [{\"action\": \"merge\", \"bitmap\": \"b0\", \"source\": \"o\", \"file\": \"$PWD/other.bitmaps\"}]}}" > r3
grep -Fx '{"return":{}}' r3
