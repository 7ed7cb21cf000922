#!/usr/bin/env bash
# orphan_queue.sh -- many acquires cut short while Redis is stopped.
#
# Each abort of a call Redis did not answer hands the call's token to the
# background worker (at most 128 queued: then a WARNING, and the session
# keeps the entry for its next transaction end after Redis answers).  The
# worker releases by compare-and-delete, so a name another holder holds,
# asked for in vain, stays that holder's.  Checked against Redis: after
# SIGCONT, none of the 130 locks asked for is left, the other holder's lock
# and semaphore permit are untouched.
#
# The same holds for the release of a transaction's leases at its end: when
# Redis does not answer it (the release is lost on the way, through a proxy
# that drops everything after one command, test/t/delay_proxy.py), they are
# handed to the worker, which reaches Redis directly, and not left to their
# TTL.
source "$(dirname "$0")/tap.bash"
plan 18

rpid=$(cat "$RP_TMP/redis-$REDIS_PORT.pid")
key() { q "SELECT rp_test.key('$1', '$2')"; }
keys=$(q "SELECT string_agg(rp_test.key('oq-' || i, 'lock'), ' ') FROM generate_series(1, 130) i")
redis set "$(key oq-held lock)" someone-else px 120000 >/dev/null
redis zadd "$(key oq-sem sem)" 99999999999999 someone-else >/dev/null

# proxied SESSION SQL: open SESSION through a proxy to Redis (the proxy's
# pid in $proxy, the backend's in $hpid), run SQL there, then let one more
# command through (answered) and nothing after it: every later call of the
# session, its release at COMMIT or at exit too, is lost on the way.
# Prints the output of SQL and of that last command, then "cut" once the
# proxy forwarded it (else the session's next command would go through).
# The proxy is armed (its event seen) before that command is sent: sent
# at once, it could pass before the proxy took the signal.  Not in $(...):
# the variables are the caller's.
proxied() {
	local ev="$RP_TMP/$1.events" pport
	start_proxy "$ev" 1
	session_open "$1"
	# That command's script is loaded first: a NOSCRIPT reply would take
	# the EVAL after it, which the proxy drops.
	hpid=$(session_q "$1" "SET redis_primitives.port = $pport; SELECT held FROM rp_lock_info('oq-dummy'); SELECT pg_backend_pid()" | tail -1)
	session_q "$1" "$2"
	kill -USR1 "$proxy"
	wait_for 30 "grep -q '^armed' '$ev'"
	session_q "$1" "SELECT held FROM rp_lock_info('oq-dummy')"
	wait_for 30 "grep -q '^forwarded' '$ev'" && echo cut
}

# A backend whose lease is handed over at its exit is that lease's last
# word: the session that cut its acquires short still has them, and offers
# them again at its next transaction end (releases them itself once Redis
# answered it).  So a lease held must find a place in a queue those
# acquires filled.
proxied hs "SELECT fence > 0 FROM rp_acquire('oq-sole', 600000)" >"$RP_TMP/hs.txt"
session_open s
session_q s "SET statement_timeout = '200ms'" >/dev/null
# oq-2's TTL is the shortest: the place it takes is the one given away
# below (the nearest its end).  Not oq-1's: the worker, asking Redis about
# the head of its queue, leaves that release in Redis' socket, and Redis
# runs it when it runs again.
sql=
for i in $(seq 130); do sql+=" SELECT rp_acquire('oq-$i', $([ $i = 2 ] && echo 300000 || echo 600000));"; done
sql+=" SELECT rp_acquire('oq-held', 600000); SELECT rp_semaphore_acquire('oq-sem', 1, 600000);"
kill -STOP "$rpid"
out=$(session_q s "$sql")
q "SELECT pg_terminate_backend($hpid)" >/dev/null
backend_gone "$hpid" 60
# The worker's pass over its queue as it was (oq-2 in it) ends within its
# 500 ms wait on the stopped Redis; only the next pass starts at CONT.
sleep 2
kill -CONT "$rpid"
is "$(echo "$out" | grep -c '57014')" "132" "132 acquires cut short by statement_timeout while Redis is stopped"
cmp_ok "$(echo "$out" | grep -c 'WARNING:  53400')" -ge 1 "the worker's queue of 128 filled: WARNING (53400)"
diag "$(echo "$out" | grep -v 57014 | sort | uniq -c)"
wait_for 60 '[ "$(redis exists "$(key oq-sole lock)")" = 0 ]'
is "$(redis exists "$(key oq-sole lock)") $(echo $(cat "$RP_TMP/hs.txt"))" "0 t f cut" \
	"a backend that exited meanwhile, its release cut off: the worker takes its lease into the full queue and releases it (within 60 s, not its 600 s TTL)"
stop_proxy
session_close hs

# Redis granted every acquire once it ran again; the worker released those
# it took (oq-1, oq-3 to oq-128).  The rest the session still has: oq-2,
# whose place the exiting backend's lease took, and those the full queue
# refused.  Its next transaction, a plain one (no lock call: Redis has not
# answered the session since), offers them all to the worker again, and
# they are released.
session_q s "SELECT 1" >/dev/null
wait_for 60 '[ "$(redis exists $keys)" = 0 ]'
is "$(redis exists $keys)" "0" "none of the 130 locks asked for is left in Redis, oq-2 whose place was taken included, with no lock call of the session"
session_q s "RESET statement_timeout" >/dev/null
session_q s "SELECT held FROM rp_lock_info('oq-other')" >/dev/null
is "$(redis get "$(key oq-held lock)")" "someone-else" "the lock another holder held is still its"
is "$(redis zscore "$(key oq-sem sem)" someone-else)" "99999999999999" "the semaphore permit another holder held is still its"
is "$(session_q s "SELECT count(*) FROM rp_leases()")" "0" "the session holds nothing"
session_close s

# ---- a transaction's leases whose release at COMMIT Redis never got --------------
# COMMIT waits for the release (release_at_commit = wait), so it finds it
# lost; a sent one is found at the session's next call (release_at_commit.sh).
proxied sp "SET redis_primitives.release_at_commit = wait; BEGIN; SELECT fence > 0 FROM rp_acquire_xact('oq-x', 120000); SELECT fence > 0 FROM rp_semaphore_acquire_xact('oq-xs', 3, 120000)" >"$RP_TMP/sp.txt"
out="$(cat "$RP_TMP/sp.txt") $(session_q sp "COMMIT" | grep -c WARNING)"
is "$(echo $out)" "t t f cut 2" "an xact lock and permit held; their release at COMMIT never reaches Redis: a WARNING per kind"
wait_for 30 '[ "$(redis exists "$(key oq-x lock)")$(redis zcard "$(key oq-xs sem)")" = 00 ]'
is "$(redis exists "$(key oq-x lock)")" "0" "the xact lock is released by the background worker (within 30 s, not its 120 s TTL)"
is "$(redis zcard "$(key oq-xs sem)")" "0" "the xact permit too"
stop_proxy
session_close sp
redis del "$(key oq-held lock)" "$(key oq-sem sem)" >/dev/null

# ---- acquires that never ran in Redis leave the worker nothing ----------
# An acquire whose connection was refused, or that Redis answered with an
# error, cannot have run: it must be neither remembered nor handed to the
# worker.  Handed, a burst of them during an outage fills the worker's
# queue while Redis is down for the worker too (a soak run: a semaphore
# worker's refused acquires took all 128 places in 2 s), and the lease of a
# backend that exits then is dropped, to live out its TTL.
#
# h holds a 600 s lease through a proxy that then drops everything, so its
# exit release never reaches Redis; Redis is stopped, so the worker cannot
# drain its queue; s makes 300 acquires of every kind on a port nobody
# listens on; h exits; Redis continues: the worker must release h's lease.
dead=$(rp_free_port)
proxied h "SELECT fence > 0 FROM rp_acquire('oq-orphan', 600000)" >"$RP_TMP/h.txt"
is "$(echo $(cat "$RP_TMP/h.txt"))" "t f cut" "a backend holds a 600 s lease through a proxy that forwards nothing more"
kill -STOP "$rpid"
session_open s
session_q s "SET redis_primitives.port = $dead" >/dev/null
sql=
for i in $(seq 60); do
	sql+=" SELECT rp_semaphore_acquire('oq-ns', 1, 600000); SELECT rp_semaphore_acquire('oq-ns', 1, 600000, 100);"
	sql+=" SELECT rp_semaphore_acquire_xact('oq-ns', 1, 600000); SELECT rp_acquire('oq-nl', 600000);"
	sql+=" SELECT rp_acquire_all(ARRAY['oq-na1', 'oq-na2'], 600000);"
done
out=$(session_q s "$sql")
is "$(echo "$out" | grep -c '08001')" "300" "300 acquires (180 of semaphore permits) refused a connection while Redis is stopped"
is "$(echo "$out" | grep -c 'WARNING:  53400')" "0" "none of them is handed to the worker: its queue is not filled (no WARNING 53400)"
q "SELECT pg_terminate_backend($hpid)" >/dev/null
backend_gone "$hpid" 60
kill -CONT "$rpid"
wait_for 60 '[ "$(redis exists "$(key oq-orphan lock)")" = 0 ]'
is "$(redis exists "$(key oq-orphan lock)")" "0" "the backend that exited meanwhile: the worker releases its lease once Redis answers (within 60 s, not its 600 s TTL)"
stop_proxy
session_close s
session_close h

# ---- a queue full of leases past their TTL -----------------------------------
# While Redis is stopped the worker cannot release what it holds, and it
# stops at the first lease Redis does not answer: a live one at the head
# keeps the expired ones behind it in their places.  Those must give way
# to a live lease handed over later, not keep it out.  A backend holding
# one lease of 600 s and 127 of 10 s exits while Redis is stopped: its exit
# release times out and hands all 128 to the worker, filling its queue
# with leases nobody else will release.  Once the short ones' TTL has
# passed, a backend holding a 600 s lease exits, its release lost: the
# worker must take it, and release it once Redis answers.
proxied h "SELECT fence > 0 FROM rp_acquire('oq-late', 600000)" >"$RP_TMP/h.txt"
session_open m
mpid=$(session_pid m)
out=$(session_q m "SELECT fence > 0 FROM rp_acquire('oqe-head', 600000); SELECT count(*) FROM generate_series(1, 127) i, rp_acquire('oqe-' || i, 10000) l WHERE l.fence > 0")
short_end=$(( $(now_ms) + 10000 ))	# the 10 s ones are past their TTL by then
log0=$(( $(stat -c %s "$RP_TMP/pg.log") + 1 ))	# this block's part of the server log
kill -STOP "$rpid"
q "SELECT pg_terminate_backend($mpid)" >/dev/null
backend_gone "$mpid" 60
session_close m
handed=$(tail -c +"$log0" "$RP_TMP/pg.log" | grep -c 'could not release 128 Redis lease')
is "$(echo $out) $handed" "t 127 1" "a backend holding one lease of 600 s and 127 of 10 s exits while Redis is stopped: all 128 handed over"
wait_for 30 '[ "$(now_ms)" -gt "$short_end" ]'
q "SELECT pg_terminate_backend($hpid)" >/dev/null
backend_gone "$hpid" 60
kill -CONT "$rpid"
wait_for 60 '[ "$(redis exists "$(key oq-late lock)" "$(key oqe-head lock)")" = 0 ]'
is "$(redis exists "$(key oq-late lock)")" "0" "a backend exiting once they expired: the worker takes its lease and releases it once Redis answers"
is "$(redis exists "$(key oqe-head lock)") $(echo $(cat "$RP_TMP/h.txt"))" "0 t f cut" "and the live lease at the head of the queue (the exiting backend's proxy had cut it off)"
stop_proxy
session_close h

# An acquire Redis answered with an error (OOM under maxmemory) did not
# run: the session's next transaction end has nothing to release, and the
# next call is its one round trip.
session_open s
session_q s "SELECT held FROM rp_lock_info('oq-warm')" >/dev/null
redis config set maxmemory 1 >/dev/null
out=$(session_q s "SELECT rp_semaphore_acquire('oq-oom', 1, 600000); SELECT rp_semaphore_acquire('oq-oom', 1, 600000, 100); SELECT rp_semaphore_acquire_xact('oq-oom', 1, 600000); SELECT rp_acquire('oq-oom2', 600000)")
redis config set maxmemory 0 >/dev/null
redis config resetstat >/dev/null
session_q s "SELECT held FROM rp_lock_info('oq-warm')" >/dev/null
is "$(echo $out) $(script_calls)" "ERROR: 53200 ERROR: 53200 ERROR: 53200 ERROR: 53200 1" "four acquires refused with OOM leave nothing to release: the next call is one script call"
session_close s
finish
