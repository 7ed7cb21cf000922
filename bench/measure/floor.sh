#!/usr/bin/env bash
# bench/measure/floor.sh -- the raw Redis round trips (bench/run.sh runs it).
#
# Each bench/floors.conf script straight from redis-benchmark, one client,
# EVALSHA: raw_<name> rows, the floors the report sets workloads against
# (`-- floor:`).  Then the acquire script at every client count a workload
# runs at: raw_lock_acquire rows, the ceiling if every client spoke to Redis
# directly.  Keys in Redis database 1, apart from the workloads'.  Know
# before editing: a script whose trial call answers with an error is
# skipped (redis-benchmark would time the error reply as happily).
set -uo pipefail
source "$HERE/lib.sh"
DB=1
N=10000; [ "$BENCH_QUICK" = 1 ] && N=2000
rcli() { redis-cli -p "$REDIS_PORT" -n "$DB" "$@"; }
rcli set "rp:{bench-ext}:lock" "$TOKEN" px 3600000 >/dev/null
rcli set "rp:{bench-held}:lock" othertokenothertokenothertoken00 px 3600000 >/dev/null
rcli set "rp:{bench-held}:fence" 41 >/dev/null

declare -A SHA ARGS
IDS=()
BAD=0
while IFS='|' read -r id file args; do
	case $id in ''|\#*) continue ;; esac
	# The script as the extension embeds it: shared text (-- #include) joined.
	sha=$(sh "$RP_ROOT/scripts/expand-includes.sh" "$RP_ROOT/src/lua" "$RP_ROOT/$file" |
		redis-cli -p "$REDIS_PORT" -x script load)
	args=$(expand "$args")
	# shellcheck disable=SC2086
	trial=$(rcli evalsha "$sha" ${args//__rand_int__/0} 2>&1)
	if [ -z "$sha" ] || [[ $trial == *ERR* ]]; then
		bench_row tool=skip "name=raw_$id" "note=the trial call failed: $trial"
		echo "skip raw_$id: $trial" >&2
		BAD=1
		continue
	fi
	SHA[$id]=$sha ARGS[$id]=$args
	IDS+=("$id")
done < "$HERE/floors.conf"

rawb() {  # id clients requests rep
	local out
	# shellcheck disable=SC2086
	out=$(redis-benchmark -p "$REDIS_PORT" --dbnum "$DB" -c "$2" -n "$3" -r 100000000 --csv \
		EVALSHA "${SHA[$1]}" ${ARGS[$1]} 2>/dev/null | tail -1)
	# "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
	IFS=, read -r _ rps avg _ p50 _ p99 _ <<<"${out//\"/}"
	if [ -z "$rps" ] || [ "$rps" = rps ]; then
		bench_row tool=skip "name=raw_$1" "clients=$2" "rep=$4" "note=redis-benchmark failed"
		return
	fi
	bench_row tool=redis-benchmark "name=raw_$1" "clients=$2" "rep=$4" "transactions=$3" \
		"seconds=$(awk -v n="$3" -v r="$rps" 'BEGIN { printf "%.2f", n / r }')" \
		"tps=$rps" "lat_mean_ms=$avg" "lat_p50_ms=$p50" "lat_p99_ms=$p99" pctl_ok=1 rt_per_call=1
	echo "raw_$1 c=$2: $rps/s mean $avg ms" >&2
}
for rep in $(seq "$REPS"); do
	for id in "${IDS[@]}"; do rawb "$id" 1 "$N" "$rep"; done
	if [ -n "${SHA[lock_acquire]:-}" ]; then
		for c in $SCALE_CLIENTS; do
			[ "$c" -gt 1 ] && rawb lock_acquire "$c" $(( N * 3 )) "$rep"
		done
	fi
done
rcli flushdb >/dev/null
exit $BAD	# a floor that no longer runs fails --strict (make bench-quick)
