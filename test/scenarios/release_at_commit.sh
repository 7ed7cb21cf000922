#!/usr/bin/env bash
# release_at_commit.sh -- redis_primitives.release_at_commit = send: COMMIT
# sends the release of the transaction's leases and does not wait for
# Redis; the session's next Redis call (or backend exit) reads the reply.
#
# What must hold, checked against Redis:
# - the default is 'wait' (a COMMIT returns once Redis answered);
# - the connection stays in step: the next call, after a commit that sent
#   two releases (a lock and a permit: two replies owed), gets its own
#   reply, not one of theirs, and the leases are gone from Redis;
# - while Redis executes no writes (CLIENT PAUSE ... WRITE), COMMIT returns
#   without the WARNING of a release Redis did not answer (which 'wait'
#   gives after 500 ms), and the release runs once Redis goes on;
# - a release that fails (NOSCRIPT after a SCRIPT FLUSH) is not dropped:
#   the lease is released again at the next transaction end, or at backend
#   exit; dropped, it would be held until its TTL (60 s here).
source "$(dirname "$0")/tap.bash"
plan 13

is "$(q "SHOW redis_primitives.release_at_commit")" "wait" "the default is wait"
lock() { redis exists "$(q "SELECT rp_test.key('$1', 'lock')")"; }
permits() { redis zcard "$(q "SELECT rp_test.key('$1', 'sem')")"; }

session_open s
session_q s "SET redis_primitives.release_at_commit = send" >/dev/null

# Two replies owed, then the next call in the session.
out=$(session_q s "BEGIN; SELECT rp_acquire_xact('rc-a', 60000) IS NOT NULL; SELECT rp_semaphore_acquire_xact('rc-sem', 3, 60000) IS NOT NULL; COMMIT")
is "$out" $'t\nt' "a lock and a permit taken in one transaction, committed"
is "$(session_q s "SELECT (rp_acquire('rc-b', 60000)).fence")" "1" \
	"the next call reads its own reply (a fresh name's first fence), not a release's"
is "$(session_q s "SELECT rp_release('rc-b')")" "t" "and the session goes on in step (release by name)"
wait_for 10 '[ "$(lock rc-a) $(permits rc-sem)" = "0 0" ]'
is "$(lock rc-a) $(permits rc-sem)" "0 0" "the lock and the permit released at COMMIT are gone from Redis"

# COMMIT while Redis runs no writes.
session_q s "BEGIN; SELECT rp_acquire_xact('rc-p', 60000)" >/dev/null
redis client pause 20000 write >/dev/null
out=$(session_q s "COMMIT")
is "$out" "" "send: COMMIT while Redis pauses writes returns with no WARNING"
is "$(lock rc-p)" "1" "the lease is still in Redis while it pauses"
redis client unpause >/dev/null
wait_for 10 '[ "$(lock rc-p)" = 0 ]'
is "$(lock rc-p)" "0" "once Redis goes on, the release sent at COMMIT runs"
session_open w
session_q w "BEGIN; SELECT rp_acquire_xact('rc-w', 60000)" >/dev/null
redis client pause 20000 write >/dev/null
out=$(session_q w "COMMIT")
redis client unpause >/dev/null
is "$(echo "$out" | grep -c '^WARNING:  08006')" "1" \
	"wait (the naive twin here): the same COMMIT waits 500 ms and warns 08006"
session_close w

# A release that fails: NOSCRIPT after SCRIPT FLUSH.
session_q s "BEGIN; SELECT rp_acquire_xact('rc-n', 60000)" >/dev/null
redis script flush >/dev/null
session_q s "COMMIT" >/dev/null
is "$(lock rc-n)" "1" "the release sent at COMMIT failed (NOSCRIPT): the lease is still there"
session_q s "SELECT held FROM rp_lock_info('rc-other')" >/dev/null
is "$(lock rc-n)" "0" "the next call read the failure; its transaction end released the lease"

# The same at backend exit.
session_q s "BEGIN; SELECT rp_acquire_xact('rc-x', 60000)" >/dev/null
redis script flush >/dev/null
session_q s "COMMIT" >/dev/null
is "$(lock rc-x)" "1" "a release that failed at the last COMMIT before exit: still there"
session_close s
wait_for 20 '[ "$(lock rc-x)" = 0 ]'
is "$(lock rc-x)" "0" "backend exit read the failure and released the lease"
finish
