#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dirtybitmap copy --full to a file that does not exist: the file gets
# the mode a new file gets (0644 less the umask) and appears only once
# the copy is complete.  A copy killed with kill -9 leaves no TARGET
# (so a later incremental copy fails instead of "completing" a backup
# that was never whole), a file created at TARGET during the copy is
# not replaced, and a dangling symbolic link is refused.
source ./functions.sh
set -e
set -x
requires_dirtybitmap_filter
requires nbdkit --filter=delay null --version

size=$((8 * 1024 * 1024))
yes | head -c $size > disk.img
nbdkit -U - --filter="$FILTER" file disk.img bitmap=b0 action=add --run true

# Modes, under two umasks (set in --run: nbdkit sets its own).
for m in 022:644 077:600; do
    rm -f new.img
    nbdkit -U - -r --filter="$FILTER" file disk.img bitmap=b0 \
           --run "umask ${m%:*}; dirtybitmap copy --full \"\$uri\" new.img"
    cmp disk.img new.img
    test "$(stat -c %a new.img)" = "${m#*:}"
done

# A slow source: reads of 64K take 100ms each, eight in flight, so a
# copy takes at least 1.6 seconds.  start_slow NAME starts one and sets
# uri.  (nbdkit 1.32.5 itself can abort when a client vanishes while
# requests sleep in the delay filter, so the kill -9 below gets a
# server of its own.)
start_slow ()
{
    local sock="$tmpdir/$1.sock"
    start_nbdkit -P "$tmpdir/$1.pid" -U "$sock" -r \
                 --filter="$FILTER" --filter=delay file disk.img \
                 bitmap=b0 rdelay=100ms
    uri="nbd+unix:///?socket=$sock"
}
slow=(dirtybitmap copy --full --connections 1 --requests 8
      --request-size 64K)

# kill -9 in the middle: backup.img does not exist (while copying,
# only its temporary file does) and never will.
start_slow killed
"${slow[@]}" "$uri" backup.img > out 2> err &
copy=$!
sleep 1
test ! -e backup.img
ls backup.img.tmp-*
kill -9 $copy
wait $copy || true
test ! -e backup.img
rm -f backup.img.tmp-*
kill_nbdkit "$(cat killed.pid)"
# So the next incremental copy fails rather than succeeding on nothing.
start_slow src
tool_fails "dirtybitmap: copy: target backup.img: No such file or directory" \
           copy "$uri" backup.img

# A file created at TARGET while the copy runs is left alone, and the
# copy fails.
"${slow[@]}" "$uri" raced.img > out 2> err &
copy=$!
sleep 0.5
echo mine > raced.img
r=0
wait $copy || r=$?
cat out err
test $r -eq 1
grep -F "dirtybitmap: copy: target raced.img: cannot rename raced.img.tmp-" err
grep -F "(it was created during the copy)" err
test "$(cat raced.img)" = mine
if ls -a | grep -F raced.img.tmp-; then
    echo "$0: the temporary file was left behind"
    exit 1
fi

# A dangling symbolic link is not a missing file.
ln -s nowhere.img link.img
tool_fails "dirtybitmap: copy: target link.img: a symbolic link to a missing file" \
           copy --full "$uri" link.img
test ! -e nowhere.img
