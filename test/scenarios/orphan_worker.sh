#!/usr/bin/env bash
# orphan_worker.sh -- the background worker releases what an exiting backend
# could not (docs/lock.md, "Backend exit releases").  Written for mutant 57
# (the worker drops what it is handed), which survived while the only test
# let Redis run the backend's own late release; it also covers names whose
# keys are 512 bytes or more, which the worker skipped during 1.1's
# development (mutant 78).
#
# Backends hold 600 s leases and exit while Redis runs no writes (CLIENT
# PAUSE WRITE): their exit release is held by Redis, and dropped with their
# connection when they exit, so only the worker can release those leases,
# once Redis runs writes again.  (DEBUG SLEEP would not do: Redis runs a
# release still in the socket when it wakes, worker or not.)  Reads still
# run, so the checks can see the leases outlive their backends.
#
# Naive twin: the same backend on a server without shared_preload_libraries,
# where there is no worker (docs/lock.md): its lease outlives the pause and
# is held for its TTL.
#
# First the worker is stopped alone (SIGTERM, as an administrator's kill):
# the postmaster must start it again, and every check after that is the new
# worker's.  (It exited with code 0, which tells the postmaster never to
# restart a background worker: orphans then stayed queued until the TTL.)
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 14

# 600 s: the worker's releases are waited for 120 s, far longer than a busy
# machine delays them and far less than a lease nobody releases lives.
ttl=600000
long=$(printf 'L%.0s' $(seq 600))           # its key is 610 bytes
pttl() { redis pttl "$(key "$1" lock)"; }
# A 300 kB name: more than the worker's queue holds (256 kB of keys), and
# too long for a command line, so it is spelled in SQL and in Lua.
huge_sql="repeat('H', 300000)"
huge_pttl() { redis eval "return redis.call('pttl', 'rp:{' .. string.rep('H', 300000) .. '}:lock')" 0; }
trap 'redis client unpause >/dev/null 2>&1' EXIT

old=$(elector_pids)
[ -n "$old" ] && kill -TERM "$old"
wait_for 30 '[ -n "$old" ] && [ -n "$(elector_pids)" ] && [ "$(elector_pids)" != "$old" ]'
ok $? "the worker stopped by SIGTERM (pid ${old:-none}) is started again by the postmaster (pid $(elector_pids))"

port=$(rp_free_port)
rp_start_pg noworker "$port" "shared_preload_libraries = ''"
NW="psql -X -At -q -h $RP_TMP -p $port -d postgres"
$NW -c "CREATE EXTENSION redis_primitives" >/dev/null

# hold SERVER-PSQL APP NAME-SQL: a backend that takes the lease, then sleeps.
hold() {
	$1 -c "SET application_name = '$2'" -c "SELECT (rp_acquire($3, $ttl)).fence" \
	   -c "SELECT pg_sleep(600)" >"$RP_TMP/$2.out" 2>&1 &
}
hold "psql -X -At -q -d $RP_DB" orph-short "'orph1'"
hold "psql -X -At -q -d $RP_DB" orph-long "'$long'"
hold "psql -X -At -q -d $RP_DB" orph-huge "$huge_sql"
hold "$NW" orph-twin "'orph-twin'"
wait_for 60 '[ "$(pttl orph1)" -gt 0 ] && [ "$(pttl "$long")" -gt 0 ] && [ "$(huge_pttl)" -gt 0 ] && [ "$(pttl orph-twin)" -gt 0 ]'
ok $? "four backends hold 600 s leases (a short name, a 600-byte name, a 300 kB name, and one on the server without the worker)"

log0=$(( $(stat -c %s "$RP_TMP/pg.log") + 1 ))	# this file's part of the server log
# Until the test unpauses (or its exit trap): a pause that ends by itself
# (it was 60 s, with a 60 s wait for the exits inside it) would let the
# worker release early on a machine slow enough, and "still held" fail.
redis client pause 600000 write >/dev/null
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name IN ('orph-short', 'orph-long', 'orph-huge')" >/dev/null
$NW -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'orph-twin'" >/dev/null
# A backend leaves pg_stat_activity after its exit callback has run.
gone() {
	local sql="SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'orph-%'"
	[ "$(q "$sql")" = 0 ] && [ "$($NW -c "$sql")" = 0 ]
}
wait_for 60 gone
ok $? "the backends are terminated while Redis runs no writes, and have exited"
wait
# The exit release waits at most 500 ms, and its WARNING says so (it said
# redis_primitives.command_timeout, 1000 ms here, whatever the wait was).
waited=$(tail -c +"$log0" "$RP_TMP/pg.log" | grep -A1 'could not release 1 Redis lease' |
	grep -o 'no reply within [0-9]* ms' | grep -o '[0-9]*' | sort -n | tr '\n' ' ')
longest=${waited% }; longest=${longest##* }
[ -n "$longest" ] && [ "$longest" -le 500 ]
ok $? "each backend's exit release gave up within its own 500 ms, and the log says how long (ms: ${waited% })"
left=$(pttl orph1)
cmp_ok "$left" -gt 0 "their own exit release did not reach Redis: the lease is still held ($left ms left)"
left=$(pttl "$long")
cmp_ok "$left" -gt 0 "nor the 600-byte name's ($left ms left)"

t0=$(now_ms)
redis client unpause >/dev/null
wait_for 120 '[ "$(pttl orph1)" = -2 ]'
ok $? "Redis runs writes again: the worker releases the lease, not left for its TTL ($(( $(now_ms) - t0 )) ms)"
is "$(q "SELECT (rp_acquire('orph1', 10000, 0)).fence IS NOT NULL")" "t" "and another session acquires the name at once"
# The twin's backend exited in the same pause, and nothing releases it.
left=$(pttl orph-twin)
cmp_ok "$left" -gt 0 "naive twin: without the worker (no shared_preload_libraries), the lease outlives the pause: $left ms of its TTL left"
is "$($NW -c "SELECT rp_acquire('orph-twin', 10000, 0) IS NULL")" "t" "and no other session can acquire that name"
wait_for 120 '[ "$(pttl "$long")" = -2 ]'
ok $? "the worker releases a lease of a 600-byte name too ($(( $(now_ms) - t0 )) ms)"
is "$(q "SELECT (rp_acquire('$long', 10000, 0)).fence IS NOT NULL")" "t" "and another session acquires that name at once"
# Past the queue's bound the lease is left to its TTL, and the log says so.
grep -A1 -E 'could not hand [0-9]+ Redis lease\(s\) to the background worker: its queue is full' "$RP_TMP/pg.log" >"$RP_TMP/orph-warn"
grep -q "the last lease's key is 300010 bytes" "$RP_TMP/orph-warn"
ok $? "a key larger than the worker's queue is not dropped silently: a WARNING in the log names its size"
cmp_ok "$(huge_pttl)" -gt 0 "and that lease is left to its TTL, as documented"
redis del "$(key orph-twin lock)" >/dev/null
redis eval "return redis.call('del', 'rp:{' .. string.rep('H', 300000) .. '}:lock')" 0 >/dev/null

rp_stop_pg noworker
finish
