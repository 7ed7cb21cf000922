#!/usr/bin/env bash
# bench/semaphore.sh -- what a semaphore permit costs next to a lock
# (`make bench-semaphore`; the full `make bench` has the same rows).
#
# Starts a throwaway PostgreSQL and Redis (scripts/lib.sh) and runs pgbench,
# RP_BENCH_T seconds (default 5) per row and client count:
#   lock      rp_acquire + rp_release, each client its own name
#   permit    rp_semaphore_acquire + rp_release, each client its own name
#   shared    rp_semaphore_acquire + rp_release, every client on one
#             semaphore of 4 permits (NULL answers count as attempts)
#   select1   SELECT 1, the floor of one statement
# Prints TPS and average latency per row.  Compare ratios within one run: the
# machine is small and shared.
set -uo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
T=${RP_BENCH_T:-5}
CLIENTS=${RP_BENCH_CLIENTS:-1 8}

rp_setup
rp_start_servers
cd "$RP_ROOT"
W=$RP_TMP/bench
mkdir -p "$W" && chmod 777 "$W"
psql -X -q -d postgres -c "CREATE DATABASE rp_bench" >/dev/null
psql -X -q -d rp_bench -c "CREATE EXTENSION redis_primitives" >/dev/null

printf '%s\n' "SELECT 1;" >"$W/select1.sql"
printf '%s\n' "SELECT fence FROM rp_acquire('bench-' || :client_id, 10000);" \
	"SELECT rp_release('bench-' || :client_id);" >"$W/lock.sql"
printf '%s\n' "SELECT fence FROM rp_semaphore_acquire('bench-sem-' || :client_id, 4, 10000);" \
	"SELECT rp_release('bench-sem-' || :client_id);" >"$W/permit.sql"
printf '%s\n' "SELECT fence FROM rp_semaphore_acquire('bench-sem-shared', 4, 10000);" \
	"SELECT rp_release('bench-sem-shared');" >"$W/shared.sql"

printf '%-8s %7s %10s %12s\n' row clients tps avg_ms
for row in select1 lock permit shared; do
	for c in $CLIENTS; do
		out=$(pgbench -n -f "$W/$row.sql" -c "$c" -j "$c" -T "$T" -d rp_bench 2>&1)
		tps=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
		lat=$(echo "$out" | sed -n 's/^latency average = \([0-9.]*\) ms/\1/p')
		printf '%-8s %7s %10s %12s\n' "$row" "$c" "${tps:-?}" "${lat:-?}"
	done
done
