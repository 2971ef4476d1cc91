#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# build-initramfs.sh CACHE: make the guest of test-dirtybitmap-vm.sh
# from what Debian installed: CACHE/vmlinuz (linux-image-amd64),
# CACHE/initramfs.cpio with a static busybox (busybox-static), the
# kernel modules for virtio disks, virtio-serial and ext4 (loaded by
# /init in the order modules.dep gives), Debian's qemu-ga
# (qemu-guest-agent) with the shared libraries it links, and this
# directory's init and writer.sh.  A CACHE already made from the same
# inputs is kept.  Exits 77, saying what is missing, if a package is
# not installed.
set -e

cache=${1:?usage: build-initramfs.sh CACHE}
here=$(cd "$(dirname "$0")" && pwd)

skip () { echo "$0: $*: skipping the test" >&2; exit 77; }

busybox=/bin/busybox
[ -x $busybox ] && $busybox --list 2>/dev/null | grep -qx insmod ||
    skip "no $busybox (package busybox-static)"
# A dynamically linked busybox (package busybox) cannot run alone.
if ldd $busybox >/dev/null 2>&1; then
    skip "$busybox is not static (package busybox-static)"
fi
qga=/usr/sbin/qemu-ga
[ -x $qga ] || skip "no $qga (package qemu-guest-agent)"

# The newest kernel that has both its image and its modules.
kver=
for k in $(ls /lib/modules 2>/dev/null | sort -V); do
    [ -r /boot/vmlinuz-$k ] && [ -r /lib/modules/$k/modules.dep ] && kver=$k
done
[ -n "$kver" ] || skip "no /boot/vmlinuz-* with /lib/modules (package linux-image-amd64)"
mods=/lib/modules/$kver

# What the cache was made from: the same inputs, the same cache.
key=$( { echo "$kver"; cksum /boot/vmlinuz-$kver $busybox $qga \
         "$here/init" "$here/writer.sh" "$0" | cut -d' ' -f1,2; } | cksum)
if [ -f "$cache/key" ] && [ "$(cat "$cache/key")" = "$key" ] &&
   [ -f "$cache/initramfs.cpio" ] && [ -f "$cache/vmlinuz" ]; then
    exit 0
fi

rm -rf "$cache"
mkdir -p "$cache"
root=$cache/root
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,run,tmp,mnt,etc,var}
mkdir -p "$root/lib/modules"
ln -s ../run "$root/var/run"

# busybox and its applets as symlinks.
cp $busybox "$root/bin/busybox"
for a in $($busybox --list-full); do
    [ -e "$root/$a" ] || ln -s /bin/busybox "$root/$a"
done

# The modules, each after those it needs (modules.dep lists them all,
# transitively; a depth-first walk puts each one after its own).
# crc32c_generic is no one's dependency but ext4 asks the crypto API
# for crc32c (metadata_csum, journal checksums).
declare -A dep_of seen
while IFS=: read -r m d; do
    dep_of[$m]=$d
    b=${m##*/}; b=${b%%.ko*}
    dep_of[name:${b//-/_}]=$m
done < $mods/modules.dep
order=()
visit ()
{
    local m=$1 d
    [ -z "${seen[$m]}" ] || return 0
    seen[$m]=1
    for d in ${dep_of[$m]}; do visit "$d"; done
    order+=("$m")
}
for n in virtio_pci virtio_blk virtio_console crc32c_generic ext4; do
    m=${dep_of[name:$n]}
    [ -n "$m" ] || skip "no module $n in $mods (package linux-image-amd64)"
    visit "$m"
done
: > "$root/etc/modules"
for m in "${order[@]}"; do
    b=${m##*/}
    case $b in
        *.ko) cp "$mods/$m" "$root/lib/modules/$b" ;;
        *.ko.xz) b=${b%.xz}; xz -dc "$mods/$m" > "$root/lib/modules/$b" ;;
        *.ko.zst) b=${b%.zst}; zstd -qdc "$mods/$m" > "$root/lib/modules/$b" ;;
        *.ko.gz) b=${b%.gz}; gzip -dc "$mods/$m" > "$root/lib/modules/$b" ;;
        *) echo "$0: $m: unknown module format" >&2; exit 1 ;;
    esac
    echo "$b" >> "$root/etc/modules"
done

# qemu-ga and every library ldd names, at the same paths.
cp $qga "$root/usr/sbin/qemu-ga"
for lib in $(ldd $qga | grep -o '/[^ ]*'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done

cp "$here/init" "$root/init"
cp "$here/writer.sh" "$root/bin/writer.sh"
chmod 755 "$root/init" "$root/bin/writer.sh"

cp /boot/vmlinuz-$kver "$cache/vmlinuz"
(cd "$root" && find . | $busybox cpio -o -H newc) > "$cache/initramfs.cpio" 2>/dev/null
rm -rf "$root"
echo "$key" > "$cache/key"
echo "$0: made $cache from kernel $kver, ${#order[@]} modules"
