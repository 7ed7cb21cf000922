#!/usr/bin/python3
"""test/soak/selftest.py DIR -- shows that test/soak/check.py sees each kind of
violation: for every invariant it doctors a copy of a real run's history
(DIR, left as it is) with one violation of that invariant, runs the checker
on the copy and requires that invariant's count of violations to grow.
A checker that cannot fail would fail here.  Run after every soak by
soak/run.sh; exits 1 if any doctored violation went unseen.

The one thing to know: each doctoring is the smallest change a real bug
would make to the record (a token lowered, an acknowledged write missing, a
second leader sample, ...), placed where no documented fault excuses it.
"""
import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402  (the checker under test; the driver is never imported)


def load(d):
    events = []
    for p in sorted(os.listdir(d)):
        if p.startswith("history-") and p.endswith(".jsonl"):
            with open(os.path.join(d, p)) as f:
                events += [json.loads(l) for l in f if l.strip()]
    with open(os.path.join(d, "final.json")) as f:
        final = json.load(f)
    return events, final


def run(events, final):
    rep, _, _ = check.decide(events, final, quiet=True)
    return {k: len(v["violations"]) for k, v in rep.inv.items()}


def free(h, t0, t1):
    return h.in_loss(t0, t1) is None


def ops_of(events):
    ops = {}
    for e in events:
        if e.get("ev") == "inv":
            ops[e["op"]] = {"inv": e, "end": None}
        elif e.get("ev") in ("ok", "fail", "unknown") and e.get("op") in ops:
            ops[e["op"]]["end"] = e
    return ops


# Each doctor takes (events, final, h) and changes them in place; returns a
# description, or None when this history has nothing to doctor (counted as
# a failure: a soak too short to exercise an invariant proves nothing).

def d_fence(ev, fin, h):
    rows = [a for a in fin["audit"] if a["tbl"] == "t_lock" and a["token"] and a["token"] > 1]
    if not rows:
        return None
    a = rows[-1]
    a2 = dict(a, seq=a["seq"] + 10_000_000, token=a["token"] - 1)
    fin["audit"].append(a2)
    return "an extra t_lock write with a token one below an accepted one"


def d_acked(ev, fin, h):
    ops = ops_of(ev)
    for i, a in enumerate(fin["audit"]):
        o = ops.get(a["op"])
        if o and o["end"] and o["end"]["ev"] == "ok" and a["tbl"] == "t_token":
            del fin["audit"][i]
            return "the audit row of acknowledged write %s removed" % a["op"]
    return None


def d_refused_committed(ev, fin, h):
    ops = ops_of(ev)
    for o in ops.values():
        if o["inv"]["kind"] == "xact_write" and o["end"] and o["end"]["ev"] == "fail":
            i = o["inv"]
            fin["audit"].append({"srv": i["srv"], "seq": 10 ** 12, "tbl": i["tbl"], "id": str(i["id"]), "token": 10 ** 9,
                                 "old": 0, "new": i["delta"], "read": None, "op": i["op"], "pid": 1, "at": 0})
            return "failed write %s (%s) appears committed" % (i["op"], o["end"].get("state"))
    # No xact write failed in this run: one that did, a minute before it.
    op_before_run(ev, "doctor:xw", {"kind": "xact_write", "srv": "pg1", "tbl": "t_token", "id": 1, "name": "T-1",
                                    "ttl": 1000, "delta": 1}, {"ev": "fail", "state": "RP002"})
    fin["audit"].append({"srv": "pg1", "seq": 10 ** 12, "tbl": "t_token", "id": "1", "token": 10 ** 9,
                         "old": 0, "new": 1, "read": None, "op": "doctor:xw", "pid": 1, "at": 0})
    return "a failed xact write appears committed (placed before the run)"


def d_final(ev, fin, h):
    for t, rows in fin["tables"].items():
        if t.endswith("t_token") and rows:
            rows[0]["value"] += 1
            return "final value of %s id %s off by one" % (t, rows[0]["id"])
    return None


def d_lost(ev, fin, h):
    ops = ops_of(ev)
    for a in fin["audit"]:
        o = ops.get(a["op"])
        if a["tbl"] == "t_lock" and a["read"] is not None and o and o["end"] and \
                free(h, (check.lease_acquire(h, o) or o)["inv"]["t"], o["end"]["t"]):
            a["read"] = a["old"] - 1
            return "t_lock write %s read one less than it overwrote" % a["op"]
    # Every write lay in a loss window (a run of failovers): the same lost
    # update on a row of its own, written before everything.
    for a in fin["audit"]:
        o = ops.get(a["op"])
        if a["tbl"] == "t_lock" and o and o["end"] and o["end"]["ev"] == "ok":
            op_before_run(ev, "doctor:lost", dict(o["inv"], id="doctor"), o["end"])
            fin["audit"].append(dict(a, seq=10 ** 12, id="doctor", op="doctor:lost", old=5, new=6, read=4))
            return "a t_lock write read one less than it overwrote (placed before the run)"
    return None


def d_unique(ev, fin, h):
    ops = ops_of(ev)
    for o in ops.values():
        i = o["inv"]
        if i["kind"] == "rmw_write" and i["tbl"] == "t_lock" and o["end"] and o["end"]["ev"] == "ok" and o["end"]["res"] == 1:
            t, rt = o["end"]["t"] + 10, o["end"]["rt"] + 10
            ev.append({"ev": "inv", "op": "doctor:1", "kind": "acquire", "th": "doctor", "srv": "pg1",
                       "name": i["name"], "ttl": 1000, "wait": 0, "scope": "session", "t": t, "rt": rt})
            ev.append({"ev": "ok", "op": "doctor:1", "th": "doctor", "t": t + 5, "rt": rt + 5,
                       "res": {"fence": i["fence"], "token": "doctored", "exp": rt + 10 ** 6}})
            return "fence %d of %s issued again after the table accepted it" % (i["fence"], i["name"])
    return None


def d_epoch(ev, fin, h):
    # Always a minute before the run: the checker pairs each node's first
    # sample of an epoch, and excuses the pair when the second node's
    # server restarted after a data loss or a key_prefix change came
    # between, which a real sample of the run may follow.
    s = next((s for s in ev if s.get("ev") == "leader" and s.get("leader") and s.get("epoch") is not None), None)
    if s is None:
        return None
    x = moved_before_run(ev, s)
    ev.insert(1, dict(x, node="doctored#x", srv="pg2" if x["srv"] == "pg1" else "pg1", t0=x["t0"] + 1, t1=x["t1"] + 1))
    return "epoch %d seen held by a second node (placed before the run)" % x["epoch"]


def d_epoch_floor(ev, fin, h):
    leads = [s for s in ev if s.get("ev") == "leader" and s.get("leader") and (s.get("epoch") or 0) > 1]
    for s in reversed(leads):
        # A restart of the server from its term's first sample on excuses a
        # step back (the floor lives in shared memory): not there.
        since = min(x["t0"] for x in leads if x["srv"] == s["srv"] and x["epoch"] == s["epoch"])
        if any(since <= r0 <= s["t1"] + 20 for r0, _ in h.restarts.get(s["srv"], [])):
            continue
        ev.append(dict(s, epoch=s["epoch"] - 1, t0=s["t1"] + 10, t1=s["t1"] + 20,
                       rt0=s["rt1"] + 10, rt1=s["rt1"] + 20))
        return "%s leads with epoch %d right after epoch %d" % (s["srv"], s["epoch"] - 1, s["epoch"])
    # Every later term began behind a restart (or the run saw one term): a
    # term of epoch 2 and a step back to 1, a minute before the run.
    s = next((s for s in ev if s.get("ev") == "leader" and s.get("leader")), None)
    if s is None:
        return None
    x = moved_before_run(ev, s, epoch=2)
    ev.append(dict(x, epoch=1, t0=x["t1"] + 10, t1=x["t1"] + 20, rt0=x["rt1"] + 10, rt1=x["rt1"] + 20))
    return "%s leads with epoch 1 right after epoch 2 (placed before the run)" % s["srv"]


def d_leader(ev, fin, h):
    s = belief_out_of_loss(ev, h, lambda x: x.get("valid_until") and x["valid_until"] - x["rt1"] > 2000, 10 ** 6)
    if s is None:
        return None
    other = "pg2" if s["srv"] == "pg1" else "pg1"
    ev.append(dict(s, srv=other, node="doctored#y", epoch=(s["epoch"] or 0) + 1,
                   t0=s["t1"] + 500, t1=s["t1"] + 1000, rt0=s["rt1"] + 500, rt1=s["rt1"] + 1000))
    return "%s believed it led inside %s's belief%s" % (other, s["srv"], " (placed before the run)" if s.get("moved") else "")


def belief_out_of_loss(ev, h, want, after):
    """A sample of a node that believes it leads, such as want() accepts,
    that no loss window reaches from its start to `after` microseconds past
    its end: the run's first such, or else its first wanted sample moved a
    minute before the run (in a Sentinel run a window of two masters
    answering can cover every sample).  None when no sample is wanted."""
    leads = [x for x in ev if x.get("ev") == "leader" and x.get("leader") and want(x)]
    for x in leads:
        if free(h, x["t0"] - 1, x["t1"] + after):
            return x
    return moved_before_run(ev, leads[0]) if leads else None


def moved_before_run(ev, s, **change):
    """A copy of leadership sample s (with `change`) a minute before the
    run, put first in ev: no fault, loss window or restart reaches it."""
    t, rt = before_everything(ev)
    dt, drt = t - s["t0"], rt - s["rt0"]
    x = dict(s, t0=s["t0"] + dt, t1=s["t1"] + dt, rt0=s["rt0"] + drt, rt1=s["rt1"] + drt, **change)
    if x.get("valid_until"):
        x["valid_until"] += drt
    x["moved"] = True
    ev.insert(0, x)             # first: the checker may keep a node's first sample
    return x


def op_before_run(ev, op, inv, end):
    """Operation op of a thread "doctor" a minute before the run: its
    invocation (inv's fields) and, 1 ms later, its end (end's fields)."""
    t, rt = before_everything(ev)
    ev.append(dict(inv, ev="inv", op=op, th="doctor", t=t, rt=rt))
    ev.append(dict(end, op=op, th="doctor", t=t + 1000, rt=rt + 1000))


def before_everything(ev):
    """A time (both clocks) a minute before the history's first event: no
    fault, loss window or restart reaches it."""
    return (min(e["t"] for e in ev if "t" in e) - 60_000_000,
            min(e["rt"] for e in ev if "rt" in e) - 60_000_000)


def d_rl(algo):
    def f(ev, fin, h):
        base = [e for e in ev if e.get("ev") == "inv" and e.get("kind") == "ratelimit"]
        if not base:
            return None
        b = base[0]
        # 12 admissions of cost 1, 1 ms apart, all completed within 1 ms:
        # more than a limit of 10 in any reading of any algorithm.  A minute
        # before the run's first event, out of every loss window (a window
        # makes the checker call a bucket undecided).
        t0, rt0 = before_everything(ev)
        for k in range(12):
            t, rt = t0 + k * 1000, (rt0 // 1000 // 1000 + 1) * 1000 * 1000 + 20_000 + k * 1000
            op = "doctor:rl%s%d" % (algo, k)
            ev.append(dict(b, op=op, th="doctor", key="doctored-" + algo, algo=algo, cost=1, limit=10,
                           window=1000, t=t, rt=rt))
            ev.append({"ev": "ok", "op": op, "th": "doctor", "t": t + 100, "rt": rt + 100, "res": True})
        return "12 admissions of 1 unit in 12 ms under a limit of 10/s (%s)" % algo
    return f


def d_sem(ev, fin, h):
    t0 = min(e["t"] for e in ev if "t" in e)
    rt0 = min(e["rt"] for e in ev if "rt" in e)
    for k in range(4):
        op = "doctor:sem%d" % k
        ev.append({"ev": "inv", "op": op, "kind": "sem_acquire", "th": "doctor%d" % k, "srv": "pg1", "name": "SEM-1",
                   "permits": 3, "ttl": 5000, "scope": "session", "t": t0 + k, "rt": rt0 + k})
        ev.append({"ev": "ok", "op": op, "th": "doctor%d" % k, "t": t0 + 10 + k, "rt": rt0 + 10 + k,
                   "res": {"fence": 10 ** 9 + k, "token": "doc%d" % k, "exp": rt0 + 5 * 10 ** 6}})
        rel = "doctor:semrel%d" % k
        ev.append({"ev": "inv", "op": rel, "kind": "release", "th": "doctor%d" % k, "srv": "pg1", "name": "SEM-1",
                   "fence": 10 ** 9 + k, "t": t0 + 1000 + k, "rt": rt0 + 1000 + k})
        ev.append({"ev": "ok", "op": rel, "th": "doctor%d" % k, "t": t0 + 1010 + k, "rt": rt0 + 1010 + k, "res": True})
    return "4 holders of 3 permits at the start of the run"


def d_stranded(ev, fin, h):
    fin["redis"].append({"key": "rp:{X-doctor-1}:lock", "type": "string", "pttl": 50000, "value": "no-such-token"})
    return "a lease key left with 50 s to live"


def doctor_lease(ev, fin, n, released, pool=False):
    """A minute before the run, thread "doctor" acquires lease X-doctor-N
    (ops doctor:N and doctor:N+1) and releases it 1 ms later, the release
    answered released (True or False); its key is left in Redis with 50 s
    to live.  Returns the acquire's time (both clocks)."""
    t, rt = before_everything(ev)
    name, token = "X-doctor-%d" % n, "%032x" % (0xD0C70 + n)
    acq, rel = "doctor:%d" % n, "doctor:%d" % (n + 1)
    ev.append({"ev": "inv", "op": acq, "kind": "acquire", "th": "doctor", "srv": "pg1", "name": name,
               "ttl": 60000, "wait": 0, "scope": "session", "t": t, "rt": rt})
    ev.append({"ev": "ok", "op": acq, "th": "doctor", "t": t + 1000, "rt": rt + 1000,
               "res": {"fence": 1, "token": token, "exp": rt + 60_000_000}})
    ev.append(dict({"ev": "inv", "op": rel, "kind": "release", "th": "doctor", "srv": "pg1", "name": name,
                    "fence": 1, "t": t + 2000, "rt": rt + 2000}, **({"pool": True} if pool else {})))
    ev.append({"ev": "ok", "op": rel, "th": "doctor", "t": t + 3000, "rt": rt + 3000, "res": released})
    fin["redis"].append({"key": "rp:{%s}:lock" % name, "type": "string", "pttl": 50000, "value": token})
    return t, rt


def d_stranded_released(ev, fin, h):
    """A lease acquired and released (Redis answered "released") outside
    every loss window, whose key is still there: the release did not happen."""
    doctor_lease(ev, fin, 4, True)
    return "a lease released with Redis' answer \"released\", its key left with 50 s to live"


def d_stranded_held(ev, fin, h):
    """A lease whose pooled release answered "not released" (the holder
    still held it), a Redis kill that lost the data 10 s later, the holder's
    session ending 20 s after that and its key left: the kill came while the
    lease was held, so it cannot have lost the holder's release."""
    t, rt = doctor_lease(ev, fin, 6, False, pool=True)
    ev.append({"ev": "inv", "op": "doctor:8", "kind": "fault", "fault": "redis_kill", "th": "doctor-nemesis",
               "t": t + 10_000_000, "rt": rt + 10_000_000})
    ev.append({"ev": "ok", "op": "doctor:8", "th": "doctor-nemesis", "t": t + 11_000_000, "rt": rt + 11_000_000,
               "res": {"lost": True}})
    ev.append({"ev": "stopped", "th": "doctor", "t": t + 30_000_000, "rt": rt + 30_000_000})
    return "a lease still held after a pooled release found nothing, lost data while held, its key left"


def d_stranded_unknown(ev, fin, h):
    """An acquire that failed with the connection lost, outside every loss
    window, whose lease is left in Redis: the backend did not release it."""
    for e in ev:
        if e.get("ev") == "inv" and e.get("kind") == "acquire":
            op_before_run(ev, "doctor:3", {"kind": "acquire", "srv": e.get("srv", "pg1"), "name": "X-doctor-2",
                                           "ttl": 60000, "wait": 0, "scope": "session"},
                          {"ev": "fail", "state": "08006", "msg": "lost the connection to Redis"})
            fin["redis"].append({"key": "rp:{X-doctor-2}:lock", "type": "string", "pttl": 50000,
                                 "value": "0123456789abcdef0123456789abcdef"})
            return "an acquire that lost its connection, its lease left with 50 s to live"
    return None


def d_rss(ev, fin, h):
    for k in range(10):
        ev.append({"ev": "rss", "t": k * 10_000_000, "pid": 999999, "srv": "pg1", "w": "doctor", "kb": 10000 + k * 2000})
    return "a backend whose RssAnon grows 2 MB every 10 s"


def d_incomplete(ev, fin, h):
    for i, e in enumerate(ev):
        if e.get("ev") == "ok":
            del ev[i]
            return "the completion of %s removed" % e["op"]
    return None


def d_strict(ev, fin, h):
    for e in ev:
        if e.get("ev") == "fail" and e["op"] in {x["op"] for x in ev if x.get("kind") == "nocol_write"}:
            e["ev"] = "ok"
            e["res"] = {"lease": {"fence": 1, "token": "x", "exp": 0}, "rows": 1}
            e.pop("state", None)
            return "a strict-guarded UPDATE without the token reported as accepted"
    # The run's few such UPDATEs all passed or were never tried: one, a
    # minute before it, reported as accepted.
    op_before_run(ev, "doctor:nocol", {"kind": "nocol_write", "srv": "pg1", "tbl": "t_strict", "id": 1, "name": "S-1",
                                       "ttl": 1000},
                  {"ev": "ok", "res": {"lease": {"fence": 1, "token": "x", "exp": 0}, "rows": 1}})
    return "a strict-guarded UPDATE without the token reported as accepted (placed before the run)"


def d_clock(ev, fin, h):
    for e in ev:
        if e.get("ev") == "rtime":
            e["redis_us"] += 1_000_000
            return "a Redis TIME one second outside its bracket"
    return None


def d_released(ev, fin, h):
    ops = ops_of(ev)
    for o in ops.values():
        i = o["inv"]
        if i["kind"] == "rmw_write" and i["tbl"] == "t_lock" and o["end"] and o["end"]["ev"] == "ok" and o["end"]["res"] == 1:
            t, rt = i["t"] - 10, i["rt"] - 10
            ev.append({"ev": "inv", "op": "doctor:2", "kind": "fault", "fault": "release_token", "th": "doctor",
                       "t": t - 5, "rt": rt - 5})
            ev.append({"ev": "ok", "op": "doctor:2", "th": "doctor", "t": t, "rt": rt,
                       "res": {"srv": i["srv"], "name": i["name"], "token": i["token"], "fence": i["fence"],
                               "released": True}})
            return "%s's lease released by token just before write %s, which was accepted" % (i["name"], i["op"])
    return None


DOCTORS = [
    ("fence_monotonic", d_fence), ("acked_writes_kept", d_acked), ("acked_writes_kept", d_refused_committed),
    ("final_value", d_final), ("no_lost_update", d_lost), ("fence_unique", d_unique), ("epoch_unique", d_epoch), ("epoch_floor", d_epoch_floor),
    ("one_leader", d_leader), ("ratelimit_sliding_log", d_rl("sliding_log")),
    ("ratelimit_sliding_window", d_rl("sliding_window")), ("ratelimit_gcra", d_rl("gcra")),
    ("semaphore_permits", d_sem), ("no_stranded_lease", d_stranded),
    ("no_stranded_lease", d_stranded_unknown), ("no_stranded_lease", d_stranded_released),
    ("no_stranded_lease", d_stranded_held), ("memory_flat", d_rss),
    ("history_complete", d_incomplete), ("strict_refuses_missing_token", d_strict),
    ("redis_clock_is_ours", d_clock), ("no_write_under_released_lease", d_released),
]


def main(d):
    events, final = load(d)
    h = check.History(events)
    base = run(events, final)
    failed = 0
    for inv, doctor in DOCTORS:
        ev, fin = copy.deepcopy(events), copy.deepcopy(final)
        what = doctor(ev, fin, h)
        if what is None:
            print("selftest: NOT RUN %-30s this history has nothing to doctor" % inv)
            failed += 1
            continue
        got = run(ev, fin)
        seen = got.get(inv, 0) > base.get(inv, 0)
        failed += not seen
        print("selftest: %-4s %-30s %s -> %d violation(s) (undoctored: %d)" % (
            "ok" if seen else "MISS", inv, what, got.get(inv, 0), base.get(inv, 0)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
