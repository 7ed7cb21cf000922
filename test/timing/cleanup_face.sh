#!/usr/bin/env bash
# test/timing/cleanup_face.sh -- after a TLS handshake that failed inside
# the cleanup face (the COMMIT's release), statement_timeout cancels on
# time.  test/scenarios/cleanup_face.sh asserts that it still cancels (the
# backend once ignored interrupts from then on); this file bounds when:
# timed by the server, around the pg_sleep alone.
source "$(dirname "$0")/../scenarios/tap.bash"
plan 1

tport=$(rp_free_port)
trap 'rp_stop_redis "$tport"' EXIT
tls_make_certs "$RP_TMP/cf-tls-timing"
redis-server --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --dir "$RP_TMP" \
	--pidfile "$RP_TMP/redis-$tport.pid" --logfile "$RP_TMP/redis-$tport.log" \
	$(tls_redis_args "$RP_TMP/cf-tls-timing" server "$tport")
wait_for 30 rp_port_taken "$tport"
out=$(psql -X -At -q -d "$RP_DB" 2>&1 <<SQL
SET redis_primitives.port = $tport;
SET redis_primitives.tls = 'verify-full';
SET redis_primitives.tls_ca_file = '$RP_TMP/cf-tls-timing/ca.crt';
BEGIN;
SELECT (rp_acquire_xact('cf-tls', 60000)).fence > 0;
SET redis_primitives.tls_server_name = 'wrong.example';
COMMIT;
SET statement_timeout = '300ms';
SELECT 'T0 ' || $ms_sql;
SELECT pg_sleep(6);
SELECT 'T1 ' || $ms_sql;
SQL
)
t0=$(echo "$out" | sed -n 's/^T0 //p') t1=$(echo "$out" | sed -n 's/^T1 //p')
took=; [ -n "$t0" ] && [ -n "$t1" ] && took=$(( t1 - t0 ))
# the handshake failed inside the COMMIT (its WARNING), and the sleep was
# cancelled by statement_timeout
ended=$(echo "$out" | grep -c "WARNING:  could not release 1 Redis lease\|canceling statement due to statement timeout")
within "$ended" 2 "$took" 5000 "after a TLS handshake failed inside the COMMIT's release, statement_timeout (300 ms) cancels pg_sleep(6) after ${took:-?} ms"
finish
