# SPDX-License-Identifier: BSD-3-Clause
# identity-lib.sh: what the tests of writes made without the filter
# share (sourced after functions.sh).  The disk is disk.img, 8M, its
# bitmaps in disk.img.bitmaps, granules of 64K.

truncate -s 8M disk.img

# outside G: write granule G of the stopped disk with another program.
outside ()
{
    printf x | dd of=disk.img bs=1 seek=$(( $1 * 65536 )) conv=notrunc \
                  status=none
}

# through G: write granule G through the filter (extra args: bitmap=...).
through ()
{
    local g=$1; shift
    nbdkit -U - --filter="$FILTER" file disk.img "$@" \
           --run "nbdsh -u \"\$uri\" -c 'h.pwrite(b\"w\" * 512, $g * 65536)'"
}

# idle: a run in which a client connects and only reads.
idle ()
{
    nbdkit -U - --filter="$FILTER" file disk.img "$@" \
           --run 'nbdsh -u "$uri" -c "h.pread(512, 0)"'
}

# found BITMAP: a writable start finds the write made without the
# filter, refuses to serve from BITMAP, and records it inconsistent.
found ()
{
    if nbdkit -U - --filter="$FILTER" file disk.img bitmap="$1" --run true \
              2> found.err; then
        cat found.err
        echo "$0: bitmap $1 served after a write made without the filter"
        exit 1
    fi
    cat found.err
    grep -F "dirtybitmap: $PWD/disk.img was written without the filter" \
         found.err
    grep -F "every enabled bitmap is now inconsistent: take a full backup" \
         found.err
    dirtybitmap info disk.img.bitmaps > found.info
    grep -A4 "name: $1\$" found.info | grep -F "consistent: false"
}

# trusted BITMAP: a start serves from BITMAP without a word of it.
trusted ()
{
    nbdkit -U - --filter="$FILTER" file disk.img bitmap="$1" --run true \
           2> trusted.err
    cat trusted.err
    if grep -F "without the filter" trusted.err; then
        echo "$0: a false alarm"; exit 1
    fi
    dirtybitmap info disk.img.bitmaps > trusted.info
    grep -A4 "name: $1\$" trusted.info | grep -F "consistent: true"
}
