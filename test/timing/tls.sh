#!/usr/bin/env bash
# test/timing/tls.sh -- how soon a TLS call to a peer that does not answer
# ends.  test/scenarios/tls.sh asserts how each ends (08001 by
# connect_timeout, 57014 by statement_timeout and by cancel, 08006 by
# command_timeout) and that the next call works; this file bounds when.
# The hung peer accepts TCP and never answers the handshake.
source "$(dirname "$0")/../scenarios/tap.bash"
plan 4

HUNG=$(rp_free_port) GOOD=$(rp_free_port)
while [ "$GOOD" = "$HUNG" ]; do GOOD=$(rp_free_port); done
HUNG_PID=
cleanup() { rp_stop_redis "$GOOD"; [ -n "$HUNG_PID" ] && kill "$HUNG_PID" 2>/dev/null; return 0; }
trap cleanup EXIT
tls_make_certs "$RP_TMP/tls-timing"
C=$RP_TMP/tls-timing
redis-server --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --dir "$RP_TMP" \
	--pidfile "$RP_TMP/redis-$GOOD.pid" --logfile "$RP_TMP/redis-$GOOD.log" $(tls_redis_args "$C" server "$GOOD")
python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
held = []
while True:
    c, _ = s.accept(); held.append(c)
' "$HUNG" &
HUNG_PID=$!
wait_for 30 "rp_port_taken $HUNG && rp_port_taken $GOOD"  # a start on a loaded machine: seconds

at() {  # port mode [more settings]
	echo "SET redis_primitives.host = '127.0.0.1'; SET redis_primitives.port = $1; SET redis_primitives.tls = '$2'; SET redis_primitives.connect_timeout = 20000; ${3:-}"
}
WORK="SELECT (rp_acquire('tls-lock', 10000)).fence IS NOT NULL AND rp_release('tls-lock') AND rp_ratelimit('tls-rl', 5, 1000)"
# hung_call SETTINGS: the call at the hung peer, timed on the server around
# the call alone (psql's start-up is not the handshake's): its error in
# HUNG_OUT ("ERROR:  <SQLSTATE>"), the ms in HUNG_MS (empty when a clock
# reading is missing).
hung_call() {
	local out t0 t1
	out=$(psql -X -At -q -d "$RP_DB" -v VERBOSITY=sqlstate -c "$(at "$HUNG" require "$1")" \
		-c "SELECT 'T0 ' || $ms_sql" -c "$WORK" -c "SELECT 'T1 ' || $ms_sql" 2>&1)
	HUNG_OUT=$(echo "$out" | grep -o '^ERROR:  [0-9A-Z]\{5\}' | head -1)
	t0=$(echo "$out" | sed -n 's/^T0 //p') t1=$(echo "$out" | sed -n 's/^T1 //p')
	HUNG_MS=; [ -n "$t0" ] && [ -n "$t1" ] && HUNG_MS=$(( t1 - t0 ))
}
hung_call "SET redis_primitives.connect_timeout = 1000;"
within "$HUNG_OUT" "ERROR:  08001" "$HUNG_MS" 6000 "hung TLS peer: connect_timeout (1000 ms) ends the handshake after ${HUNG_MS:-?} ms (server clock)"
hung_call "SET redis_primitives.connect_timeout = 600000; SET statement_timeout = 1000;"
within "$HUNG_OUT" "ERROR:  57014" "$HUNG_MS" 6000 "hung TLS peer: statement_timeout (1000 ms) ends the handshake after ${HUNG_MS:-?} ms (server clock)"

# A cancel: the session's call hangs in the handshake (seen waiting on the
# peer), then pg_cancel_backend.
rm -f "$RP_TMP/hung.rc"
(psql -X -At -q -d "$RP_DB" -c "SET application_name = 'tls-hung'" -c "$(at "$HUNG" require "SET redis_primitives.connect_timeout = 600000;")" \
	-c "$WORK" >"$RP_TMP/hung.out" 2>&1; echo $? >"$RP_TMP/hung.rc") &
wait_for 60 "[ \"\$(q \"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tls-hung' AND state = 'active'
	AND wait_event = '$(wait_event Connect)' AND query LIKE '%rp_acquire(''tls-lock''%'\")\" = 1 ]"
t=$(now_ms); q "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'tls-hung'" >/dev/null
wait_for 60 "[ -f $RP_TMP/hung.rc ]"; el=$(( $(now_ms) - t ))
within "$(grep -o 'canceling statement due to user request' "$RP_TMP/hung.out")" "canceling statement due to user request" "$el" 30000 \
	"hung TLS peer: cancel ends the handshake ${el} ms after pg_cancel_backend"

# A TLS server stopped (SIGSTOP) after the handshake: command_timeout
# (1000 ms) ends the call.
session_open s
session_q s "$(at "$GOOD" verify-full "SET redis_primitives.tls_ca_file = '$C/ca.crt'; SET redis_primitives.command_timeout = 1000")" >/dev/null
session_q s "SELECT rp_ratelimit('tls-stop', 5, 1000)" >/dev/null   # connected
gpid=$(cat "$RP_TMP/redis-$GOOD.pid")
kill -STOP "$gpid"
session_timed s "SELECT rp_ratelimit('tls-stop', 5, 1000)"
kill -CONT "$gpid"
within "$TIMED_OUT" "ERROR:  08006" "$TIMED_MS" 10000 "a TLS server stopped mid-session: command_timeout (1000 ms) ends the call after ${TIMED_MS:-?} ms (server clock)"
session_close s
finish
