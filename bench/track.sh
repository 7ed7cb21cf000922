#!/usr/bin/env bash
# bench/track.sh -- what rp_stats and rp_locks cost (`make bench-track`).
#
# Builds and installs the extension, starts a throwaway PostgreSQL (at the
# default max_connections, so the shared memory reported is the default
# size) and Redis, and runs pgbench on two workloads, at 1 and 8 clients:
#   acquire+release   SELECT rp_release(rp_acquire(...))   (two counted calls,
#                     one rp_locks row published and removed)
#   rp_ratelimit      sliding_log, a limit never reached
# in ROUNDS rounds that alternate redis_primitives.track on and off (on-off,
# off-on, ...).  Each run is a fixed number of transactions; besides its TPS
# we take the CPU time the backends spent (the postmaster's reaped
# children's time, /proc/PID/stat cutime + cstime), per transaction.
#
# On a small shared machine TPS swings by tens of percent from one run to
# the next with the neighbours' load; CPU per transaction hardly does, and
# tracking costs CPU, not round trips.  So the overhead reported is the
# median over rounds of (CPU/txn on) / (CPU/txn off) - 1, next to the
# median per-round TPS ratio.
#
# Then the wrapper's own cost, CPU-bound and without Redis: rp_release_all()
# with nothing held (counted, no round trip), MICRO calls in one statement,
# alternating on and off; the fastest of each, as for any micro-benchmark.
# That cost over the time a call takes (1 / TPS off, per client) is the
# overhead the counters add to a call that talks to Redis.
#
# Writes bench/results/track.md.  It reports; it never fails on a bad number.
#
# Knobs: RP_BENCH_TXN (transactions per run and client-set, default 1500),
# RP_BENCH_ROUNDS (10), RP_BENCH_CLIENTS ("1 8"), RP_BENCH_MICRO (200000).
set -uo pipefail
source "$(dirname "$0")/../scripts/lib.sh"

TXN=${RP_BENCH_TXN:-1500}
ROUNDS=${RP_BENCH_ROUNDS:-10}
CLIENTS=${RP_BENCH_CLIENTS:-1 8}
MICRO=${RP_BENCH_MICRO:-200000}
RP_EXTRA_CONF="max_connections = 100
autovacuum = off
${RP_EXTRA_CONF:-}"

rp_setup
rp_start_servers
OUT="$RP_ROOT/bench/results/track.md"
mkdir -p "$(dirname "$OUT")"
W=$RP_TMP/work
mkdir -p "$W"
psql -X -q -c "CREATE DATABASE rp_bench" >/dev/null
psql -X -q -d rp_bench -c "CREATE EXTENSION redis_primitives" >/dev/null
PM=$(head -1 "$RP_TMP/pg/postmaster.pid")
HZ=$(getconf CLK_TCK)

cat >"$W/acquire.sql" <<'SQL'
SELECT rp_release(rp_acquire('bench-track-' || :client_id, 10000));
SQL
cat >"$W/ratelimit.sql" <<'SQL'
SELECT rp_ratelimit('bench-track-rl-' || :client_id, 100000, 1000);
SQL

# cutime + cstime of the postmaster: every backend that has exited, in ticks.
children_ticks() { awk '{ sub(/^.*\) /, ""); print $14 + $15 }' "/proc/$PM/stat"; }
backends_gone() {  # wait until pgbench's backends have exited and been reaped
	local i
	for i in $(seq 100); do
		[ "$(psql -X -At -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE datname = 'rp_bench'")" = 0 ] && break
		sleep 0.02
	done
	sleep 0.05
}
run() {  # workload clients track -> "tps cpu_us_per_txn"
	local t0 t1 tps n=$(( TXN / $2 ))
	backends_gone; t0=$(children_ticks)
	tps=$(PGOPTIONS="-c redis_primitives.track=$3" pgbench -n -t "$n" -c "$2" -j "$(( $2 < 2 ? 1 : 2 ))" \
		-f "$W/$1.sql" rp_bench 2>/dev/null | sed -n 's/^tps = \([0-9.]*\) .*/\1/p')
	backends_gone; t1=$(children_ticks)
	awk -v tps="${tps:-0}" -v d=$((t1 - t0)) -v hz="$HZ" -v n=$((n * $2)) \
		'BEGIN { printf "%s %.1f\n", tps, d / hz * 1e6 / n }'
}
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

{
	echo "# Cost of redis_primitives.track"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start;"
	echo "$TXN transactions per run, $ROUNDS rounds alternating track on/off per row."
	echo
	echo "| workload | clients | TPS on | TPS off | TPS on/off (median of rounds) | backend CPU µs/txn on | off | CPU overhead (median of rounds) |"
	echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
} >"$OUT"

for wl in acquire ratelimit; do
	for c in $CLIENTS; do
		: >"$W/tps_on"; : >"$W/tps_off"; : >"$W/cpu_on"; : >"$W/cpu_off"; : >"$W/r_tps"; : >"$W/r_cpu"
		for r in $(seq "$ROUNDS"); do
			if [ $((r % 2)) -eq 1 ]; then order="on off"; else order="off on"; fi
			for t in $order; do
				read -r tps cpu <<<"$(run "$wl" "$c" "$t")"
				echo "$tps" >>"$W/tps_$t"; echo "$cpu" >>"$W/cpu_$t"
				eval "tps_$t=$tps cpu_$t=$cpu"
			done
			awk -v a="$tps_on" -v b="$tps_off" 'BEGIN { if (b > 0) printf "%.4f\n", a / b }' >>"$W/r_tps"
			awk -v a="$cpu_on" -v b="$cpu_off" 'BEGIN { if (b > 0) printf "%.4f\n", a / b }' >>"$W/r_cpu"
		done
		row="| $wl | $c | $(median <"$W/tps_on") | $(median <"$W/tps_off") | $(median <"$W/r_tps")"
		row="$row | $(median <"$W/cpu_on") | $(median <"$W/cpu_off") | $(median <"$W/r_cpu" | awk '{ printf "%+.1f%%", ($1 - 1) * 100 }') |"
		echo "$row" >>"$OUT"
		rp_log "$row"
	done
done

# The wrapper alone.
micro() {  # track -> ms for MICRO calls
	psql -X -At -d rp_bench -c "SET redis_primitives.track = $1" -c "SELECT count(rp_release_all()) FROM generate_series(1, 1000)" \
		-c "DO \$\$ DECLARE t0 timestamptz := clock_timestamp(); BEGIN PERFORM count(rp_release_all()) FROM generate_series(1, $MICRO); RAISE NOTICE 'ms=%', extract(epoch FROM clock_timestamp() - t0) * 1000; END \$\$" 2>&1 |
		sed -n 's/.*ms=\([0-9.]*\).*/\1/p'
}
: >"$W/micro_on"; : >"$W/micro_off"
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) -eq 1 ]; then order="on off"; else order="off on"; fi
	for t in $order; do micro "$t" >>"$W/micro_$t"; done
done
m_on=$(sort -g "$W/micro_on" | head -1); m_off=$(sort -g "$W/micro_off" | head -1)
ns=$(awk -v a="$m_on" -v b="$m_off" -v n="$MICRO" 'BEGIN { printf "%.0f", (a - b) / n * 1e6 }')
clock_ns=$(psql -X -At -d rp_bench -c "DO \$\$ DECLARE t0 timestamptz := clock_timestamp(); BEGIN PERFORM count(clock_timestamp()) FROM generate_series(1, $MICRO); RAISE NOTICE 'ms=%', extract(epoch FROM clock_timestamp() - t0) * 1000; END \$\$" 2>&1 |
	sed -n 's/.*ms=\([0-9.]*\).*/\1/p' | awk -v n="$MICRO" '{ printf "%.0f", $1 / n * 1e6 }')
{
	echo
	echo "Wrapper alone (rp_release_all() with nothing held, $MICRO calls, fastest of $ROUNDS):"
	echo "track = on $m_on ms, off $m_off ms: **$ns ns per counted call**.  For scale, one"
	echo "clock_timestamp() call (gettimeofday, like the two clock readings the wrapper takes) costs"
	echo "about $clock_ns ns here, including the executor's per-row work ($(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown) clock source)."
	echo
	echo "| workload | clients | time per call, track off (µs) | counted calls per transaction | wrapper cost / call time |"
	echo "| --- | --- | --- | --- | --- |"
	while IFS='|' read -r _ wl c _ off _; do
		wl=$(echo $wl); c=$(echo $c); off=$(echo $off)
		k=1; [ "$wl" = acquire ] && k=2
		awk -v wl="$wl" -v c="$c" -v tps="$off" -v k="$k" -v ns="$ns" 'BEGIN {
			us = c / tps * 1e6 / k; printf "| %s | %s | %.0f | %d | %.3f%% |\n", wl, c, us, k, ns / 1000 / us * 100 }'
	done < <(grep -E '^\| (acquire|ratelimit) \|' "$OUT")
} >>"$OUT"

{
	echo
	echo "CPU overhead: median over rounds of (backend CPU per transaction with track = on) /"
	echo "(the same with track = off) - 1; positive means tracking costs CPU.  The clock has"
	echo "$HZ ticks a second: each run's CPU figure is good to about $((1000000 / HZ)) µs / its transactions."
	echo
	echo "Shared memory (rp_stats_info.shmem_bytes) at max_connections = 100 and the"
	echo "default redis_primitives.max_tracked_leases = 1024:"
	echo "$(psql -X -At -d rp_bench -c "SELECT shmem_bytes || ' bytes (' || pg_size_pretty(shmem_bytes) || ')' FROM rp_stats_info")."
	echo
	echo "Counted during the run (track = on runs only): $(psql -X -At -d rp_bench -c "SELECT string_agg(primitive || ' ' || calls, ', ') FROM rp_stats WHERE calls > 0")."
} >>"$OUT"
cat "$OUT"
