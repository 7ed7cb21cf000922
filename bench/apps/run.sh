#!/usr/bin/env bash
# bench/apps/run.sh -- `make bench-apps`: node-redlock + PostgreSQL against
# redis_primitives for the whole critical section, rate-limiter-flexible
# against rp_ratelimit, and the lost increments and stale writes of leases
# that expire mid-work (see bench.js for exactly what each side does).
#
# Starts a throwaway PostgreSQL and Redis (scripts/lib.sh), `npm ci`s the
# committed package-lock.json into the temporary folder, runs bench.js once
# and writes bench/apps/results.md.  Knobs: ROUNDS (3), SECONDS_PER_RUN (2),
# CLIENTS ("1 8"), EXPIRY_SECONDS (4).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../scripts/lib.sh"
rp_setup
rp_start_servers
psql -X -q -c "CREATE DATABASE rp_bench" >/dev/null
psql -X -q -d rp_bench -c "CREATE EXTENSION redis_primitives" >/dev/null
export PGDATABASE=rp_bench
mkdir -p "$RP_TMP/bench"
cp "$here/package.json" "$here/package-lock.json" "$here/bench.js" "$RP_TMP/bench/"
( cd "$RP_TMP/bench" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error ) || { rp_log "npm ci failed"; exit 1; }
out=$RP_TMP/bench.jsonl
node "$RP_TMP/bench/bench.js" | tee "$out" || exit 1
/usr/bin/python3 - "$out" "$here/results.md" <<'PY'
import json, sys, datetime, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
tot = {(r['side'], r['clients']): r for r in rows if r['kind'] == 'total'}
label = {'redlock': 'node-redlock + INCR fence + UPDATE ... WHERE fence_token <= $t',
         'rp': 'rp_acquire_xact + guarded UPDATE, one statement',
         'rlf': 'rate-limiter-flexible RateLimiterRedis.consume',
         'rp_ratelimit': "rp_ratelimit(..., 'sliding_window') via node-postgres"}
o = ["# bench/apps: results of one run", "",
     f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
     "(shared machine: compare within this table, not across runs).", "",
     "## Latency and throughput (all rounds pooled)", "",
     "| what | clients | ops/s | p50 ms | p99 ms | errors |", "| --- | --- | --- | --- | --- | --- |"]
for pair in (('redlock', 'rp'), ('rlf', 'rp_ratelimit')):
    for c in sorted({k[1] for k in tot if k[0] in pair}):
        for s in pair:
            r = tot.get((s, c))
            if r: o.append(f"| {label[s]} | {c} | {r['ops_s']} | {r['p50']} | {r['p99']} | {r['errors']} |")
parts = [('pg_select1', "SELECT 1 through pool.query (PostgreSQL's floor)"),
         ('pg_update', 'the UPDATE alone, no trigger'),
         ('pg_update_guarded', 'the UPDATE alone, with rp_fence_guard'),
         ('rp_acquire_release', 'SELECT * FROM rp_acquire_xact(...) alone (acquire, release at commit)'),
         ('redis_ping', "ioredis PING (Redis' floor)"),
         ('redlock_only', 'redlock lock + unlock alone')]
o += ["", "## Where the time goes (1 client, each part alone)", "",
      "| part | ops/s | p50 ms | p99 ms |", "| --- | --- | --- | --- |"]
o += [f"| {d} | {tot[(k, 1)]['ops_s']} | {tot[(k, 1)]['p50']} | {tot[(k, 1)]['p99']} |" for k, d in parts if (k, 1) in tot]
o += ["", "## Per round (sides alternate, the order flips every round)", "",
      "| round | side | clients | ops/s | p50 ms | p99 ms |", "| --- | --- | --- | --- | --- | --- |"]
o += [f"| {r['round']} | {r['side']} | {r['clients']} | {r['ops_s']} | {r['p50']} | {r['p99']} |" for r in rows if r['kind'] == 'round']
o += ["", "## Leases of 50 ms expiring mid-work (8 clients, one account, 0-100 ms of work)", "",
      "| side | attempts | writes acknowledged | refused | not acquired | balance grew | lost increments | stale writes accepted |",
      "| --- | --- | --- | --- | --- | --- | --- | --- |"]
o += [f"| {r['side']} | {r['attempts']} | {r['acked']} | {r['refused']} | {r['notAcquired']} | {r['grew']} | {r['lost']} | {r['stale']} |"
      for r in rows if r['kind'] == 'expiry']
open(sys.argv[2], 'w').write("\n".join(o) + "\n")
print("\n".join(o))
PY
