#!/usr/bin/env python3
"""bench/report.py -- turn benchmark CSVs into bench/results/report.md.

    bench/report.py [--out FILE] [--history OLD.csv] [--workloads DIR] RUN.csv...

The CSVs are what bench/run.sh writes (columns: bench/lib.sh).  Every CSV
given as RUN.csv is one run's data (e.g. `make bench` and `make bench-tls`
written to two files); --history is an earlier run, compared ratio for
ratio (never absolute numbers: the machine's load moves those).  Titles,
baselines, floors and statement counts come from the workload files in
--workloads (default: bench/workloads next to this script).

Know before editing: this script only reads and formats.  It must not
measure, and every ratio it prints is between two numbers of the same run:
repetitions are reduced to their median first, then divided.
"""

import argparse
import csv
import math
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Sections of the report: (title, name regex, what to say about them).
FAMILIES = [
    ("Locks and semaphores", r"^(select1|lock_|sem_|advisory)",
     "Each client on its own name unless the title says otherwise."),
    ("Rate limiter", r"^rl_", "Limit 100,000 per second: every call takes the admitting path, the one that writes."),
    ("Leader election", r"^(campaign|is_leader)", ""),
    ("Fence trigger", r"^fence_",
     "Row UPDATEs of a random row of 1,000, and UPDATEs of all 1,000 rows; "
     "for the bulk rows the difference to no trigger in ms is the trigger's cost in µs per row. "
     "PostgreSQL's own C row trigger shows what *any* BEFORE ROW trigger costs."),
    ("Transport", r"^transport_",
     "The same calls against a second Redis, over loopback TCP and over its unix socket."),
    ("TLS", r"^tls_",
     "One Redis serving a plain and a TLS port. The handshake's cost is "
     "(tls_tls_reconnect - tls_tls_ping) - (tls_plain_reconnect - tls_plain_ping), in the Δ columns."),
    ("Statistics (redis_primitives.track)", r"^track_",
     "Tracking costs CPU, not round trips: compare backend CPU µs per transaction, which a shared machine's load moves far less than TPS."),
]


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v, digits=3):
    if v is None:
        return "–"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.1f}"
    return f"{v:.{digits}f}"


def ratio(a, b):
    return a / b if a is not None and b else None


def read_csvs(paths):
    """Every row, with every column present (a CSV from an older runner may
    lack the columns added since: they read as empty)."""
    rows = []
    for p in paths:
        with open(p, newline="") as f:
            for r in csv.DictReader(f):
                rows.append({k: (v or "") for k, v in r.items() if k is not None})
    cols = {k for r in rows for k in r}
    for r in rows:
        for k in cols:
            r.setdefault(k, "")
    return rows


def workload_files(d):
    """name -> {title, baseline, floor, redis-calls, statements}"""
    out = {}
    if not os.path.isdir(d):
        return out
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".sql"):
            continue
        h = {"statements": 0}
        in_header = True
        for line in open(os.path.join(d, fn)):
            m = re.match(r"^-- ([a-z-]+): (.*)$", line.rstrip("\n"))
            if in_header and m:
                h.setdefault(m.group(1), m.group(2))
                continue
            in_header = False
            s = line.strip()
            if s and not s.startswith("--") and not s.startswith("\\"):
                h["statements"] += 1
        out[fn[:-4]] = h
    return out


class Run:
    """One run's rows reduced to medians per (name, clients)."""

    def __init__(self, rows):
        self.rows = rows
        self.meta = {}
        for r in rows:
            if r["tool"] == "meta":
                self.meta.setdefault(r["name"], r["note"] or f"{r['value']} {r['unit']}")
        self.cells = {}
        groups = {}
        for r in rows:
            if r["tool"] in ("pgbench", "redis-benchmark"):
                groups.setdefault((r["name"], int(r["clients"])), []).append(r)
        for key, rs in groups.items():
            c = {"tool": rs[0]["tool"], "reps": len(rs), "baseline": rs[0].get("baseline", "")}
            for col in ("transactions", "tps", "lat_mean_ms", "lat_p50_ms", "lat_p99_ms", "rt_per_txn", "rt_per_call", "cpu_us_per_txn"):
                c[col] = med([num(r.get(col)) for r in rs])
            c["pctl_ok"] = all(r.get("pctl_ok") != "0" for r in rs)
            self.cells[key] = c
        self.skips = [r for r in rows if r["tool"] == "skip"]
        mg = {}
        for r in rows:
            if r["tool"] == "metric":
                mg.setdefault((r["name"], r["clients"]), []).append(r)
        self.metrics = {k: (med([num(r["value"]) for r in rs]), rs[0]["unit"], rs[0]["note"], len(rs))
                        for k, rs in mg.items()}

    def names(self, tool="pgbench"):
        return sorted({n for (n, _), c in self.cells.items() if c["tool"] == tool})

    def clients(self, name):
        return sorted(c for (n, c) in self.cells if n == name)

    def cell(self, name, clients):
        return self.cells.get((name, clients))

    def baseline_cell(self, name, clients):
        """The baseline at the same client count, else at 1 client."""
        c = self.cell(name, clients)
        b = c and c.get("baseline")
        if not b:
            return None, None
        bc = self.cell(b, clients)
        if bc:
            return b, bc
        return b, self.cell(b, 1)

    def floor(self, name, wl):
        """(mean, p50) floor at 1 client: statements x SELECT 1 + raw scripts."""
        h = wl.get(name, {})
        if not h.get("floor"):
            return None
        s1 = self.cell("select1", 1)
        if not s1:
            return None
        fm = h["statements"] * s1["lat_mean_ms"]
        fp = h["statements"] * (s1["lat_p50_ms"] or 0)
        for raw in h["floor"].split(","):
            rc = self.cell("raw_" + raw.strip(), 1)
            if not rc:
                return None
            fm += rc["lat_mean_ms"]
            fp += rc["lat_p50_ms"] or 0
        return fm, fp

    def header(self):
        stamps = sorted(r["timestamp"] for r in self.rows if r.get("timestamp"))
        loads = [num(r["load1"]) for r in self.rows if num(r.get("load1")) is not None]
        commits = sorted({r["commit"] for r in self.rows if r.get("commit")})
        runs = sorted({r["run_id"] for r in self.rows if r.get("run_id")})
        return stamps, loads, commits, runs


def shown(p):
    """A path as the report shows it: from the repository root when inside it."""
    r = os.path.relpath(os.path.abspath(p), os.path.dirname(HERE))
    return os.path.abspath(p) if r.startswith("..") else r


def table(out, head, rows, align=None):
    out.append("| " + " | ".join(head) + " |")
    out.append("| " + " | ".join(align or (["---"] + ["---:"] * (len(head) - 1))) + " |")
    for r in rows:
        out.append("| " + " | ".join(r) + " |")


# --- charts ------------------------------------------------------------------
# Plain SVG written here (no plotting library to install): a chart is a
# picture of numbers the tables beside it already print, never new data.

PALETTE = ["#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7",
           "#a463f2", "#97bbf5", "#9c6b4e", "#9498a0"]


def esc(s):
    return (str(s).replace("&", "&amp;").replace("<", "&lt;")
            .replace(">", "&gt;").replace('"', "&quot;"))


def tick(v):
    """An axis label: whole numbers from 10 up, else as few decimals as fit."""
    if v == 0:
        return "0"
    if abs(v) >= 10:
        return f"{v:,.0f}"
    return f"{v:.2f}".rstrip("0").rstrip(".")


def nice_max(v):
    """The smallest 1, 2 or 5 x 10^k at or above v (an axis' end)."""
    if v <= 0:
        return 1.0
    k = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 5, 10):
        if m * k >= v:
            return m * k
    return 10 * k


def svg_floor_chart(bars):
    """bars: [(label, measured p50 ms, floor p50 ms)].  Horizontal bars, one
    pair per workload: the call as measured, and its floor under it."""
    row, left, right, top = 34, 190, 90, 44
    width = 760
    height = top + row * len(bars) + 40
    xmax = nice_max(max(max(m, f) for _, m, f in bars))
    scale = (width - left - right) / xmax
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'font-family="sans-serif" font-size="12">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="{left}" y="18" font-size="14" font-weight="bold">'
         'Median latency at 1 client against the floor (ms)</text>',
         f'<rect x="{left}" y="26" width="10" height="10" fill="{PALETTE[0]}"/>'
         f'<text x="{left + 14}" y="35">measured p50</text>',
         f'<rect x="{left + 120}" y="26" width="10" height="10" fill="{PALETTE[7]}"/>'
         f'<text x="{left + 134}" y="35">floor p50 (SELECT 1s + raw Redis scripts)</text>']
    for i in range(0, 6):
        v = xmax * i / 5
        x = left + v * scale
        o.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - 30}" stroke="#ddd"/>')
        o.append(f'<text x="{x:.1f}" y="{height - 14}" text-anchor="middle">{tick(v)}</text>')
    for i, (label, m, f) in enumerate(bars):
        y = top + i * row
        o.append(f'<text x="{left - 6}" y="{y + 17}" text-anchor="end">{esc(label)}</text>')
        o.append(f'<rect x="{left}" y="{y + 4}" width="{m * scale:.1f}" height="12" fill="{PALETTE[0]}"/>')
        o.append(f'<rect x="{left}" y="{y + 17}" width="{f * scale:.1f}" height="8" fill="{PALETTE[7]}"/>')
        r = ratio(m, f)
        o.append(f'<text x="{left + max(m, f) * scale + 6:.1f}" y="{y + 17}">'
                 f'{fmt(m)} ms{f" ({r:.2f}×)" if r else ""}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def svg_scaling_chart(series, counts):
    """series: [(label, {clients: tps})].  Throughput by clients, a line per
    workload, the client axis spaced by position (1, 4, 8, 16 ...)."""
    width, height, left, right, top, bottom = 760, 420, 70, 200, 40, 50
    ymax = nice_max(max(v for _, pts in series for v in pts.values()))
    pw, ph = width - left - right, height - top - bottom
    xpos = {c: left + (pw * i / max(1, len(counts) - 1)) for i, c in enumerate(counts)}
    ypos = lambda v: top + ph - ph * v / ymax
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'font-family="sans-serif" font-size="12">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="{left}" y="22" font-size="14" font-weight="bold">'
         'Transactions per second by clients</text>']
    for i in range(0, 6):
        v = ymax * i / 5
        o.append(f'<line x1="{left}" y1="{ypos(v):.1f}" x2="{left + pw}" y2="{ypos(v):.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{left - 6}" y="{ypos(v) + 4:.1f}" text-anchor="end">{tick(v)}</text>')
    for c, x in xpos.items():
        o.append(f'<text x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle">{c}</text>')
    o.append(f'<text x="{left + pw / 2:.1f}" y="{height - 10}" text-anchor="middle">clients</text>')
    for i, (label, pts) in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        # past the palette's length, the same colours dashed
        dash = ' stroke-dasharray="6,3"' if i >= len(PALETTE) else ""
        xy = [(xpos[c], ypos(pts[c])) for c in counts if c in pts]
        o.append('<polyline fill="none" stroke-width="2" stroke="%s"%s points="%s"/>'
                 % (colour, dash, " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)))
        for x, y in xy:
            o.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>')
        ly = top + 14 + 18 * i
        o.append(f'<line x1="{left + pw + 12}" y1="{ly - 4}" x2="{left + pw + 26}" y2="{ly - 4}" '
                 f'stroke="{colour}" stroke-width="3"{dash}/>')
        o.append(f'<text x="{left + pw + 28}" y="{ly}">{esc(label)}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def write_chart(out_md, suffix, svg):
    """Write the chart beside the report; return its name for the link."""
    stem = os.path.splitext(os.path.basename(out_md))[0]
    name = f"{stem}-{suffix}.svg"
    os.makedirs(os.path.dirname(os.path.abspath(out_md)), exist_ok=True)
    with open(os.path.join(os.path.dirname(os.path.abspath(out_md)), name), "w") as f:
        f.write(svg)
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "report.md"))
    ap.add_argument("--history", help="an earlier run's CSV, compared ratio for ratio")
    ap.add_argument("--workloads", default=os.path.join(HERE, "workloads"))
    a = ap.parse_args()

    wl = workload_files(a.workloads)
    run = Run(read_csvs(a.csv))
    hist = Run(read_csvs([a.history])) if a.history else None
    o = []

    stamps, loads, commits, runs = run.header()
    o.append("# redis_primitives benchmark")
    o.append("")
    if stamps:
        o.append(f"Measured {stamps[0]} to {stamps[-1]}, commit {', '.join(commits)}"
                 + (f", load average {min(loads):.1f}–{max(loads):.1f} while measuring" if loads else "") + ".")
    for k in ("machine", "versions", "method"):
        if k in run.meta:
            o.append(f"{k.capitalize()}: {run.meta[k]}.")
    o.append("")
    o.append("Written by `bench/report.py` from " + ", ".join(f"`{shown(p)}`" for p in a.csv)
             + ". The machine is small and shared: **read the ratios, which compare numbers "
             "measured minutes apart in this run, not the absolute numbers.** Each cell is the median "
             "of the run's repetitions. How to read each column: `bench/README.md`.")

    if run.skips:
        o += ["", "Not measured in this run:", ""]
        for s in run.skips:
            where = f" ({s['clients']} clients)" if s.get("clients") else ""
            o.append(f"- `{s['name']}`{where}: {s['note']}")

    # --- workloads, by family ------------------------------------------
    names = run.names()
    placed = set()
    fams = []
    for title, rx, note in FAMILIES:
        ns = [n for n in names if re.search(rx, n) and n not in placed]
        placed.update(ns)
        fams.append((title, ns, note))
    rest = [n for n in names if n not in placed]
    if rest:
        fams.append(("Other workloads", rest, ""))
    o += ["", "## Workloads", "",
          "pgbench per workload and client count. *mean* is pgbench's own (clients / tps, exact); "
          "p50/p99 from its per-transaction log († understated: pgbench 15 reads its clock lazily with "
          "several sub-0.1 ms clients; trust the mean there). *RT/call*: Redis round trips per "
          "Redis-backed call (per transaction where the workload does not say how many calls it makes, "
          "marked ᵗ), counted from `INFO commandstats`. *CPU*: the backends' CPU µs per transaction, "
          "connection start included. *× base* and *Δ ms* compare the mean latency with the "
          "workload's baseline at the same client count (or at 1 client)."]
    for title, ns, note in fams:
        if not ns:
            continue
        o += ["", f"### {title}", ""]
        if note:
            o += [note, ""]
        rows = []
        for n in ns:
            for c in run.clients(n):
                x = run.cell(n, c)
                b, bc = run.baseline_cell(n, c)
                dag = "" if x["pctl_ok"] else " †"
                if x["rt_per_call"] is not None:
                    rt = fmt(x["rt_per_call"], 2)
                elif x["rt_per_txn"] is not None:
                    rt = fmt(x["rt_per_txn"], 2) + "ᵗ"
                else:
                    rt = "–"
                rows.append([f"`{n}`: {wl.get(n, {}).get('title', '')}", str(c), fmt(x["tps"]),
                             fmt(x["lat_mean_ms"]), fmt(x["lat_p50_ms"]) + dag, fmt(x["lat_p99_ms"]) + dag,
                             rt, fmt(x["cpu_us_per_txn"], 0),
                             f"`{b}`" if b else "", fmt(ratio(x["lat_mean_ms"], bc and bc["lat_mean_ms"]), 2),
                             fmt(x["lat_mean_ms"] - bc["lat_mean_ms"]) if bc else "–"])
        table(o, ["workload", "clients", "tps", "mean ms", "p50 ms", "p99 ms", "RT/call",
                  "CPU µs/txn", "baseline", "× base", "Δ ms"], rows,
              ["---"] + ["---:"] * 7 + ["---", "---:", "---:"])

    # --- round trips -------------------------------------------------------
    off = []
    checked = 0
    for n in names:
        calls = wl.get(n, {}).get("redis-calls")
        if calls is None:
            continue
        for c in run.clients(n):
            x = run.cell(n, c)
            want = 0.0 if calls.strip() == "0" else 1.0
            got = x["rt_per_txn"] if want == 0 else x["rt_per_call"]
            if got is None:
                continue
            checked += 1
            # A session's first calls may add a few: the connection's own
            # commands, and a NOSCRIPT + EVAL per script on a Redis that has
            # not seen it.  Allow 4 per client per run, not one more.
            per = 1 if want == 0 else int(calls)
            extra = abs(got - want) * per * (x["transactions"] or 0)
            if extra > 4 * c + 0.5:
                off.append(f"`{n}` at {c} clients: {got:.4f} (expected {want:.2f})")
    o += ["", "## Round trips", ""]
    o.append(f"{checked} workload runs say how many Redis-backed calls a transaction makes (`-- redis-calls:`); "
             "each such call should make exactly one round trip, and a workload of 0 calls none "
             "(up to 4 round trips per client per run are allowed for a session's start: its "
             "connection's commands and a NOSCRIPT + EVAL per script new to that Redis). "
             + ("All of them did." if not off else "These did not: " + "; ".join(off) + "."))

    # --- floors ------------------------------------------------------------
    frows = []
    for n in names:
        f = run.floor(n, wl)
        x = run.cell(n, 1)
        if not f or not x:
            continue
        frows.append([f"`{n}`", str(wl[n]["statements"]), fmt(x["lat_mean_ms"]), fmt(x["lat_p50_ms"]),
                      f"{fmt(f[0])} / {fmt(f[1])}", wl[n]["floor"],
                      fmt(ratio(x["lat_mean_ms"], f[0]), 2), fmt(ratio(x["lat_p50_ms"], f[1]), 2)])
    if frows:
        o += ["", "## Against the floor, one client", "",
              "**Floor** = (SQL statements) × `SELECT 1` + the round trips of the same Lua scripts sent "
              "straight from `redis-benchmark -c 1` (EVALSHA): what the call would cost if the extension "
              "itself were free. The target is 1.2×, judged on the medians (on a shared machine the means "
              "carry other tenants' stalls, which fall on the separate runs unequally). "
              "redis-benchmark's percentiles come in steps of about 8 µs."]
        o.append("")
        table(o, ["workload", "stmts", "mean ms", "p50 ms", "floor mean / p50 ms", "raw scripts",
                  "× floor (mean)", "× floor (p50)"], frows,
              ["---", "---:", "---:", "---:", "---:", "---", "---:", "---:"])
        bars = [(n, run.cell(n, 1)["lat_p50_ms"], run.floor(n, wl)[1]) for n in names
                if run.floor(n, wl) and run.cell(n, 1) and run.cell(n, 1)["lat_p50_ms"] is not None]
        if bars:
            o += ["", f"![Median latency against the floor per workload]"
                      f"({write_chart(a.out, 'floor', svg_floor_chart(bars))})"]

    # --- raw Redis -----------------------------------------------------------
    raws = run.names("redis-benchmark")
    if raws:
        o += ["", "## Raw Redis (redis-benchmark, EVALSHA of the extension's scripts)", ""]
        rows = []
        for n in raws:
            for c in run.clients(n):
                x = run.cell(n, c)
                rows.append([f"`{n}`", str(c), fmt(x["tps"]), fmt(x["lat_mean_ms"]),
                             fmt(x["lat_p50_ms"]), fmt(x["lat_p99_ms"])])
        table(o, ["script", "clients", "ops/s", "mean ms", "p50 ms", "p99 ms"], rows)

    # --- scaling -------------------------------------------------------------
    scaled = [n for n in names if len(run.clients(n)) > 1]
    if scaled:
        counts = sorted({c for n in scaled for c in run.clients(n)})
        cols = scaled + (["raw_lock_acquire"] if "raw_lock_acquire" in raws else [])
        o += ["", "## Scaling: transactions per second by clients", "",
              "Each cell its own run; 2 cores shared by pgbench, the backends and Redis, so throughput "
              "saturates at a few clients and more clients only queue. `raw_lock_acquire` is "
              "redis-benchmark running the acquire script with as many clients: the ceiling if every "
              "client spoke to Redis directly."]
        o.append("")
        rows = []
        for c in counts:
            r = [str(c)]
            for n in cols:
                x = run.cell(n, c)
                r.append(fmt(x["tps"]) if x else "–")
            rows.append(r)
        table(o, ["clients"] + [f"`{n}`" for n in cols], rows)
        series = [(n, {c: run.cell(n, c)["tps"] for c in run.clients(n)
                       if run.cell(n, c)["tps"] is not None}) for n in cols]
        series = [(n, pts) for n, pts in series if pts]
        if series:
            o += ["", f"![Transactions per second by clients]"
                      f"({write_chart(a.out, 'scaling', svg_scaling_chart(series, counts))})"]

    # --- metrics -------------------------------------------------------------
    if run.metrics:
        o += ["", "## Other measurements", "",
              "From the bench/measure/*.sh scripts (median over repetitions where repeated)."]
        o.append("")
        rows = []
        for (n, c), (v, unit, note, k) in sorted(run.metrics.items()):
            rows.append([f"`{n}`" + (f" ({c} clients)" if c else ""), fmt(v, 3), unit, note])
        table(o, ["measurement", "value", "unit", "how"], rows, ["---", "---:", "---", "---"])

    # --- history ---------------------------------------------------------------
    if hist:
        hs, hl, hc, _ = hist.header()
        o += ["", "## Against an earlier run", ""]
        o.append(f"The earlier run: `{shown(a.history)}`, "
                 + (f"measured {hs[0]} to {hs[-1]}, commit {', '.join(hc)}" if hs else "no timestamps")
                 + (f", load average {min(hl):.1f}–{max(hl):.1f}" if hl else "")
                 + ". Only ratios within each run are compared: absolute numbers from runs under "
                 "different load do not compare.")
        o.append("")
        rows = []
        for n in names:
            for c in run.clients(n):
                x, y = run.cell(n, c), hist.cell(n, c)
                if not y:
                    continue
                _, bx = run.baseline_cell(n, c)
                _, by = hist.baseline_cell(n, c)
                fx, fy = run.floor(n, wl), hist.floor(n, wl)
                rx = ratio(x["lat_mean_ms"], bx and bx["lat_mean_ms"])
                ry = ratio(y["lat_mean_ms"], by and by["lat_mean_ms"])
                px = ratio(x["lat_p50_ms"], fx and fx[1]) if c == 1 else None
                py = ratio(y["lat_p50_ms"], fy and fy[1]) if c == 1 else None
                if rx is None and px is None:
                    continue
                rows.append([f"`{n}`", str(c), f"`{x.get('baseline') or ''}`", fmt(ry, 2), fmt(rx, 2),
                             fmt(py, 2), fmt(px, 2)])
        table(o, ["workload", "clients", "baseline", "× base then", "× base now",
                  "× floor (p50) then", "× floor (p50) now"], rows,
              ["---", "---:", "---", "---:", "---:", "---:", "---:"])

    o += ["", "Against the libraries applications use (node-redlock, rate-limiter-flexible): "
          "`make bench-apps`, [apps/results.md](../apps/results.md)."]
    text = "\n".join(o) + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text)
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
