#!/usr/bin/env bash
# bench/measure/memory.sh -- a backend's memory over many calls, and the
# bytes of a rate-limit key (bench/run.sh runs it).
#
# 1. One backend runs rp_release(rp_acquire('bench-mem', 10000)) in a
#    PL/pgSQL loop, committing every 1,000 pairs, for RP_BENCH_MEM_SECONDS
#    (20; 2 in --quick) or RP_BENCH_MEM_CALLS pairs, after a 1,000-pair
#    warm-up.  Its RssAnon (private heap) is read after the warm-up, after
#    the first quarter and at the end: growth in the first quarter is
#    warm-up (caches, allocator arenas), growth in the rest would be a leak.
# 2. MEMORY USAGE <key> SAMPLES 0 (every member counted) of one rate-limit
#    key per algorithm and limit (10, 1,000, 10,000; 10 and 1,000 in
#    --quick), after one request and when full, filled by requests of cost 1
#    as an application fills it; window one hour so nothing ages out.
# Know before editing: the rows are metrics (bench/lib.sh bench_metric);
# their names are what the report and a history CSV match on.
set -uo pipefail
source "$HERE/lib.sh"
SECS=${RP_BENCH_MEM_SECONDS:-20}; CALLS=${RP_BENCH_MEM_CALLS:-1000000}
LIMITS="10 1000 10000"
[ "$BENCH_QUICK" = 1 ] && { SECS=2; LIMITS="10 1000"; }
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }

cat > "$W/memloop.sql" <<'SQL'
DO $$
DECLARE
  i bigint := 0;
  maxcalls bigint := current_setting('bench.calls')::bigint;
  t0 timestamptz := clock_timestamp();
  deadline timestamptz := clock_timestamp() + make_interval(secs => current_setting('bench.secs')::float8);
BEGIN
  LOOP
    PERFORM rp_release(rp_acquire('bench-mem', 10000));
    i := i + 1;
    IF i % 1000 = 0 THEN
      COMMIT;
      EXIT WHEN i >= maxcalls OR clock_timestamp() >= deadline;
    END IF;
  END LOOP;
  PERFORM set_config('bench.done', i::text, false);
  PERFORM set_config('bench.elapsed', extract(epoch FROM clock_timestamp() - t0)::text, false);
END $$;
SQL
s1=$(awk -v s="$SECS" 'BEGIN { printf "%.1f", s / 4 }'); c1=$(( CALLS / 4 ))
s2=$(awk -v s="$SECS" 'BEGIN { printf "%.1f", s * 3 / 4 }'); c2=$(( CALLS - c1 ))
snap() { echo "\\! grep -E '^RssAnon' /proc/\$RP_PID/status | tr -dc 0-9 > $W/mem.$1"; }
{
	echo "SELECT pg_backend_pid() AS pid \\gset"
	echo "\\setenv RP_PID :pid"
	echo "SELECT count(rp_release(rp_acquire('bench-mem', 10000))) FROM generate_series(1, 1000) \\g /dev/null"
	snap 0
	echo "SELECT set_config('bench.secs', '$s1', false), set_config('bench.calls', '$c1', false) \\g /dev/null"
	echo "\\i $W/memloop.sql"
	snap 1
	echo "SELECT current_setting('bench.done'), current_setting('bench.elapsed');"
	echo "SELECT set_config('bench.secs', '$s2', false), set_config('bench.calls', '$c2', false) \\g /dev/null"
	echo "\\i $W/memloop.sql"
	snap 2
	echo "SELECT current_setting('bench.done'), current_setting('bench.elapsed');"
} > "$W/mem.sql"
r0=$(rcli info memory | tr -d '\r' | sed -n 's/^used_memory:\([0-9]*\)/\1/p')
if q -f "$W/mem.sql" >"$W/mem.out" 2>&1; then
	r1=$(rcli info memory | tr -d '\r' | sed -n 's/^used_memory:\([0-9]*\)/\1/p')
	IFS='|' read -r d1 e1 < <(sed -n 1p "$W/mem.out")
	IFS='|' read -r d2 e2 < <(sed -n 2p "$W/mem.out")
	a0=$(cat "$W/mem.0"); a1=$(cat "$W/mem.1"); a2=$(cat "$W/mem.2")
	per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.3f", (n > 0) ? (b - a) * 1000 / n : 0 }'; }
	bench_metric mem_pairs_per_s "$(awk -v n=$((d1 + d2)) -v s="$e1" -v t="$e2" 'BEGIN { printf "%.0f", n / (s + t) }')" "pairs/s" \
		"acquire + release pairs per second in one backend's PL/pgSQL loop ($((d1 + d2)) pairs)"
	bench_metric mem_rssanon_warmup_kb_per_1000 "$(per "$a0" "$a1" "$d1")" "kB per 1,000 pairs" \
		"backend RssAnon growth over the first quarter ($a0 -> $a1 kB, $d1 pairs): warm-up"
	bench_metric mem_rssanon_steady_kb_per_1000 "$(per "$a1" "$a2" "$d2")" "kB per 1,000 pairs" \
		"backend RssAnon growth over the rest ($a1 -> $a2 kB, $d2 pairs): a leak if above 0"
	bench_metric mem_redis_used_delta "$(( r1 - r0 ))" bytes "Redis used_memory after the loop minus before (the lease is released each time)"
else
	bench_row tool=skip name=mem_rssanon_steady_kb_per_1000 "note=the memory loop failed: $(grep -m1 ERROR "$W/mem.out")"
fi

for algo in sliding_log sliding_window gcra; do
	for L in $LIMITS; do
		key="rp:{bench-rl-$L}:rl:$algo"
		q -c "SELECT rp_ratelimit('bench-rl-$L', $L, 3600000, 1, '$algo')" >/dev/null || continue
		one=$(rcli memory usage "$key" samples 0)
		q -c "SELECT count(*) FILTER (WHERE rp_ratelimit('bench-rl-$L', $L, 3600000, 1, '$algo')) FROM generate_series(2, $L)" >/dev/null
		full=$(rcli memory usage "$key" samples 0)
		enc=$(rcli object encoding "$key")
		rem=$(q -c "SELECT remaining FROM rp_ratelimit_peek('bench-rl-$L', $L, 3600000, 1, '$algo')")
		bench_metric "rl_key_bytes_${algo}_${L}_one" "$one" bytes "MEMORY USAGE after one request, limit $L"
		bench_metric "rl_key_bytes_${algo}_${L}_full" "$full" bytes "MEMORY USAGE when full (remaining $rem), limit $L, encoding $enc"
		rcli del "$key" >/dev/null
	done
done
