#!/usr/bin/env python3
"""scripts/check-layers.py -- fail when two modules of src/ depend in a circle.

A module is a file stem: src/lock.c and src/lock.h are one module "lock".
Two graphs are built over src/ and each must be acyclic:

  calls     an edge A -> B when a symbol undefined in src/A.o is defined in
            src/B.o (nm; run after the build, so the objects exist);
  includes  an edge A -> B when src/A.c or src/A.h has #include "B.h".

Every strongly connected component of more than one module is printed, one
line per graph, and the exit status is 1.  A lower layer that must reach a
higher one does it through a hook (a function pointer the higher module sets
at _PG_init) or lets redis_primitives.c chain the calls; see DESIGN.md.

Usage: scripts/check-layers.py [SRC_DIR]   (default: src next to this script)
"""

import os
import re
import subprocess
import sys


def modules(src):
    names = set()
    for f in os.listdir(src):
        stem, ext = os.path.splitext(f)
        if ext in (".c", ".h"):
            names.add(stem)
    return names


def call_graph(src, names):
    objs = {}
    for m in sorted(names):
        if os.path.exists(os.path.join(src, m + ".c")):
            objs[os.path.join(src, m + ".o")] = m
    missing = [o for o in objs if not os.path.exists(o)]
    if missing:
        sys.exit("check-layers: build first; missing " + ", ".join(missing))
    # One nm for every object: "file.o: [address] type symbol" per line.
    out = subprocess.run(["nm", "-A"] + sorted(objs), check=True,
                         capture_output=True, text=True).stdout
    defined = {}
    undefined = {m: set() for m in objs.values()}
    for line in out.splitlines():
        obj, _, rest = line.partition(": ")
        parts = rest.split()
        m = objs.get(obj)
        if m is None:
            continue
        if len(parts) == 2 and parts[0] == "U":
            undefined[m].add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRGSV":
            defined.setdefault(parts[2], m)
    edges = {m: set() for m in names}
    for m, syms in undefined.items():
        for s in syms:
            d = defined.get(s)
            if d is not None and d != m:
                edges[m].add(d)
    return edges


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)\.h"', re.M)


def include_graph(src, names):
    edges = {m: set() for m in names}
    for m in names:
        for ext in (".c", ".h"):
            path = os.path.join(src, m + ext)
            if not os.path.exists(path):
                continue
            with open(path, encoding="utf-8") as f:
                for target in INCLUDE.findall(f.read()):
                    target = os.path.basename(target)
                    if target in names and target != m:
                        edges[m].add(target)
    return edges


def circles(edges):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def describe(comp, edges):
    inside = set(comp)
    arcs = ["%s->%s" % (a, b) for a in comp for b in sorted(edges[a])
            if b in inside]
    return "{%s}: %s" % (", ".join(comp), " ".join(arcs))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "src")
    names = modules(src)
    bad = 0
    for kind, edges in (("calls", call_graph(src, names)),
                        ("includes", include_graph(src, names))):
        for comp in circles(edges):
            print("check-layers: %s circle %s" % (kind, describe(comp, edges)))
            bad += 1
    if bad:
        print("check-layers: %d circle(s) in %s" % (bad, os.path.normpath(src)))
        return 1
    print("check-layers: no circles among %d modules" % len(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
