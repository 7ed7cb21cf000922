#!/usr/bin/env bash
# bench/track.sh -- what rp_stats and rp_locks cost (`make bench-track`).
#
# Builds and installs the extension, starts a throwaway PostgreSQL (at the
# default max_connections, so the shared memory reported is the default
# size) and Redis, and runs pgbench on two workloads, at 1 and 8 clients:
#   acquire+release   SELECT rp_release(rp_acquire(...))   (two counted calls,
#                     one rp_locks row published and removed)
#   rp_ratelimit      sliding_log, a limit never reached
# each in ROUNDS rounds that alternate redis_primitives.track on and off
# (on-off, off-on, ...), so drift in a shared machine's load falls on both.
# The overhead is the median of the per-round ratios: two runs seconds apart
# share the machine's load far better than two medians over minutes do.
# Reports it with the median TPS of each, and writes
# bench/results/track.md.  It reports; it never fails on a bad number.
#
# Knobs: RP_BENCH_T (s per pgbench run, default 2), RP_BENCH_ROUNDS (15),
# RP_BENCH_CLIENTS ("1 8").
set -uo pipefail
source "$(dirname "$0")/../scripts/lib.sh"

T=${RP_BENCH_T:-2}
ROUNDS=${RP_BENCH_ROUNDS:-15}
CLIENTS=${RP_BENCH_CLIENTS:-1 8}
RP_EXTRA_CONF="max_connections = 100
${RP_EXTRA_CONF:-}"

rp_setup
rp_start_servers
OUT="$RP_ROOT/bench/results/track.md"
mkdir -p "$(dirname "$OUT")"
W=$RP_TMP/work
mkdir -p "$W"
psql -X -q -c "CREATE DATABASE rp_bench" >/dev/null
psql -X -q -d rp_bench -c "CREATE EXTENSION redis_primitives" >/dev/null

cat >"$W/acquire.sql" <<'SQL'
SELECT rp_release(rp_acquire('bench-track-' || :client_id, 10000));
SQL
cat >"$W/ratelimit.sql" <<'SQL'
SELECT rp_ratelimit('bench-track-rl-' || :client_id, 100000, 1000);
SQL

run() {  # workload clients track -> tps
	PGOPTIONS="-c redis_primitives.track=$3" pgbench -n -T "$T" -c "$2" -j "$(( $2 < 2 ? 1 : 2 ))" \
		-f "$W/$1.sql" rp_bench 2>/dev/null | sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

{
	echo "# Cost of redis_primitives.track"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start;"
	echo "pgbench $T s per run, $ROUNDS alternating rounds per row; median TPS and median per-round ratio."
	echo
	echo "| workload | clients | TPS track=on | TPS track=off | overhead | per-round on/off |"
	echo "| --- | --- | --- | --- | --- | --- |"
} >"$OUT"

for wl in acquire ratelimit; do
	for c in $CLIENTS; do
		: >"$W/on" ; : >"$W/off"; ratios=""
		for r in $(seq "$ROUNDS"); do
			if [ $((r % 2)) -eq 1 ]; then order="on off"; else order="off on"; fi
			for t in $order; do
				v=$(run "$wl" "$c" "$t")
				echo "${v:-0}" >>"$W/$t"
				eval "last_$t=\${v:-0}"
			done
			ratios="$ratios $(awk -v a="$last_on" -v b="$last_off" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')"
		done
		on=$(median <"$W/on"); off=$(median <"$W/off")
		ovh=$(for x in $ratios; do echo "$x"; done | median | awk '{ printf "%+.1f%%", (1 - $1) * 100 }')
		echo "| $wl | $c | $on | $off | $ovh |$ratios |" >>"$OUT"
		rp_log "$wl, $c client(s): on $on, off $off TPS ($ovh)"
	done
done

{
	echo
	echo "overhead = 1 - median(per-round TPS on / TPS off): positive means tracking made it slower."
	echo
	echo "Shared memory (rp_stats_info.shmem_bytes) at max_connections = 100 and the"
	echo "default redis_primitives.max_tracked_leases = 1024:"
	echo "$(psql -X -At -d rp_bench -c "SELECT shmem_bytes || ' bytes (' || pg_size_pretty(shmem_bytes) || ')' FROM rp_stats_info")."
	echo
	echo "Counted during the run: $(psql -X -At -d rp_bench -c "SELECT string_agg(primitive || ' ' || calls, ', ') FROM rp_stats WHERE calls > 0")."
} >>"$OUT"
cat "$OUT"
