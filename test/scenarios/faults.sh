#!/usr/bin/env bash
# Redis failing under a running backend.  For each fault: what the caller
# sees (the SQLSTATE; how long it took is test/timing/faults.sh's), what is
# left behind (in the session; in Redis where the fault lets Redis run the
# call), and that the next call works with no action from the user.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 38

# Redis is inside DEBUG SLEEP (its main thread in nanosleep, not epoll_wait).
redis_asleep() { grep -q nanosleep "/proc/$(cat "$RP_TMP/redis-$REDIS_PORT.pid")/wchan"; }
# Backend PID runs a statement like %WHAT% and waits for Redis' reply.
waiting_on_redis() {  # pid what
	[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'
	        AND wait_event_type = 'Extension' AND wait_event = '$(wait_event Reply)' AND query LIKE '%$2%'")" = 1 ]
}

session_open s
session_q s "SELECT (rp_acquire('warm', 1000)).fence IS NOT NULL; SELECT rp_release_all()" >/dev/null

# 1. Redis not running: 08001 (within connect_timeout, 1000 ms here).
rp_stop_redis "$REDIS_PORT"
session_timed s "SELECT rp_acquire('f1', 10000)"
is "$TIMED_OUT" "ERROR:  08001" "Redis stopped: rp_acquire fails with 08001 (${TIMED_MS:-?} ms)"
is "$(session_q s "SELECT count(*) FROM rp_leases()")" "0" "nothing is believed held"

# 2. Started again: the same session's next call works (and the scripts it
# had loaded are gone: the NOSCRIPT path runs too).
rp_start_redis "$REDIS_PORT"
is "$(session_q s "SELECT (rp_acquire('f1', 10000)).fence")" "1" "Redis back: the same session acquires, no action needed"
is "$(session_q s "SELECT rp_release('f1')")" "t" "and releases"

# 3. Restarted between two calls of a session holding an idle connection.
rp_stop_redis "$REDIS_PORT"; rp_start_redis "$REDIS_PORT"
is "$(session_q s "SELECT (rp_acquire('f2', 10000)).fence")" "1" "restart between calls is invisible"
session_q s "SELECT rp_release_all()" >/dev/null

# 4. Killed while a call is in flight: 08006, the session believes it holds
# nothing, and the next call works.  In order, whatever the load: Redis
# stopped (SIGSTOP, until the kill: a DEBUG SLEEP of 10 s would end by
# itself, and a stall that long let Redis answer), the call sent and waiting
# for its reply (command_timeout 60 s), then the kill.  Redis never read the
# call and restarts empty, so nothing in Redis is
# asserted here: that a script is never half-run is Redis' guarantee (one
# Redis ran and kept is a whole acquire nobody holds: an orphan, see 5b).
session_q s "SET redis_primitives.command_timeout = '60s'" >/dev/null
spid=$(session_pid s)
kill -STOP "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
( session_q s "SELECT rp_acquire('inflight', 10000)" >"$RP_TMP/inflight.out" ) & caller=$!
wait_for 30 "waiting_on_redis $spid 'rp_acquire(%inflight'"
kill -9 "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
wait $caller
out=$(cat "$RP_TMP/inflight.out")
is "$out" "ERROR:  08006" "Redis killed mid-call: the call fails with 08006"
rm -f "$RP_TMP/redis-$REDIS_PORT.pid"
rp_start_redis "$REDIS_PORT"
is "$(session_q s "SELECT count(*) FROM rp_leases()")" "0" "the session believes it holds nothing"
is "$(session_q s "SELECT (rp_acquire('inflight', 10000)).fence")" "1" "the next call reconnects and works"
session_q s "SELECT rp_release_all(); RESET redis_primitives.command_timeout" >/dev/null

# 5. Redis hung three ways: the call ends at command_timeout (1000 ms) with
# 08006, and the late reply is never read as the answer to the next command.
# The hang is in place before the call (a paused or sleeping Redis is seen
# so) and lasts past the naive client's give-up: a pause or a stop until it
# is ended (CLIENT UNPAUSE, SIGCONT).  DEBUG SLEEP ends by itself, after 4 s:
# a try that a loaded machine let run past its hang shows nothing, and is
# made again with a hang twice as long (at load 35-48, 4 s were not enough
# three times in a row).  The call is timed by the server (session_timed).
# The naive twin of a timeout: a client that gives up on a reply but keeps
# its connection (bash's /dev/tcp, Redis' inline protocol).  It sends its
# command with ours and gives up when ours timed out (Redis still hung), so
# it takes no time of its own from the hang.
naive_send() {  # command
	exec {naive_fd}<>"/dev/tcp/127.0.0.1/$REDIS_PORT"
	printf '%s\r\n' "$1" >&"$naive_fd"
}
naive_give_up() {
	if read -t 0.1 -r -u "$naive_fd" _; then naive_first=answered; else naive_first="timed out"; fi
}
naive_next() {  # command: send it on the same connection, print the reply read
	local line=
	printf '%s\r\n' "$1" >&"$naive_fd"
	read -t 10 -r -u "$naive_fd" line
	exec {naive_fd}>&-
	echo "$naive_first, then ${line%$'\r'}"
}
hang_test() {  # label start-hang-cmd end-hang-cmd [ends-by-itself: lasts $hang_s s]
	local label=$1 out try from
	hang_s=4
	for try in 1 2 3 4; do
		from=$(now_ms)
		eval "$2"
		sleep 0.2
		naive_send "SET naive-$label mine"
		session_timed s "SELECT rp_acquire('hang-$label', 3000)"
		naive_give_up
		[ -z "${4:-}" ] || [ "$(now_ms)" -lt $((from + hang_s * 1000)) ] || [ "$try" -eq 4 ] && break
		diag "$label: try $try ran past the $hang_s s hang (a loaded machine): again, twice as long"
		eval "$3"; exec {naive_fd}>&-
		session_q s "SELECT rp_release_all()" >/dev/null
		hang_s=$((hang_s * 2))
	done
	is "$TIMED_OUT" "ERROR:  08006" "$label: the call fails with 08006"
	cmp_ok "$TIMED_MS" -ge 900 "$label: not before command_timeout ($TIMED_MS ms)"
	eval "$3"
	# The dropped connection's acquire may still have run when Redis woke:
	# nobody holds that token, so it is an orphan that expires by its TTL.
	out=$(session_q s "SELECT held, fence FROM rp_lock_info('other-$label')")
	is "$out" "f|" "$label: the next command gets its own answer, not the late one"
	# The timed-out acquire stays unsettled until its 3 s lease ran out or
	# two transaction ends had their release of it answered: make the second
	# now, while Redis answers.  Else, after a hang that ended at once
	# (UNPAUSE), the next hang's first statement makes it against a hung
	# Redis, and its WARNING comes out with that call's answer.
	session_q s "SELECT 1" >/dev/null
	# The key does not exist: GET's own answer would be $-1 (nil).
	is "$(naive_next "GET other-$label")" "timed out, then +OK" \
		"$label: naive: a client that keeps its connection after a timeout reads the late reply (+OK) as its GET's answer"
}
hang_test debug_sleep "redis debug sleep \$hang_s >/dev/null 2>&1 & wait_for 30 redis_asleep" "redis ping >/dev/null" by-itself
hang_test client_pause "redis client pause 60000 write >/dev/null" "redis client unpause >/dev/null"
hang_test sigstop "kill -STOP \$(cat $RP_TMP/redis-$REDIS_PORT.pid)" "kill -CONT \$(cat $RP_TMP/redis-$REDIS_PORT.pid)"
sleep 3.2
is "$(session_q s "SELECT count(*) FROM unnest(ARRAY['debug_sleep','client_pause','sigstop']) n WHERE (rp_lock_info('hang-' || n)).held")" "0" \
	"the acquires the timed-out calls left in Redis are gone (released as orphans or expired: 5b tells them apart)"

# 5b. The orphan of a timed-out acquire: Redis runs the buffered command when
# it wakes, taking a 60 s lease whose token only this session knows.  The
# session releases it as soon as Redis answers one of its lock calls again.
# Redis is stopped (SIGSTOP) until the call has timed out, however long a
# loaded machine takes to send it, and the session's next call waits until
# Redis has run the buffered acquire.
kill -STOP "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
out=$(session_q s "SELECT rp_acquire('orphan', 60000)")
is "$out" "ERROR:  08006" "a 60 s acquire times out while Redis sleeps"
kill -CONT "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
# The abort handed it to the background worker too (it does not wait on a
# hung Redis), so the lease may be gone again at once: the fence it was
# issued shows Redis ran it.
wait_for 30 '[ "$(redis get "$(key orphan fence)")" = 1 ]'
is "$(redis get "$(key orphan fence)")" "1" "Redis ran it on waking: a 60 s lease that nobody holds was granted (fence 1)"
session_q s "SELECT held FROM rp_lock_info('something-else')" >/dev/null
wait_for 30 '[ "$(redis exists "$(key orphan lock)")" = 0 ]'
is "$(redis exists "$(key orphan lock)")" "0" "the orphan is released once Redis answers again (by the worker or the session's next call), not left for 60 s"

# 5c. A call sent while Redis is still hung after a timeout: the timed-out
# connection must be gone, not kept (on a kept one, the next call reads the
# timed-out call's late reply first; the hang tests above send their next
# call after the late reply arrived, when the stale connection is seen and
# dropped anyway).  The second call waits up to 30 s, over the thaw.
kill -STOP "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
out=$(session_q s "SELECT rp_acquire('stale-1', 60000)")
( session_q s "SET redis_primitives.command_timeout = '30s'; SELECT held, fence FROM rp_lock_info('stale-2'); RESET redis_primitives.command_timeout" >"$RP_TMP/stale.out" ) & caller=$!
wait_for 30 "waiting_on_redis $spid 'rp_lock_info(%stale-2'"
kill -CONT "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
wait $caller
is "$out|$(cat "$RP_TMP/stale.out")" "ERROR:  08006|f|" \
	"a call sent while Redis is still hung after a timeout gets its own answer (the timed-out connection was dropped)"

# 5d. The same after a cancel (statement_timeout) mid-exchange: the cancelled
# call's reply is still to come, so its connection must go too.
session_q s "SET redis_primitives.command_timeout = '30s'; SET statement_timeout = '300ms'" >/dev/null
kill -STOP "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
out=$(session_q s "SELECT rp_acquire('stale-3', 60000)")
session_q s "RESET statement_timeout" >/dev/null
( session_q s "SELECT held, fence FROM rp_lock_info('stale-4')" >"$RP_TMP/stale.out" ) & caller=$!
wait_for 30 "waiting_on_redis $spid 'rp_lock_info(%stale-4'"
kill -CONT "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
wait $caller
session_q s "RESET redis_primitives.command_timeout" >/dev/null
is "$out|$(cat "$RP_TMP/stale.out")" "ERROR:  57014|f|" \
	"a call sent while Redis is still hung after a cancelled call gets its own answer (the cancelled call's connection was dropped)"

# 6. statement_timeout and cancel end a hung call (57014), not
# command_timeout (08006, 30 s here).  (How soon: test/timing/faults.sh.)
session_q s "SET redis_primitives.command_timeout = '30s'; SET statement_timeout = '300ms'" >/dev/null
kill -STOP "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
session_timed s "SELECT rp_acquire('st', 1000)"
kill -CONT "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
is "$TIMED_OUT" "ERROR:  57014" "statement_timeout ends a call to a hung Redis (57014), not command_timeout (${TIMED_MS:-?} ms)"
session_q s "RESET statement_timeout" >/dev/null
pid=$(session_pid s)
kill -STOP "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
cancel_in "$pid" "rp_acquire(%cancel"
session_timed s "SELECT rp_acquire('cancel', 1000)"
kill -CONT "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"; wait $canceller
is "$TIMED_OUT" "ERROR:  57014" "pg_cancel_backend ends a call to a hung Redis"
is "$(session_q s "SELECT held FROM rp_lock_info('nothing')")" "f" "the session works normally afterwards"

# 7. pg_cancel_backend ends a 60 s wait_ms.
redis set "$(key held lock)" someone-else px 120000 >/dev/null
cancel_in "$pid" "rp_acquire(%held"
session_timed s "SELECT rp_acquire('held', 1000, 60000)"; wait $canceller
is "$TIMED_OUT" "ERROR:  57014" "a 60 s wait is cancelled"

# 8. Wrong password, password required while connected, ACL without EVALSHA.
# The session's connection is open when the password is set: a cancel in 7
# that lands mid-exchange drops it (at load 26 it did: 28000 on reconnect).
session_q s "SELECT held FROM rp_lock_info('auth')" >/dev/null
redis config set requirepass s3cret-Pw >/dev/null
is "$(session_q s "SELECT held FROM rp_lock_info('auth')")" "f" "requirepass set while connected: the open connection still works"
out=$(q_state "SELECT rp_lock_info('auth')")
is "$out" "28000" "a new connection without a password: 28000 (NOAUTH)"
out=$(psql -X -At -d "$RP_DB" -c "SET redis_primitives.password = 'wrong-Pw'" -c "SELECT rp_lock_info('auth')" 2>&1)
echo "$out" | grep -q "could not authenticate to Redis"; ok $? "a wrong password: could not authenticate to Redis"
echo "$out" | grep -q "wrong-Pw"; ok $(( ! $? )) "the password appears nowhere in the message"
is "$(psql -X -At -q -d "$RP_DB" -c "SET redis_primitives.password = 's3cret-Pw'" -c "SELECT held FROM rp_lock_info('auth')" 2>&1)" "f" "the right password works"
redis -a s3cret-Pw --no-auth-warning acl setuser limited on '>limited-Pw' '~*' '+@all' '-evalsha' '-eval' >/dev/null
out=$(psql -X -At -d "$RP_DB" -v VERBOSITY=sqlstate -c "SET redis_primitives.username = 'limited'" -c "SET redis_primitives.password = 'limited-Pw'" -c '\set VERBOSITY sqlstate' -c "SELECT rp_lock_info('auth')" 2>&1)
is "$(echo "$out" | grep -o '[0-9A-Z]\{5\}$' | tail -1)" "42501" "an ACL user without EVALSHA: 42501"
redis -a s3cret-Pw --no-auth-warning config set requirepass "" >/dev/null
redis acl deluser limited >/dev/null
session_close s

# 9. Out of memory under noeviction: a clear error, the lock not half-taken.
before=$(redis get "$(key oom fence)")
redis config set maxmemory 1 >/dev/null
out=$(psql -X -At -d "$RP_DB" -c "SELECT rp_acquire('oom', 10000)" 2>&1)
redis config set maxmemory 0 >/dev/null
echo "$out" | grep -q "out of memory"; ok $? "OOM: Redis refused the command: out of memory"
is "$(redis exists "$(key oom lock)")/$(redis get "$(key oom fence)")" "0/$before" "no lock and no counter change left behind"
finish
