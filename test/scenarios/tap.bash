# test/scenarios/tap.bash -- TAP helpers for the scenario tests (bash, run by prove).
#
# The runner (scripts/test.sh) exports PGHOST PGPORT PGUSER REDIS_PORT RP_TMP;
# the database rp_test has the extension and pgTAP.  Every scenario tests real
# servers: concurrency is separate connections released together by an
# advisory-lock barrier, never a loop in one session.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"   # wait_for, rp_start_redis...
RP_DB=${RP_DB:-rp_test}
_tap_n=0
_tap_failed=0

plan() { echo "1..$1"; }
diag() { echo "# $*"; }
# _tap STATUS DESCRIPTION [DIAGNOSTIC...]: one check, passed when STATUS is
# 0; a failed check prints each diagnostic line after it.
_tap() {
	_tap_n=$((_tap_n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $_tap_n - $2"; return; fi
	echo "not ok $_tap_n - $2"; _tap_failed=$((_tap_failed + 1))
	[ $# -le 2 ] || printf '%s\n' "${@:3}" | sed 's/^/#   /'  # every line: a value may span lines
}
ok() { _tap "$1" "$2"; }  # condition-exit-status description
is() { [ "$1" = "$2" ]; _tap $? "$3" "got:      '$1'" "expected: '$2'"; }  # got expected description
# cmp_ok a op b description   (integers; an empty or non-numeric side fails)
cmp_ok() { [ "$1" "$2" "$3" ] 2>/dev/null; _tap $? "$4" "'$1' $2 '$3' is false"; }
# within GOT WANT MS BOUND DESCRIPTION: a timing check (test/timing/): the
# timed call ended as WANT (its output, an error's "ERROR:  <SQLSTATE>")
# and in less than BOUND ms.  Another ending is a failure too: a bound met
# by the wrong event (an error at once, say) shows nothing.
within() {
	[ "$1" = "$2" ] && [ "$3" -lt "$4" ] 2>/dev/null
	_tap $? "$5" "ended as: '$1' (expected '$2'), after '$3' ms (bound: less than $4 ms)"
}
# q SQL...: run statements in one session (an empty one runs nothing), print
# unaligned tuples only.
q() { psql -X -At -q -v ON_ERROR_STOP=1 -d "$RP_DB" "${@/#/--command=}"; }
# q_state SQL...: like q, but print only the SQLSTATE of the error (or OK).
q_state() {
	local out
	out=$(q '\set VERBOSITY sqlstate' "$@" 2>&1 >/dev/null)
	if [ -z "$out" ]; then echo OK; else echo "$out" | sed -n 's/^.*ERROR:  *\([0-9A-Z]\{5\}\).*$/\1/p' | head -1; fi
}
redis() { redis-cli -p "$REDIS_PORT" "$@"; }
# wait_event NAME: what pg_stat_activity.wait_event shows while a backend
# of the extension waits on NAME (Connect, Reply, LeaseWait, ...: the list
# in src/common/waitevents.h): RedisPrimitivesNAME on PostgreSQL 17 and
# later, before 17 "Extension", every extension's one wait event.  Its
# wait_event_type is Extension on every major.
wait_event() {
	if [ "$(q "SHOW server_version_num")" -ge 170000 ]; then echo "RedisPrimitives$1"; else echo Extension; fi
}
# elector_pids [SERVER [PGREP-OPTION...]]: the pids (pgrep -c: the count) of
# the background worker of a server started under $RP_TMP (default pg, the
# runner's).  It has no database connection, so pg_stat_activity never
# lists it: the postmaster's children.
elector_pids() { pgrep "${@:2}" -P "$(head -1 "$RP_TMP/${1:-pg}/postmaster.pid")" -f 'redis_primitives elector'; }
# own_redis: a Redis of this test's own on port RPORT (stopped on exit),
# used by every call of the test (PGOPTIONS), so that Redis'
# counts are this test's alone.  rc talks to it; round_trips prints how many
# script calls it served (EVALSHA, and EVAL after NOSCRIPT).
own_redis() {
	RPORT=$(rp_free_port)
	rp_start_redis "$RPORT" || { echo "Bail out! no Redis"; exit 1; }
	trap 'rp_stop_redis "$RPORT"' EXIT
	export PGOPTIONS="-c redis_primitives.port=$RPORT"
}
rc() { redis-cli -p "$RPORT" "$@"; }
# txn_bouncer NAME: a PgBouncer (Debian's) in transaction mode in front of
# this test's server, as an application's pool meets it: database "txn",
# 8 server connections, trust auth for $PGUSER; BPORT is its port.  Stopped
# at exit (its EXIT trap replaces the test's own, if any).
txn_bouncer() {
	local name=$1
	command -v pgbouncer >/dev/null || { echo "Bail out! pgbouncer is not installed (RP_PACKAGES)"; exit 1; }
	BPORT=$(rp_free_port)
	printf '"%s" ""\n' "$PGUSER" >"$RP_TMP/$name.users"
	cat >"$RP_TMP/$name.ini" <<INI
[databases]
txn = host=$RP_TMP port=$PGPORT dbname=$RP_DB pool_mode=transaction pool_size=8
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $BPORT
unix_socket_dir =
auth_type = trust
auth_file = $RP_TMP/$name.users
logfile = $RP_TMP/$name.log
pidfile = $RP_TMP/$name.pid
max_client_conn = 100
INI
	chmod a+r "$RP_TMP/$name.ini" "$RP_TMP/$name.users"
	rp_as_pg pgbouncer -d -q "$RP_TMP/$name.ini" || cat "$RP_TMP/$name.log" >&2
	# shellcheck disable=SC2064  # the name, now
	trap "[ -f '$RP_TMP/$name.pid' ] && kill \"\$(cat '$RP_TMP/$name.pid')\" 2>/dev/null" EXIT
	wait_for 30 "rp_port_taken $BPORT"  # a start on a loaded machine: seconds
}

round_trips() { script_calls "$RPORT"; }
# script_calls [PORT]: the script calls (EVALSHA and EVAL) the Redis on PORT
# (default: the runner's) has run since its start or CONFIG RESETSTAT; one
# it refused before running (OOM, LOADING) is not counted.
script_calls() {
	redis-cli -p "${1:-$REDIS_PORT}" INFO commandstats | tr -d '\r' |
		awk -F'[=:,]' '/^cmdstat_evalsha:|^cmdstat_eval:/ { n += $3 } END { print n + 0 }'
}
key() { echo "rp:{$1}:$2"; }

# Barriers: a holder session takes an exclusive advisory lock; callers block
# on the shared lock; once all N wait, the holder is terminated and all of
# them proceed at the same instant.
barrier_sessions() {  # key granted(t|f): sessions holding / waiting for it
	q "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND granted = '$2'"
}
barrier_hold() {  # key
	psql -X -q -d "$RP_DB" -c "SET application_name = 'barrier-$1'" \
		-c "SELECT pg_advisory_lock($1)" -c "SELECT pg_sleep(300)" >/dev/null 2>&1 &
	wait_for 30 "[ \"\$(barrier_sessions $1 t)\" -ge 1 ]"
}
# barrier_release KEY N: wait until N sessions are blocked on it (120 s at
# most: fewer is a diagnostic), then let them all go.
barrier_release() {
	wait_for 120 "[ \"\$(barrier_sessions $1 f)\" -ge $2 ]" || diag "barrier $1: fewer than $2 sessions arrived"
	q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'barrier-$1'" >/dev/null
}

finish() { [ "$_tap_failed" -eq 0 ]; }

# A long-lived psql session fed through a FIFO, for "the same session's next
# call" across a Redis restart.  session_q prints the output of one batch,
# with errors shown as "ERROR:  <SQLSTATE>".
session_open() {  # name
	mkfifo "$RP_TMP/$1.in"
	psql -X -At -q -d "$RP_DB" -v VERBOSITY=sqlstate <"$RP_TMP/$1.in" >"$RP_TMP/$1.out" 2>&1 &
	echo $! >"$RP_TMP/$1.pid"
	eval "exec {_fd_$1}>\"$RP_TMP/$1.in\""
}
# session_q: send SQL and a marker, wait for the marker, print what came
# after the previous one.
session_q() {  # name sql
	local n=$1 fdvar="_fd_$1" marker="__done_${RANDOM}_$RANDOM" sql=$2
	case $sql in \\*) ;; *) sql="$sql;" ;; esac
	printf '%s\n\\echo %s\n' "$sql" "$marker" >&"${!fdvar}"
	wait_for 600 "grep -q '^$marker\$' '$RP_TMP/$n.out'" || { echo "no answer within 600 s"; return 1; }
	awk -v m="$marker" '$0 == m { exit } /^__done_[0-9]+_[0-9]+$/ { out = ""; next } { out = out $0 "\n" } END { printf "%s", out }' \
		"$RP_TMP/$n.out" | sed 's/^psql:[^ ]* //'
}
session_pid() { session_q "$1" "SELECT pg_backend_pid()"; }
# ms_sql: the server's clock in ms, as SQL.
ms_sql="(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
# session_timed NAME SQL: session_q, timed by the server: sets TIMED_OUT (the
# output) and TIMED_MS (the ms between the server's clock read in the same
# session just before and just after SQL).  A loaded client (psql,
# the polling here) adds nothing to the time, only the server's own work.
session_timed() {  # name sql
	local out
	out=$(session_q "$1" "SELECT 'T0 ' || $ms_sql; $2; SELECT 'T1 ' || $ms_sql")
	TIMED_OUT=$(echo "$out" | grep -v '^T[01] ')
	# no T0 or no T1 (an error): empty, which fails cmp_ok
	TIMED_MS=$(echo "$out" | awk '/^T0 / { t0 = $2 } /^T1 / { t1 = $2 } END { if (t0 && t1) print t1 - t0 }')
}
# Children started meanwhile (a daemonized redis-server) may hold the FIFO
# open, so closing our end is not enough: end the psql too.
session_close() {
	eval "exec {_fd_$1}>&-"
	kill "$(cat "$RP_TMP/$1.pid")" 2>/dev/null
	wait "$(cat "$RP_TMP/$1.pid")" 2>/dev/null
	rm -f "$RP_TMP/$1".{in,out,pid}
}

# backend_gone PID [SECONDS]: wait (30 s by default) until backend PID has
# left pg_stat_activity, its exit callbacks run; false when it has not.
backend_gone() {
	wait_for "${2:-30}" "[ \"\$(q \"SELECT count(*) FROM pg_stat_activity WHERE pid = $1\")\" = 0 ]"
}

# start_proxy EVENTS HOLD_MS [hold]: a fresh test/t/delay_proxy.py to Redis
# on $pport (pid in $proxy), which after SIGUSR1 runs one more command in
# Redis and holds its reply back HOLD_MS; it writes what it does to EVENTS.
# With "hold", that command itself waits for SIGUSR2 before it goes.
start_proxy() {
	pport=$(rp_free_port)
	: >"$1"
	/usr/bin/python3 "$(dirname "$0")/../t/delay_proxy.py" "$pport" "$REDIS_PORT" "$2" "$1" ${3:-} &
	proxy=$!
	wait_for 30 "grep -q '^listening' '$1'"
}
# stop_proxy: end the proxy start_proxy started.
stop_proxy() { kill "$proxy" 2>/dev/null; wait "$proxy" 2>/dev/null; }

# terminate_mid_call PORT SESSION SQL LIKE: stop the Redis at PORT
# (SIGSTOP), send SQL on the open SESSION, wait until its backend ($pid)
# waits for the answer (wait_event Reply, its query LIKE the pattern),
# set $waited to that backend's "state wait_event" ("not seen waiting" after
# 30 s), terminate it, wait until it is gone ("backend not gone" after 30 s),
# and let Redis go on (SIGCONT; $t is then the time in ms): Redis runs what
# the dead backend sent.  No clock orders the steps, so a slow machine
# cannot make Redis answer before the backend is gone.  Give the session a
# command_timeout of a minute.
terminate_mid_call() {
	local port=$1 fdvar="_fd_$2" rpid
	pid=$(session_pid "$2") rpid=$(cat "$RP_TMP/redis-$port.pid")
	kill -STOP "$rpid"
	printf '%s\n' "$3" >&"${!fdvar}"
	wait_for 30 "waited=\$(q \"SELECT state || ' ' || wait_event FROM pg_stat_activity WHERE pid = $pid AND wait_event = '$(wait_event Reply)' AND query LIKE '$4'\"); [ -n \"\$waited\" ]" ||
		waited="not seen waiting"
	q "SELECT pg_terminate_backend($pid)" >/dev/null
	backend_gone "$pid" || waited="backend not gone"
	kill -CONT "$rpid"; t=$(now_ms)
}

# cancel_in PID WHAT: once backend PID runs a statement like %WHAT%, cancel
# it (in the background, pid $canceller), writing the server's clock read
# in the statement that sends the cancel to $RP_TMP/cancel.at.
# since_cancel PID: the ms from that reading to the ERROR the cancelled
# backend logged (the log line's %m in $RP_TMP/pg.log, the slot's server):
# no psql turnaround of either side is counted.  Empty (which fails
# cmp_ok) when either is missing.
cancel_in() {
	rm -f "$RP_TMP/cancel.at"
	log0=$(( $(stat -c %s "$RP_TMP/pg.log") + 1 ))
	( wait_for 60 "[ \"\$(q \"SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND query LIKE '%$2%'\")\" = 1 ]"
	  sleep 0.2
	  psql -X -At -q -d "$RP_DB" -c "SELECT $ms_sql, pg_cancel_backend($1)" | cut -d'|' -f1 >"$RP_TMP/cancel.at" ) &
	canceller=$!
}
since_cancel() {
	local at err
	at=$(cat "$RP_TMP/cancel.at" 2>/dev/null)
	err=$(tail -c +"$log0" "$RP_TMP/pg.log" | grep -a "\[$1\] ERROR:  canceling statement due to user request" | tail -1 | sed 's/ \[.*//')
	# a stamp date cannot read gives nothing (cmp_ok fails), not "0 - at"
	# (date -d "" reads as midnight: the stamp is checked first)
	[ -n "$err" ] && err=$(date -d "$err" +%s%3N 2>/dev/null)
	[ -n "$at" ] && [ -n "$err" ] && echo $(( err - at ))
}
