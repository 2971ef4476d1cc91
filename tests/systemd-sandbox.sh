#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# systemd-sandbox.sh [OPTION]... -- COMMAND [ARG]...: run COMMAND in a
# mount namespace of its own set up as systemd sets one up for these
# settings of a unit, where no systemd runs the unit itself
# (test-dirtybitmap-systemd-service.sh).  Run it under
# "unshare -m --propagation private"; it fails if any step fails.
#
#   --protect-system strict   every mount read-only, but /dev, /proc, /sys
#   --protect-home yes|read-only
#                             /home, /root, /run/user empty, or read-only
#   --private-tmp             /tmp and /var/tmp new and empty
#   --protect-kernel-tunables /proc/sys and /sys read-only
#   --protect-control-groups  /sys/fs/cgroup read-only
#   --rw [-]PATH              PATH writable again (ReadWritePaths=,
#                             RuntimeDirectory=); with "-", PATH may be
#                             missing
#   --no-new-privs            COMMAND runs with no_new_privs set
#
# This is the part of systemd's sandboxing made of mounts and of
# no_new_privs.  What systemd does with seccomp, capabilities or
# namespaces other than the mount namespace is not done here.

set -e

protect_system= protect_home= private_tmp= tunables= cgroups= nnp=
rw=()
while [ $# -gt 0 ]; do
    case "$1" in
        --protect-system) protect_system=$2; shift 2 ;;
        --protect-home) protect_home=$2; shift 2 ;;
        --private-tmp) private_tmp=1; shift ;;
        --protect-kernel-tunables) tunables=1; shift ;;
        --protect-control-groups) cgroups=1; shift ;;
        --rw) rw+=("$2"); shift 2 ;;
        --no-new-privs) nnp=1; shift ;;
        --) shift; break ;;
        *) echo "systemd-sandbox.sh: unknown option $1" >&2; exit 1 ;;
    esac
done

# The mount points, as /proc/self/mountinfo says them (\040 is a space).
mounts ()
{
    local m
    awk '{ print $5 }' /proc/self/mountinfo | while read -r m; do
        printf '%b\n' "$m"
    done | sort -u
}

# read_only PREFIX...: remount read-only every mount point at or below
# one of PREFIX.
read_only ()
{
    local m p
    mounts | while IFS= read -r m; do
        for p in "$@"; do
            if [ "$p" = / ] || [ "$m" = "$p" ] || [[ $m == "$p"/* ]]; then
                mount -o remount,bind,ro "$m"
                break
            fi
        done
    done
}

mount --make-rprivate /

case "$protect_system" in
    '') ;;
    strict)
        mounts | while IFS= read -r m; do
            case "$m" in
                /dev|/dev/*|/proc|/proc/*|/sys|/sys/*) ;;
                *) mount -o remount,bind,ro "$m" ;;
            esac
        done ;;
    *) echo "systemd-sandbox.sh: ProtectSystem=$protect_system: not emulated" >&2
       exit 1 ;;
esac

for d in /home /root /run/user; do
    [ -d "$d" ] || continue
    case "$protect_home" in
        '') ;;
        yes) mount -t tmpfs -o ro,mode=000 tmpfs "$d" ;;
        read-only) mount --bind "$d" "$d"; read_only "$d" ;;
        *) echo "systemd-sandbox.sh: ProtectHome=$protect_home: not emulated" >&2
           exit 1 ;;
    esac
done

if [ -n "$private_tmp" ]; then
    mount -t tmpfs -o mode=1777 tmpfs /tmp
    mount -t tmpfs -o mode=1777 tmpfs /var/tmp
fi

if [ -n "$tunables" ]; then
    mount --bind /proc/sys /proc/sys
    read_only /proc/sys /sys
fi
if [ -n "$cgroups" ] && [ -d /sys/fs/cgroup ]; then
    read_only /sys/fs/cgroup
fi

for p in "${rw[@]}"; do
    optional=
    case "$p" in -*) optional=1; p=${p#-} ;; esac
    if ! [ -e "$p" ]; then
        [ -n "$optional" ] && continue
        echo "systemd-sandbox.sh: $p: no such file or directory" >&2
        exit 1
    fi
    mount --bind "$p" "$p"
    mount -o remount,bind,rw "$p"
done

if [ -n "$nnp" ]; then
    exec setpriv --no-new-privs -- "$@"
fi
exec "$@"
