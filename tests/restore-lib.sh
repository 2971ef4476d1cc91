# SPDX-License-Identifier: BSD-3-Clause
# restore-lib.sh: what the restore tests share (sourced after
# functions.sh): the source served by qemu-nbd, the pause points
# waited for and released from the shell, and restore.py.
requires qemu-nbd --version
requires nbdcopy --version

restore_py="$abs_top_srcdir/tests/restore.py"

# serve_source IMAGE: serve IMAGE read-only at $PWD/src.sock, stopped
# at exit; sets $src to its URI.
serve_source ()
{
    qemu-nbd -r -f raw -t -k "$PWD/src.sock" --fork \
             --pid-file="$PWD/src.pid" "$1"
    cleanup_fn stop_source
    src="nbd+unix:///?socket=$PWD/src.sock"
}

stop_source ()
{
    [ -s "$PWD/src.pid" ] || return 0
    kill "$(cat "$PWD/src.pid")" 2>/dev/null || true
    rm -f "$PWD/src.pid"
}

# reached POINT / release POINT: a pause point (testpause.h) armed by
# start_nbdkit_paused: wait until a thread is there, let it go.
reached ()
{
    timeout 30 cat "$1.reached" > /dev/null
}

release ()
{
    timeout 30 sh -c ": > '$1.release'"
}
