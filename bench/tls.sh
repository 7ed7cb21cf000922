#!/usr/bin/env bash
# bench/tls.sh -- what TLS to Redis costs (`make bench-tls`; issue 12).
#
# One Redis serves a plain port and a TLS port at once, so both paths talk to
# the same server process with the same data, and every row below is run
# plain and TLS alternately (RP_BENCH_ROUNDS rounds of RP_BENCH_T seconds,
# single client, pgbench) in this one run:
#   acquire+release     SELECT rp_release(rp_acquire(...)) on an established connection
#   rp_ratelimit        one rate-limit call (gcra) on an established connection
#   reconnect+ping      a changed setting forces a new Redis connection (TCP
#                       connect, TLS handshake, and the first round trip)
#   ping                the same round trip without the reconnect
# The handshake cost is (reconnect+ping) - ping.  Target (issue 12): a call
# over an established TLS connection within 1.15x of plain TCP.
# Writes bench/results/tls.md.  Reports; never fails because a number is bad.
set -uo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
source "$(dirname "$0")/../test/scenarios/tls_certs.bash"

T=${RP_BENCH_T:-5}
ROUNDS=${RP_BENCH_ROUNDS:-3}
OUT=$RP_ROOT/bench/results/tls.md

rp_setup
rp_start_servers
cd "$RP_ROOT"
tls_make_certs "$RP_TMP/tls"
C=$RP_TMP/tls
PP=$(rp_free_port); PT=$(rp_free_port)
while [ "$PT" = "$PP" ]; do PT=$(rp_free_port); done
rp_start_redis "$PP" $(tls_redis_args "$C" server | sed 's/--port 0//') --tls-port "$PT" --tls-auth-clients no
psql -X -q -c "CREATE DATABASE rp_bench" >/dev/null
psql -X -q -d rp_bench -c "CREATE EXTENSION redis_primitives" >/dev/null

mkdir -p "$RP_TMP/b"
echo "SELECT rp_release(rp_acquire('bench-tls-' || :client_id, 10000));" >"$RP_TMP/b/acq.sql"
echo "SELECT rp_ratelimit('bench-tls-rl', 1000000000, 60000, 1, 'gcra');" >"$RP_TMP/b/rl.sql"
echo "SELECT rp_ping();" >"$RP_TMP/b/ping.sql"
# redis_primitives.database has a change hook: setting it drops the
# connection, so the rp_ping after it opens a new one.
printf 'SET redis_primitives.database = 0;\nSELECT rp_ping();\n' >"$RP_TMP/b/reconnect.sql"

PLAIN="-c redis_primitives.port=$PP -c redis_primitives.tls=off"
TLS="-c redis_primitives.port=$PT -c redis_primitives.tls=verify-full -c redis_primitives.tls_ca_file=$C/ca.crt"

run() {  # mode script -> average latency in ms
	local opts=$PLAIN
	[ "$1" = tls ] && opts=$TLS
	PGOPTIONS="$opts" pgbench -n -c 1 -T "$T" -f "$RP_TMP/b/$2.sql" rp_bench 2>&1 |
		sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p'
}
# Check both paths work before timing them.
for m in plain tls; do
	opts=$PLAIN; [ $m = tls ] && opts=$TLS
	PGOPTIONS="$opts" psql -X -At -q -d rp_bench -c "SELECT rp_ping()" >/dev/null ||
		{ rp_log "the $m path does not work"; exit 1; }
done

declare -A SUM
rows="acq rl ping reconnect"
for r in $(seq "$ROUNDS"); do
	for s in $rows; do
		for m in plain tls; do
			v=$(run "$m" "$s")
			[ -n "$v" ] || { rp_log "pgbench failed for $m $s"; exit 1; }
			SUM[$m.$s]=$(echo "${SUM[$m.$s]:-0} + $v" | bc -l)
			rp_log "round $r: $s $m $v ms"
		done
	done
done
avg() { echo "scale=4; ${SUM[$1]} / $ROUNDS" | bc -l; }
label() { case $1 in acq) echo "acquire+release" ;; rl) echo "rp_ratelimit" ;; ping) echo "rp_ping" ;; reconnect) echo "reconnect+rp_ping" ;; esac; }

{
	echo "# TLS to Redis: cost next to plain TCP"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); one Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') serving both ports;"
	echo "$ROUNDS rounds of ${T} s per cell, plain and TLS alternating; single client; TLS = verify-full, $(openssl version | cut -d' ' -f1-2)."
	echo
	echo "| call | plain ms | TLS ms | TLS / plain |"
	echo "| --- | ---: | ---: | ---: |"
	for s in $rows; do
		p=$(avg "plain.$s"); t=$(avg "tls.$s")
		printf '| %s | %.3f | %.3f | %.2fx |\n' "$(label "$s")" "$p" "$t" "$(echo "$t / $p" | bc -l)"
	done
	hp=$(echo "$(avg plain.reconnect) - $(avg plain.ping)" | bc -l)
	ht=$(echo "$(avg tls.reconnect) - $(avg tls.ping)" | bc -l)
	echo
	printf 'Connection set-up (reconnect+rp_ping - rp_ping): plain %.3f ms, TLS %.3f ms: a TLS handshake costs about %.3f ms more, once per connection.\n' "$hp" "$ht" "$(echo "$ht - $hp" | bc -l)"
} >"$OUT"
cat "$OUT"
