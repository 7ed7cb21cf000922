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
plan 9

rpid=$(cat "$RP_TMP/redis-$REDIS_PORT.pid")
key() { q "SELECT rp_test.key('$1', '$2')"; }
keys=$(q "SELECT string_agg(rp_test.key('oq-' || i, 'lock'), ' ') FROM generate_series(1, 130) i")
redis set "$(key oq-held lock)" someone-else px 120000 >/dev/null
redis zadd "$(key oq-sem sem)" 99999999999999 someone-else >/dev/null

session_open s
session_q s "SET statement_timeout = '200ms'" >/dev/null
sql="SELECT rp_acquire('oq-held', 120000); SELECT rp_semaphore_acquire('oq-sem', 1, 120000);"
for i in $(seq 130); do sql+=" SELECT rp_acquire('oq-$i', 120000);"; done
kill -STOP "$rpid"
out=$(session_q s "$sql")
kill -CONT "$rpid"
is "$(echo "$out" | grep -c '57014')" "132" "132 acquires cut short by statement_timeout while Redis is stopped"
cmp_ok "$(echo "$out" | grep -c 'WARNING:  53400')" -ge 1 "the worker's queue of 128 filled: WARNING (53400)"
diag "$(echo "$out" | grep -v 57014 | sort | uniq -c)"
session_q s "RESET statement_timeout" >/dev/null

# The worker releases what was handed to it; the session releases the rest at
# its first transaction end after Redis answers one of its lock calls.
session_q s "SELECT held FROM rp_lock_info('oq-other')" >/dev/null
wait_for 60 '[ "$(redis exists $keys)" = 0 ]'
is "$(redis exists $keys)" "0" "none of the 130 locks asked for is left in Redis"
is "$(redis get "$(key oq-held lock)")" "someone-else" "the lock another holder held is still its"
is "$(redis zscore "$(key oq-sem sem)" someone-else)" "99999999999999" "the semaphore permit another holder held is still its"
is "$(session_q s "SELECT count(*) FROM rp_leases()")" "0" "the session holds nothing"
session_close s

# ---- a transaction's leases whose release at COMMIT Redis never got --------------
pport=$(rp_free_port)
touch "$RP_TMP/oq.events"
/usr/bin/python3 "$(dirname "$0")/../t/delay_proxy.py" "$pport" "$REDIS_PORT" 1 "$RP_TMP/oq.events" &
proxy=$!
wait_for 30 "grep -q '^listening' '$RP_TMP/oq.events'"
session_open sp
session_q sp "SET redis_primitives.port = $pport" >/dev/null
out=$(session_q sp "BEGIN; SELECT fence > 0 FROM rp_acquire_xact('oq-x', 120000); SELECT fence > 0 FROM rp_semaphore_acquire_xact('oq-xs', 3, 120000)")
kill -USR1 "$proxy"
# One more command reaches Redis (and is answered); nothing after it does.
out+=" $(session_q sp "SELECT held FROM rp_lock_info('oq-dummy')")"
wait_for 30 "grep -q '^forwarded' '$RP_TMP/oq.events'"
out+=" $(session_q sp "COMMIT" | grep -c WARNING)"
is "$(echo $out)" "t t f 2" "an xact lock and permit held; their release at COMMIT never reaches Redis: a WARNING per kind"
wait_for 30 '[ "$(redis exists "$(key oq-x lock)")$(redis zcard "$(key oq-xs sem)")" = 00 ]'
is "$(redis exists "$(key oq-x lock)")" "0" "the xact lock is released by the background worker (within 30 s, not its 120 s TTL)"
is "$(redis zcard "$(key oq-xs sem)")" "0" "the xact permit too"
kill "$proxy" 2>/dev/null; wait "$proxy" 2>/dev/null
session_close sp
redis del "$(key oq-held lock)" "$(key oq-sem sem)" >/dev/null
finish
