#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Bash completion of dirtybitmap (bash-completion/dirtybitmap): what
# TAB offers for a subcommand, an option, an option's value and a
# bitmap name, from a real bitmap file and from a served one.
source ./functions.sh
set -e
set -x

requires test -r /usr/share/bash-completion/bash_completion
requires_dirtybitmap_filter

completion="$abs_top_srcdir/bash-completion/dirtybitmap"

# offers LINE: what TAB at the end of LINE offers (COMPREPLY), sorted,
# one a line: the function that "complete -p dirtybitmap" names, called
# as bash calls it, in a bash with bash-completion loaded.
offers ()
{
    bash --norc --noprofile -c '
        source /usr/share/bash-completion/bash_completion
        source "$1"
        spec=$(complete -p dirtybitmap)
        fn=${spec#*-F }
        fn=${fn%% *}
        COMP_LINE=$2
        COMP_POINT=${#COMP_LINE}
        read -ra COMP_WORDS <<< "$COMP_LINE"
        if [[ $COMP_LINE == *" " ]]; then COMP_WORDS+=(""); fi
        COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        COMPREPLY=()
        "$fn" dirtybitmap "${COMP_WORDS[COMP_CWORD]}" \
            "${COMP_WORDS[COMP_CWORD - 1]}"
        printf "%s\n" "${COMPREPLY[@]}" | LC_ALL=C sort
    ' offers "$completion" "$1"
}

# Subcommands: each one the tool has, and nothing that is not one.
offers 'dirtybitmap ' > subcommands
for s in backup bitmap check copy info map resize list restore rollback serve prune; do
    grep -Fx "$s" subcommands
done
while read -r s; do
    dirtybitmap "$s" --help > /dev/null
done < subcommands
[ "$(offers 'dirtybitmap bi')" = bitmap ]
[ "$(offers 'dirtybitmap -')" = "$(printf '%s\n' --help --verbose --version -V -h -v | LC_ALL=C sort)" ]

# A subcommand's options, from its --help: its usage and its list of
# options, not the words of its prose ("as nbdinfo --map prints them").
offers 'dirtybitmap map --' > map-options
expect map-options <<'EOF'
--disk
--force-share
--output=
EOF
offers 'dirtybitmap bitmap --' > bitmap-options
for o in --add --remove --clear --enable --disable --merge --source-file \
         --granularity --size --disk --control; do
    grep -Fx -- "$o" bitmap-options
done
[ "$(offers 'dirtybitmap bitmap --m')" = --merge ]
[ "$(offers 'dirtybitmap resize --s')" = --shrink ]
[ "$(offers 'dirtybitmap info --output=')" = "$(printf 'human\njson')" ]
offers 'dirtybitmap verify --' > verify-options
expect verify-options <<'EOF'
--format
--output=
--progress
--resume
EOF
[ "$(offers 'dirtybitmap verify -f ')" = "$(printf 'qcow2\nraw')" ]
[ "$(offers 'dirtybitmap verify --format r')" = raw ]

# Bitmap names, from a bitmap file made by the tool.
truncate -s 1M disk.img
dirtybitmap bitmap --add --size 1M disk.img.bitmaps b0
dirtybitmap bitmap --add disk.img.bitmaps backup-mon
dirtybitmap bitmap --add disk.img.bitmaps 'two words'
offers 'dirtybitmap bitmap disk.img.bitmaps ' > names
expect names <<'EOF'
b0
backup-mon
two\ words
EOF
[ "$(offers 'dirtybitmap map disk.img.bitmaps ba')" = backup-mon ]
[ "$(offers 'dirtybitmap bitmap --add -g 4K disk.img.bitmaps --merge b')" = \
  "$(printf 'b0\nbackup-mon')" ]
# The file comes first: no name to offer before it.
[ -z "$(offers 'dirtybitmap bitmap --clear --merge ')" ]

# While nbdkit serves the disk: from the file, which it holds, and
# through its control socket.
start_nbdkit -P nbdkit.pid -U "$PWD/nbd.sock" --filter="$FILTER" \
    file "$PWD/disk.img" control="$PWD/ctl"
offers 'dirtybitmap map disk.img.bitmaps ' > names-served
expect names-served <<'EOF'
b0
backup-mon
two\ words
EOF
dirtybitmap bitmap --add --control "$PWD/ctl" live
[ "$(offers "dirtybitmap bitmap --remove --control $PWD/ctl l")" = live ]
[ "$(offers "dirtybitmap backup --control $PWD/ctl --incremental l")" = live ]

# A backup repository: its points after DIR@, its disks after --disk.
offers 'dirtybitmap backup --' | grep -Fx -- --repo
[ "$(offers 'dirtybitmap list --')" = --output= ]
offers 'dirtybitmap restore --' > restore-options
for o in --disk --output= --progress --requests; do
    grep -Fx -- "$o" restore-options
done
offers 'dirtybitmap prune --' > prune-options
expect prune-options <<'EOF'
--dry-run
--keep-daily
--keep-hourly
--keep-last
--keep-monthly
--keep-weekly
--keep-yearly
--output=
EOF
offers 'dirtybitmap serve --' > serve-options
expect serve-options <<'EOF'
--disk
--socket
EOF
uri="nbd+unix:///?socket=$PWD/nbd.sock"
dirtybitmap backup --repo "$PWD/R" --checkpoint c1 --control "$PWD/ctl" "$uri"
dirtybitmap backup --repo "$PWD/R" --checkpoint c2 --control "$PWD/ctl" "$uri"
[ "$(offers "dirtybitmap restore $PWD/R@")" = "$(printf '%s\n' "$PWD/R@c1" "$PWD/R@c2")" ]
[ "$(offers "dirtybitmap rollback $PWD/R@")" = "$(printf '%s\n' "$PWD/R@c1" "$PWD/R@c2")" ]
[ "$(offers "dirtybitmap serve $PWD/R@c")" = "$(printf '%s\n' "$PWD/R@c1" "$PWD/R@c2")" ]
[ "$(offers "dirtybitmap verify $PWD/R@")" = "$(printf '%s\n' "$PWD/R@c1" "$PWD/R@c2")" ]
[ "$(offers "dirtybitmap serve $PWD/R@c1 --disk ")" = disk0 ]
[ "$(offers "dirtybitmap restore $PWD/R@c1 --disk ")" = disk0= ]
