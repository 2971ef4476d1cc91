#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check-deb.sh /ABS/PATH/nbdkit-dirtybitmap_VERSION_ARCH.deb (make
# check-deb, which builds it first): install the package on this
# machine, use what it installed as a user would, and purge it.
#
#   - it depends on the nbdkit it was built for, that version only;
#   - nbdkit finds the filter by its name (--filter=dirtybitmap) and
#     serves a disk through it; the installed dirtybitmap reads the
#     bitmaps; both man pages are there;
#   - the generator reads /etc/dirtybitmap/NAME.conf, and
#     systemd-analyze verify finds nothing to say about the installed
#     unit with its drop-in;
#   - bash-completion loads the completion on first use of the name;
#   - where systemd-nspawn can boot this machine's /usr in a container
#     (check-deb-systemd.sh), a real systemd starts, restarts and
#     stops nbdkit-dirtybitmap@NAME.service;
#   - a purge leaves none of its files, and nbdkit no filter by that
#     name.
#
# Root only; it refuses to run if the package or a filter of that name
# is installed already (make install), rather than replace it.
source ./functions.sh
set -e
set -x

deb="$1"
pkg=nbdkit-dirtybitmap
case "$deb" in
    /*.deb) test -f "$deb" ;;
    *) echo "usage: check-deb.sh /ABS/PATH/$pkg.deb"; exit 1 ;;
esac
if [ "$(id -u)" -ne 0 ]; then
    echo "$0: installs a package: run it as root"
    exit 1
fi

# What is installed, not what was built.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
unset FILTER DIRTYBITMAP
filterdir="$(nbdkit --dump-config | sed -n 's/^filterdir=//p')"

installed ()
{
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null)" = installed ]
}
if installed; then
    echo "$0: $pkg is installed already: apt-get purge $pkg first"
    exit 1
fi
if [ -e "$filterdir/nbdkit-dirtybitmap-filter.so" ] ||
   [ -e /usr/local/bin/dirtybitmap ]; then
    echo "$0: a dirtybitmap filter or tool is installed (make install?):" \
         "make uninstall first"
    exit 1
fi
if nbdkit --filter=dirtybitmap null --version; then
    echo "$0: nbdkit finds a dirtybitmap filter before the install"
    exit 1
fi

# Whatever happens, the machine is left without the package.
purge_if_installed ()
{
    rm -f /etc/dirtybitmap/check-deb-$$.conf
    if installed; then apt-get purge -y -q "$pkg"; fi
}
cleanup_fn purge_if_installed

apt-get install -y -q --no-install-recommends "$deb"
installed
dpkg -L "$pkg" > files

# It depends on the upstream version of nbdkit it was built for, and
# no other.
v="$(nbdkit --version | awk '{ print $2 }')"
next="$(echo "$v" | awk -F. '{ $NF = $NF + 1; print }' OFS=.)"
dpkg-query -W -f='${Depends}\n' "$pkg" | tee depends
grep -F "nbdkit (>= $v), nbdkit (<< $next~)" depends

# nbdkit loads the filter by its name, and serves a disk through it.
nbdkit --filter=dirtybitmap null --version | tee versions
grep -Fx "dirtybitmap $v" versions
truncate -s 1M disk.img
nbdkit -U - --filter=dirtybitmap file disk.img bitmap=b0 action=add \
    --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\" * 4096, 65536)"'
[ "$(command -v dirtybitmap)" = /usr/bin/dirtybitmap ]
dirtybitmap map disk.img.bitmaps b0 > map
expect map <<'EOF'
         0       65536    1  hole
     65536       65536    0  data
    131072      917504    1  hole
EOF
dirtybitmap --version | tee version
grep -F "$(dpkg-query -W -f='${Version}' "$pkg")" version

# The man pages.
[ "$(man -w dirtybitmap)" = /usr/share/man/man1/dirtybitmap.1.gz ]
[ "$(man -w nbdkit-dirtybitmap-filter)" = \
  /usr/share/man/man1/nbdkit-dirtybitmap-filter.1.gz ]
MANWIDTH=100 man dirtybitmap 2>/dev/null | grep -F 'BACKING UP A VIRTUAL MACHINE'
MANWIDTH=100 man nbdkit-dirtybitmap-filter 2>/dev/null |
    grep -F 'nbdkit-dirtybitmap@.service'

# The documentation, with the example configuration.
for f in copyright changelog.gz README.md.gz examples/example.conf; do
    test -f "/usr/share/doc/$pkg/$f"
done
test -d /etc/dirtybitmap

# The unit, its generator, and systemd-analyze verify.
unit=/lib/systemd/system/nbdkit-dirtybitmap@.service
generator=/lib/systemd/system-generators/nbdkit-dirtybitmap-generator
test -f "$unit"
test -x "$generator"
grep -Fx 'EnvironmentFile=/etc/dirtybitmap/%i.conf' "$unit"
name="check-deb-$$"
printf 'DISK=%s\n' "$PWD/disk.img" > "/etc/dirtybitmap/$name.conf"
mkdir gen
"$generator" "$PWD/gen"
rm "/etc/dirtybitmap/$name.conf"
grep -Fx "ReadWritePaths=-\"$PWD\"" \
    "gen/nbdkit-dirtybitmap@$name.service.d/50-read-write-paths.conf"
if command -v systemd-analyze; then
    set +x
    SYSTEMD_UNIT_PATH="$PWD/gen:/lib/systemd/system" \
        systemd-analyze verify "nbdkit-dirtybitmap@$name.service" \
        > verify.out 2>&1
    set -x
    cat verify.out
    [ ! -s verify.out ]
else
    echo "$0: systemd-analyze is not installed: not verified"
fi

# bash-completion finds the completion by the command's name, on first
# use, and it completes from the installed tool.
bash --norc --noprofile -c '
    source /usr/share/bash-completion/bash_completion
    __load_completion dirtybitmap
    complete -p dirtybitmap
    COMP_LINE="dirtybitmap bitmap disk.img.bitmaps "
    COMP_POINT=${#COMP_LINE}
    COMP_WORDS=(dirtybitmap bitmap disk.img.bitmaps "")
    COMP_CWORD=3
    _dirtybitmap dirtybitmap "" disk.img.bitmaps
    printf "%s\n" "${COMPREPLY[@]}"' > completion
expect completion <<'EOF'
complete -F _dirtybitmap dirtybitmap
b0
EOF

# A real systemd, where a container can boot one.
bash "$abs_top_srcdir/tests/check-deb-systemd.sh"

# The purge leaves nothing.
apt-get purge -y -q "$pkg"
if installed; then
    echo "$0: $pkg is still installed after the purge"
    exit 1
fi
left=0
while IFS= read -r f; do
    # Directories that other packages share (/usr/bin, and /lib, a
    # symbolic link to usr/lib) stay.
    if [ -d "$f" ]; then
        case "$f" in
            /etc/dirtybitmap|/usr/share/doc/$pkg|/usr/share/doc/$pkg/*) ;;
            *) continue ;;
        esac
    fi
    if [ -e "$f" ] || [ -L "$f" ]; then
        echo "$0: left after the purge: $f"
        left=1
    fi
done < files
[ $left = 0 ]
if nbdkit --filter=dirtybitmap null --version; then
    echo "$0: nbdkit still finds a dirtybitmap filter after the purge"
    exit 1
fi
echo "$0: installed, used and purged $deb"
