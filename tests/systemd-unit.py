#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# systemd-unit.py: read a service unit as systemd would for one of its
# instances, for the tests that run its command line without systemd
# (test-dirtybitmap-systemd-service.sh).
#
#   systemd-unit.py [--env-file PATH] UNIT INSTANCE keys
#       every key of [Service], one a line (those of the drop-ins too)
#   systemd-unit.py [--env-file PATH] UNIT INSTANCE get KEY
#       each value of KEY (its words, unquoted, specifiers expanded),
#       one a line
#   systemd-unit.py [--env-file PATH] UNIT INSTANCE exec KEY
#       the command line of KEY (ExecStart) as systemd runs it, its
#       environment expanded: one argument a line
#
# UNIT is the unit file; its drop-ins are read from UNIT@INSTANCE.d/
# beside it (nbdkit-dirtybitmap@NAME.service.d/*.conf), in order.
# --env-file reads that file instead of the unit's EnvironmentFile=.
# Only what these units use is understood: the specifiers %i and %%,
# Environment=, one EnvironmentFile=, $VAR and ${VAR}; anything else is
# an error (exit 1), so that a unit using more fails the test rather
# than being read wrong.

import os
import re
import shlex
import sys


def die(msg):
    print("systemd-unit.py: " + msg, file=sys.stderr)
    sys.exit(1)


def read_service(path, settings):
    """Append (key, value) of the [Service] section of path."""
    section = None
    with open(path) as fp:
        lines = fp.read().replace("\\\n", " ").splitlines()
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line
            continue
        key, eq, value = line.partition("=")
        if not eq:
            die("%s: not a setting: %s" % (path, line))
        if section == "[Service]":
            settings.append((key.strip(), value.strip()))


def specifiers(s, instance):
    def one(m):
        if m.group(1) == "i":
            return instance
        if m.group(1) == "%":
            return "%"
        die("specifier %%%s is not understood" % m.group(1))
    return re.sub(r"%(.)", one, s)


def words(s):
    try:
        return shlex.split(s, posix=True)
    except ValueError as e:
        die("cannot split %r: %s" % (s, e))


def env_file(path):
    env = {}
    with open(path) as fp:
        for line in fp:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            key, eq, value = line.partition("=")
            if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                die("%s: not an assignment: %s" % (path, line))
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            env[key] = value
    return env


def main():
    args = sys.argv[1:]
    env_path = None
    if args[:1] == ["--env-file"]:
        env_path = args[1]
        args = args[2:]
    if len(args) < 3:
        die("usage: systemd-unit.py [--env-file PATH] UNIT INSTANCE "
            "keys|get KEY|exec KEY")
    unit, instance, what = args[0], args[1], args[2]

    settings = []
    read_service(unit, settings)
    base = os.path.basename(unit)
    dropins = os.path.join(os.path.dirname(unit),
                           base.replace("@.", "@%s." % instance, 1) + ".d")
    if os.path.isdir(dropins):
        for f in sorted(os.listdir(dropins)):
            if f.endswith(".conf"):
                read_service(os.path.join(dropins, f), settings)

    if what == "keys":
        for k in sorted({k for k, _ in settings}):
            print(k)
        return

    key = args[3]
    values = [specifiers(v, instance) for k, v in settings if k == key]

    if what == "get":
        for v in values:
            for w in words(v):
                print(w)
        return

    if what != "exec" or len(values) != 1:
        die("exec %s: not one %s= line" % (key, key))
    env = {}
    for k, v in settings:
        if k == "Environment":
            for w in words(specifiers(v, instance)):
                name, eq, value = w.partition("=")
                if not eq:
                    die("Environment=%s: not an assignment" % w)
                env[name] = value
    files = [specifiers(v, instance) for k, v in settings
             if k == "EnvironmentFile"]
    if len(files) != 1:
        die("not one EnvironmentFile=")
    # The file's settings override those of Environment=.
    env.update(env_file(env_path or files[0].lstrip("-")))

    line = values[0]
    if line[:1] in "@-:+!":
        die("%s=: prefixes are not understood" % key)
    argv = []
    for w in words(line):
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", w)
        if m:
            # $VAR: its value split at whitespace, zero or more words.
            argv += env.get(m.group(1), "").split()
            continue
        if re.search(r"\$(?!\{)", w):
            die("%s: $ is understood only as a word $VAR or ${VAR}" % w)
        argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                           lambda m: env.get(m.group(1), ""), w))
    for a in argv:
        if "\n" in a:
            die("an argument holds a newline: %r" % a)
        print(a)


main()
