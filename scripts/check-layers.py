#!/usr/bin/env python3
"""scripts/check-layers.py -- fail when src/ depends upward or in a circle.

src/ is cut into floors, one folder each, from the top down:

  module.c   _PG_init: every hook, every setting's registration
  prim/      the primitives: lock, semaphore, rate limit, election, fences
  worker/    the background worker's loop, the elector, notifications
  lease/     the session's lease registry and its lifecycle, tokens,
             unsettled acquires, the orphan queue, pools
  redis/     the Redis layer: settings, transport, TLS, Sentinel, Cluster
  common/    argument helpers, error codes, statistics

A module is a file stem: src/prim/lock.c and src/prim/lock.h are one
module "lock", on the floor of its folder.  Two graphs are built:

  calls     an edge A -> B when a symbol undefined in A.o is defined in
            B.o (nm; run after the build, so the objects exist);
  includes  an edge A -> B when A.c or A.h has #include "B.h".

Each edge must point to the same floor or one below it, and neither graph
may have a circle.  Every upward edge and every strongly connected
component of more than one module is printed, and the exit status is 1.  A
lower floor that must reach a higher one does it through a hook (a function
pointer the higher module sets at _PG_init) or lets module.c chain the
calls.

Usage: scripts/check-layers.py [SRC_DIR]   (default: src next to this script)
"""

import os
import re
import subprocess
import sys


# Floors from the bottom up; the top-level files of src/ are the module.
FLOORS = ["common", "redis", "lease", "worker", "prim", ""]
# Generated from src/lua/ at build time: the scripts' text, data that every
# floor may include (like a system header), not a module of its own.
GENERATED = {"rp_scripts"}


def modules(src):
    """{stem: folder relative to src} for every .c and .h under src/."""
    names = {}
    for floor in FLOORS:
        d = os.path.join(src, floor)
        for f in sorted(os.listdir(d)):
            stem, ext = os.path.splitext(f)
            if (ext in (".c", ".h") and stem not in GENERATED
                    and os.path.isfile(os.path.join(d, f))):
                if names.get(stem, floor) != floor:
                    sys.exit("check-layers: %s is in two folders" % stem)
                names[stem] = floor
    for d in sorted(os.listdir(src)):
        if os.path.isdir(os.path.join(src, d)) and d not in FLOORS:
            for f in os.listdir(os.path.join(src, d)):
                if f.endswith((".c", ".h")):
                    sys.exit("check-layers: src/%s/%s is on no floor" % (d, f))
    return names


def path(src, names, m, ext):
    return os.path.join(src, names[m], m + ext)


def call_graph(src, names):
    objs = {}
    for m in sorted(names):
        if os.path.exists(path(src, names, m, ".c")):
            objs[path(src, names, m, ".o")] = m
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
            p = path(src, names, m, ext)
            if not os.path.exists(p):
                continue
            with open(p, encoding="utf-8") as f:
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


def upward(edges, names):
    """Edges from a floor to a higher one, as "a (floor) -> b (floor)"."""
    rank = {m: FLOORS.index(f) for m, f in names.items()}
    where = lambda m: names[m] or "module"
    return ["%s (%s) -> %s (%s)" % (a, where(a), b, where(b))
            for a in sorted(edges) for b in sorted(edges[a])
            if rank[b] > rank[a]]


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
        for e in upward(edges, names):
            print("check-layers: %s upward %s" % (kind, e))
            bad += 1
    if bad:
        print("check-layers: %d circle(s) or upward edge(s) in %s"
              % (bad, os.path.normpath(src)))
        return 1
    print("check-layers: no circles, no upward edges among %d modules on %d floors"
          % (len(names), len(FLOORS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
