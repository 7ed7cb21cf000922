#!/usr/bin/env bash
# bench/apps/run.sh -- `make bench-apps`: what a Node application pays for
# the whole request, the extension in its fast forms against node-redlock and
# rate-limiter-flexible over ioredis (see bench.js for what each mode does).
#
# Starts a throwaway PostgreSQL and Redis (scripts/lib.sh), `npm ci`s the
# committed package-lock.json into the temporary folder, runs bench.js once
# and writes the report (report.py) with one SVG chart per table beside it.
# Knobs: ROUNDS (9), SECONDS_PER_RUN (1), CLIENTS ("1 8"), EXPIRY_SECONDS
# (4, 0: skip), BENCH_GROUPS ("lock section admit refuse floor"), RESULTS (the
# report, default bench/apps/results.md).  QUICK=1: ROUNDS=2,
# SECONDS_PER_RUN=1, EXPIRY_SECONDS=2 -- a smoke check that it runs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${QUICK:-}" ]; then
	export ROUNDS=${ROUNDS:-2} SECONDS_PER_RUN=${SECONDS_PER_RUN:-1} EXPIRY_SECONDS=${EXPIRY_SECONDS:-2}
fi
results=${RESULTS:-$here/results.md}
load_start=$(cut -d' ' -f1 /proc/loadavg)
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
/usr/bin/python3 "$here/report.py" "$out" "$results" "$load_start"
