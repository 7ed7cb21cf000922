#!/usr/bin/env bash
# cleanup_face.sh -- the cleanup face (rp_eval_quiet: COMMIT and ROLLBACK,
# DISCARD ALL, backend exit, the background worker) never throws and never
# leaves interrupts held, whatever fails beneath it.  The failures this
# guards against (all three were in 1.1's development code, and the checks
# of each fail on it):
#
#  A. an ERROR raised below the cleanup face -- here an unreadable
#     redis_primitives.sentinel_password_file, read when the release at
#     COMMIT reconnects -- escaped from the COMMIT callback: for a
#     transaction that wrote, PANIC "cannot abort transaction N, it was
#     already committed", and every session of the server was lost.
#  B. the same at DISCARD ALL (a pool's server_reset_query) failed it.
#  C. an ERROR caught inside the cleanup face (a TLS handshake that failed)
#     had InterruptHoldoffCount reset to 0 by errfinish, and the face's
#     RESUME_INTERRUPTS then wrapped it to 2^32-1: the backend ignored
#     cancel, statement_timeout and pg_terminate_backend from then on
#     (how soon statement_timeout cancels: test/timing/cleanup_face.sh).
#  D. the failed release's WARNING said 08006 (connection failure) whatever
#     failed: a release that could not connect at all is 08001, the code
#     the status of the failed call carries.
#
# Its own PostgreSQL server: on the old code A crashes the server.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 10

port=$(rp_free_port)
tport=$(rp_free_port)
while [ "$tport" = "$port" ]; do tport=$(rp_free_port); done
dport=$(rp_free_port)    # nothing listens there
while [ "$dport" = "$port" ] || [ "$dport" = "$tport" ]; do dport=$(rp_free_port); done
cleanup() { rp_stop_redis "$tport"; rp_stop_pg cleanupface; }
trap cleanup EXIT
rp_start_pg cleanupface "$port" "log_min_messages = warning"
CF() { psql -X -At -q -h "$RP_TMP" -p "$port" -d postgres "$@"; }
CF -c "CREATE EXTENSION IF NOT EXISTS redis_primitives" -c "DROP TABLE IF EXISTS cf_t" -c "CREATE TABLE cf_t (i int)" >/dev/null  # a slot may run it twice

# A. COMMIT of a transaction that wrote and holds an xact lease; the release
# reconnects (the settings changed) and the sentinel password file is gone.
out=$(CF -v ON_ERROR_STOP=1 2>&1 <<SQL
BEGIN;
SELECT (rp_acquire_xact('cf-commit', 60000)).fence > 0;
INSERT INTO cf_t VALUES (1);
SET redis_primitives.sentinels = '127.0.0.1:1';
SET redis_primitives.sentinel_password_file = '$RP_TMP/cf-no-such-file';
COMMIT;
SELECT 'alive';
SQL
)
echo "$out" | grep -q "^alive$"; ok $? "COMMIT with an unreadable sentinel_password_file: the session goes on"
echo "$out" | grep -q "WARNING:  could not release 1 Redis lease"; ok $? "the failed release is a WARNING"
crash=$(grep -E "PANIC|terminated by signal" "$RP_TMP/cleanupface.log")
[ -n "$crash" ] && diag "$crash"
is "$crash" "" "the server did not crash (no PANIC in its log)"
wait_for 30 'CF -c "SELECT 1" >/dev/null 2>&1'
is "$(CF -c "SELECT count(*) FROM cf_t")" "1" "the commit stands"
redis del "rp:{cf-commit}:lock" >/dev/null

# B. DISCARD ALL with the same failure below.  DISCARD ALL resets session
# settings before the hook releases, so the failing ones are the server's:
# set and reloaded first (until a new session has them: a reload that came
# late, after a fixed pause, left the release nothing to fail on), while
# the session acquires with its own working ones.
CF -c "ALTER SYSTEM SET redis_primitives.sentinels = '127.0.0.1:1'" \
   -c "ALTER SYSTEM SET redis_primitives.sentinel_password_file = '$RP_TMP/cf-no-such-file'" -c "SELECT pg_reload_conf()" >/dev/null
wait_for 30 '[ "$(CF -c "SHOW redis_primitives.sentinels")" = 127.0.0.1:1 ]'
out=$(CF -v ON_ERROR_STOP=1 2>&1 <<SQL
SET redis_primitives.sentinels = '';
SET redis_primitives.sentinel_password_file = '';
SELECT (rp_acquire('cf-discard', 60000)).fence > 0;
DISCARD ALL;
SELECT 'alive';
SQL
)
CF -c "ALTER SYSTEM RESET ALL" -c "SELECT pg_reload_conf()" >/dev/null
wait_for 30 '[ -z "$(CF -c "SHOW redis_primitives.sentinels")" ]'   # C's session must not have them
echo "$out" | grep -q "^alive$"; ok $? "DISCARD ALL with an unreadable sentinel_password_file succeeds"
echo "$out" | grep -q "WARNING:  could not release 1 Redis lease"; ok $? "the failed release is a WARNING"
is "$(echo "$out" | grep -c "^ERROR")" "0" "and raises no ERROR"
redis del "rp:{cf-discard}:lock" >/dev/null

# C. A TLS handshake that fails inside the cleanup face (the COMMIT's
# release reconnects and the server's certificate does not name the host
# now required); afterwards statement_timeout must still cancel the
# pg_sleep, and the session go on.
tls_make_certs "$RP_TMP/cf-tls"
redis-server --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --dir "$RP_TMP" \
	--pidfile "$RP_TMP/redis-$tport.pid" --logfile "$RP_TMP/redis-$tport.log" \
	$(tls_redis_args "$RP_TMP/cf-tls" server "$tport")
wait_for 10 rp_port_taken "$tport"
out=$(CF 2>&1 <<SQL
SET redis_primitives.port = $tport;
SET redis_primitives.tls = 'verify-full';
SET redis_primitives.tls_ca_file = '$RP_TMP/cf-tls/ca.crt';
BEGIN;
SELECT (rp_acquire_xact('cf-tls', 60000)).fence > 0;
SET redis_primitives.tls_server_name = 'wrong.example';
COMMIT;
SET statement_timeout = '300ms';
SELECT pg_sleep(6);
SELECT 'after';
SQL
)
echo "$out" | grep -q "WARNING:  could not release 1 Redis lease"; ok $? "the TLS handshake failed inside the COMMIT's release (a WARNING)"
echo "$out" | grep -q "canceling statement due to statement timeout" && echo "$out" | grep -q "^after$"
ok $? "statement_timeout still cancels after it (pg_sleep(6) is cancelled), and the session goes on"

# D. The release at COMMIT cannot connect (the port changed to one nothing
# listens on): the WARNING carries the failure's own SQLSTATE.
out=$(CF 2>&1 <<SQL
\\set VERBOSITY verbose
BEGIN;
SELECT (rp_acquire_xact('cf-sqlstate', 60000)).fence > 0;
SET redis_primitives.port = $dport;
COMMIT;
SQL
)
echo "$out" | grep -q "WARNING:  08001: could not release 1 Redis lease"
ok $? "a release that could not connect warns with 08001, not a fixed 08006" || diag "$out"
redis del "rp:{cf-sqlstate}:lock" >/dev/null
finish
