#!/usr/bin/env bash
# rp_locks answers "who holds account-42 and what is it doing" the way
# pg_locks does for PostgreSQL's own locks: one row per lease any backend of
# this server holds, joinable to pg_stat_activity, gone when the lease or the
# backend is (a backend ended by FATAL leaves no ghost row), and filtered by
# role like pg_stat_activity.  The bound (max_tracked_leases) needs a server
# of its own: it is tested in observe_notify.sh.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 18

rows() { q "SELECT name || ':' || scope FROM rp_locks WHERE pid = $1 ORDER BY name" | tr '\n' ' '; }
# after SQL ROWS DESCRIPTION: the holder session runs SQL, then its rows are ROWS.
after() { session_q obsh "$1" >/dev/null; is "$(rows "$hpid")" "$2" "$3"; }

rm -f "$RP_TMP/obsh.in"
session_open obsh
session_q obsh "SET application_name = 'obs-holder'" >/dev/null
hpid=$(session_pid obsh)
session_q obsh "CREATE TEMP TABLE hl AS SELECT rp_acquire('account-42', 30000) AS l" >/dev/null
out=$(q "SELECT a.application_name, l.fence > 0, l.scope, NOT l.expired, l.expires_at > now()
         FROM rp_locks l JOIN pg_stat_activity a USING (pid) WHERE l.name = 'account-42'" | tr '|' ' ')
is "$out" "obs-holder t session t t" \
	"rp_locks JOIN pg_stat_activity USING (pid): who holds account-42, live, session scope"
is "$(q "SELECT fence FROM rp_locks WHERE name = 'account-42'")" "$(redis GET 'rp:{account-42}:fence')" \
	"its fence is the one Redis issued"
before=$(q "SELECT expires_at FROM rp_locks WHERE name = 'account-42'")
session_q obsh "SELECT rp_extend((SELECT l FROM hl), 120000) IS NOT NULL" >/dev/null
is "$(q "SELECT expires_at > '$before'::timestamptz + interval '60 s' FROM rp_locks WHERE name = 'account-42'")" "t" \
	"rp_extend moves expires_at"
after "SELECT rp_acquire('account-42', 30000) IS NOT NULL" "account-42:session " "acquiring a name the session holds leaves one row"

after "BEGIN; SELECT rp_acquire_xact('tx-1', 30000) IS NOT NULL; SAVEPOINT s; SELECT rp_acquire_xact('tx-2', 30000) IS NOT NULL" "account-42:session tx-1:xact tx-2:xact " "transaction leases are shown with scope xact"
after "ROLLBACK TO s" "account-42:session tx-1:xact " "a rolled-back subtransaction's lease disappears with it"
after "COMMIT" "account-42:session " "the transaction's leases disappear at COMMIT"
session_q obsh "SELECT rp_acquire('short', 200) IS NOT NULL" >/dev/null
sleep 0.4
is "$(q "SELECT expired FROM rp_locks WHERE name = 'short'")" "t" \
	"a lease past its local deadline is still shown (the session believes it), marked expired"
after "SELECT rp_release('short')" "account-42:session " "rp_release(name) removes the row"
after "SELECT rp_release_all()" "" "rp_release_all removes every row of the session"

# Many leases, released out of order.  A backend finds its row of a lease
# through a hash of their places in an array, and a release moves the last
# one into the place it frees: a place not moved with it would leave a
# released lease's row behind, or lose one still held.
session_q obsh "SELECT count(*) FROM generate_series(1, 300) g, LATERAL rp_acquire('many-' || g, 30000) a
                WHERE a.token IS NOT NULL" >/dev/null
session_q obsh "SELECT count(*) FILTER (WHERE rp_release('many-' || g)) FROM generate_series(1, 300, 3) g;
                SELECT count(*) FILTER (WHERE rp_release('many-' || g)) FROM generate_series(299, 2, -7) g" >/dev/null
# held: 300 but every third from 1 (100) and the others of 299, 292, ... 5 (29 of 43)
expect=$(q "SELECT string_agg('many-' || g, ' ' ORDER BY ('many-' || g) COLLATE \"C\") FROM generate_series(1, 300) g
            WHERE g % 3 <> 1 AND NOT (g <= 299 AND (299 - g) % 7 = 0)")
in_redis=$(redis --scan --pattern "$(key 'many-*' lock)" | sed 's/^rp:{\(.*\)}:lock$/\1/' | LC_ALL=C sort | paste -sd' ')
is "$(q "SELECT string_agg(name, ' ' ORDER BY name COLLATE \"C\") FROM rp_locks WHERE pid = $hpid") $(session_q obsh \
	"SELECT string_agg(name, ' ' ORDER BY name COLLATE \"C\") FROM rp_leases()") $in_redis" "$expect $expect $expect" \
	"300 leases, 129 released out of order: rp_locks, rp_leases() and Redis show the same 171 held"
after "SELECT rp_release_all()" "" "rp_release_all releases them: no row is left"
session_q obsh "SELECT rp_acquire('pooled', 30000) IS NOT NULL" >/dev/null
after "DISCARD ALL" "" "DISCARD ALL (a pooler's reset) releases the session's leases: their rows go too"

# A backend ended by FATAL (pg_terminate_backend) leaves no ghost row.  The
# naive twin, a table the application keeps (insert after acquiring, delete
# after releasing), keeps the dead backend's row.
q "SET client_min_messages = warning" "DROP TABLE IF EXISTS obs_naive_locks" \
	"CREATE TABLE obs_naive_locks (pid int, name text)" >/dev/null
session_q obsh "SELECT rp_acquire('doomed', 30000) IS NOT NULL; INSERT INTO obs_naive_locks VALUES (pg_backend_pid(), 'doomed')" >/dev/null
q "SELECT pg_terminate_backend($hpid)" >/dev/null
backend_gone "$hpid"
is "$(q "SELECT count(*) FROM rp_locks WHERE pid = $hpid OR name = 'doomed'")" "0" \
	"pg_terminate_backend (FATAL): the backend's rows are gone with it"
is "$(q "SELECT count(*) FROM obs_naive_locks l WHERE NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.pid)")" "1" \
	"naive twin: the application's own lock table still lists the dead backend as holder"
q "DROP TABLE obs_naive_locks" >/dev/null
session_close obsh

# Roles: as pg_stat_activity, only rows of roles one has the privileges of,
# or all of them with pg_read_all_stats.
q "SET client_min_messages = warning" "DROP ROLE IF EXISTS obs_alice" "DROP ROLE IF EXISTS obs_bob" \
	"DROP ROLE IF EXISTS obs_mon" "CREATE ROLE obs_alice LOGIN" "CREATE ROLE obs_bob LOGIN" \
	"CREATE ROLE obs_mon LOGIN IN ROLE pg_read_all_stats" \
	"GRANT EXECUTE ON FUNCTION rp_acquire(text, bigint, bigint, bigint) TO obs_alice, obs_bob" >/dev/null
PGUSER=obs_alice psql -X -q -d "$RP_DB" -c "SELECT rp_acquire('alice-lock', 30000)" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
apid=$!
wait_for 30 '[ "$(q "SELECT count(*) FROM rp_locks WHERE name = '"'alice-lock'"'")" = 1 ]'
is "$(PGUSER=obs_alice q "SELECT count(*) FROM rp_locks WHERE name = 'alice-lock'")" "1" "the holder's role sees its row"
is "$(PGUSER=obs_bob q "SELECT count(*) FROM rp_locks")" "0" "another plain role sees none of it"
is "$(PGUSER=obs_mon q "SELECT count(*) FROM rp_locks WHERE name = 'alice-lock'")" "1" "a member of pg_read_all_stats sees it"
kill "$apid" 2>/dev/null; wait "$apid" 2>/dev/null
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'obs_alice'" >/dev/null
wait_for 30 '[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE usename = '"'obs_alice'"'")" = 0 ]'
q "SET client_min_messages = warning" "REVOKE EXECUTE ON FUNCTION rp_acquire(text, bigint, bigint, bigint) FROM obs_alice, obs_bob" \
	"DROP ROLE obs_alice" "DROP ROLE obs_bob" "DROP ROLE obs_mon" >/dev/null

finish
