#!/usr/bin/env bash
# bench/targets.sh -- the three performance targets of 1.1 (the refusal cache,
# rp_acquire_all, calls against their floor), each measured side by
# side in one pgbench run (the scripts interleaved, so the machine's noise
# falls on both alike), repeated RP_BENCH_REPEAT times (3), median reported.
#
#   1. refused flood (bench/workloads/ratelimit_refused_flood.sql) against
#      SELECT 1 at 1 and 8 clients: target <= 1.1x, and 0 Redis round trips
#      during the runs (INFO commandstats, which nothing else uses meanwhile);
#   2. rp_acquire_all of ten names against rp_acquire of one (each followed
#      by rp_release_all): target <= 1.3x;
#   3. rp_acquire + rp_release and rp_ratelimit (gcra) against their floor:
#      statements x SELECT 1 + the same scripts' round trips from
#      redis-benchmark -c 1, measured right after: target <= 1.2x.
#
# It uses the workload files of bench/workloads/ (the layout bench/run.sh
# discovers) and writes bench/results/targets.md.  Knobs: RP_BENCH_T (5 s
# per run), RP_BENCH_REPEAT (3).
set -uo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
T=${RP_BENCH_T:-5}
REPEAT=${RP_BENCH_REPEAT:-3}
WL=$RP_ROOT/bench/workloads
OUT=$RP_ROOT/bench/results/targets.md

rp_setup
rp_start_servers
export PGDATABASE=rp_bench
psql -X -q -d postgres -c "CREATE DATABASE rp_bench" >/dev/null
psql -X -q -c "CREATE EXTENSION redis_primitives" >/dev/null
W=$RP_TMP/bench17; mkdir -p "$W"; chmod 777 "$W"
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }
round_trips() {
	rcli INFO commandstats | tr -d '\r' |
		awk -F'[=:,]' '/^cmdstat_evalsha:|^cmdstat_eval:/ { n += $3 } END { print n + 0 }'
}
setup() {  # run a workload's "-- setup:" lines
	sed -n 's/^-- setup: //p' "$WL/$1.sql" | while read -r s; do psql -X -q -At -c "$s" >/dev/null; done
}
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# pgbench with several scripts interleaved; prints "name latency_ms" per script.
interleaved() {  # clients script...
	local c=$1 j=1 args=() s; shift
	[ "$c" -gt 1 ] && j=2
	for s in "$@"; do args+=(-f "$WL/$s.sql@1"); done
	(cd "$W" && pgbench -n -M prepared -c "$c" -j "$j" -T "$T" "${args[@]}" 2>&1) |
		tee -a "$W/pgbench.log" | awk '/^SQL script [0-9]+:/ { name = $4; sub(/.*\//, "", name); sub(/\.sql$/, "", name) }
		     /^ - latency average = / && name != "" { print name, $5 }'
}

for s in ratelimit_refused_flood acquire1 acquire_all10 lock_pair rl_gcra; do setup "$s"; done
# Trial transactions: a broken workload must not be timed.
for s in select1 ratelimit_refused_flood acquire1 acquire_all10 lock_pair rl_gcra; do
	(cd "$W" && pgbench -n -M prepared -c 1 -t 1 -f "$WL/$s.sql" >/dev/null 2>&1) || { echo "workload $s fails" >&2; exit 1; }
done
setup ratelimit_refused_flood

# Raw floor: the scripts straight from redis-benchmark -c 1 (mean ms).
raw_ms() {  # lua file, args...
	local f=$1 sha; shift
	sha=$(rcli SCRIPT LOAD "$(sh "$RP_ROOT/scripts/expand-includes.sh" "$RP_ROOT/src/lua" "$RP_ROOT/src/lua/$f.lua")")
	redis-benchmark -p "$REDIS_PORT" -c 1 -n 20000 -r 100000000 --csv EVALSHA "$sha" "$@" 2>/dev/null |
		awk -F'","' 'NR == 2 { gsub(/"/, "", $2); print 1000 / $2 }'
}

declare -A R
for rep in $(seq "$REPEAT"); do
	for c in 1 8; do
		b=$(round_trips)
		interleaved "$c" select1 ratelimit_refused_flood > "$W/flood.$c.$rep"
		R[rt.$c.$rep]=$(( $(round_trips) - b ))
		a=$(awk '$1 == "select1" { print $2 }' "$W/flood.$c.$rep")
		f=$(awk '$1 == "ratelimit_refused_flood" { print $2 }' "$W/flood.$c.$rep")
		R[flood.$c.$rep]=$(awk -v a="$a" -v f="$f" 'BEGIN { printf "%.3f", f / a }')
		R[flood_ms.$c.$rep]="$f / $a"
	done
	interleaved 1 acquire1 acquire_all10 > "$W/all.$rep"
	a=$(awk '$1 == "acquire1" { print $2 }' "$W/all.$rep")
	f=$(awk '$1 == "acquire_all10" { print $2 }' "$W/all.$rep")
	R[all.$rep]=$(awk -v a="$a" -v f="$f" 'BEGIN { printf "%.3f", f / a }')
	R[all_ms.$rep]="$f / $a"

	interleaved 1 select1 lock_pair rl_gcra > "$W/single.$rep"
	acq=$(raw_ms lock_acquire 2 "rp:{rb:__rand_int__}:lock" "rp:{rb:__rand_int__}:fence" 0123456789abcdef0123456789abcdef 10000 0)
	rel=$(raw_ms lock_release 1 "rp:{rb:__rand_int__}:lock" 0123456789abcdef0123456789abcdef)
	gcra=$(raw_ms ratelimit_gcra 1 "rp:{bench-rl-raw}:rl:gcra" 100000 1000 1 1 0)
	s1=$(awk '$1 == "select1" { print $2 }' "$W/single.$rep")
	p=$(awk '$1 == "lock_pair" { print $2 }' "$W/single.$rep")
	g=$(awk '$1 == "rl_gcra" { print $2 }' "$W/single.$rep")
	R[pair.$rep]=$(awk -v p="$p" -v s="$s1" -v a="$acq" -v r="$rel" 'BEGIN { printf "%.3f", p / (2 * s + a + r) }')
	R[gcra.$rep]=$(awk -v g="$g" -v s="$s1" -v r="$gcra" 'BEGIN { printf "%.3f", g / (s + r) }')
	R[pair_ms.$rep]="$p / (2 x $s1 + $acq + $rel)"
	R[gcra_ms.$rep]="$g / ($s1 + $gcra)"
done

med() { for rep in $(seq "$REPEAT"); do echo "${R[$1.$rep]}"; done | median; }
all_of() { for rep in $(seq "$REPEAT"); do printf '%s; ' "${R[$1.$rep]}"; done; }
met() { awk -v v="$1" -v t="$2" 'BEGIN { print (v <= t) ? "yes" : "no" }'; }
{
	echo "# The performance targets of 1.1: measured side by side"
	echo
	echo "Run $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$RP_ROOT" rev-parse --short HEAD), load average at the end $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores."
	echo "Each ratio is from one pgbench run whose scripts are interleaved (\`-f a@1 -f b@1\`, $T s, \`-M prepared\`); $REPEAT runs, median shown, every run listed."
	echo
	echo "| target | median | runs | goal | met |"
	echo "| --- | ---: | --- | ---: | --- |"
	for c in 1 8; do
		v=$(med flood.$c)
		echo "| refused flood (cache) / SELECT 1, $c client(s) | ${v}x | $(all_of flood.$c) | 1.1x | $(met "$v" 1.1) |"
		echo "| Redis round trips during those runs, $c client(s) | $(med rt.$c) | $(all_of rt.$c) | 0 | $(met "$(med rt.$c)" 0) |"
	done
	v=$(med all); echo "| rp_acquire_all (10 names) + rp_release_all / rp_acquire (1) + rp_release_all | ${v}x | $(all_of all) | 1.3x | $(met "$v" 1.3) |"
	v=$(med pair); echo "| rp_acquire + rp_release / floor | ${v}x | $(all_of pair) | 1.2x | $(met "$v" 1.2) |"
	v=$(med gcra); echo "| rp_ratelimit gcra / floor | ${v}x | $(all_of gcra) | 1.2x | $(met "$v" 1.2) |"
	echo
	echo "Latencies (ms) behind each ratio, per run:"
	echo
	for k in flood_ms.1 flood_ms.8 all_ms pair_ms gcra_ms; do
		echo "- $k: $(all_of $k)"
	done
} > "$OUT"
cat "$OUT"
[ -n "${RP_BENCH_KEEP_LOG:-}" ] && cp "$W/pgbench.log" "$RP_BENCH_KEEP_LOG"
