#!/usr/bin/env bash
# soak_selftest.sh -- test/soak/selftest.py doctors a violation of each
# invariant into any history, from a history written here (no servers)
# whose every leadership sample and every lease-held write lies in a loss
# window, as in a Sentinel soak whose old master answers beside the new one
# for seconds at a time.
#
# The naive selftest doctored only a real sample or write out of every
# loss window: it found none, reported "nothing to doctor" and failed the
# soak (one_leader, in a 60 s Sentinel run).  Each doctoring must be
# placed, and the checker must count it as a violation, not an excuse.
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
# Redis killed with its data lost from 1 s to 19 s: the window covers it all.
ev += [{"ev": "inv", "op": "nemesis:1", "kind": "fault", "fault": "redis_kill", "th": "nemesis",
        "t": T + 1_000_000, "rt": RT + 1_000_000},
       {"ev": "ok", "op": "nemesis:1", "th": "nemesis", "res": {"lost": True},
        "t": T + 19_000_000, "rt": RT + 19_000_000}]
# pg1's node leads, epoch 1, sampled every 0.5 s from 2 s to 12 s.
for k in range(20):
    t0 = 2_000_000 + k * 500_000
    ev.append({"ev": "leader", "srv": "pg1", "leader": True, "node": "n1", "epoch": 1,
               "t0": T + t0, "t1": T + t0 + 1000, "rt0": RT + t0, "rt1": RT + t0 + 1000,
               "valid_until": RT + t0 + 1_500_000})
    ev.append({"ev": "leader", "srv": "pg2", "leader": False, "node": "n2", "epoch": 1,
               "t0": T + t0, "t1": T + t0 + 1000, "rt0": RT + t0, "rt1": RT + t0 + 1000})
# A lease, then a read-modify-write of t_lock under it, at 5 s.
ev += [{"ev": "inv", "op": "lock0:1", "kind": "acquire", "srv": "pg1", "name": "L-1", "ttl": 1500,
        "wait": 0, "scope": "session", "th": "lock0", "t": T + 5_000_000, "rt": RT + 5_000_000},
       {"ev": "ok", "op": "lock0:1", "th": "lock0", "res": {"fence": 1, "token": "a" * 32, "exp": RT + 6_500_000},
        "t": T + 5_001_000, "rt": RT + 5_001_000},
       {"ev": "inv", "op": "lock0:2", "kind": "rmw_write", "srv": "pg1", "tbl": "t_lock", "id": 1, "name": "L-1",
        "fence": 1, "token": "a" * 32, "read": 0, "delta": 3, "th": "lock0", "t": T + 5_002_000, "rt": RT + 5_002_000},
       {"ev": "ok", "op": "lock0:2", "th": "lock0", "res": 1, "t": T + 5_003_000, "rt": RT + 5_003_000}]
final = {"tables": {"pg1.t_lock": [{"id": "1", "value": 3, "token": 1, "op_id": "lock0:2"}]},
         "audit": [{"srv": "pg1", "seq": 1, "tbl": "t_lock", "id": "1", "token": 1, "old": 0, "new": 3, "read": 0,
                    "op": "lock0:2", "pid": 1, "at": RT + 5_002_500}],
         "redis": [], "rp_locks": {"pg1": []}, "t": T + 20_000_000, "rt": RT + 20_000_000}
with open(os.path.join(d, "history-all.jsonl"), "w") as f:
    for e in ev:
        f.write(json.dumps(e) + "\n")
with open(os.path.join(d, "final.json"), "w") as f:
    json.dump(final, f)
PY
ok $? "a history whose samples and writes all lie in a loss window"

/usr/bin/python3 "$ROOT/test/soak/selftest.py" "$d" >"$d/out" 2>&1
# Each doctored violation seen, and the undoctored history has none: the
# checker neither excuses the doctoring nor invents a violation.
for inv in one_leader epoch_unique no_lost_update; do
	r=$(grep -E "^selftest: .* $inv " "$d/out" | head -1)
	[[ $r == "selftest: ok "* && $r == *"(undoctored: 0)" ]]
	ok $? "$inv: a violation doctored and seen (got: ${r:-no line})"
done
