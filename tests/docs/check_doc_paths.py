#!/usr/bin/env python3
"""Every repository path that README.md and docs/*.md name must exist (CTest: docs_paths_exist).

    check_doc_paths.py REPO_ROOT

A path is named when it starts with one of the repository's top-level folders (src/, tests/,
bench/ ...) in any text, or is the target of a relative Markdown link ([x](exit_status.md),
resolved from the page's folder). Globs (`tests/multihost/*.sh`) must match something;
placeholders in angle brackets (`bench/results/<new dated folder>`, `flight/rank-<r>.json`)
stand for any name, so only the part before them is checked, and so does a one-letter file
name (`"collectives/x.h"`: any header there), whose folder is checked. Existence is checked when the
test runs, so a file moved without its documents fails here. Prints each missing path with
the page and line naming it; exits 1 when any is missing."""
import glob
import os
import re
import sys

TOP = ("include", "src", "collectives", "pipeline", "profiler", "rules", "tests", "examples",
       "bench", "scripts", "docs", "cmake", ".ci")
# A path of the tree: a top-level folder, then path characters (globs and placeholders included).
PATH = re.compile(r"(?<![\w./<-])((?:%s)/[\w.*/<>{}-]*)" % "|".join(re.escape(t) for t in TOP))
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Known to be missing, each with the page that names it and why it is allowed for now. An entry
# whose path exists again (or whose page no longer names it) fails the check too, so the list
# only shrinks.
# An entry: ("docs/page.md", "path/as/named"), with a comment saying why and until when.
KNOWN_MISSING = set()


def candidates(line):
    """The repository paths a line names (from the root), and its relative link targets."""
    for m in PATH.finditer(line):
        yield "root", m.group(1)
    for m in LINK.finditer(line):
        target = m.group(1).split("#", 1)[0]
        if target and "://" not in target and not target.startswith("mailto:"):
            yield "link", target


def exists(root, path):
    path = path.rstrip(".,;:")  # the end of a sentence
    if "<" in path:  # a placeholder: the part before it must exist
        path = os.path.dirname(path[: path.index("<")] + "x")
    elif len(os.path.splitext(os.path.basename(path))[0]) == 1:  # "collectives/x.h": its folder
        path = os.path.dirname(path)
    if "{" in path or "*" in path:
        return bool(glob.glob(os.path.join(root, path.replace("{", "*").split("}")[0] + "*")
                              if "{" in path else os.path.join(root, path)))
    full = os.path.join(root, path)
    # A program named by its source's stem (`bench/flight_bench` from bench/flight_bench.cpp).
    return os.path.exists(full) or bool(glob.glob(full + ".*"))


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    pages = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    missing = 0
    checked = 0
    excused = set()
    for page in pages:
        base = os.path.dirname(page)
        with open(page, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for kind, path in candidates(line):
                    where = path if kind == "root" else os.path.relpath(os.path.normpath(os.path.join(base, path)), root)
                    checked += 1
                    if exists(root, where):
                        continue
                    name = os.path.relpath(page, root)
                    if (name, where) in KNOWN_MISSING:
                        excused.add((name, where))
                        continue
                    missing += 1
                    print(f"{name}:{number}: {path} does not exist")
    for name, where in sorted(KNOWN_MISSING - excused):
        missing += 1
        print(f"{name}: {where} is in KNOWN_MISSING but is no longer missing there: remove it from the list")
    print(f"{checked} path mentions checked in {len(pages)} pages, {missing} missing, "
          f"{len(excused)} known missing (KNOWN_MISSING)")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
