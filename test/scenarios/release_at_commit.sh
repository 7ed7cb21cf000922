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
# - a Redis that lost its script cache still runs the release (sent as
#   EVAL), and the same session takes the name again at once;
# - a release that never runs (its connection killed before Redis read it)
#   is not dropped: the lease is released again after the next call, or at
#   backend exit, 300 of them too (more than the session keeps: the rest go
#   to the background worker), and the call that finds them is not harmed,
#   nor a terminated backend kept from exiting; dropped, each would be
#   held until its TTL (60 s here);
# - a release Redis answers with an error (NOPERM, READONLY, OOM) is not
#   taken as done either: the lease is released again after the next call;
# - that second release, and the next transaction end's, are sent too: a
#   COMMIT then does not wait for a Redis that runs no writes; one on its
#   way is not sent again, and the next follows once its reply has come;
# - an acquire cut short while Redis hangs, after reading the answer to a
#   release sent before, does not have its abort wait on Redis.
source "$(dirname "$0")/tap.bash"
plan 36

is "$(q "SHOW redis_primitives.release_at_commit")" "wait" "the default is wait"
lock() { redis exists "$(q "SELECT rp_test.key('$1', 'lock')")"; }
permits() { redis zcard "$(q "SELECT rp_test.key('$1', 'sem')")"; }
# user_session NAME USER: open session NAME with release_at_commit = send,
# connected to Redis as USER, a Redis user made for it (password USER-Pw):
# what is done to that user touches no other connection.
user_session() {
	redis acl setuser "$2" on ">$2-Pw" '~*' '&*' '+@all' >/dev/null
	session_open "$1"
	session_q "$1" "SET redis_primitives.release_at_commit = send" >/dev/null
	session_q "$1" "SET redis_primitives.username = '$2'" >/dev/null
	session_q "$1" "SET redis_primitives.password = '$2-Pw'" >/dev/null
}

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
session_q s "BEGIN; SELECT rp_acquire_xact('rc-p', 60000); SELECT rp_semaphore_acquire_xact('rc-psem', 2, 60000)" >/dev/null
redis client pause 20000 write >/dev/null
out=$(session_q s "COMMIT")
is "$out" "" "send: COMMIT of a lock and a permit while Redis pauses writes returns with no WARNING"
is "$(lock rc-p) $(permits rc-psem)" "1 1" "the leases are still in Redis while it pauses"
redis client unpause >/dev/null
wait_for 10 '[ "$(lock rc-p) $(permits rc-psem)" = "0 0" ]'
is "$(lock rc-p) $(permits rc-psem)" "0 0" "once Redis goes on, the two releases sent at COMMIT run"
session_open w
session_q w "BEGIN; SELECT rp_acquire_xact('rc-w', 60000)" >/dev/null
redis client pause 20000 write >/dev/null
out=$(session_q w "COMMIT")
redis client unpause >/dev/null
is "$(echo "$out" | grep -c '^WARNING:  08006')" "1" \
	"wait (the naive twin here): the same COMMIT waits 500 ms and warns 08006"
session_close w

# A Redis that lost its script cache (restarted, failed over, SCRIPT
# FLUSH): the release is sent as EVAL, so it runs, and the session's next
# acquire of the same name is not refused by its own released lease.
session_q s "BEGIN; SELECT rp_acquire_xact('rc-f', 60000)" >/dev/null
redis script flush >/dev/null
session_q s "COMMIT" >/dev/null
is "$(session_q s "SELECT rp_acquire_xact('rc-f', 60000, 1500) IS NOT NULL")" "t" \
	"after SCRIPT FLUSH, the released name is taken again at once by the same session"

# A release that never runs: sent while Redis pauses writes, its connection
# killed before Redis reads it (CLIENT KILL is not a write).
lost_commit() {  # session name
	session_q "$1" "BEGIN; SELECT rp_acquire_xact('$2', 60000)" >/dev/null
	redis client pause 20000 write >/dev/null
	session_q "$1" "COMMIT" >/dev/null
	redis client kill type normal skipme yes >/dev/null
	redis client unpause >/dev/null
}
lost_commit s rc-n
is "$(lock rc-n)" "1" "the release sent at COMMIT was lost with its connection: the lease is still there"
session_q s "SELECT held FROM rp_lock_info('rc-other')" >/dev/null
wait_for 10 '[ "$(lock rc-n)" = 0 ]'
is "$(lock rc-n)" "0" "the next call found the release lost; it was released again (not left to its TTL)"

# That lease is released a second time at a later transaction end (an
# unsettled one is released twice: a command still in flight may land after
# the first). With send, that release is sent too: a COMMIT under a Redis
# that runs no writes still returns at once, with no WARNING. Waited for,
# it took 1 s here (command_timeout twice) and warned 08006.
session_q s "BEGIN; SELECT rp_acquire_xact('rc-s', 60000)" >/dev/null
redis client pause 20000 write >/dev/null
out=$(session_q s "COMMIT")
redis client unpause >/dev/null
is "$out" "" "send: a COMMIT that also releases an unsettled lease again does not wait for Redis"
wait_for 10 '[ "$(lock rc-s)" = 0 ]'
is "$(lock rc-s) $(session_q s "SELECT (rp_acquire('rc-s2', 60000)).fence")" "0 1" \
	"its release ran once Redis went on, and the session's next call gets its own reply"
session_q s "SELECT rp_release('rc-s2')" >/dev/null
# While such a release is on its way (Redis pauses writes: no reply comes),
# it is not sent again: transactions that make no Redis call do not each
# add a release and a reply owed. rp_lock_info runs under the pause (its
# script writes nothing); it finds the release lost, and its end sends it
# again.
evals() { redis info commandstats | grep '^cmdstat_eval:' | sed 's/^cmdstat_eval:calls=\([0-9]*\),.*/\1/'; }
lost_commit s rc-t
tkey=$(q "SELECT rp_test.key('rc-t', 'lock')")
tok=$(redis get "$tkey")
before=$(evals)
redis client pause 20000 write >/dev/null
session_q s "SELECT held FROM rp_lock_info('rc-other')" >/dev/null
for i in 1 2 3 4 5; do session_q s "SELECT 1" >/dev/null; done
redis client unpause >/dev/null
wait_for 10 '[ "$(lock rc-t)" = 0 ]'
is "$(lock rc-t) $(( $(evals) - before ))" "0 1" \
	"a release on its way is not sent again by five transactions with no Redis call (1 EVAL ran, not 6)"

# Its second release follows at the next transaction end (the first one's
# reply has come by then), Redis call or not, as with wait: an acquire that
# lands late (here the key set again with the lost lease's token) is
# released by it.
redis set "$tkey" "$tok" px 60000 >/dev/null
session_q s "SELECT 1" >/dev/null
wait_for 10 '[ "$(lock rc-t)" = 0 ]'
is "$(lock rc-t)" "0" "a late acquire of the lost lease is released by its second release at the next transaction end, with no Redis call"

# An acquire cut short while Redis hangs (statement_timeout, cancel) is
# released by the background worker, not by the abort waiting on a hung
# Redis; so too when the acquire's exchange read, on its way, the answer
# to a release sent before the hang: that answer is no sign that the
# acquire's own will come. (Taken as one, the abort reconnects, waits for
# the handshake's answer and warns 08006; and so does every transaction
# end after it, until Redis answers.) The session authenticates, as a
# managed Redis requires: a new connection's handshake waits for an answer.
user_session c rc-auth
session_q c "BEGIN; SELECT rp_acquire_xact('rc-c1', 60000); COMMIT" >/dev/null
wait_for 10 '[ "$(lock rc-c1)" = 0 ]'
kill -STOP "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
out=$(session_q c "SET statement_timeout = '300ms'; SELECT rp_acquire('rc-c2', 60000); RESET statement_timeout; SELECT 1")
kill -CONT "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
is "$(echo "$out" | grep -c '^ERROR:  57014') $(echo "$out" | grep -c '^WARNING')" "1 0" \
	"an acquire cut short after reading a sent release's answer: 57014, and no transaction end waits on the hung Redis"
fence() { redis get "$(q "SELECT rp_test.key('$1', 'fence')")"; }
wait_for 10 '[ "$(lock rc-c2) $(fence rc-c2)" = "0 1" ]'
is "$(lock rc-c2) $(fence rc-c2)" "0 1" "the cut-short acquire ran once Redis went on (fence 1), and its lease was released"

# The session still releases such a lease a second time itself, once an
# answer shows Redis answers again, even one read by a rate-limit call
# (only an answer read on the way of an acquire does not count): an
# acquire that lands after the worker's release (here its key set again
# with its token) is released then, not left to its TTL (60 s). The cut
# happens in a savepoint, so that the COMMIT after it sends a release.
session_q c "BEGIN; SELECT rp_acquire_xact('rc-ca', 60000); SAVEPOINT p" >/dev/null
kill -STOP "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
out=$(session_q c "SET LOCAL statement_timeout = '300ms'; SELECT rp_acquire_xact('rc-c3', 60000)")
session_q c "ROLLBACK TO p" >/dev/null
kill -CONT "$(cat "$RP_TMP/redis-$REDIS_PORT.pid")"
wait_for 10 '[ "$(lock rc-c3)" = 1 ]'
tok3=$(redis get "$(q "SELECT rp_test.key('rc-c3', 'lock')")")
session_q c "COMMIT" >/dev/null
wait_for 10 '[ "$(lock rc-c3) $(lock rc-ca)" = "0 0" ]'
redis set "$(q "SELECT rp_test.key('rc-c3', 'lock')")" "$tok3" px 60000 >/dev/null
for i in $(seq 10); do
	[ "$(lock rc-c3)" = 0 ] && break
	session_q c "SELECT rp_ratelimit('rc-rl', 1000, 60000)" >/dev/null
done
is "$(echo "$out" | grep -c '^ERROR:  57014') $(lock rc-c3)" "1 0" \
	"a late acquire of a cut-short lease is released by the session once a rate-limit call read an answer"
session_close c
redis acl deluser rc-auth >/dev/null

# A release Redis answers with an error: here NOPERM (the connection's user
# may no longer run scripts); a READONLY after a failover, an OOM or a
# script's error reply take the same path. The reply is read by the next
# call, and the lease, still there, is released again at that call's end.
# Taken as done, it would be held until its TTL (60 s here). A session of
# its own, with nothing unsettled, connected as a Redis user of its own:
# only its commands are refused (the background worker's connection and
# any other keep the default user).
user_session e rc-user
session_q e "BEGIN; SELECT rp_acquire_xact('rc-e', 60000)" >/dev/null
redis client pause 20000 write >/dev/null
out=$(session_q e "COMMIT")
redis acl setuser rc-user -@scripting >/dev/null
redis client unpause >/dev/null
# The release is sent as EVAL; Redis' ACL log names the user it refused
# once Redis read it.
refused() { redis acl log | grep -cx rc-user; }
wait_for 10 '[ "$(refused)" -ge 1 ]'
redis acl setuser rc-user +@all >/dev/null
is "$out $([ "$(refused)" -ge 1 ] && echo refused) $(lock rc-e)" " refused 1" \
	"the release sent at COMMIT (no WARNING) was refused with NOPERM: the lease is still there"
session_q e "SELECT held FROM rp_lock_info('rc-other')" >/dev/null
wait_for 10 '[ "$(lock rc-e)" = 0 ]'
is "$(lock rc-e)" "0" "the next call read the refusal; the lease was released again (not left to its TTL)"
session_close e
redis acl deluser rc-user >/dev/null
redis acl log reset >/dev/null

# The same refusal for good: a Redis user allowed EVALSHA but not EVAL,
# with which a sent release (EVAL: its reply cannot ask for the script
# again) is refused.  The release after the refusal waits for its reply,
# through EVALSHA as every waited call (and the session's later releases
# are sent as EVALSHA, below).
q "BEGIN" "SELECT rp_acquire_xact('rc-load', 60000) IS NOT NULL" "COMMIT" \
	"SELECT held FROM rp_lock_info('rc-load')" >/dev/null   # both scripts cached
user_session e2 rc-user2
redis acl setuser rc-user2 -eval >/dev/null
session_q e2 "BEGIN; SELECT rp_acquire_xact('rc-e2', 60000); COMMIT" >/dev/null
wait_for 10 '[ "$(redis acl log | grep -cx rc-user2)" -ge 1 ]'
session_q e2 "SELECT held FROM rp_lock_info('rc-other')" >/dev/null
wait_for 10 '[ "$(lock rc-e2)" = 0 ]'
is "$(lock rc-e2) $(session_q e2 "SELECT rp_acquire_xact('rc-e2', 60000) IS NOT NULL")" "0 t" \
	"a user without EVAL: the sent release is refused, the next transaction end's waits (EVALSHA) and releases it"
# Refused EVAL once, the session sends its releases as EVALSHA: the next
# COMMIT's release runs with no further call.  Sent as EVAL again, each
# would be refused, and the lease held until the session's next Redis
# call ended its transaction (or its TTL, 60 s here).
# settle_e2: two calls, so that nothing is left unsettled before the next
# COMMIT (a transaction end that releases a refused lease again waits, and
# may take the transaction's own with it; an unsettled lease is released
# at two transaction ends).
settle_e2() {
	session_q e2 "SELECT held FROM rp_lock_info('rc-other')" >/dev/null
	session_q e2 "SELECT held FROM rp_lock_info('rc-other')" >/dev/null
}
settle_e2
session_q e2 "BEGIN; SELECT rp_acquire_xact('rc-e4', 60000); COMMIT" >/dev/null
wait_for 10 '[ "$(lock rc-e4)" = 0 ]'
is "$(lock rc-e4)" "0" \
	"refused EVAL once, the session sends its releases as EVALSHA: the next COMMIT's release runs"
# And back to EVAL when Redis lost its script cache: a release sent as
# EVALSHA answered NOSCRIPT (the user allowed EVAL again, SCRIPT FLUSH) is
# released again by the next call, and the session's releases go as EVAL
# from then on, which runs them whatever the cache holds.  Kept on
# EVALSHA, each release after every flush would wait for the next call.
redis acl setuser rc-user2 +eval >/dev/null
redis script flush >/dev/null
session_q e2 "BEGIN; SELECT rp_acquire_xact('rc-e5', 60000); COMMIT" >/dev/null
settle_e2
wait_for 10 '[ "$(lock rc-e5)" = 0 ]'
redis script flush >/dev/null
session_q e2 "BEGIN; SELECT rp_acquire_xact('rc-e6', 60000); COMMIT" >/dev/null
wait_for 10 '[ "$(lock rc-e6)" = 0 ]'
is "$(lock rc-e5) $(lock rc-e6)" "0 0" \
	"a release sent as EVALSHA answered NOSCRIPT: released by the next call, and the next COMMIT's sent as EVAL runs"
# A setting that names another user (or server) forgets the switch too:
# refused EVAL again, then connected as a user allowed EVAL, the session's
# next release after a SCRIPT FLUSH is sent as EVAL and runs.  Kept on
# EVALSHA, it would be refused (NOSCRIPT) and wait for the next call.
redis acl setuser rc-user2 -eval >/dev/null
redis acl setuser rc-user4 on '>rc-user4-Pw' '~*' '&*' '+@all' >/dev/null
session_q e2 "BEGIN; SELECT rp_acquire_xact('rc-e7', 60000); COMMIT" >/dev/null
settle_e2
wait_for 10 '[ "$(lock rc-e7)" = 0 ]'
session_q e2 "SET redis_primitives.username = 'rc-user4'; SET redis_primitives.password = 'rc-user4-Pw'" >/dev/null
redis script flush >/dev/null
session_q e2 "BEGIN; SELECT rp_acquire_xact('rc-e8', 60000); COMMIT" >/dev/null
wait_for 10 '[ "$(lock rc-e8)" = 0 ]'
is "$(lock rc-e7) $(lock rc-e8)" "0 0" \
	"another user named: the switch to EVALSHA is forgotten, the next COMMIT's release sent as EVAL runs"
session_close e2
redis acl deluser rc-user2 rc-user4 >/dev/null
redis acl log reset >/dev/null

# The same at backend exit, in a session with nothing unsettled (the
# release of what is unsettled at a transaction end waits for Redis, and
# reads the reply owed on the way).
session_close s
session_open x
session_q x "SET redis_primitives.release_at_commit = send" >/dev/null
lost_commit x rc-x
is "$(lock rc-x)" "1" "a release lost after the last COMMIT before exit: still there"
session_close x
wait_for 10 '[ "$(lock rc-x)" = 0 ]'
is "$(lock rc-x)" "0" "backend exit found the release lost and released the lease"

# More lost releases than the session keeps unsettled (256): the oldest
# go to the background worker, none is left to its TTL; the acquire that
# reads the 300 lost replies on its way is not harmed (an entry it holds
# for its own round trip must not be freed under it: a crash).
lost_many() {  # session prefix
	session_q "$1" "SET redis_primitives.release_at_commit = send" >/dev/null
	session_q "$1" "BEGIN; SELECT count(rp_acquire_xact('$2' || i, 60000)) FROM generate_series(1, 300) i" >/dev/null
	redis client pause 20000 write >/dev/null
	session_q "$1" "COMMIT" >/dev/null
	redis client kill type normal skipme yes >/dev/null
	redis client unpause >/dev/null
}
left() { redis --scan --pattern "$(q "SELECT rp_test.key('$1', 'lock')" | sed "s/$1/$1*/")" | wc -l; }
session_open m
lost_many m rc-m
is "$(left rc-m)" "300" "300 releases lost in one COMMIT: 300 leases still there"
is "$(session_q m "SELECT (rp_acquire('rc-after', 60000)).fence")" "1" \
	"the next acquire reads the 300 lost replies on its way and gets its own lease"
is "$(session_q m "SELECT rp_release('rc-after')")" "t" "the session is alive and in step"
wait_for 20 '[ "$(left rc-m)" = 0 ]'
is "$(left rc-m)" "0" "all 300 released again (the session's 256, the worker the rest)"
session_close m

# Terminated while idle with 300 releases lost: exit reads the replies and
# releases the leases itself.
session_open e
pid=$(session_pid e)
lost_many e rc-e
q "SELECT pg_terminate_backend($pid)" >/dev/null
backend_gone "$pid"
ok $? "terminated while idle after 300 lost releases: the backend exits"
wait_for 20 '[ "$(left rc-e)" = 0 ]'
is "$(left rc-e)" "0" "and none of its 300 leases is left in Redis"
session_close e

# The same while Redis still pauses writes: exit cannot release them, hands
# the worker what its queue takes (128), and warns once for the rest, not
# once per lease: to a client that is not reading, 172 WARNINGs held the
# backend in ClientWrite (its exit waited for the client to go).
session_open t
pid=$(session_pid t)
lost_many t rc-t
mark=$(stat -c %s "$RP_TMP/pg.log")
redis client pause 20000 write >/dev/null
q "SELECT pg_terminate_backend($pid)" >/dev/null
backend_gone "$pid"
ok $? "terminated while Redis pauses writes, 300 leases to hand off: the backend exits"
redis client unpause >/dev/null
session_close t
# What the worker's queue did not take is left to its TTL: the WARNINGs
# count every one of them (not only the first of a burst).
counted=$(tail -c +"$((mark + 1))" "$RP_TMP/pg.log" |
	grep -oE 'could not hand [0-9]+ Redis lease' | awk '{ n += $4 } END { print n + 0 }')
wait_for 20 '[ "$(left rc-t)" = "$counted" ]'
is "$(left rc-t)" "$counted" "the leases left in Redis are the ones the WARNINGs counted ($counted)"
cmp_ok "$counted" -gt 0 "and some were left: the queue holds 128"
finish
