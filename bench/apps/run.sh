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

# What other processes used of the machine while bench.js ran: the CPU time
# of every CPU (/proc/stat, less idle and iowait) less that of PostgreSQL
# (the postmaster, its live children and the ones it reaped), Redis and
# node (which prints its own).  The load average cannot tell: at its end it
# counts the benchmark's own 8 clients and their servers.
tree_ticks() {  # pid: utime + stime of it, of its reaped and live children
	local t f
	read -r -a f < <(sed 's/^.*) //' "/proc/$1/stat")
	t=$((f[11] + f[12] + f[13] + f[14]))
	for c in $(ps -o pid= --ppid "$1"); do
		read -r -a f < <(sed 's/^.*) //' "/proc/$c/stat" 2>/dev/null) && t=$((t + f[11] + f[12]))
	done
	echo "$t"
}
busy_ticks() { awk '/^cpu /{ print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
own_ticks() {
	echo $(($(tree_ticks "$(head -1 "$RP_TMP/pg/postmaster.pid")") + \
		$(tree_ticks "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")")))
}
busy0=$(busy_ticks) own0=$(own_ticks) t0=$(date +%s.%N)
node "$RP_TMP/bench/bench.js" | tee "$out" || exit 1
sleep 1   # the pools' backends exit, and the postmaster reaps them
busy1=$(busy_ticks) own1=$(own_ticks) t1=$(date +%s.%N)
other=$(python3 -c "
import json
node = sum(r['user_us'] + r['system_us'] for r in map(json.loads, (l for l in open('$out') if l.startswith('{'))) if r['kind'] == 'cpu') / 1e6
hz = $(getconf CLK_TCK)
print('%.2f' % (max(0.0, (($busy1 - $busy0) - ($own1 - $own0)) / hz - node) / ($t1 - $t0)))")
rp_log "other processes used $other of a core on average while bench.js ran"
/usr/bin/python3 "$here/report.py" "$out" "$results" "$load_start" "$(cut -d' ' -f1 /proc/loadavg)" "$other"
