#!/usr/bin/env bash
# bench/measure/profile.sh -- where one rp_acquire + rp_release spends its
# time (bench/run.sh runs it; `make bench-profile` adds perf).
#
# CPU accounting without a profiler: one pgbench client runs a script for
# 10 s (4 in --quick); over a window in its middle the backend's and
# pgbench's CPU (/proc/<pid>/stat) and Redis' (INFO cpu) are read, per
# transaction, for SELECT 1; SELECT 1 (the same two statements without
# Redis), acquire; release, and two rp_ratelimit (gcra) calls.  Then what
# redis-benchmark spends of its own CPU per acquire-script round trip: a
# Redis client's side of one round trip.  With RP_BENCH_PERF=1 and a perf
# that can sample, perf record (cpu-clock, DWARF call graphs) on the pair's
# backend: the share of its CPU by code.
# Know before editing: clock ticks are 1/CLK_TCK s; the window must hold
# thousands of transactions for a per-transaction figure to mean anything.
set -uo pipefail
source "$HERE/lib.sh"
RUN=10 WIN=2; [ "$BENCH_QUICK" = 1 ] && { RUN=4; WIN=1; }
PM=$(head -1 "$RP_TMP/pg/postmaster.pid")
HZ=$(getconf CLK_TCK)
q() { psql -X -q -At "$@"; }
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }
ticks() {  # pid -> utime + stime in clock ticks, empty when the process is gone
	local st f
	read -r st 2>/dev/null < "/proc/$1/stat" || return 0
	read -r -a f <<<"${st##*) }"
	echo $(( f[11] + f[12] ))
}
redis_cpu() { rcli info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }'; }
printf 'SELECT 1;\nSELECT 1;\n' > "$W/prof.select2.sql"
printf '%s\n' "SELECT fence FROM rp_acquire('bench-prof', 10000);" "SELECT rp_release('bench-prof');" > "$W/prof.pair.sql"
printf '%s\n' "SELECT rp_ratelimit('bench-prof', 100000, 1000, 1, 'gcra');" "SELECT rp_ratelimit('bench-prof', 100000, 1000, 1, 'gcra');" > "$W/prof.rl2.sql"
PERF=no
if [ "${RP_BENCH_PERF:-0}" = 1 ] && command -v perf >/dev/null &&
	perf record -e cpu-clock -o "$W/perf.probe" -- true >/dev/null 2>&1; then
	PERF=yes
fi

account() {  # tag perf(yes|no)
	local tag=$1 perf=$2 bpid="" i b0 b1 p0 p1 r0 r1 w0 w1
	rm -f "$W/log.prof.$tag".*
	(cd "$W" && exec pgbench -n -M prepared -c 1 -T "$RUN" -f "$W/prof.$tag.sql" --log --log-prefix="log.prof.$tag" >"$W/prof.$tag.out" 2>&1) &
	local pgbpid=$!
	# the backend: the postmaster's one child serving rp_bench (pgrep, not
	# psql: on a loaded machine a psql connection takes a second)
	for i in $(seq 200); do
		bpid=$(pgrep -n -P "$PM" -f 'postgres: .* rp_bench')
		[ -n "$bpid" ] && break; sleep 0.02
	done
	sleep 0.3
	b0=$(ticks "$bpid"); p0=$(ticks "$pgbpid"); r0=$(redis_cpu); w0=$(date +%s.%N)
	sleep "$WIN"
	b1=$(ticks "$bpid"); p1=$(ticks "$pgbpid"); r1=$(redis_cpu); w1=$(date +%s.%N)
	local alive=yes
	[ -n "$bpid" ] && [ -n "$b0" ] && [ -n "$b1" ] && [ -n "$p0" ] && [ -n "$p1" ] && kill -0 "$pgbpid" 2>/dev/null || alive=no
	[ "$perf" = yes ] && [ -n "$bpid" ] &&
		perf record -e cpu-clock -F 1999 --call-graph dwarf,16384 -o "$W/perf.data" -p "$bpid" -- sleep 1.5 >/dev/null 2>&1
	wait "$pgbpid"
	read -r n wall b r p < <(cat "$W/log.prof.$tag".* 2>/dev/null | awk -v w0="$w0" -v w1="$w1" -v b=$(( ${b1:-0} - ${b0:-0} )) -v p=$(( ${p1:-0} - ${p0:-0} )) \
		-v r0="$r0" -v r1="$r1" -v hz="$HZ" '
		{ t = $5 + $6 / 1e6; if (t >= w0 && t < w1) n++ }
		END {
			if (n == 0) { print "0 0 0 0 0"; exit }
			printf "%d %.1f %.1f %.1f %.1f\n", n, (w1 - w0) * 1e6 / n, b / hz * 1e6 / n, (r1 - r0) * 1e6 / n, p / hz * 1e6 / n
		}')
	rm -f "$W/log.prof.$tag".*
	if [ "$alive" = no ] || [ "${n:-0}" = 0 ]; then
		# the machine was too slow for the window to fall inside the run
		bench_row tool=skip "name=profile_${tag}_backend_us" "note=the pgbench run or its backend ended before the ${WIN} s window closed"
		return
	fi
	local how="per transaction over a ${WIN} s window of one pgbench client ($n transactions)"
	bench_metric "profile_${tag}_wall_us" "$wall" "µs/txn" "wall time $how"
	bench_metric "profile_${tag}_backend_us" "$b" "µs/txn" "backend CPU $how"
	bench_metric "profile_${tag}_redis_us" "$r" "µs/txn" "Redis CPU $how"
	bench_metric "profile_${tag}_pgbench_us" "$p" "µs/txn" "pgbench CPU $how"
}
account select2 no
account pair "$PERF"
account rl2 no

sha=$(sh "$RP_ROOT/scripts/expand-includes.sh" "$RP_ROOT/src/lua" "$RP_ROOT/src/lua/lock_acquire.lua" | rcli -n 1 -x script load)
rb=$( { /usr/bin/time -f '%U %S' redis-benchmark -p "$REDIS_PORT" --dbnum 1 -c 1 -n 20000 -r 100000000 -q \
	EVALSHA "$sha" 2 'rp:{rb:__rand_int__}:lock' 'rp:{rb:__rand_int__}:fence' "$TOKEN" 10000 0 >/dev/null; } 2>&1 | tail -1 |
	awk 'NF == 2 { printf "%.1f", ($1 + $2) * 1e6 / 20000 }')
[ -n "$rb" ] && bench_metric profile_redis_benchmark_client_us "$rb" "µs/call" \
	"redis-benchmark's own CPU per acquire-script round trip (one client, 20,000 calls): a Redis client's side of a round trip"
redis-cli -p "$REDIS_PORT" -n 1 flushdb >/dev/null

if [ "$PERF" = yes ] && [ -s "$W/perf.data" ]; then
	perf report -i "$W/perf.data" --no-children --sort dso -g none --stdio 2>/dev/null | grep -E '^ +[0-9]' > "$W/perf.dso"
	perf report -i "$W/perf.data" --children --sort sym -g none --stdio 2>/dev/null | grep -E '^ +[0-9]' > "$W/perf.sym"
	dso() { awk -v d="$1" '$2 == d { gsub("%", "", $1); s += $1 } END { printf "%.1f", s }' "$W/perf.dso"; }
	incl() { awk -v s="$1" '$NF == s || ($(NF-1) == s && $NF == "(inlined)") { gsub("%", "", $1); print $1; exit }' "$W/perf.sym"; }
	for d in redis_primitives.so libhiredis.so.0.14 libcrypto.so.3 postgres libc.so.6 '[kernel.kallsyms]'; do
		bench_metric "profile_perf_self_$(tr -dc 'a-z0-9_.' <<<"$d")" "$(dso "$d")" "% of backend CPU" "perf: self time in $d, acquire + release backend"
	done
	for s in rp_acquire_common rp_exchange redisBufferWrite redisBufferRead rp_wait \
		WaitEventSetWait ModifyWaitEvent CreateWaitEventSet __GI_epoll_create1 __GI_epoll_ctl rp_conn_is_stale pg_strong_random; do
		bench_metric "profile_perf_incl_$s" "$(incl "$s")" "% of backend CPU" "perf: inclusive time in $s (0 or empty: not seen)"
	done
fi
exit 0
