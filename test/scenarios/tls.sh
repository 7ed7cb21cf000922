#!/usr/bin/env bash
# tls.sh -- TLS to Redis (docs/tls.md), single servers.  The failures this
# guards against:
#
#  A. a setting that claims protection and gives none: verify-full accepting
#     a certificate for another name, verify-ca accepting an unknown CA or an
#     expired certificate; each mode against a good server works, and
#     "require" is shown NOT to verify (libpq's meaning: a non-guarantee);
#  B. a failure that does not say what failed: unknown CA, expired, name
#     mismatch, missing client certificate, server not speaking TLS, plain
#     client on a TLS port -- all 08001, each saying which, none carrying a
#     key or the password (1.1's first cut gave the plain client 08006);
#  C. a TLS peer that accepted TCP and never answers: the handshake ends by
#     connect_timeout, by cancel and by statement_timeout (the naive client,
#     redis-cli --tls, waits until killed; how soon: test/timing/tls.sh);
#  D. a TLS server restarted between two calls of one session: the next call
#     reconnects by itself (TLS 1.3 session tickets do not make an idle
#     connection look out of step);
#  E. a changed TLS setting takes effect on the next connection;
#  G. a TLS server that stops answering mid-call (SIGSTOP after the
#     handshake): command_timeout ends the call, the next call reconnects;
#     pg_terminate_backend in the middle of a handshake ends the backend
#     cleanly (no crash, the server goes on);
#  H. the TLS session of every connection is freed on every path: one
#     backend's memory does not grow over 100 failed handshakes (wrong CA)
#     and 100 reconnects (a build without rp_tls_close's SSL_free grows it
#     by 69 kB a connection: 20.6 MB over 150 + 150);
#  I. release_at_commit = send: a lost release's second release goes out at
#     a transaction end with no Redis call, its first one's reply read
#     through OpenSSL without waiting.
#
# Sentinel and Cluster over TLS: test/t/008_tls_topology.pl.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 43

declare -A PORT
for s in good other expired mtls hung; do
	p=$(rp_free_port)
	while [[ " ${PORT[*]} " == *" $p "* ]]; do p=$(rp_free_port); done
	PORT[$s]=$p
done
HUNG_PID=
cleanup() {
	for s in good other expired mtls; do rp_stop_redis "${PORT[$s]}"; done
	[ -n "$HUNG_PID" ] && kill "$HUNG_PID" 2>/dev/null
	return 0
}
trap cleanup EXIT

tls_make_certs "$RP_TMP/tls"
C=$RP_TMP/tls
start_tls() {  # name cert-basename [extra args]
	local n=$1 crt=$2; shift 2
	redis-server --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --dir "$RP_TMP" \
		--pidfile "$RP_TMP/redis-${PORT[$n]}.pid" --logfile "$RP_TMP/redis-${PORT[$n]}.log" \
		$(tls_redis_args "$C" "$crt" "${PORT[$n]}") "$@"
}
tls_ping() {  # port
	redis-cli --tls --cacert "$C/ca.crt" --cert "$C/client.crt" --key "$C/client.key" -p "$1" ping 2>/dev/null
}
for s in good other expired mtls; do
	case $s in
		good) crt=server ;; other) crt=other ;; expired) crt=expired ;; mtls) crt=server ;;
	esac
	extra=()
	[ $s = mtls ] && extra=(--tls-auth-clients yes)
	start_tls "$s" "$crt" "${extra[@]}"
done
for s in good other expired mtls; do
	wait_for 30 "rp_port_taken ${PORT[$s]}"  # a start on a loaded machine: seconds
done
is "$(tls_ping "${PORT[good]}")$(tls_ping "${PORT[mtls]}")" "PONGPONG" "TLS-only Redis servers are up (plain port 0)"

# sql [settings...] -- statements: run with the given TLS settings.
with() {  # "SET ...; SET ..." sql
	psql -X -At -q -v ON_ERROR_STOP=1 -d "$RP_DB" -c "$1" -c "$2" 2>&1
}
# state settings sql: the SQLSTATE of the error (or OK); the messages are
# kept in $RP_TMP/tls-last (read by said) and appended to tls-messages.  A
# Redis password is set too: no message may show it.
PW="tls-pw-$RANDOM$RANDOM-secret"
state() {
	local msg
	msg=$(psql -X -At -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -d "$RP_DB" \
		-c "SET redis_primitives.password = '$PW'" -c "$1" -c "$2" 2>&1 >/dev/null)
	echo "$msg" >"$RP_TMP/tls-last"
	echo "$msg" >>"$RP_TMP/tls-messages"
	if [ -z "$msg" ]; then echo OK; else echo "$msg" | sed -n 's/^.*ERROR:  *\([0-9A-Z]\{5\}\):.*$/\1/p' | head -1; fi
}
said() {  # pattern description: the last error message contains pattern
	grep -q -- "$1" "$RP_TMP/tls-last"; local rc=$?
	ok $rc "$2"
	[ $rc -eq 0 ] || sed 's/^/#   /' "$RP_TMP/tls-last"
}
# works / refused PORT MODE SETTINGS DESCRIPTION: $WORK over TLS MODE to
# PORT succeeds / fails with 08001 (the message is kept for said).
works() { is "$(with "$(at "$1" "$2" "$3")" "$WORK")" "t" "$4"; }
refused() { is "$(state "$(at "$1" "$2" "$3")" "$WORK")" "08001" "$4"; }
at() {  # port mode [more settings]
	echo "SET redis_primitives.host = '127.0.0.1'; SET redis_primitives.port = $1; SET redis_primitives.tls = '$2'; SET redis_primitives.connect_timeout = 20000; ${3:-}"
}
CA="SET redis_primitives.tls_ca_file = '$C/ca.crt';"
WORK="SELECT (rp_acquire('tls-lock', 10000)).fence IS NOT NULL AND rp_release('tls-lock') AND rp_ratelimit('tls-rl', 5, 1000)"

# ---- A. each mode against a good server ---------------------------------------
works "${PORT[good]}" require "" "require: acquire, release and rate limit over TLS"
works "${PORT[good]}" verify-ca "$CA" "verify-ca with the right CA"
works "${PORT[good]}" verify-full "$CA" "verify-full, host 127.0.0.1 matches the certificate's IP SAN"
works "${PORT[good]}" verify-full "$CA SET redis_primitives.host = 'localhost';" \
	"verify-full, host localhost matches the certificate's DNS SAN"
calls=$(redis-cli --tls --cacert "$C/ca.crt" -p "${PORT[good]}" info commandstats | tr -d '\r' |
	sed -n 's/^cmdstat_eval\(sha\)\{0,1\}:calls=\([0-9]*\),.*/\2/p' | paste -sd+ | bc)
cmp_ok "${calls:-0}" -ge 12 "the calls reached the TLS-only server ($calls script calls there)"

# ---- A/B. verification refuses what it must -------------------------------------
works "${PORT[other]}" verify-ca "$CA" "verify-ca accepts a CA-signed certificate for another name"
refused "${PORT[other]}" verify-full "$CA" "verify-full refuses a certificate for another name"
said 'does not match the name "127.0.0.1"' "... saying the certificate does not match the host"
works "${PORT[other]}" verify-full "$CA SET redis_primitives.tls_server_name = 'other.example';" \
	"verify-full accepts it with tls_server_name naming it"
refused "${PORT[good]}" verify-ca "SET redis_primitives.tls_ca_file = '$C/ca2.crt';" \
	"verify-ca with the wrong CA is refused"
said 'not signed by a trusted certificate authority' "... saying the CA is unknown"
refused "${PORT[expired]}" verify-ca "$CA" "verify-ca refuses an expired certificate"
said 'has expired' "... saying it has expired"
# The naive twin of verification: "require" checks nothing, as in libpq.
works "${PORT[expired]}" require "" \
	"require (no CA file) does not verify: it accepts the expired certificate (documented)"

# ---- B. mutual TLS ----------------------------------------------------------------
refused "${PORT[mtls]}" verify-full "$CA" "mutual TLS without a client certificate is refused at connect"
said 'requires a client certificate' "... saying the server requires a client certificate"
works "${PORT[mtls]}" verify-full "$CA SET redis_primitives.tls_cert_file = '$C/client.crt'; SET redis_primitives.tls_key_file = '$C/client.key';" \
	"mutual TLS with the client certificate"
refused "${PORT[mtls]}" verify-full "$CA SET redis_primitives.tls_cert_file = '$C/client2.crt'; SET redis_primitives.tls_key_file = '$C/client2.key';" \
	"a client certificate from another CA is refused at connect"
said 'refused the client certificate' "... saying the server refused it"

# ---- B. plain client on a TLS port, TLS client on a plain port ---------------------
# The password makes AUTH the first command, sent by the connect itself; without
# one the first command is the caller's own: both are refused at connect.
refused "${PORT[good]}" off "" "plain client on a TLS port (AUTH first) is refused at connect"
said 'before answering the first command; the server may be speaking TLS' "... saying the server may be speaking TLS"
said 'HINT:.*set redis_primitives.tls' "... with a hint naming the setting"
msg=$(psql -X -At -q -v VERBOSITY=verbose -d "$RP_DB" -c "$(at "${PORT[good]}" off)" -c "$WORK" 2>&1 >/dev/null)
echo "$msg" >>"$RP_TMP/tls-messages"
is "$(echo "$msg" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p')" "08001" \
	"plain client on a TLS port, no password (the caller's command first): 08001 too"
refused "$REDIS_PORT" require "" "TLS client on a plain port is refused at connect"
said 'not speaking TLS' "... saying the server is not speaking TLS"
# Every message of this file so far, against every line of every key, and the
# password.
leaks=$(cat "$C"/*.key | grep -v -- '-----' | grep -cFf - "$RP_TMP/tls-messages")
cmp_ok "$(wc -l <"$RP_TMP/tls-messages")" -gt 5 "the error messages were collected"
is "$leaks" "0" "no key material in any error message"
is "$(grep -c -- "$PW" "$RP_TMP/tls-messages")" "0" "no password in any error message"

# ---- C. a TLS peer that accepts TCP and never answers ------------------------------
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
held = []
while True:
    c, _ = s.accept(); held.append(c)
' "${PORT[hung]}" &
HUNG_PID=$!
wait_for 30 "rp_port_taken ${PORT[hung]}"
# The naive twin: a client with a blocking handshake waits until killed.
timeout 2 redis-cli --tls --cacert "$C/ca.crt" -p "${PORT[hung]}" ping >/dev/null 2>&1; rc=$?
is "$rc" "124" "naive twin: redis-cli --tls against the hung peer is still waiting after 2 s (killed by timeout)"
st=$(state "$(at "${PORT[hung]}" require "SET redis_primitives.connect_timeout = 1000;")" "$WORK")
is "$st" "08001" "hung TLS peer: connect_timeout ends the handshake with 08001"
settings="SET redis_primitives.connect_timeout = 600000; SET statement_timeout = 1000;"
st=$(state "$(at "${PORT[hung]}" require "$settings")" "$WORK")
is "$st" "57014" "hung TLS peer: statement_timeout ends the handshake (connect_timeout 10 min)"
# in_hung_handshake NAME: a session (application_name NAME) whose call hangs
# in the TLS handshake with the silent peer, in the background: its output
# in hung.out, its exit status in hung.rc; returns once it is running.
in_hung_handshake() {
	rm -f "$RP_TMP/hung.rc"
	(psql -X -At -q -d "$RP_DB" -c "SET application_name = '$1'" -c "$(at "${PORT[hung]}" require "SET redis_primitives.connect_timeout = 600000;")" \
		-c "$WORK" >"$RP_TMP/hung.out" 2>&1; echo $? >"$RP_TMP/hung.rc") &
	# the call itself (not one of the SETs before it) waits on the peer
	wait_for 60 "[ \"\$(q \"SELECT count(*) FROM pg_stat_activity WHERE application_name = '$1' AND state = 'active'
		AND wait_event = '$(wait_event Connect)' AND query LIKE '%rp_acquire(''tls-lock''%'\")\" = 1 ]"
}
in_hung_handshake tls-hung
q "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'tls-hung'" >/dev/null
wait_for 60 "[ -f $RP_TMP/hung.rc ]"
grep -q 'canceling statement due to user request' "$RP_TMP/hung.out"; ok $? "hung TLS peer: cancel ends the handshake"
# FATAL in the middle of a handshake: the backend exits through its exit
# callbacks with a half-open TLS session; nothing crashes.
in_hung_handshake tls-fatal
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tls-fatal'" >/dev/null
wait_for 60 "[ -f $RP_TMP/hung.rc ]"
grep -q 'terminating connection due to administrator command' "$RP_TMP/hung.out"; ok $? "hung TLS peer: pg_terminate_backend ends the backend in the handshake"
is "$(q "SELECT 1")$(grep -c 'terminated by signal' "$RP_TMP/pg.log" 2>/dev/null)" "10" "... cleanly: no backend crashed, the server goes on"

# ---- D. the TLS server restarts between two calls of one session -------------------
session_open s
session_q s "$(at "${PORT[good]}" verify-full "$CA")" >/dev/null
first=$(session_q s "SELECT (rp_acquire('tls-restart', 10000)).fence IS NOT NULL")
rp_stop_redis "${PORT[good]}"
start_tls good server
wait_for 30 "rp_port_taken ${PORT[good]}"
is "$first$(session_q s "SELECT (rp_acquire('tls-restart2', 10000)).fence IS NOT NULL")" "tt" \
	"after the TLS server restarted, the same session's next call reconnects by itself"
# ---- E. a changed setting takes effect on the next connection ----------------------
session_q s "SET redis_primitives.tls_ca_file = '$C/ca2.crt'" >/dev/null
is "$(session_q s "SELECT rp_release_all() >= 0")" "ERROR:  08001" \
	"a changed tls_ca_file drops the connection: the next call verifies against the new (wrong) CA"

# ---- G. a TLS server that stops answering after the handshake ---------------------
session_q s "$CA SET redis_primitives.command_timeout = 1000" >/dev/null
session_q s "SELECT rp_ratelimit('tls-stop', 5, 1000)" >/dev/null   # connected
gpid=$(cat "$RP_TMP/redis-${PORT[good]}.pid")
kill -STOP "$gpid"
session_timed s "SELECT rp_ratelimit('tls-stop', 5, 1000)"  # on the server's clock
kill -CONT "$gpid"
is "$TIMED_OUT" "ERROR:  08006" "a TLS server stopped mid-session: command_timeout ends the call (08006, ${TIMED_MS:-?} ms)"
is "$(session_q s "SELECT rp_ratelimit('tls-stop', 5, 1000)")" "t" "... and once it answers again the next call reconnects over TLS"

# ---- H. memory: TLS sessions freed on every path --------------------------------
spid=$(session_pid s)
anon() { awk '/^RssAnon:/ {print $2}' "/proc/$spid/status"; }
session_q s "CREATE TEMP TABLE tlsmem (ok int, refused int)" >/dev/null
cycle="DO \$\$ DECLARE ok int := 0; refused int := 0; BEGIN
  FOR i IN 1..%d LOOP
    PERFORM set_config('redis_primitives.tls_ca_file', '$C/ca2.crt', false);
    BEGIN PERFORM rp_ping(); EXCEPTION WHEN sqlclient_unable_to_establish_sqlconnection THEN refused := refused + 1; END;
    PERFORM set_config('redis_primitives.tls_ca_file', '$C/ca.crt', false);
    PERFORM rp_ping(); ok := ok + 1;
  END LOOP;
  INSERT INTO tlsmem VALUES (ok, refused);
END \$\$"
session_q s "$(printf "$cycle" 20)" >/dev/null
before=$(anon)
session_q s "$(printf "$cycle" 100)" >/dev/null
after=$(anon)
is "$(session_q s "SELECT sum(ok) || ' ' || sum(refused) FROM tlsmem")" "120 120" \
	"one backend: 120 TLS handshakes refused (wrong CA) and 120 that succeeded, each a new connection"
cmp_ok "$(( after - before ))" -lt 3072 "... its memory grew $(( after - before )) kB over the last 100 of each (RssAnon $before -> $after kB; bound 3 MB)"
session_close s

# ---- F. the background elector uses the same settings -----------------------------
EP=$(rp_free_port)
rp_start_pg tlselec "$EP" "redis_primitives.port = ${PORT[good]}
redis_primitives.tls = 'verify-full'
redis_primitives.tls_ca_file = '$C/ca.crt'
redis_primitives.node_id = 'tls-node'
redis_primitives.elections = 'tls-elec'"
leader=
for i in $(seq 600); do
	leader=$(redis-cli --tls --cacert "$C/ca.crt" -p "${PORT[good]}" hget 'rp:{tls-elec}:leader' node 2>/dev/null)
	[ "$leader" = tls-node ] && break; sleep 0.1
done
is "$leader" "tls-node" "the background elector of a server configured for TLS campaigns over TLS"
rp_stop_pg tlselec

# ---- I. release_at_commit = send over TLS ----------------------------------------
# A release sent at COMMIT is lost with its connection; the next call finds
# it and sends it again. Its second release (an acquire that landed late is
# stood in for by the key set again with the token) follows at a later
# transaction end with no Redis call: the replies that came are read there
# without waiting, through OpenSSL as on a plain socket.
tr() { redis-cli --tls --cacert "$C/ca.crt" -p "${PORT[good]}" "$@" 2>/dev/null; }
session_open u
session_q u "$(at "${PORT[good]}" verify-full "$CA") SET redis_primitives.release_at_commit = send;" >/dev/null
ikey=$(q "SELECT rp_test.key('tls-send', 'lock')")
session_q u "BEGIN; SELECT rp_acquire_xact('tls-send', 60000)" >/dev/null
itok=$(tr get "$ikey")
tr client pause 20000 write >/dev/null
session_q u "COMMIT" >/dev/null
tr client kill type normal skipme yes >/dev/null
tr client unpause >/dev/null
session_q u "SELECT held FROM rp_lock_info('tls-other')" >/dev/null
wait_for 10 '[ "$(tr exists "$ikey")" = 0 ]'
tr set "$ikey" "$itok" px 60000 >/dev/null
session_q u "SELECT 1" >/dev/null
wait_for 10 '[ "$(tr exists "$ikey")" = 0 ]'
is "$([ -n "$itok" ] && echo token) $(tr exists "$ikey")" "token 0" \
	"over TLS, a lost release's second release goes out at the next transaction end, with no Redis call"
session_close u

finish
