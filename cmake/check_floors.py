#!/usr/bin/env python3
"""The build's floor check (docs/architecture.md, "The floors" and "Components"). Run by the build
before any floor is compiled; prints one line per violation and fails.

1. Floors: a source file may include headers of its own floor and of the floors below it, never
   of a floor above.
2. Components: a component is a header and its source with the same stem in the same folder
   (foo.h + foo.cpp; a header or a source alone is a component too). A component depends on the
   components whose headers its files include. The dependencies must form no cycle: each cycle
   is one line naming its components in order, back to the first. Components are levelled as
   Lakos levels them: a component that includes no other component is at level 1, any other at
   1 + the highest level of what it includes; a component in a cycle, or above one, has none.

Usage: check_floors.py ROOT STAMP [--levels]
  writes STAMP when all is well (with every component's level); --levels also prints them.
"""
import os
import re
import sys

# Lowest first. A folder's files may include the folders of its floor and the floors below.
FLOORS = [("platform", ["platform"]), ("models", ["models"]), ("firmware", ["firmware"]), ("vp", ["vp"])]
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
MAX_CYCLES_PER_KNOT = 50  # cycles listed for one strongly connected set before "... and N more"


def floor_of(path):
    top = path.split("/", 1)[0]
    for i, (_, folders) in enumerate(FLOORS):
        if top in folders:
            return i
    return None


def component_of(rel):
    """firmware/llm/estimate.cpp -> firmware/llm/estimate"""
    return os.path.splitext(rel)[0]


def sources(root):
    """(floor index, floor name, path relative to root) of every .h and .cpp of the floors."""
    for i, (name, folders) in enumerate(FLOORS):
        for folder in folders:
            for d, dirs, files in os.walk(os.path.join(root, folder)):
                dirs.sort()
                for f in sorted(files):
                    if f.endswith((".h", ".cpp")):
                        yield i, name, os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")


def includes(root, rel):
    """(line number, included path) of every quoted include of a file."""
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as src:
        for n, line in enumerate(src, 1):
            m = INCLUDE.match(line)
            if m:
                yield n, m.group(1)


def knots(graph):
    """The strongly connected sets of more than one component, or of one that includes itself
    (Tarjan's algorithm, iterative), each sorted; in a stable order."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                scc = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    scc.append(w)
                    if w == v:
                        break
                if len(scc) > 1 or v in graph[v]:
                    out.append(sorted(scc))
    return sorted(out)


def cycles_in(graph, knot, limit):
    """The elementary cycles within one knot, each starting at its smallest component (so each is
    listed once), in a stable order; at most `limit`, and how many more there are."""
    members = set(knot)
    found, more = [], 0
    for start in knot:
        # Paths from start through components greater than start, back to start.
        path, work = [start], [iter(sorted(w for w in graph[start] if w in members and w >= start))]
        on_path = {start}
        while work:
            w = next(work[-1], None)
            if w is None:
                work.pop()
                on_path.discard(path.pop())
                continue
            if w == start:
                if len(found) < limit:
                    found.append(path + [start])
                else:
                    more += 1
            elif w not in on_path:
                path.append(w)
                on_path.add(w)
                work.append(iter(sorted(x for x in graph[w] if x in members and x >= start)))
    return found, more


def levels(graph):
    """Each component's Lakos level (None for a component in a cycle or above one)."""
    level = {}
    cyclic = set(c for k in knots(graph) for c in k)

    def of(c, seen):
        if c in level:
            return level[c]
        if c in cyclic or c in seen:
            level[c] = None
            return None
        seen.add(c)
        below = [of(d, seen) for d in graph[c] if d != c]
        seen.discard(c)
        level[c] = None if any(b is None for b in below) else 1 + max(below, default=0)
        return level[c]

    for c in sorted(graph):
        of(c, set())
    return level


def check(root):
    """(problems, levels): one line per floor violation and per include cycle; every
    component's level."""
    bad = []
    files = list(sources(root))
    known = {rel for _, _, rel in files}
    graph = {}
    for i, name, rel in files:
        comp = component_of(rel)
        graph.setdefault(comp, set())
        for n, inc in includes(root, rel):
            j = floor_of(inc)
            if j is not None and j > i:
                bad.append(f"{rel}:{n}: floor '{name}' includes \"{inc}\" of the floor "
                           f"above it, '{FLOORS[j][0]}' (a floor uses only the floors below it)")
            if inc in known and component_of(inc) != comp:
                graph[comp].add(component_of(inc))
    for knot in knots(graph):
        found, more = cycles_in(graph, knot, MAX_CYCLES_PER_KNOT)
        for cycle in found:
            bad.append("include cycle: " + " -> ".join(cycle))
        if more:
            bad.append(f"include cycle: ... and {more} more among " + ", ".join(knot))
    return bad, levels(graph)


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    root, stamp = args
    bad, level = check(root)
    for b in bad:
        print(b, file=sys.stderr)
    if bad:
        return 1
    table = [f"{level[c]} {c}" for c in sorted(level, key=lambda c: (level[c] or 0, c))]
    if "--levels" in argv:
        print("\n".join(table))
    with open(stamp, "w") as s:
        s.write("floors ok\n" + "\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
