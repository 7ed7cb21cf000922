#!/usr/bin/env bash
# bench/measure/track_wrapper.sh -- what redis_primitives.track's wrapper
# costs per counted call without Redis, and the shared memory of rp_stats
# and rp_locks (bench/run.sh runs it; `make bench-track`).
#
# rp_release_all() with nothing held is counted but makes no round trip:
# RP_BENCH_MICRO calls (200,000; 20,000 in --quick) in one statement, track
# on and off alternating, RP_BENCH_ROUNDS rounds (5; 3 in --quick); the
# fastest of each, as for any micro-benchmark.  The workloads track_*_on
# and track_*_off measure the same with Redis in the loop.
# Know before editing: the rows are metrics; their names are what the
# report and a history CSV match on.
set -uo pipefail
source "$HERE/lib.sh"
MICRO=${RP_BENCH_MICRO:-200000}; ROUNDS=${RP_BENCH_ROUNDS:-5}
[ "$BENCH_QUICK" = 1 ] && { MICRO=20000; ROUNDS=3; }
micro() {  # track -> ms for MICRO calls
	psql -X -At -c "SET redis_primitives.track = $1" -c "SELECT count(rp_release_all()) FROM generate_series(1, 1000)" \
		-c "DO \$\$ DECLARE t0 timestamptz := clock_timestamp(); BEGIN PERFORM count(rp_release_all()) FROM generate_series(1, $MICRO); RAISE NOTICE 'ms=%', extract(epoch FROM clock_timestamp() - t0) * 1000; END \$\$" 2>&1 |
		sed -n 's/.*ms=\([0-9.]*\).*/\1/p'
}
: > "$W/micro_on"; : > "$W/micro_off"
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) -eq 1 ]; then order="on off"; else order="off on"; fi
	for t in $order; do micro "$t" >> "$W/micro_$t"; done
done
on=$(sort -g "$W/micro_on" | head -1); off=$(sort -g "$W/micro_off" | head -1)
if [ -n "$on" ] && [ -n "$off" ]; then
	bench_metric track_wrapper_ns_per_call "$(awk -v a="$on" -v b="$off" -v n="$MICRO" 'BEGIN { printf "%.0f", (a - b) / n * 1e6 }')" ns \
		"rp_release_all() with nothing held, $MICRO calls, fastest of $ROUNDS: track on $on ms, off $off ms"
else
	bench_row tool=skip name=track_wrapper_ns_per_call "note=the micro-benchmark did not run"
fi
b=$(psql -X -At -c "SELECT shmem_bytes FROM rp_stats_info" 2>/dev/null)
[ -n "$b" ] && bench_metric track_shmem_bytes "$b" bytes \
	"rp_stats_info.shmem_bytes at max_connections = $(psql -X -At -c 'SHOW max_connections') and max_tracked_leases = $(psql -X -At -c 'SHOW redis_primitives.max_tracked_leases')"
exit 0
