#!/usr/bin/env python3
"""The build's floor check: a source file may include headers of its own floor and of the floors
below it, never of a floor above (docs/architecture.md, "The floors"). Run by the build before
any floor is compiled; prints one line per violation and fails.

Usage: check_floors.py ROOT STAMP
"""
import os
import re
import sys

# Lowest first. A folder's files may include the folders of its floor and the floors below.
FLOORS = [("platform", ["platform"]), ("models", ["models"]), ("firmware", ["firmware"]), ("vp", ["vp"])]
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def floor_of(path):
    top = path.split("/", 1)[0]
    for i, (_, folders) in enumerate(FLOORS):
        if top in folders:
            return i
    return None


def main():
    root, stamp = sys.argv[1], sys.argv[2]
    bad = []
    for i, (name, folders) in enumerate(FLOORS):
        for folder in folders:
            for d, _, files in os.walk(os.path.join(root, folder)):
                for f in sorted(files):
                    if not f.endswith((".h", ".cpp")):
                        continue
                    path = os.path.join(d, f)
                    rel = os.path.relpath(path, root)
                    with open(path, encoding="utf-8", errors="replace") as src:
                        for n, line in enumerate(src, 1):
                            m = INCLUDE.match(line)
                            if not m:
                                continue
                            j = floor_of(m.group(1))
                            if j is not None and j > i:
                                bad.append(f"{rel}:{n}: floor '{name}' includes \"{m.group(1)}\" of the floor "
                                           f"above it, '{FLOORS[j][0]}' (a floor uses only the floors below it)")
    for b in bad:
        print(b, file=sys.stderr)
    if bad:
        sys.exit(1)
    with open(stamp, "w") as s:
        s.write("floors ok\n")


if __name__ == "__main__":
    main()
