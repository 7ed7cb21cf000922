#!/usr/bin/python3
"""test/soak/check.py DIR -- the soak's checker: decides every invariant from the
history (DIR/history-*.jsonl) and the final state (DIR/final.json) alone.

Written apart from the extension and from soak/driver.py: it imports
nothing from either, talks to no server, and reads only what the driver
wrote, so a doctored history (soak/selftest.py) or a history copied from
another machine is checked the same way.  Prints one line per invariant
(checked, violations, excused) and the first violations of each with the
history excerpt that shows them; exits 1 if any invariant was violated.

The one thing to know: every check is one-sided.  It reports a violation
only when the recorded times PROVE one (an operation's effect happened
somewhere between its invocation and its completion, never at a guessed
instant); what the times cannot decide is counted as undecided, never as
passed or failed.  Invariants the design does not promise across a fault
(a Redis that lost its data, a key_prefix change, an immediate restart of
PostgreSQL) are excused inside that fault's window and counted as excused,
with the documented reason (docs/testing.md, "The soak").
"""
import bisect
import collections
import glob
import json
import os
import sys

# Windows after a fault in which the design promises less (microseconds):
# the longest lease a worker takes (1.5 s), the election lease (3 s), slack.
LOSS_SLACK_US = 5_000_000
RSS_SLACK_KB = int(os.environ.get("SOAK_RSS_SLACK_KB", "4096"))
FLOORED_PREFIXES = ("L-", "TK-", "SK-", "ST-", "F-")   # names acquired with a floor
NAIVE_TABLES = ("t_naive",)
INVARIANTS = ("history_complete", "fence_monotonic", "acked_writes_kept", "final_value", "no_lost_update",
              "strict_refuses_missing_token", "fence_unique", "epoch_unique", "epoch_floor", "redis_clock_is_ours",
              "ratelimit_sliding_log", "ratelimit_sliding_window", "ratelimit_gcra", "one_leader",
              "semaphore_permits", "no_stranded_lease", "memory_flat", "no_write_under_released_lease")
WRITE_KINDS = ("rmw_write", "xact_write", "nocol_write", "fenced_write", "leader_write")


class Report:
    def __init__(self):
        self.inv = collections.OrderedDict()

    def add(self, name, checked=0, violation=None, excused=None, undecided=0):
        r = self.inv.setdefault(name, {"checked": 0, "violations": [], "excused": [], "undecided": 0})
        r["checked"] += checked
        r["undecided"] += undecided
        if violation is not None:
            r["violations"].append(violation)
        if excused is not None:
            r["excused"].append(excused)


def load(d):
    events = []
    for p in sorted(glob.glob(os.path.join(d, "history-*.jsonl"))):
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        events.append(json.loads(line))
                    except ValueError:
                        events.append({"ev": "corrupt", "file": p, "line": line[:200]})
    with open(os.path.join(d, "final.json")) as f:
        final = json.load(f)
    return events, final


class History:
    def __init__(self, events):
        self.ops = collections.OrderedDict()
        self.other = collections.defaultdict(list)
        for e in events:
            ev = e.get("ev")
            if ev == "inv":
                self.ops[e["op"]] = {"inv": e, "end": None}
            elif ev in ("ok", "fail", "unknown"):
                if e.get("op") in self.ops:
                    self.ops[e["op"]]["end"] = e
                else:
                    self.other["orphan_end"].append(e)
            else:
                self.other[ev].append(e)
        self.faults = [o for o in self.ops.values() if o["inv"]["kind"] == "fault"]
        # Loss windows, in both clocks: [invocation, completion + slack].
        self.loss = []
        for f in self.faults:
            name = f["inv"]["fault"]
            res = (f["end"] or {}).get("res") or {}
            lossy = (name in ("redis_kill", "sentinel_failover") and (res.get("lost", True) or f["end"]["ev"] != "ok")) \
                or name == "key_prefix"
            if lossy:
                end = f["end"] or f["inv"]
                self.loss.append({"fault": name, "t0": f["inv"]["t"], "t1": end["t"] + LOSS_SLACK_US,
                                  "rt0": f["inv"]["rt"], "rt1": end["rt"] + LOSS_SLACK_US, "op": f["inv"]["op"]})
        # With Sentinel, every change of master is a loss too, whatever caused
        # it (a SIGSTOP longer than down-after-milliseconds does): the old
        # master keeps taking writes from clients still connected to it until
        # the sentinels demote it (docs/topology.md).  From 5 s before the
        # change was seen to 10 s after.
        rts = sorted((x for x in self.other["rtime"] if x.get("master") and "t0" in x), key=lambda x: x["t0"])
        for a, b in zip(rts, rts[1:]):
            if a["master"] != b["master"]:
                self.loss.append({"fault": "failover %s -> %s" % (a["master"], b["master"]),
                                  "t0": a["t0"] - LOSS_SLACK_US, "t1": b["t1"] + 2 * LOSS_SLACK_US,
                                  "rt0": a["rt0"] - LOSS_SLACK_US, "rt1": b["rt1"] + 2 * LOSS_SLACK_US, "op": None})
        # ... and every sample in which two nodes answered ROLE as master
        # (the old one not demoted yet): from 5 s before to 5 s after.
        for x in rts:
            if len(x.get("masters") or []) > 1:
                self.loss.append({"fault": "two masters %s" % x["masters"],
                                  "t0": x["t0"] - LOSS_SLACK_US, "t1": x["t1"] + LOSS_SLACK_US,
                                  "rt0": x["rt0"] - LOSS_SLACK_US, "rt1": x["rt1"] + LOSS_SLACK_US, "op": None})
        self.restarts = collections.defaultdict(list)   # server -> [(t0, t1)]
        for f in self.faults:
            if f["inv"]["fault"] == "pg_restart" and f["end"] is not None:
                srv = (f["end"].get("res") or {}).get("srv")
                if srv:
                    self.restarts[srv].append((f["inv"]["t"], f["end"]["t"] + LOSS_SLACK_US))

    def in_loss(self, t0, t1, clock="t", redis_only=False, fault=None):
        """The loss window [t0, t1] overlaps, if any; redis_only: only those
        where Redis itself lost writes (not a key_prefix change); fault:
        only those of that fault."""
        a, b = ("t0", "t1") if clock == "t" else ("rt0", "rt1")
        for w in self.loss:
            if (redis_only and w["fault"] == "key_prefix") or (fault and w["fault"] != fault):
                continue
            if t0 <= w[b] and t1 >= w[a]:
                return w
        return None

    def kind(self, *kinds):
        return [o for o in self.ops.values() if o["inv"]["kind"] in kinds]


def excerpt(*ops):
    out = []
    for o in ops:
        if o is None:
            continue
        out.append(json.dumps(o["inv"], sort_keys=True))
        out.append(json.dumps(o["end"], sort_keys=True) if o["end"] else "  (no completion)")
    return out


# ---- 1 + 2: fencing and accepted writes, from the audit ---------------------

def lease_acquire(h, o):
    """The acquire of the lease write o ran under: its thread's last acquire
    of the name before o (None if there is none)."""
    th = o["inv"]["th"]
    return max((x for x in h.kind("acquire") if x["inv"]["th"] == th and x["inv"]["t"] < o["inv"]["t"]
                and x["inv"]["name"] == o["inv"]["name"]), key=lambda x: x["inv"]["t"], default=None)


def check_tables(h, final, rep):
    audit = collections.defaultdict(list)          # (srv, tbl, id) -> rows by seq
    by_op = {}
    for a in final["audit"]:
        audit[(a["srv"], a["tbl"], a["id"])].append(a)
        if a["op"] is not None:
            by_op.setdefault(a["op"], []).append(a)
    for rows in audit.values():
        rows.sort(key=lambda a: a["seq"])

    # Fence tokens per row never go down, in commit order (soak/sql/common.sql).
    for key, rows in audit.items():
        name = "fence_monotonic" + ("[naive twin]" if key[1] in NAIVE_TABLES else "")
        top = None
        for a in rows:
            rep.add(name, checked=1)
            if top is not None and a["token"] is not None and a["token"] < top["token"]:
                rep.add(name, violation={
                    "what": "%s.%s id %s accepted token %d after token %d" % (key[0], key[1], key[2], a["token"], top["token"]),
                    "history": excerpt(h.ops.get(top["op"]), h.ops.get(a["op"])) + [json.dumps(top), json.dumps(a)]})
            if a["token"] is not None and (top is None or a["token"] >= top["token"]):
                top = a

    # Every acknowledged write is in the audit exactly once; every refused or
    # failed one is not; nothing in the audit comes from nowhere.
    for o in h.kind(*WRITE_KINDS):
        inv, end = o["inv"], o["end"]
        tbl = inv["tbl"]
        name = "acked_writes_kept" + ("[naive twin]" if tbl in NAIVE_TABLES else "")
        rows = [a for a in by_op.get(inv["op"], []) if a["srv"] == inv["srv"] and a["tbl"] == tbl]
        if end is None or end["ev"] == "unknown":
            rep.add(name, undecided=1)
            continue
        rep.add(name, checked=1)
        res = end.get("res")
        if end["ev"] == "ok":
            if inv["kind"] == "fenced_write":
                applied = res is True
            elif inv["kind"] == "leader_write":
                applied = res is not None
            elif inv["kind"] == "rmw_write":
                applied = res == 1
            else:
                applied = res.get("lease") is not None and res.get("rows") == 1
        else:
            applied = False
        if applied and len(rows) != 1:
            rep.add(name, violation={"what": "acknowledged write %s is in the audit %d times" % (inv["op"], len(rows)),
                                     "history": excerpt(o)})
        if not applied and rows:
            rep.add(name, violation={"what": "write %s was refused or failed (%s) yet committed" % (
                inv["op"], end.get("state") or end.get("res")), "history": excerpt(o) + [json.dumps(r) for r in rows]})
        if applied and rows and inv.get("delta") is not None and inv["kind"] != "rmw_write":
            if rows[0]["new"] - rows[0]["old"] != inv["delta"]:
                rep.add(name, violation={"what": "write %s added %d, not its delta %d" % (
                    inv["op"], rows[0]["new"] - rows[0]["old"], inv["delta"]), "history": excerpt(o)})
    for op, rows in by_op.items():
        if op not in h.ops:
            rep.add("acked_writes_kept", violation={"what": "the audit holds a write no worker invoked (%s)" % op,
                                                    "history": [json.dumps(r) for r in rows]})

    # The final value is the audit's last value, and the chain has no gap:
    # each write started from the value the previous one left.
    for key, rows in audit.items():
        name = "final_value" + ("[naive twin]" if key[1] in NAIVE_TABLES else "")
        t = final["tables"].get("%s.%s" % (key[0], key[1]))
        if t is None:
            continue
        row = next((r for r in t if r["id"] == key[2]), None)
        rep.add(name, checked=1)
        last = rows[-1]
        if key[1] == "rp_fenced_store":
            if row is None or row["op_id"] != last["op"] or row["token"] != last["token"]:
                rep.add(name, violation={"what": "rp_fenced_store %s holds %s, its last accepted write was %s" % (
                    key[2], row, last["op"]), "history": [json.dumps(last)]})
            continue
        if row is None or row["value"] != last["new"]:
            rep.add(name, violation={"what": "%s.%s id %s final value %s, the audit's last write left %s" % (
                key[0], key[1], key[2], row and row["value"], last["new"]), "history": [json.dumps(last)]})
        prev = 0
        for a in rows:
            if a["old"] != prev:
                rep.add(name, violation={"what": "%s.%s id %s: a write found %s where the last committed write left %s" % (
                    key[0], key[1], key[2], a["old"], prev), "history": [json.dumps(a)]})
            prev = a["new"]

    # Lost updates (read-modify-write across transactions under a lease):
    # a write whose read is not the value it overwrote lost an increment.
    for key, rows in audit.items():
        if key[1] not in ("t_lock",) + NAIVE_TABLES:
            continue
        name = "no_lost_update" + ("[naive twin]" if key[1] in NAIVE_TABLES else "")
        for a in rows:
            rep.add(name, checked=1)
            if a["read"] is not None and a["read"] != a["old"]:
                o = h.ops.get(a["op"])
                acq = lease_acquire(h, o) if o is not None else None
                t0 = (acq or o or {"inv": {"t": 0}})["inv"]["t"]
                t1 = o["end"]["t"] if o and o["end"] else 1 << 62
                w = h.in_loss(t0, t1)
                v = {"what": "%s.%s id %s: write %s read %s but overwrote %s (lost %d)" % (
                    key[0], key[1], key[2], a["op"], a["read"], a["old"], a["old"] - a["read"]),
                     "history": excerpt(acq, o) + [json.dumps(a)]}
                if w and key[1] not in NAIVE_TABLES:
                    v["excused_by"] = w
                    rep.add(name, excused=v)
                else:
                    rep.add(name, violation=v)

    # Strict guards refuse an UPDATE that does not assign the column.
    for o in h.kind("nocol_write"):
        if o["end"] is None or o["end"]["ev"] == "unknown":
            continue
        res = o["end"].get("res") or {}
        if o["end"]["ev"] == "fail" or res.get("lease") is None:
            # Counted when the guard itself refused it (RP004); a call that
            # failed before the UPDATE (no lease, Redis down) tested nothing.
            # Either way nothing committed (acked_writes_kept checks that).
            if o["end"].get("state") == "RP004":
                rep.add("strict_refuses_missing_token", checked=1)
            continue
        rep.add("strict_refuses_missing_token", checked=1, violation={
            "what": "strict guard accepted an UPDATE without the token (%s)" % o["inv"]["op"], "history": excerpt(o)})


# ---- 3: no fence token or epoch issued twice --------------------------------

def lease_of(o):
    end = o["end"]
    if end is None or end["ev"] != "ok":
        return None
    res = end.get("res")
    if isinstance(res, dict) and "fence" in res:
        return res
    if isinstance(res, dict) and isinstance(res.get("lease"), dict):
        return res["lease"]
    return None


def first_token(write_op):
    """The token of the lease a write was made under (xact writes carry it)."""
    res = (write_op["end"] or {}).get("res")
    if isinstance(res, dict) and isinstance(res.get("lease"), dict):
        return res["lease"]["token"]
    return write_op["inv"].get("token")


def check_unique(h, final, rep):
    issued = collections.defaultdict(list)            # (name, fence) -> ops
    for o in h.kind("acquire", "xact_write", "nocol_write"):
        l = lease_of(o)
        if l is not None:
            issued[(o["inv"]["name"], l["fence"])].append(o)
    # When did the database first accept each (name, fence)?  An acked write.
    accepted = {}
    for o in h.kind(*WRITE_KINDS):
        if o["end"] is None or o["end"]["ev"] != "ok" or "name" not in o["inv"]:
            continue
        res = o["end"].get("res")
        fence = o["inv"].get("fence")
        if fence is None and isinstance(res, dict) and res.get("lease"):
            fence = res["lease"]["fence"]
        good = res is True or res == 1 or (isinstance(res, dict) and res.get("rows") == 1)
        if fence is not None and good:
            k = (o["inv"]["name"], fence)
            if k not in accepted or o["end"]["t"] < accepted[k]["end"]["t"]:
                accepted[k] = o
    for (name, fence), ops in issued.items():
        floored = name.startswith(FLOORED_PREFIXES)
        inv_name = "fence_unique" if floored else "fence_unique[no floor: info]"
        rep.add(inv_name, checked=1)
        # An acquire of a name the session already holds returns that same
        # lease (same token): one issue, however many acquires returned it.
        ops.sort(key=lambda o: o["inv"]["t"])
        first_of = {}
        for o in ops:
            first_of.setdefault(lease_of(o)["token"], o)
        ops = list(first_of.values())
        if len(ops) < 2:
            continue
        first = accepted.get((name, fence))
        for later in ops:
            if first is None or later is first or later["inv"]["t"] <= first["end"]["t"] \
                    or lease_of(later)["token"] == first_token(first):
                continue
            if later["inv"]["th"] == first["inv"]["th"] and later["inv"]["op"] == first["inv"]["op"]:
                continue
            v = {"what": "fence %d of %s was accepted by the table (%s) and issued again later (%s)" % (
                fence, name, first["inv"]["op"], later["inv"]["op"]), "history": excerpt(first, later)}
            if floored:
                rep.add(inv_name, violation=v)
            else:
                rep.add(inv_name, excused=v)

    # Epochs: one node per epoch, from every leadership sample of both servers.
    seen = collections.defaultdict(dict)              # epoch -> node -> first sample
    for s in h.other["leader"]:
        # A follower's row shows the epoch it sees, under its own node_id:
        # only a sample that believes it leads says who holds the epoch.
        if s.get("leader") and s.get("epoch") is not None and s.get("node"):
            seen[s["epoch"]].setdefault(s["node"], s)
    for epoch, nodes in seen.items():
        rep.add("epoch_unique", checked=1)
        if len(nodes) > 1:
            ss = sorted(nodes.values(), key=lambda s: s["t0"])
            a, b = ss[0], ss[1]
            # Documented: the elector's floor lives in shared memory; a server
            # restarted after a Redis data loss does not know old epochs.
            excuse = None
            for r0, r1 in h.restarts.get(b["srv"], []):
                w = h.in_loss(r0, b["t1"], redis_only=True)
                if r0 < b["t1"] and w:
                    excuse = w
            # Documented: until every server has reloaded a new key_prefix,
            # each prefix has its own election, and two electors whose floor
            # is the same last epoch both take the next one.
            w = h.in_loss(b["t0"], b["t1"], fault="key_prefix")
            if w:
                excuse = w
            v = {"what": "epoch %d held by %s and %s" % (epoch, a["node"], b["node"]),
                 "history": [json.dumps(a), json.dumps(b)]}
            if excuse:
                v["excused_by"] = excuse
                rep.add("epoch_unique", excused=v)
            else:
                rep.add("epoch_unique", violation=v)
    # The elector's floor: each new term of a server's elector has a higher
    # epoch than every term it held before, even after Redis lost the
    # counter; only a restart of that server (the floor is in shared memory)
    # excuses a step back.
    for srv in sorted({s["srv"] for s in h.other["leader"]}):
        top = None
        for s in sorted((s for s in h.other["leader"] if s["srv"] == srv and s.get("leader") and s.get("epoch")),
                        key=lambda s: s["t0"]):
            rep.add("epoch_floor", checked=1)
            if top is not None and s["epoch"] < top["epoch"]:
                if any(top["t0"] <= r0 <= s["t1"] for r0, _ in h.restarts.get(srv, [])):
                    top = s         # a new life of the server, a new floor
                    continue
                rep.add("epoch_floor", violation={
                    "what": "%s led with epoch %d after leading with epoch %d, with no restart between" % (
                        srv, s["epoch"], top["epoch"]), "history": [json.dumps(top), json.dumps(s)]})
            if top is None or s["epoch"] > top["epoch"]:
                top = s
    # The same epoch accepted by both servers' leader-bound tables.
    tok = collections.defaultdict(set)
    for a in final["audit"]:
        if a["tbl"] == "t_leader":
            tok[a["token"]].add(a["srv"])
    for epoch, srvs in tok.items():
        rep.add("epoch_unique", checked=1)
        if len(srvs) > 1 and not any(len(seen.get(epoch, {})) > 1 for _ in [0]):
            rep.add("epoch_unique", violation={"what": "epoch %d stamped by both servers' t_leader" % epoch,
                                               "history": sorted(srvs)})


# ---- 4: the rate limiter, on Redis' clock -----------------------------------

def check_clock(h, rep):
    for s in h.other["rtime"]:
        rep.add("redis_clock_is_ours", checked=1)
        if not (s["rt0"] - 1000 <= s["redis_us"] <= s["rt1"] + 1000):
            rep.add("redis_clock_is_ours", violation={
                "what": "Redis TIME %d outside the bracket [%d, %d]" % (s["redis_us"], s["rt0"], s["rt1"]),
                "history": [json.dumps(s)]})


def check_ratelimit(h, rep):
    adm = collections.defaultdict(list)
    for o in h.kind("ratelimit"):
        if o["end"] is not None and o["end"]["ev"] == "ok" and o["end"].get("res") is True:
            i = o["inv"]
            adm[(i["key"], i["algo"], i["limit"], i["window"])].append(
                {"a": i["rt"] // 1000, "b": o["end"]["rt"] // 1000, "c": i["cost"], "o": o})
    for (key, algo, L, W), xs in adm.items():
        xs.sort(key=lambda x: x["a"])
        name = "ratelimit_" + algo
        if algo == "sliding_log":
            # (t - W, t] holds at most L units: count those surely before k
            # and surely inside k's window.
            starts = [x["a"] for x in xs]
            for k in xs:
                lo = bisect.bisect_left(starts, k["b"] - W + 2)
                hi = bisect.bisect_right(starts, k["a"])
                s = [x for x in xs[lo:hi] if x is not k and x["b"] <= k["a"]]
                tot = sum(x["c"] for x in s) + k["c"]
                if h.in_loss(s[0]["a"] * 1000 if s else k["a"] * 1000, k["b"] * 1000, "rt"):
                    rep.add(name, undecided=1)
                    continue
                rep.add(name, checked=1)
                if tot > L:
                    rep.add(name, violation={"what": "%s: %d units admitted within one %d ms window (limit %d)" % (
                        key, tot, W, L), "history": excerpt(*[x["o"] for x in s + [k]])[-12:]})
        elif algo == "sliding_window":
            # The bucket [nW, (n+1)W) never takes more than L units.
            buckets = collections.defaultdict(list)
            for x in xs:
                if x["a"] // W == x["b"] // W:
                    buckets[x["a"] // W].append(x)
                else:
                    rep.add(name, undecided=1)
            for n, s in buckets.items():
                if h.in_loss(n * W * 1000, (n + 1) * W * 1000, "rt"):
                    rep.add(name, undecided=len(s))
                    continue
                rep.add(name, checked=len(s))
                tot = sum(x["c"] for x in s)
                if tot > L:
                    rep.add(name, violation={"what": "%s: %d units admitted in bucket %d (limit %d)" % (key, tot, n, L),
                                             "history": excerpt(*[x["o"] for x in s])[-12:]})
        elif algo == "gcra":
            # In any [t1, t2]: at most L + L (t2 - t1) / W units.
            for i, x in enumerate(xs):
                tot, hi = 0, x["b"]
                for j in range(i, len(xs)):
                    y = xs[j]
                    if y["a"] - x["a"] > 3 * W:
                        break
                    tot += y["c"]
                    hi = max(hi, y["b"])
                    if tot * W > L * W + L * (hi - x["a"]):
                        if h.in_loss(x["a"] * 1000, hi * 1000, "rt"):
                            rep.add(name, undecided=1)
                            break
                        rep.add(name, violation={"what": "%s: %d units admitted within [%d, %d] ms (at most %.1f)" % (
                            key, tot, x["a"], hi, L + L * (hi - x["a"]) / W),
                            "history": excerpt(*[z["o"] for z in xs[i:j + 1]])[-12:]})
                        break
                rep.add(name, checked=1)


# ---- 5: leadership beliefs never overlap ------------------------------------

def check_leaders(h, rep):
    ss = [s for s in h.other["leader"] if s.get("leader")]
    by = collections.defaultdict(list)
    for s in ss:
        by[s["srv"]].append(s)
    srvs = sorted({s["srv"] for s in h.other["leader"]})
    for x in srvs:
        for y in srvs:
            if x == y:
                continue
            ys = sorted(by[y], key=lambda s: s["rt0"])
            starts = [s["rt0"] for s in ys]
            for a in by[x]:
                rep.add("one_leader", checked=1)
                vu = a.get("valid_until")
                if vu is None:
                    continue
                # a believed at some instant <= a.rt1 and, per its deadline,
                # can only have been elected in Redis until after vu; y's belief
                # at an instant inside (a.rt1, vu) means y was elected while
                # a's lease still lived in Redis.
                k = bisect.bisect_right(starts, a["rt1"])
                if k < len(ys) and ys[k]["rt1"] < vu and ys[k]["node"] != a["node"]:
                    b = ys[k]
                    v = {"what": "%s (%s epoch %s) believed it led until %d; %s (%s epoch %s) believed it led at [%d, %d]" % (
                        x, a["node"], a["epoch"], vu, y, b["node"], b["epoch"], b["rt0"], b["rt1"]),
                         "history": [json.dumps(a), json.dumps(b)]}
                    w = h.in_loss(a["t0"], b["t1"])
                    if w:
                        v["excused_by"] = w
                        rep.add("one_leader", excused=v)
                    else:
                        rep.add("one_leader", violation=v)


# ---- semaphores: never more holders than permits -----------------------------

def check_semaphores(h, rep):
    iv = []
    # A holder's release: the first release of that fence by the same thread
    # after the acquire (fences repeat after Redis lost the counter).
    rel = collections.defaultdict(list)
    for o in h.kind("release"):
        if o["inv"]["name"] == "SEM-1":
            rel[(o["inv"]["th"], o["inv"].get("fence"))].append(o)
    # Each holder's interval must lie inside the time Redis held its permit:
    # from the acquire's completion to the earliest of the deadline
    # (invocation + TTL), the release's invocation, the COMMIT's invocation.
    # A holder whose session died holding it was released at an instant the
    # history does not know (exit release): undecided, not counted.
    for o in h.kind("sem_acquire", "sem_xact"):
        l = lease_of(o)
        inv = o["inv"]
        deadline = inv["rt"] + inv["ttl"] * 1000 - 2000
        if inv["kind"] == "sem_xact":
            if o["end"] is None or o["end"]["ev"] != "ok" or not (o["end"].get("res") or {}).get("lease"):
                if o["end"] is not None and o["end"]["ev"] != "ok":
                    rep.add("semaphore_permits", undecided=1)
                continue
            fence = o["end"]["res"]["lease"]["fence"]
            held = [e for e in h.other["sem_held"] if e["th"] == inv["th"] and e["fence"] == fence
                    and inv["t"] <= e["t"] <= o["end"]["t"]]
            done = [e for e in h.other["sem_commit"] if e["th"] == inv["th"] and e["fence"] == fence
                    and inv["t"] <= e["t"] <= o["end"]["t"]]
            if not held or not done:
                continue
            start, end = held[0]["rt"], min(deadline, done[0]["rt"])
        else:
            if l is None:
                continue
            r = next((x for x in rel.get((inv["th"], l["fence"]), []) if x["inv"]["t"] > o["inv"]["t"]), None)
            if r is None or r["end"] is None or r["end"]["ev"] != "ok":
                rep.add("semaphore_permits", undecided=1)
                continue
            start, end = o["end"]["rt"], min(deadline, r["inv"]["rt"])
        if end > start:
            iv.append((start, end, o))
    iv.sort(key=lambda x: x[0])
    active = []
    for i, (s, e, o) in enumerate(iv):
        rep.add("semaphore_permits", checked=1)
        active = [x for x in active if x[1] > s]
        inside = list(active)
        active.append((s, e, o))
        permits = o["inv"]["permits"]
        if len(inside) + 1 > permits:
            v = {"what": "%d holders of SEM-1 (permits %d) at %d" % (len(inside) + 1, permits, s),
                 "history": excerpt(*[x[2] for x in inside] + [o])}
            w = h.in_loss(min(x[2]["inv"]["t"] for x in inside + [(s, e, o)]), o["end"]["t"] if o["end"] else o["inv"]["t"])
            if w:
                v["excused_by"] = w
                rep.add("semaphore_permits", excused=v)
            else:
                rep.add("semaphore_permits", violation=v)


# ---- 6: nothing stranded, memory flat ---------------------------------------

def check_end(h, final, rep):
    tokens = {}
    for o in h.ops.values():
        l = lease_of(o)
        if l is not None and l.get("token"):
            tokens[l["token"]] = o
    # Every lease that ended is covered (the 60 s ones make a stranded one visible).
    for o in h.kind("acquire"):
        if lease_of(o) is not None and o["inv"]["name"].startswith("X-"):
            rep.add("no_stranded_lease", checked=1)
    # Acquires that failed with their outcome unknown (the connection lost,
    # a timeout, a cancel after the script was sent, the backend gone in an
    # immediate restart with the script sent: ev "unknown"): Redis may have granted
    # the lease with a token only that backend knew.  The backend releases
    # such an acquire at its next transaction ends (docs/lock.md, "A
    # timed-out acquire may still take effect"); a failover can lose that
    # release like any other write.
    unknown = collections.defaultdict(list)         # lock key name -> ops
    for o in h.kind("acquire"):
        end = o["end"]
        if end is None or end["ev"] == "unknown" or \
                end["ev"] == "fail" and (end.get("state") or "")[:2] in ("08", "57"):
            unknown[o["inv"]["name"]].append(o)
    for k in final["redis"]:
        if not k["key"].endswith(":lock"):
            continue
        if (k["value"] or "").startswith("election:"):
            continue        # a running elector's term, not a session's lease
        o = tokens.get(k["value"])
        failed = None
        if o is None:
            name = k["key"][k["key"].find("{") + 1:k["key"].rfind("}")]
            failed = next(iter(sorted(unknown.get(name, []), key=lambda x: x["inv"]["t"])), None)
        v = {"what": "%s left in Redis with %d ms to live after every session ended (%s)" % (
            k["key"], k["pttl"], o["inv"]["op"] if o else
            "%s failed, outcome unknown" % failed["inv"]["op"] if failed else "no acquire in the history"),
             "history": excerpt(o) if o else excerpt(failed) if failed else [json.dumps(k)]}
        if failed is not None:
            # Its releases come at the failing transaction's end and the
            # next ones of the same worker: within the loss slack after the
            # failure.  Only a Redis that lost them excuses the key.
            t1 = failed["end"]["t"] if failed["end"] else failed["inv"]["t"] + 60_000_000
            w = h.in_loss(failed["inv"]["t"], t1 + LOSS_SLACK_US, redis_only=True)
            srv = failed["inv"].get("srv")
            if any(r0 <= t1 + LOSS_SLACK_US and r1 >= failed["inv"]["t"] for r0, r1 in h.restarts.get(srv, [])):
                v["excused_by"] = "immediate restart of %s while unsettled" % srv
                rep.add("no_stranded_lease", excused=v)
            elif w:
                v["excused_by"] = w
                rep.add("no_stranded_lease", excused=v)
            else:
                rep.add("no_stranded_lease", violation=v)
            continue
        # Documented: an immediate shutdown of PostgreSQL runs no exit
        # callbacks, and its background worker's memory of orphans is gone.
        srv = o["inv"].get("srv") if o else None
        # ... and a release that Redis lost: acknowledged by a master that a
        # failover then replaced, or lost with Redis' data.
        # A release answered "released" ends the lease then.  One that
        # failed leaves the release owed by the holder's backend (its next
        # transaction ends, its exit, the background worker) until the TTL.
        # One answered "not released" (a pooled one by token under the
        # other key_prefix) leaves the lease held: the holder lets go of it
        # when its session ends, so only a loss from then on explains the key.
        rel = None
        start = done = None
        if o:
            rel = next((r for r in h.kind("release") if r["inv"]["th"] == o["inv"]["th"]
                        and r["inv"]["name"] == o["inv"]["name"] and r["inv"]["t"] > o["inv"]["t"]), None)
            start, done = o["inv"]["t"], o["inv"]["t"] + 60_000_000
            rend = rel and rel["end"]
            if rend and rend["ev"] == "ok" and rend.get("res") is True:
                done = rend["t"]
            elif rend and rend["ev"] == "ok":
                start = min(session_ends(h, o["inv"]["th"], rel["inv"]["t"]), default=done) - LOSS_SLACK_US
        w = o and h.in_loss(start, done, redis_only=True)
        if o and any(r0 <= done and r1 >= o["inv"]["t"] for r0, r1 in h.restarts.get(srv, [])):
            v["excused_by"] = "immediate restart of %s while held" % srv
            rep.add("no_stranded_lease", excused=v)
        elif w:
            v["excused_by"] = w
            v["history"] += excerpt(rel)
            rep.add("no_stranded_lease", excused=v)
        else:
            rep.add("no_stranded_lease", violation=v)
    for srv, rows in final.get("rp_locks", {}).items():
        for r in rows:
            rep.add("no_stranded_lease", violation={"what": "rp_locks on %s still lists %s after every worker ended" % (srv, r),
                                                    "history": []})

    rss = collections.defaultdict(list)
    for s in h.other["rss"]:
        rss[(s["srv"], s["pid"])].append(s)
    for (srv, pid), xs in rss.items():
        xs.sort(key=lambda s: s["t"])
        warm = [s for s in xs if s["t"] >= xs[0]["t"] + 20_000_000]
        if len(warm) < 2 or warm[-1]["t"] - warm[0]["t"] < 30_000_000:
            rep.add("memory_flat", undecided=1)
            continue
        rep.add("memory_flat", checked=1)
        grew = warm[-1]["kb"] - warm[0]["kb"]
        if grew > RSS_SLACK_KB:
            rep.add("memory_flat", violation={"what": "%s backend %d (%s) RssAnon grew %d kB in %.0f s" % (
                srv, pid, xs[0]["w"], grew, (warm[-1]["t"] - warm[0]["t"]) / 1e6),
                "history": [json.dumps(warm[0]), json.dumps(warm[-1])]})


def session_ends(h, th, after):
    """When thread th's sessions may have ended after time after: each
    reconnect (the previous session was gone), each operation whose outcome
    is unknown (the driver closes that connection) and the thread's end."""
    ends = [e["t"] for e in h.other["connect"] + h.other["stopped"] if e.get("th") == th and e["t"] > after]
    ends += [o["end"]["t"] for o in h.ops.values() if o["inv"]["th"] == th and o["end"]
             and o["end"]["ev"] == "unknown" and o["inv"]["t"] > after]
    return ends


def check_released_leases(h, rep):
    """No lock-bound write accepted under a lease that this server had
    released (the nemesis' rp_release(name, token) from another connection,
    answered before the write was sent), or whose name another session had
    been granted before the write was sent.  The second is excused inside a
    loss window (Redis forgot the lease early: only a round trip sees that)."""
    released = {}                               # (srv, token) -> time the release answered
    for f in h.faults:
        res = (f["end"] or {}).get("res") or {}
        if f["inv"]["fault"] == "release_token" and f["end"]["ev"] == "ok" and res.get("released"):
            released[(res["srv"], res["token"])] = f["end"]["t"]
    grants = collections.defaultdict(list)      # name -> [(time granted, fence, thread)]
    for o in h.kind("acquire"):
        end = o["end"]
        if end and end["ev"] == "ok" and isinstance(end.get("res"), dict) and end["res"].get("fence"):
            grants[o["inv"]["name"]].append((end["t"], end["res"]["fence"], o["inv"]["th"]))
    for o in h.kind("rmw_write"):
        inv, end = o["inv"], o["end"]
        if inv["tbl"] in NAIVE_TABLES or end is None or end["ev"] != "ok" or end.get("res") != 1:
            continue
        rep.add("no_write_under_released_lease", checked=1)
        t = released.get((inv["srv"], inv.get("token")))
        if t is not None and t < inv["t"]:
            rep.add("no_write_under_released_lease", violation={
                "what": "%s wrote %s id %s under %s's lease (fence %s) released by token before the write" % (
                    inv["op"], inv["tbl"], inv["id"], inv["name"], inv["fence"]),
                "history": excerpt(o)})
            continue
        for gt, fence, th in grants.get(inv["name"], []):
            if th != inv["th"] and fence > inv["fence"] and gt < inv["t"]:
                what = "%s wrote %s id %s under fence %s after fence %s of %s was granted to %s" % (
                    inv["op"], inv["tbl"], inv["id"], inv["fence"], fence, inv["name"], th)
                w = h.in_loss(gt - LOSS_SLACK_US, end["t"])
                if w:
                    rep.add("no_write_under_released_lease",
                            excused={"what": what, "excused_by": w, "history": excerpt(o)})
                else:
                    rep.add("no_write_under_released_lease", violation={"what": what, "history": excerpt(o)})
                break


def check_history(h, rep):
    """The history itself: every operation completed, the driver made no error."""
    for o in h.ops.values():
        rep.add("history_complete", checked=1)
        if o["end"] is None:
            rep.add("history_complete", violation={"what": "operation %s never completed" % o["inv"]["op"],
                                                   "history": excerpt(o)})
    for e in h.other["driver_error"] + h.other["corrupt"]:
        rep.add("history_complete", violation={"what": "driver error", "history": [json.dumps(e)]})


def counts(h):
    ops = collections.Counter()
    outcomes = collections.Counter()
    for o in h.ops.values():
        k = o["inv"]["kind"]
        if k == "fault":
            continue
        ops[k] += 1
        end = o["end"]
        if end is None:
            outcomes["%s:incomplete" % k] += 1
        elif end["ev"] == "ok":
            res = end.get("res")
            refused = res is None or res is False or res == 0 or (isinstance(res, dict) and res.get("lease") is None)
            outcomes["%s:%s" % (k, "refused/null" if refused else "ok")] += 1
        else:
            outcomes["%s:%s %s" % (k, end["ev"], end.get("state"))] += 1
    faults = collections.Counter()
    for f in h.faults:
        res = (f["end"] or {}).get("res") or {}
        tag = f["inv"]["fault"]
        if tag == "redis_kill":
            tag += "(%s)" % ("data lost" if res.get("lost") else "aof kept")
        if f["end"] is None or f["end"]["ev"] != "ok":
            tag += "[failed]"
        faults[tag] += 1
    return ops, outcomes, faults


def main(d, quiet=False):
    events, final = load(d)
    return decide(events, final, d, quiet)


def decide(events, final, d="(doctored)", quiet=False):
    h = History(events)
    rep = Report()
    for name in INVARIANTS:         # printed even when this run never exercised them
        rep.add(name)
    check_history(h, rep)
    check_tables(h, final, rep)
    check_unique(h, final, rep)
    check_clock(h, rep)
    check_ratelimit(h, rep)
    check_leaders(h, rep)
    check_semaphores(h, rep)
    check_end(h, final, rep)
    check_released_leases(h, rep)
    ops, outcomes, faults = counts(h)
    start = (h.other.get("start") or [{}])[0]
    bad = 0
    if not quiet:
        print("soak check of %s: seed %s, %s s, %d operations, %d faults" % (
            d, start.get("seed"), start.get("seconds"), sum(ops.values()), sum(faults.values())))
        print("operations: " + ", ".join("%s %d" % kv for kv in sorted(ops.items())))
        print("outcomes:   " + ", ".join("%s %d" % kv for kv in sorted(outcomes.items())))
        print("faults:     " + ", ".join("%s %d" % kv for kv in sorted(faults.items())))
    for name, r in rep.inv.items():
        twin = "[naive twin]" in name or "[no floor" in name
        n = len(r["violations"])
        if not twin:
            bad += n
        if not quiet:
            print("%-4s %-40s checked %7d  violations %4d  excused %4d  undecided %6d" % (
                ("ok" if r["checked"] else "idle") if n == 0 else ("twin" if twin else "FAIL"), name, r["checked"], n, len(r["excused"]), r["undecided"]))
    if not quiet:
        for name, r in rep.inv.items():
            for v in r["violations"][:3] + r["excused"][:1]:
                tag = "excused" if "excused_by" in v else ("twin" if "[" in name else "VIOLATION")
                print("\n%s %s: %s" % (tag, name, v["what"]))
                if "excused_by" in v:
                    print("  excused by: %s" % json.dumps(v["excused_by"]))
                for line in v["history"][:10]:
                    print("    " + line[:400])
    # The naive twin must show the checker can see a broken configuration.
    twin = rep.inv.get("fence_monotonic[naive twin]", {"violations": []})["violations"] + \
        rep.inv.get("no_lost_update[naive twin]", {"violations": []})["violations"]
    return rep, bad, len(twin)


if __name__ == "__main__":
    rep, bad, twin = main(sys.argv[1])
    print("\nsoak: %d violations; naive twin: %d violations (the checker sees a table without a guard)" % (bad, twin))
    sys.exit(1 if bad else 0)
