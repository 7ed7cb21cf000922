#!/usr/bin/env python3
"""bench/apps/report.py -- turn bench.js's JSON lines into the report.

    bench/apps/report.py RUN.jsonl OUT.md [LOAD_AT_START [LOAD_AT_END [OTHER]]]

(LOAD_AT_END: the load average now, unless given, as a test gives it.
OTHER: the share of a core other processes used while the run ran, as
run.sh measures it; given, a run is judged under load by it and the load at
the start, not by the load at the end, which counts the run's own clients.)

Only reads and formats.  Every ratio is between two modes of the same round
(same clients), and what the tables show is the median over rounds of those
per-round numbers: a round that ran while the machine was busier moves both
sides of its ratio.  Charts are SVG files beside OUT.md, drawn with
bench/report.py's helpers, one per table, a picture of numbers the table
prints.
"""
import json
import os
import statistics
import sys

sys.dont_write_bytecode = True   # no __pycache__ in the tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import PALETTE, esc, fmt, nice_max, tick, write_chart  # noqa: E402

# mode: (label, client round trips / backend->Redis round trips, chart label)
MODES = {
    "redlock_cycle": ("node-redlock acquire + release", "2 Redis", "node-redlock"),
    "rp_cycle": ("rp_acquire, then rp_release(name, token)", "2 PG (+2 PG→Redis)", "rp_acquire + rp_release"),
    "redlock_section": ("node-redlock + INCR fence + UPDATE … WHERE fence_token <= $t + release", "3 Redis + 1 PG", "node-redlock + INCR + UPDATE"),
    "rp_one_trip": ("BEGIN; rp_acquire_xact; UPDATE; COMMIT as one string (lock-bound guard)", "1 PG (+2 PG→Redis)", "rp: one string (BEGIN … COMMIT)"),
    "rp_one_stmt": ("WITH lease AS (rp_acquire_xact) UPDATE … FROM lease, one named statement", "1 PG (+2 PG→Redis)", "rp: one statement (WITH lease)"),
    "rp_one_trip_send": ("the one string, `release_at_commit = send`", "1 PG (+1½ PG→Redis)", "rp: one string, release sent"),
    "rp_one_stmt_send": ("the one named statement, `release_at_commit = send`", "1 PG (+1½ PG→Redis)", "rp: one statement, release sent"),
    "rp_one_stmt_unnamed": ("the one statement unnamed: planned at every call", "1 PG (+2 PG→Redis)", "rp: one statement, unnamed"),
    "rp_four_trips": ("the slow way: BEGIN, rp_acquire_xact, UPDATE, COMMIT as four queries", "4 PG (+2 PG→Redis)", "rp: four round trips (slow way)"),
    "update_only": ("the UPDATE alone, no lock, no trigger (the floor)", "1 PG", "UPDATE alone (floor)"),
    "rlf_admit": ("rate-limiter-flexible consume, then the query", "1 Redis + 1 PG", "rate-limiter-flexible + query"),
    "rp_admit": ("rp_ratelimit in FROM, the query gated on it: one named statement", "1 PG (+1 PG→Redis)", "rp_ratelimit folded"),
    "rp_admit_gcra": ("the same statement with `gcra` (`TIME`, `GET`, `SET` in Redis)", "1 PG (+1 PG→Redis)", "rp_ratelimit folded, gcra"),
    "rp_admit_unnamed": ("the same statement unnamed: planned at every call", "1 PG (+1 PG→Redis)", "rp_ratelimit folded, unnamed"),
    "query_only": ("the query alone (the floor)", "1 PG", "query alone (floor)"),
    "rlf_refuse": ("rate-limiter-flexible consume, refused", "1 Redis", "rate-limiter-flexible"),
    "rlf_refuse_memory": ("rate-limiter-flexible with inMemoryBlockOnConsumed, refused", "none", "RLF inMemoryBlockOnConsumed"),
    "rp_refuse": ("the rp_admit statement, refused (refusal cache)", "1 PG (+0 PG→Redis)", "rp_ratelimit folded (cache)"),
    "pg_select1": ("SELECT 1 through pool.query", "1 PG", "SELECT 1"),
    "redis_ping": ("ioredis PING", "1 Redis", "Redis PING"),
}
GROUPS = [
    ("lock", "redlock_cycle", "(a) The lock cycle alone",
     "Take a lock and give it back, nothing in between. Node-redlock talks to Redis directly; "
     "the extension is a PostgreSQL round trip for each call, and the backend makes its own Redis "
     "round trip inside each: **this is where the extra hop costs**, twice. A caller that needs a "
     "lock *outside* the database (no PostgreSQL write to fence) should use a Redis client library "
     "directly (node-redlock, or a single `SET NX PX` + compare-and-delete script)."),
    ("section", "redlock_section", "(b)–(d) The whole fenced critical section",
     "Lock, a fenced write of one row, release. Sent as one string or one statement, the extension "
     "makes one client round trip where the redlock pattern makes four; the backend's two Redis "
     "round trips (acquire, and release at COMMIT) are loopback calls from the database host. "
     "The slow way (four round trips, one per statement) gives that advantage back."),
    ("admit", "rlf_admit", "(e) Rate limit, admitted, with the request's query",
     "An admitted request: the limiter decides, then the request's own query (a primary-key read) "
     "runs. Folded into one statement the extension saves the client's separate Redis round trip "
     "but adds the backend's; rate-limiter-flexible counts a fixed window (`INCRBY` + `EXPIRE` in "
     "one script), the extension a sliding window, and `gcra` (`TIME`, `GET`, `SET`) to show "
     "whether the script or the round trip is what the request pays for."),
    ("refuse", "rlf_refuse", "(f) Rate limit, a hot key refused every time",
     "The abuse case. `rp_ratelimit` answers a refusal Redis already gave from the server's "
     "shared-memory refusal cache (no Redis round trip), and the gated query does not run. "
     "rate-limiter-flexible's `inMemoryBlockOnConsumed` does the same inside the Node process, "
     "which costs nothing at all — but only for the process that saw the refusal."),
    ("floor", None, "Floors: one round trip, no work", ""),
]

# The goals, in time per request (the base's throughput over the mode's,
# within a round: the same clients, so time scales as 1 / throughput):
# (mode, base, base's name, goal at 1 client, goal at 8 clients).
GOALS = [
    ("rp_one_stmt", "redlock_section", "node-redlock + INCR + UPDATE", 0.7, 0.8),
    ("rp_one_stmt_send", "redlock_section", "node-redlock + INCR + UPDATE", 0.7, 0.8),
    ("rp_one_trip", "redlock_section", "node-redlock + INCR + UPDATE", 0.7, 0.8),
    ("rp_one_trip_send", "redlock_section", "node-redlock + INCR + UPDATE", 0.7, 0.8),
    ("rp_one_stmt", "update_only", "the bare UPDATE", 1.4, 1.4),
    ("rp_one_stmt_send", "update_only", "the bare UPDATE", 1.4, 1.4),
    ("rp_admit", "rlf_admit", "rate-limiter-flexible + query", 1.0, 1.0),
    ("rp_refuse", "rlf_refuse", "rate-limiter-flexible, refused", 1.0, 1.0),
]


def base_ops(rounds, base, clients, rnd):
    """The base's ops/s in that round at that client count; None when it
    did not run or completed no request (its ratio then says nothing)."""
    b = [x for x in rounds if x["mode"] == base and x["clients"] == clients and x["round"] == rnd]
    return b[0]["ops_s"] if b and b[0]["ops_s"] else None


def goals(rounds, judged):
    """The goals table: median over rounds of base ops/s ÷ mode ops/s.
    judged: False for a run under load, whose ratios judge nothing."""
    o = ["## Against the goals", "",
         "Time per request of the extension's form ÷ the other's, at the same number of clients "
         "(the inverse of the throughput ratio, taken per round, median): below 1, the extension's "
         "request took less time.", "",
         "| form | against | clients | time ratio | goal | met |",
         "| --- | --- | ---: | ---: | ---: | --- |"]
    for mode, base, base_name, g1, g8 in GOALS:
        for c, goal in ((1, g1), (8, g8)):
            mine = [r for r in rounds if r["mode"] == mode and r["clients"] == c]
            if not mine:
                continue
            # A round whose base completed no request says nothing about
            # the goal; a mode that completed none took forever.
            ratios = []
            for r in mine:
                b = base_ops(rounds, base, c, r["round"])
                if b:
                    ratios.append(b / r["ops_s"] if r["ops_s"] else float("inf"))
            m = med(ratios)
            shown = f"{m:.2f}" if m is not None and m != float("inf") else "–"
            # Failed requests on either side make the ratio a comparison of
            # something else: such a goal is not met, whatever the ratio.
            errors = sum(r["errors"] for r in rounds
                         if r["mode"] in (mode, base) and r["clients"] == c)
            if not judged:
                met = "not judged: under load"
            elif errors:
                met = f"no: {errors} failed requests"
            else:
                met = "yes" if m is not None and m <= goal else "no"
            o.append(f"| {MODES[mode][2]} | {base_name} | {c} | {shown} | ≤ {goal} | {met} |")
    return o + [""] if len(o) > 6 else []


def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def chart(title, groups):
    """groups: [(label, {clients: p50})] -> horizontal bars, one per client count."""
    counts = sorted({c for _, d in groups for c in d})
    row = 16 * len(counts) + 14
    left, right, top = 250, 90, 48
    width = 800
    height = top + row * len(groups) + 36
    xmax = nice_max(max([v for _, d in groups for v in d.values() if v] or [1]))
    scale = (width - left - right) / xmax
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'font-family="sans-serif" font-size="12">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="10" y="18" font-size="14" font-weight="bold">{esc(title)}: median p50 latency (ms)</text>']
    for i, c in enumerate(counts):
        x = left + 150 * i
        o.append(f'<rect x="{x}" y="28" width="10" height="10" fill="{PALETTE[i]}"/>'
                 f'<text x="{x + 14}" y="37">{c} client{"s" if c != 1 else ""}</text>')
    for i in range(0, 6):
        v = xmax * i / 5
        x = left + v * scale
        o.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - 28}" stroke="#ddd"/>')
        o.append(f'<text x="{x:.1f}" y="{height - 12}" text-anchor="middle">{tick(v)}</text>')
    for g, (label, d) in enumerate(groups):
        y = top + g * row
        o.append(f'<text x="{left - 6}" y="{y + 4 + 8 * len(counts)}" text-anchor="end">{esc(label)}</text>')
        for i, c in enumerate(counts):
            v = d.get(c)
            if v is None:
                continue
            yy = y + 4 + 16 * i
            o.append(f'<rect x="{left}" y="{yy}" width="{max(v * scale, 1):.1f}" height="13" fill="{PALETTE[i]}"/>')
            o.append(f'<text x="{left + v * scale + 4:.1f}" y="{yy + 11}">{fmt(v)}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def main():
    src, out = sys.argv[1], sys.argv[2]
    load_start = sys.argv[3] if len(sys.argv) > 3 else "?"
    rows = [json.loads(line) for line in open(src) if line.startswith("{")]
    rounds = [r for r in rows if r["kind"] == "round"]
    cores = os.cpu_count()
    load_end = float(sys.argv[4]) if len(sys.argv) > 4 else os.getloadavg()[0]
    start = float(load_start) if load_start.replace(".", "", 1).isdigit() else 0
    # OTHER: how much of a core other processes used on average while the
    # benchmark ran (run.sh).  Given, it judges the run, with the load at
    # the start: the load at the end counts the benchmark's own clients.
    other = float(sys.argv[5]) if len(sys.argv) > 5 else None
    if other is None:
        heavy = max(load_end, start) > cores
        seen = f"load average {load_start} at the start, {load_end:.1f} at the end, on {cores} cores"
    else:
        heavy = start > cores / 2 or other > 0.5
        seen = (f"load average {load_start} at the start, {load_end:.1f} at the end with the benchmark's "
                f"own load, on {cores} cores; other processes used {other:.2f} of a core on average "
                "while it ran")
    o = ["# bench/apps: results of one run", ""]
    if heavy:
        o += [f"**Measured under load ({seen}): a smoke check of the benchmark, not a result. "
              "Do not quote these numbers or ratios.**", ""]
    else:
        o += [seen[0].upper() + seen[1:] + ".", ""]
    o += ["Every mode ran in every round, the order rotated by one each round; each number is the "
          "median over rounds, and each ratio is taken within a round (same clients, same moment) "
          "before its median. `÷ base` is the mode's throughput over the Node library's in that "
          "round: above 1, the extension's form did more requests per second. Round trips: from the "
          "client, and in brackets those the PostgreSQL backend makes to Redis itself.", ""]
    nrounds = len({r["round"] for r in rounds})
    o += goals(rounds, not heavy)
    for key, base, title, text in GROUPS:
        g = [r for r in rounds if r["group"] == key]
        if not g:
            continue
        o += [f"## {title}", ""] + ([text, ""] if text else [])
        o += ["| mode | round trips | clients | ops/s | p50 ms | p99 ms | ÷ base per round | ÷ base, median | errors |",
              "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
        series = {}
        modes = list(dict.fromkeys(r["mode"] for r in g))
        for mode in modes:
            for c in sorted({r["clients"] for r in g}):
                mine = [r for r in g if r["mode"] == mode and r["clients"] == c]
                if not mine:
                    continue
                ratios = []
                if base and mode != base:
                    for r in mine:
                        b = base_ops(g, base, c, r["round"])
                        if b:
                            ratios.append(r["ops_s"] / b)
                p50 = med([r["p50"] for r in mine])
                series.setdefault(MODES[mode][2], {})[c] = p50
                o.append(f"| {MODES[mode][0]} | {MODES[mode][1]} | {c} | {fmt(med([r['ops_s'] for r in mine]))} | "
                         f"{fmt(p50)} | {fmt(med([r['p99'] for r in mine]))} | "
                         f"{' '.join(f'{x:.2f}' for x in ratios) or '–'} | "
                         f"{f'{med(ratios):.2f}' if ratios else '–'} | {sum(r['errors'] for r in mine)} |")
        o += ["", f"![{title}]({write_chart(out, key, chart(title, list(series.items())))})", ""]
    cache = [r for r in rows if r["kind"] == "cache"]
    if cache:
        c = cache[0]
        o += [f"Refusal cache: {c['cache_hits']} hits for {c['rp_refuse_calls']} refused calls measured "
              "(`rp_ratelimit_cache_info()`): every refusal was answered without Redis.", ""]
    exp = [r for r in rows if r["kind"] == "expiry"]
    if exp:
        o += ["## Leases of 200 ms expiring mid-work (8 clients, one account, 0–400 ms of work)", "",
              "Correctness, not speed: *lost increments* are writes the client saw succeed that are not "
              "in the balance; *stale writes* succeeded although another client had been granted a newer "
              "lease before they were issued.", "",
              "| side | attempts | writes acknowledged | refused | not acquired | balance grew | lost increments | stale writes accepted |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        o += [f"| {r['side']} | {r['attempts']} | {r['acked']} | {r['refused']} | {r['notAcquired']} | "
              f"{r['grew']} | {r['lost']} | {r['stale']} |" for r in exp]
        o.append("")
    o += [f"{nrounds} round(s). What each mode does: [bench.js](bench.js); how to read it: [README.md](README.md)."]
    with open(out, "w") as f:
        f.write("\n".join(o) + "\n")
    print("\n".join(o))


if __name__ == "__main__":
    main()
