#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# lint.py: checks of the source tree that no compiler makes.
#
#   lint.py TOP_SRCDIR
#
# 1. No shell script says "! cmd" as a statement.  Under set -e bash
#    ignores the status of a pipeline inverted with "!" (and of any
#    command in a && or || list but the last), so "! grep x f" never
#    stops a test: the assertion cannot fail.  "!" is allowed only in
#    the condition of if, elif, while and until.
# 2. Every source file, test and script starts with an
#    SPDX-License-Identifier line (in its first 3 lines).
# 3. Every folder of the code matches its map: the head comment of
#    the file named in MAPS lists what each file of the folder holds.
#    Each .c and .h file of the folder must be named there (a header
#    X.h is named by its module's X.c), and each .c or .h the map names
#    must exist, so that a file added, renamed or removed changes the
#    map with it.
#
# The files: those git tracks when TOP_SRCDIR is a git work tree, or
# else (an unpacked release) the files in the tree with the names of
# sources, tests and scripts.  Prints each problem as FILE:LINE: what,
# and exits 1 if there is any.

import os
import re
import subprocess
import sys

# Files that need no licence line: documentation and data, and the
# Debian files whose formats have no comments (debian/copyright holds
# the licence itself).
EXEMPT = re.compile(r"""(^|/)(COPYING|AUTHORS|\.gitignore|\.gitkeep)$
                        |\.md$
                        |^debian/(changelog|copyright|source/format)$
                        |^tests/fuzz/(corpus|regressions|control-corpus)/
                        |^tests/fuzz/control-corpus\.expected$
                        |^tests/old-format/""", re.X)

# In a tree without git: what counts as a source, test or script.
SOURCE = re.compile(r"""\.(c|h|sh|py|pod|syms|am|ac)$|\.sh\.in$
                        |^\.ci/|^demo\.sh$
                        |^debian/(control|rules|docs|[^/]*\.lintian-overrides)$
                        |^systemd/[^/]*(\.service\.in|-generator\.in|\.conf)$
                        |^bash-completion/dirtybitmap$""", re.X)
# ... and what a build or autotools made there.
GENERATED = re.compile(r"""^(build-aux|autom4te\.cache|m4)/|\.tmp/
                           |(^|/)(\.libs|\.deps)/|^config\.h$
                           |^tests/functions\.sh$""", re.X)

# Each folder of the code and the file whose head comment is its map.
MAPS = {
    "filter": "filter/Makefile.am",
    "lib": "lib/Makefile.am",
    "tool": "tool/Makefile.am",
    "tool/backup": "tool/backup/internal.h",
    "tool/copy": "tool/copy/internal.h",
}
# A file name in a map: a word ending in .c or .h, maybe with a folder.
# (A full stop after a name ends a sentence: "... in open.c.")
MAP_NAME = re.compile(r"(?<![\w./-])([\w-]+(?:/[\w-]+)*\.[ch])(?!\w|\.\w)")


def map_comment(text):
    """The head comment of a map: a Makefile.am's first block of "#"
    lines, or a header's first /* ... */ comment after the licence."""
    lines = text.split("\n")
    if lines and lines[0].startswith("#"):
        head = []
        for line in lines:
            if not line.startswith("#"):
                break
            head.append(line)
        return "\n".join(head)
    text = text.replace("/* SPDX-License-Identifier:", "", 1)
    start = text.find("/*")
    end = text.find("*/", start)
    return text[start:end] if start != -1 and end != -1 else ""


def check_maps(top, files):
    """Problems, as strings, where a folder and its map disagree."""
    problems = []
    present = set(files)
    for folder, mapfile in sorted(MAPS.items()):
        try:
            with open(os.path.join(top, mapfile)) as fp:
                names = MAP_NAME.findall(map_comment(fp.read()))
        except OSError:
            problems.append("%s:1: the map of %s/ is missing"
                            % (mapfile, folder))
            continue
        # A name is relative to the folder, or to the folder above it
        # (copy/run.c in tool/copy/internal.h), or to the top.
        parent = os.path.dirname(folder)
        named = set()
        for name in names:
            places = [os.path.normpath(os.path.join(d, name))
                      for d in (folder, parent, "")]
            found = [p for p in places if p in present]
            if found:
                named.add(found[0])
            else:
                problems.append("%s:1: the map names %s, which %s/ does "
                                "not hold" % (mapfile, name, folder))
        for rel in sorted(present):
            if os.path.dirname(rel) != folder or \
               not rel.endswith((".c", ".h")) or rel in named:
                continue
            if rel.endswith(".h") and rel[:-2] + ".c" in named:
                continue
            problems.append("%s:1: %s is not in the map of %s/ (the head "
                            "comment of %s)" % (rel, os.path.basename(rel),
                                                folder, mapfile))
    return problems


def tracked_files(top):
    """The files git tracks under top, or None if top is no work tree."""
    try:
        r = subprocess.run(["git", "-C", top, "rev-parse", "--show-toplevel"],
                           capture_output=True, text=True)
        if r.returncode != 0 or \
           os.path.realpath(r.stdout.strip()) != os.path.realpath(top):
            return None
        r = subprocess.run(["git", "-C", top, "ls-files", "-z"],
                           capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return [f for f in r.stdout.split("\0") if f]


def tree_files(top):
    out = []
    for d, dirs, files in os.walk(top):
        # Not .git, nor a build tree inside this one (make distcheck
        # builds in _build/sub of the unpacked release).
        dirs[:] = [x for x in dirs if x != ".git" and not
                   os.path.exists(os.path.join(d, x, "config.status"))]
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), top)
            if SOURCE.search(rel) and not GENERATED.search(rel):
                out.append(rel)
    return sorted(out)


def is_shell(top, rel):
    if rel.endswith((".sh", ".sh.in")):
        return True
    try:
        with open(os.path.join(top, rel), "rb") as fp:
            first = fp.readline()
    except OSError:
        return False
    return re.match(rb"#!\s*(/usr/bin/env\s+)?(/bin/|/usr/bin/)?(ba)?sh\b",
                    first) is not None


OPERATORS = ("&&", "||", ";;", ";", "|", "&", "(", ")", "{", "}")
# After these a command starts (")" ends a case pattern) ...
CONTROL = {"&&", "||", ";;", ";", "|", "&", "(", ")", "{"}
# ... and after these keywords, when they are in command position.
KEYWORDS = {"then", "do", "else", "if", "elif", "while", "until", "!"}


def bang_statements(text):
    """Line numbers of each "!" in command position outside a
    condition.  A small scanner: quotes (across lines), comments,
    here-documents, line continuations and the if/while keywords are
    understood; other syntax is just words.
    """
    found = []
    quote = None                # the open quote character, if any
    heredocs = []               # terminators of pending here-documents
    in_heredoc = None
    in_cond = False             # between if/while/... and then/do
    at_start = True             # the next word is in command position
    for n, line in enumerate(text.split("\n"), 1):
        if in_heredoc is not None:
            if line.strip() == in_heredoc[0] or \
               (in_heredoc[1] and line.lstrip("\t") == in_heredoc[0]):
                in_heredoc = heredocs.pop(0) if heredocs else None
            continue
        i, word, words = 0, "", []
        continued = False

        def flush():
            nonlocal word
            if word:
                words.append(word)
                word = ""

        while i < len(line):
            c = line[i]
            if quote:
                if c == "\\" and quote == '"':
                    i += 2
                    continue
                if c == quote:
                    quote = None
                word += "q"
                i += 1
                continue
            if c in "'\"":
                quote = c
                word += "q"
            elif c == "\\":
                if i == len(line) - 1:
                    continued = True
                word += "x"
                i += 1
            elif c == "#" and not word:
                break
            elif line.startswith("${", i):
                # A parameter expansion is part of a word (${!name}).
                j = line.find("}", i)
                j = len(line) - 1 if j == -1 else j
                word += "x" * (j + 1 - i)
                i = j
            elif c.isspace():
                flush()
            elif line.startswith("<<<", i):
                flush()
                words.append("<<<")
                i += 2
            elif line.startswith("<<", i):
                flush()
                m = re.match(r"<<(-?)\s*(['\"]?)([A-Za-z0-9_]+)\2", line[i:])
                if m:
                    heredocs.append((m.group(3), m.group(1) == "-"))
                    i += m.end() - 1
                    words.append("<<")
            else:
                for op in OPERATORS:
                    if line.startswith(op, i):
                        flush()
                        words.append(op)
                        i += len(op) - 1
                        break
                else:
                    word += c
            i += 1
        flush()

        for w in words:
            if at_start and w == "!" and not in_cond:
                found.append(n)
            if at_start and w in ("if", "elif", "while", "until"):
                in_cond = True
            elif at_start and w in ("then", "do"):
                in_cond = False
            at_start = w in CONTROL or (at_start and w in KEYWORDS)
        # A new line starts a command, unless the line was continued
        # with a backslash or ended inside quotes.
        if not continued and quote is None:
            at_start = True
        if heredocs and quote is None:
            in_heredoc = heredocs.pop(0)
    return found


def main():
    top = sys.argv[1]
    files = tracked_files(top)
    if files is None:
        print("lint: %s is not a git work tree: checking the files in it"
              % top)
        files = tree_files(top)
    problems = 0
    scripts = 0
    for rel in files:
        path = os.path.join(top, rel)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as fp:
            data = fp.read()
        if not EXEMPT.search(rel):
            head = b"\n".join(data.split(b"\n")[:3])
            if b"SPDX-License-Identifier:" not in head:
                print("%s:1: no SPDX-License-Identifier line in the first "
                      "3 lines" % rel)
                problems += 1
        if is_shell(top, rel):
            scripts += 1
            for n in bang_statements(data.decode("utf-8", "replace")):
                print("%s:%d: '! cmd' outside a condition cannot fail under "
                      "set -e: write 'if cmd; then echo ...; exit 1; fi'"
                      % (rel, n))
                problems += 1
    for problem in check_maps(top, files):
        print(problem)
        problems += 1
    print("lint: %d files, %d shell scripts, %d problems"
          % (len(files), scripts, problems))
    if scripts == 0:
        print("lint: found no shell script: wrong directory?")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
