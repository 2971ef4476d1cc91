#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap serve stopped as soon as its socket appears: SIGTERM (or
# SIGINT) while qemu-nbd is still starting must end it all the same,
# exit 0, its socket removed, no qemu-nbd left (a qemu-nbd killed by
# the SIGTERM before it handles it had served nothing).  And qemu-nbd
# loses a SIGTERM that comes after it set its handler and before its
# main loop runs: with a stand-in that loses the first, serve must ask
# again (it once waited forever).  Then a socket that exists is
# refused, and a backup while a point is served.
source ./functions.sh
set -e
set -x
source "$abs_top_srcdir/tests/repo-lib.sh"

start_disk a 8M
write_some 1 a
rbackup c1 a
snapshot a c1

for (( n = 0; n < 10; ++n )); do
    sig=TERM
    [ $((n % 2)) = 0 ] || sig=INT
    dirtybitmap serve "$repo" --socket "$PWD/s.sock" > serve.out 2> serve.err &
    spid=$!
    wait_until -i 0.005 5 [ -S s.sock ] || :
    kill -$sig $spid
    r=0
    # Bounded: one that hangs fails the test.
    wait_until -i 0.05 20 gone $spid || {
        echo "$0: serve did not end after SIG$sig"; kill -9 $spid; exit 1; }
    wait $spid || r=$?
    cat serve.out serve.err
    test $r = 0
    test ! -e s.sock
    if pgrep -f "$repo/disks/" > /dev/null; then
        echo "$0: qemu-nbd left running"
        exit 1
    fi
done

# A qemu-nbd that loses the first SIGTERM, as qemu-nbd does when it
# comes before its main loop runs (a stand-in, first on PATH, that
# exits at the second): serve asks again, and ends.
mkdir fake
cat > fake/qemu-nbd <<'EOF2'
#!/bin/sh
n=0
trap 'n=$((n + 1)); [ $n -lt 2 ] || exit 0' TERM
echo started > "$FAKE_LOG"
while :; do sleep 0.05; done
EOF2
chmod +x fake/qemu-nbd
PATH="$PWD/fake:$PATH" FAKE_LOG="$PWD/fake.log" \
    dirtybitmap serve "$repo" --socket "$PWD/s.sock" > serve.out 2> serve.err &
spid=$!
wait_until -i 0.01 10 [ -s fake.log ] || :
kill -TERM $spid
wait_until -i 0.05 20 gone $spid || {
    echo "$0: serve did not end: it did not ask qemu-nbd again"
    kill -9 $spid; exit 1; }
r=0
wait $spid || r=$?
cat serve.out serve.err
test $r = 0
test ! -e s.sock

# A socket that exists is not replaced.
: > taken.sock
tool_fails -k taken.sock "serve: --socket $PWD/taken.sock: it exists (remove it if no server listens there)" \
    serve "$repo" --socket "$PWD/taken.sock"

# While a point is served, a prune is refused (a backup is not:
# test-dirtybitmap-repo-readers.sh); the point reads as it was.
dirtybitmap serve "$repo@c1" --socket "$PWD/s.sock" > serve.out &
spid=$!
cleanup_fn kill_nbdkit $spid
wait_until 10 [ -S s.sock ]
write_some 2 a
tool_fails "$repo is in use by another dirtybitmap" \
    prune --keep-last 1 "$repo"
nbdsh -u "nbd+unix:///?socket=$PWD/s.sock" -c '
import sys
sys.stdout.buffer.write(h.pread(h.get_size(), 0))' > served
cmp a.c1 served
kill -TERM $spid
wait $spid
rbackup c2 a
