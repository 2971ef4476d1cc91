#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap copy refuses what it cannot do with a clear message and
# exit status 1: bad options, a target of another size, a source
# without base:allocation, a missing or read-only target, a read-only
# source with --trim-source, a target that fails writes; --help works;
# --full creates a missing file.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires nbdkit --filter=error null --version

dirtybitmap copy --help > help
grep -F "Usage: dirtybitmap copy" help
grep -F -- "--request-size SIZE" help

# Option errors read as those of the other subcommands: getopt's
# message, then how to get help, and nothing else.
tool_fails "dirtybitmap copy: unrecognized option '--frob'" \
           copy --frob nbd://localhost t.img
tool_fails "Try 'dirtybitmap copy --help' for more information." \
           copy --frob nbd://localhost t.img
test "$(wc -l < fails.err)" -eq 2
tool_fails "dirtybitmap copy: invalid option -- 'x'" copy -x nbd://localhost t.img
test "$(wc -l < fails.err)" -eq 2
tool_fails "dirtybitmap copy: option '--requests' requires an argument" \
           copy --requests
tool_fails "Try 'dirtybitmap copy --help' for more information." \
           copy --requests
tool_fails "dirtybitmap: --output=xml: must be human or json" \
           copy --output=xml nbd://localhost t.img
tool_fails "Try 'dirtybitmap copy --help' for more information." \
           copy --output=xml nbd://localhost t.img

fails "expecting SOURCE_URI and TARGET" dirtybitmap copy nbd://localhost
fails "--requests 0: must be a number from 1 to 1024" \
      dirtybitmap copy --requests 0 nbd://localhost t.img
fails "--connections x: must be a number from 1 to 64" \
      dirtybitmap copy --connections x nbd://localhost t.img
fails "--request-size 3M: must be a power of 2 from 512 to 32M" \
      dirtybitmap copy --request-size 3M nbd://localhost t.img
fails "disk.img: SOURCE_URI must be an NBD URI" \
      dirtybitmap copy disk.img t.img
fails "source nbd+unix:///?socket=$tmpdir/none: cannot connect" \
      dirtybitmap copy "nbd+unix:///?socket=$tmpdir/none" t.img

yes | head -c 1M > disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add \
       --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\" * 1000, 70000)"'
src=(nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 --run)

# Targets of another size, a file and an NBD server.
truncate -s 2M big.img
fails "copy: target big.img is 2097152 bytes but source nbd+unix:" \
      "${src[@]}" 'dirtybitmap copy "$uri" big.img'
grep -F "is 1048576 bytes: the target must be a copy of the same disk" fails.err
sock="$tmpdir/big.sock"
start_nbdkit -P "$tmpdir/big.pid" -U "$sock" file big.img
fails "copy: target nbd+unix:///?socket=$sock is 2097152 bytes" \
      "${src[@]}" "dirtybitmap copy \"\$uri\" 'nbd+unix:///?socket=$sock'"
cmp big.img <(head -c 2M /dev/zero)

# A missing target, unless --full (which creates it).
fails "copy: target missing.img: No such file or directory" \
      "${src[@]}" 'dirtybitmap copy "$uri" missing.img'
test ! -e missing.img
"${src[@]}" 'dirtybitmap copy --full "$uri" missing.img'
cmp disk.img missing.img

# --trim-source needs a source that accepts trims: not a -r server.
fails "copy: source nbd+unix:" \
      "${src[@]}" 'dirtybitmap copy --trim-source "$uri" big.img'
grep -F "does not accept trim requests (is it served read-only?)" fails.err

# A read-only NBD target.
cp disk.img ro.img
sock="$tmpdir/ro.sock"
start_nbdkit -P "$tmpdir/ro.pid" -U "$sock" -r file ro.img
fails "copy: target nbd+unix:///?socket=$sock is read-only" \
      "${src[@]}" "dirtybitmap copy \"\$uri\" 'nbd+unix:///?socket=$sock'"

# A source without base:allocation (no structured replies, so no
# block status): its dirty ranges are unknown, so nothing is copied
# and the copy fails.
cp disk.img old.img
printf 'old' | dd of=old.img bs=1 seek=70000 conv=notrunc
cp old.img old2.img
fails "does not offer base:allocation, so its dirty ranges are unknown" \
      nbdkit -U - -r --no-sr --filter="$FILTER" file disk.img bitmap=b0 \
      --run 'dirtybitmap copy "$uri" old.img'
cmp old.img old2.img
# --full needs no extents.
nbdkit -U - -r --no-sr file disk.img \
       --run 'dirtybitmap copy --full "$uri" old.img'
cmp disk.img old.img

# A target whose writes fail: the target, the request and the error
# are named, and the copy is reported incomplete.
cp old2.img bad.img
sock="$tmpdir/bad.sock"
start_nbdkit -P "$tmpdir/bad.pid" -U "$sock" --filter=error file bad.img \
             error-pwrite=EIO error-pwrite-rate=1
fails "copy: target nbd+unix:///?socket=$sock: writing 65536 bytes at offset 65536: Input/output error" \
      "${src[@]}" "dirtybitmap copy \"\$uri\" 'nbd+unix:///?socket=$sock'"
grep -Fx "dirtybitmap: copy incomplete: 0 of 65536 dirty bytes copied" fails.err
