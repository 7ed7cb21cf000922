#!/usr/bin/env bash
# bench/tls.sh -- what TLS to Redis costs (`make bench-tls`; issue 12).
#
# One Redis serves a plain port and a TLS port at once, so both paths talk to
# the same server process with the same data.  Rows (single client):
#   acquire+release     rp_acquire then rp_release on an established connection
#   rp_ratelimit        one rate-limit call (gcra) on an established connection
#   rp_ping             one PING round trip
#   reconnect+rp_ping   a changed setting drops the connection, so each call
#                       opens a new one (TCP connect, TLS handshake) first
# The handshake cost is (reconnect+rp_ping) - rp_ping.
#
# 1. Paired halves: RP_BENCH_N calls plain, then RP_BENCH_N calls TLS (order
#    alternating), RP_BENCH_PAIRS times; the median of the pairs' ratios is
#    robust to a shared machine's load, which moves both halves of a pair.
# 2. pgbench: acquire+release and rp_ratelimit, RP_BENCH_T seconds per run,
#    plain and TLS alternating.
# Target (issue 12): a call over an established TLS connection within 1.15x
# of plain TCP.  Writes bench/results/tls.md.  Reports; never fails because a
# number is bad.
set -uo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
source "$(dirname "$0")/../test/scenarios/tls_certs.bash"

T=${RP_BENCH_T:-5}
PAIRS=${RP_BENCH_PAIRS:-15}
N=${RP_BENCH_N:-200}
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

PLAIN="-c redis_primitives.port=$PP -c redis_primitives.tls=off"
TLS="-c redis_primitives.port=$PT -c redis_primitives.tls=verify-full -c redis_primitives.tls_ca_file=$C/ca.crt"
for m in plain tls; do
	opts=$PLAIN; [ $m = tls ] && opts=$TLS
	PGOPTIONS="$opts" psql -X -At -q -d rp_bench -c "SELECT rp_ping()" >/dev/null ||
		{ rp_log "the $m path does not work"; exit 1; }
done

# 1. Paired: N calls plain, then N calls TLS (or the other
# way round, alternating), PAIRS times; a pair runs within a fraction of a
# second, so both halves see the same machine load, and the median of the
# pairs' ratios is what the shared machine cannot blur.  Switching a
# setting drops the connection: each half starts with one untimed call.
psql -X -q -d rp_bench -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE TABLE tls_pair (pair int, kind text, mode text, ms float8);
CREATE PROCEDURE tls_half(pair int, kind text, mode text, n int) LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz; l rp_lease;
BEGIN
  PERFORM set_config('redis_primitives.port', CASE mode WHEN 'tls' THEN '$PT' ELSE '$PP' END, false);
  PERFORM set_config('redis_primitives.tls', CASE mode WHEN 'tls' THEN 'verify-full' ELSE 'off' END, false);
  PERFORM set_config('redis_primitives.tls_ca_file', '$C/ca.crt', false);
  PERFORM rp_ping();
  t0 := clock_timestamp();
  FOR i IN 1..n LOOP
    CASE kind
      WHEN 'acquire+release' THEN l := rp_acquire('bench-tls', 10000); PERFORM rp_release(l);
      WHEN 'rp_ratelimit' THEN PERFORM rp_ratelimit('bench-tls-rl', 1000000000, 60000, 1, 'gcra');
      WHEN 'rp_ping' THEN PERFORM rp_ping();
      WHEN 'reconnect+rp_ping' THEN
        PERFORM set_config('redis_primitives.database', '0', false);  -- drops the connection
        PERFORM rp_ping();
    END CASE;
  END LOOP;
  INSERT INTO tls_pair VALUES (pair, kind, mode, extract(epoch FROM clock_timestamp() - t0) * 1000 / n);
END \$\$;
SQL
for p in $(seq "$PAIRS"); do
	for row in "acquire+release" "rp_ratelimit" "rp_ping" "reconnect+rp_ping"; do
		if [ $((p % 2)) -eq 0 ]; then order="plain tls"; else order="tls plain"; fi
		for m in $order; do
			psql -X -q -d rp_bench -v ON_ERROR_STOP=1 -c "CALL tls_half($p, '$row', '$m', $N)" >/dev/null ||
				{ rp_log "pair $p $row $m failed"; exit 1; }
		done
	done
done

# 2. pgbench, plain and TLS alternating, RP_BENCH_T seconds each.
declare -A PGB
for s in acq rl; do
	for m in plain tls tls plain; do
		opts=$PLAIN; [ $m = tls ] && opts=$TLS
		v=$(PGOPTIONS="$opts" pgbench -n -c 1 -T "$T" -f "$RP_TMP/b/$s.sql" rp_bench 2>&1 |
			sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p')
		[ -n "$v" ] || { rp_log "pgbench failed for $m $s"; exit 1; }
		PGB[$m.$s]="${PGB[$m.$s]:+${PGB[$m.$s]} }$v"
	done
done

{
	echo "# TLS to Redis: cost next to plain TCP"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); one Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') serving both ports;"
	echo "TLS = verify-full, $(openssl version | cut -d' ' -f1-2), TLS 1.3. Single client."
	echo
	echo "## Paired (one session, $PAIRS pairs of $N calls per mode, order alternating)"
	echo
	echo "| call | plain ms (median) | TLS ms (median) | TLS / plain: median of the pairs' ratios | pairs within 1.15x |"
	echo "| --- | ---: | ---: | ---: | ---: |"
	psql -X -At -F '|' -d rp_bench -c "
	  WITH p AS (SELECT a.kind, a.pair, a.ms AS plain, b.ms AS tls, b.ms / a.ms AS ratio
	             FROM tls_pair a JOIN tls_pair b USING (pair, kind) WHERE a.mode = 'plain' AND b.mode = 'tls')
	  SELECT '', kind, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY plain)::numeric, 3),
	         round(percentile_cont(0.5) WITHIN GROUP (ORDER BY tls)::numeric, 3),
	         round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ratio)::numeric, 2) || 'x',
	         count(*) FILTER (WHERE ratio <= 1.15) || ' of ' || count(*), ''
	  FROM p GROUP BY kind ORDER BY min(CASE kind WHEN 'acquire+release' THEN 1 WHEN 'rp_ratelimit' THEN 2 WHEN 'rp_ping' THEN 3 ELSE 4 END)"
	echo
	psql -X -At -d rp_bench -c "
	  WITH m AS (SELECT kind, mode, percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS ms FROM tls_pair GROUP BY kind, mode)
	  SELECT format('Connection set-up (reconnect+rp_ping minus rp_ping, medians): plain %s ms, TLS %s ms: the TLS handshake adds about %s ms, once per connection.',
	    round((r.ms - p.ms)::numeric, 3), round((rt.ms - pt.ms)::numeric, 3), round(((rt.ms - pt.ms) - (r.ms - p.ms))::numeric, 3))
	  FROM m r, m p, m rt, m pt
	  WHERE r.kind = 'reconnect+rp_ping' AND r.mode = 'plain' AND p.kind = 'rp_ping' AND p.mode = 'plain'
	    AND rt.kind = 'reconnect+rp_ping' AND rt.mode = 'tls' AND pt.kind = 'rp_ping' AND pt.mode = 'tls'"
	echo
	echo "## pgbench (average latency, ${T} s per run, runs in the order plain, TLS, TLS, plain)"
	echo
	echo "| call | plain ms | TLS ms |"
	echo "| --- | --- | --- |"
	echo "| acquire+release | ${PGB[plain.acq]} | ${PGB[tls.acq]} |"
	echo "| rp_ratelimit (gcra) | ${PGB[plain.rl]} | ${PGB[tls.rl]} |"
} >"$OUT"
cat "$OUT"
