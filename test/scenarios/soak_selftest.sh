#!/usr/bin/env bash
# soak_selftest.sh -- test/soak/selftest.py doctors a violation of every
# invariant into any history, from a history written here (no servers)
# where the run was unlucky: every leadership sample and every lease-held
# write lies in a loss window (a key_prefix change, a Redis data loss, a
# Sentinel failover: in a real Sentinel soak the old master answers beside
# the new one for seconds at a time), a server restarted, the elector held
# one term, and no guarded write was refused.
#
# The naive selftest doctored only what the run offered: a sample or write
# out of every loss window, a second term with no restart between, a
# refused xact write, a strict guard's refusal.  Finding none it reported
# "nothing to doctor" and failed the soak (one_leader in a 60 s Sentinel
# run in CI, epoch_floor in another); and a second node's epoch doctored
# beside a real sample was excused by the key_prefix window it lay in.
# Each doctoring must be placed, and the checker must count it as a
# violation the undoctored history does not have.
source "$(dirname "$0")/tap.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
plan 4

d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
/usr/bin/python3 - "$d" <<'PY'
import json, os, sys
d = sys.argv[1]
T, RT = 1_000_000_000, 1_800_000_000_000_000      # monotonic, Redis clock (us)
ev = [{"ev": "start", "seed": 1, "seconds": 20, "t": T, "rt": RT}]
def at(k):                                         # k ms into the run
    return {"t": T + k * 1000, "rt": RT + k * 1000}
def op(opid, k, kind, end, res=None, **inv):
    th = opid.split(":")[0]
    ev.append(dict(inv, ev="inv", op=opid, kind=kind, th=th, **at(k)))
    ev.append(dict(ev=end, op=opid, th=th, res=res, **at(k + 1)))
# The key prefix changed, then Redis killed with its data lost, from 1 s
# to 19 s: their windows cover it all, and a key_prefix window excuses a
# second node's epoch.
op("nemesis:1", 1000, "fault", "ok", {}, fault="key_prefix")
ev[-1].update(at(19000))
op("nemesis:2", 1001, "fault", "ok", {"lost": True}, fault="redis_kill")
ev[-1].update(at(19000))
# and pg2 restarted at 0.5 s: a restart before a data loss excuses a second
# node's epoch (the floor lives in shared memory).
op("nemesis:0", 500, "fault", "ok", {"srv": "pg2"}, fault="pg_restart")
# pg1's node leads with epoch 1 from 2 s to 12 s; pg2's follows.
for k in range(20):
    t0 = 2000 + k * 500
    for srv, lead in (("pg1", True), ("pg2", False)):
        ev.append({"ev": "leader", "srv": srv, "leader": lead, "node": "n" + srv[-1], "epoch": 1,
                   "t0": T + t0 * 1000, "t1": T + t0 * 1000 + 1000, "rt0": RT + t0 * 1000,
                   "rt1": RT + t0 * 1000 + 1000, "valid_until": RT + (t0 + 1500) * 1000})
    # Sentinel moved the master at 7 s: a loss window from 5 s before the
    # last sample of the old one (a doctoring placed only a little before
    # the run would fall in it).
    ev.append(dict(ev="rtime", t0=T + t0 * 1000, t1=T + t0 * 1000 + 500, rt0=RT + t0 * 1000,
                   rt1=RT + t0 * 1000 + 500, redis_us=RT + t0 * 1000 + 250, master=6379 if t0 < 7000 else 6380))
# Two leases on L-1 and a read-modify-write of t_lock under each.
tok = ["a" * 32, "b" * 32]
for n in (0, 1):
    k = 5000 + n * 2000
    op("lock0:%d" % (2 * n + 1), k, "acquire", "ok", {"fence": n + 1, "token": tok[n], "exp": RT + (k + 1500) * 1000},
       srv="pg1", name="L-1", ttl=1500, wait=0, scope="session")
    op("lock0:%d" % (2 * n + 2), k + 10, "rmw_write", "ok", 1, srv="pg1", tbl="t_lock", id=1, name="L-1",
       fence=n + 1, token=tok[n], read=3 * n, delta=3)
# An xact lease's write to t_token, accepted.
op("token0:1", 9000, "xact_write", "ok", {"lease": {"fence": 1, "token": "c" * 32, "exp": RT + 10_000_000}, "rows": 1},
   srv="pg1", tbl="t_token", id=1, name="T-1", ttl=1000, delta=2)
# One admission of a rate limit.
op("rl0:1", 9500, "ratelimit", "ok", True, srv="pg1", key="k", algo="gcra", cost=1, limit=10, window=1000)
final = {"tables": {"pg1.t_lock": [{"id": "1", "value": 6, "token": 2, "op_id": "lock0:4"}],
                    "pg1.t_token": [{"id": "1", "value": 2, "token": 1, "op_id": "token0:1"}]},
         "audit": [{"srv": "pg1", "seq": 1, "tbl": "t_lock", "id": "1", "token": 1, "old": 0, "new": 3, "read": 0,
                    "op": "lock0:2", "pid": 1, "at": RT + 5_011_000},
                   {"srv": "pg1", "seq": 2, "tbl": "t_lock", "id": "1", "token": 2, "old": 3, "new": 6, "read": 3,
                    "op": "lock0:4", "pid": 1, "at": RT + 7_011_000},
                   {"srv": "pg1", "seq": 3, "tbl": "t_token", "id": "1", "token": 1, "old": 0, "new": 2, "read": None,
                    "op": "token0:1", "pid": 1, "at": RT + 9_000_500}],
         "redis": [], "rp_locks": {"pg1": []}, "t": T + 20_000_000, "rt": RT + 20_000_000}
with open(os.path.join(d, "history-all.jsonl"), "w") as f:
    for e in ev:
        f.write(json.dumps(e) + "\n")
with open(os.path.join(d, "final.json"), "w") as f:
    json.dump(final, f)
PY
[ $? = 0 ] || { echo "Bail out! could not write the history"; exit 1; }

/usr/bin/python3 "$ROOT/test/soak/check.py" "$d" >"$d/check" 2>&1
ok $? "the checker finds no violation in the undoctored history"
/usr/bin/python3 "$ROOT/test/soak/selftest.py" "$d" >"$d/out" 2>&1
rc=$?
n=$(cd "$ROOT/test/soak" && /usr/bin/python3 -c 'import selftest; print(len(selftest.DOCTORS))')
bad=$(grep -v -E "^selftest: ok .*\(undoctored: 0\)$" "$d/out")
[ $rc = 0 ] && [ -z "$bad" ] && [ "$(grep -c '^selftest: ok' "$d/out")" = "$n" ]
ok $? "each of the $n doctored violations seen (exit $rc; ${bad:-every line ok})"
# The six doctors that need what this run did not offer placed their own.
is "$(grep -c '(placed before the run) -> ' "$d/out")" 6 \
	"one_leader, epoch_unique, epoch_floor, no_lost_update, a refused write, a strict refusal: placed before the run"

# A second node's epoch taken while a new key_prefix was reloading is
# excused (each prefix has its own election), also when the sample lies in
# an earlier, longer window of another fault too: a soak run had the second
# epoch-6 sample inside a Redis data loss (from 0.4 s before) and the
# switch back of key_prefix, and the checker looked at the first window
# only.
d2=$d/prefix
mkdir "$d2"
/usr/bin/python3 - "$d2" <<'PY'
import json, os, sys
d = sys.argv[1]
T, RT = 1_000_000_000, 1_800_000_000_000_000
def at(k):
    return {"t": T + k * 1000, "rt": RT + k * 1000}
ev = [dict(ev="start", seed=1, seconds=20, **at(0))]
for n, (fault, k0, k1, res) in enumerate((("redis_kill", 1000, 3000, {"lost": True}),
                                          ("key_prefix", 5000, 5200, {"prefix": "rp:"}))):
    ev.append(dict(ev="inv", op="nemesis:%d" % n, kind="fault", fault=fault, th="nemesis", **at(k0)))
    ev.append(dict(ev="ok", op="nemesis:%d" % n, res=res, th="nemesis", **at(k1)))
for srv, k in (("pg1", 5100), ("pg2", 5150)):
    ev.append({"ev": "leader", "srv": srv, "leader": True, "node": "n" + srv[-1], "epoch": 6,
               "t0": T + k * 1000, "t1": T + k * 1000 + 500, "rt0": RT + k * 1000, "rt1": RT + k * 1000 + 500,
               "valid_until": RT + (k + 2500) * 1000})
with open(os.path.join(d, "history-all.jsonl"), "w") as f:
    for e in ev:
        f.write(json.dumps(e) + "\n")
with open(os.path.join(d, "final.json"), "w") as f:
    json.dump({"tables": {}, "audit": [], "redis": [], "rp_locks": {}, "t": T + 20_000_000,
               "rt": RT + 20_000_000}, f)
PY
/usr/bin/python3 "$ROOT/test/soak/check.py" "$d2" >"$d2/check" 2>&1
line=$(grep ' epoch_unique ' "$d2/check" | tr -s ' ')
is "$line" "ok epoch_unique checked 1 violations 0 excused 1 undecided 0" \
	"an epoch taken twice during a key_prefix reload inside a Redis data loss: excused"
finish
