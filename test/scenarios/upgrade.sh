#!/usr/bin/env bash
# upgrade.sh -- a 1.0 database and a 1.1 database taken to the current
# version (CUR below) with ALTER EXTENSION ... UPDATE must each end with the
# catalog a fresh CREATE EXTENSION gives, and keep their leases, fenced rows
# and store rows working.
#
# New objects reach older databases only through src/sql/upgrade/ (1.0 ->
# 1.1 -> 1.2, chained by PostgreSQL); this test is what keeps those scripts
# honest.  It compares ext_catalog.sql's listing of every member
# object (full function definitions, columns, indexes, triggers, comments,
# ACLs, pg_dump configuration) and prints each line only one side has.
# It also shows that the comparison sees a deliberately missing function and
# a changed attribute, which a comparison of object names (what \dx+ shows)
# does not see.
#
# Before the update the 1.0 catalog runs against the current library: every C
# symbol the 1.0 script names must still be there (CREATE EXTENSION checks),
# and every function must work called with its 1.0 arguments.
source "$(dirname "$0")/tap.bash"

CATALOG=$(dirname "$0")/ext_catalog.sql
OLD=rp_upg_old MID=rp_upg_mid NEW=rp_upg_new BROKEN=rp_upg_broken
CUR=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" "$(dirname "$0")/../../redis_primitives.control")
cleanup() { for d in $OLD $MID $NEW $BROKEN; do dropdb --if-exists "$d" 2>/dev/null; done; psql -X -q -d postgres -c "DROP ROLE IF EXISTS rp_upg_monitor" 2>/dev/null; }
cleanup
trap cleanup EXIT

plan 29

# dq DB SQL...: q in another database.
dq() { local db=$1; shift; RP_DB=$db q "$@"; }
dq_state() { local db=$1; shift; RP_DB=$db q_state "$@"; }
listing() { psql -X -q -v ON_ERROR_STOP=1 -d "$1" -f "$CATALOG" | LC_ALL=C sort; }

# compare A B LABEL_A LABEL_B: print, as TAP diagnostics, every line of the
# two listings that only one side has; returns 1 if there is any.
compare() {
	local a=$RP_TMP/catalog.$1 b=$RP_TMP/catalog.$2
	listing "$1" >"$a"; listing "$2" >"$b"
	if [ ! -s "$a" ] || [ ! -s "$b" ]; then diag "empty catalog listing for $1 or $2"; return 1; fi
	local only_a only_b
	only_a=$(LC_ALL=C comm -23 "$a" "$b") only_b=$(LC_ALL=C comm -13 "$a" "$b")
	[ -z "$only_a" ] && [ -z "$only_b" ] && return 0
	diag "The catalog of $3 differs from $4."
	if [ -n "$only_b" ]; then
		diag "Only in $4 (missing from $3: create or replace it in the upgrade script):"
		printf '%s\n' "$only_b" | sed 's/^/#     /'
	fi
	if [ -n "$only_a" ]; then
		diag "Only in $3 (the upgrade script leaves or makes it different):"
		printf '%s\n' "$only_a" | sed 's/^/#     /'
	fi
	diag "Fix: the upgrade script to $CUR (src/sql/upgrade/) must create, replace, alter or drop each object above as src/sql/*.sql define it."
	return 1
}

# ---- 1.0, on the current library -----------------------------------------
createdb "$OLD" && createdb "$MID" && createdb "$NEW" && createdb "$BROKEN"
is "$(dq_state $OLD "CREATE EXTENSION redis_primitives VERSION '1.0'")" "OK" \
	"CREATE EXTENSION ... VERSION '1.0' against the $CUR library (every C symbol 1.0 names resolves)"
is "$(dq $OLD "SELECT extversion FROM pg_extension WHERE extname = 'redis_primitives'")" "1.0" "the database is at 1.0"

# Every 1.0 function, called with its 1.0 arguments, before the update.
calls=("SELECT redis_version IS NOT NULL FROM rp_ping()"
	"SELECT (rp_acquire('upg-a', 60000)).fence > 0"
	"SELECT (rp_lock_info('upg-a')).held"
	"SELECT (rp_extend(l, 60000)).fence = l.fence FROM rp_leases() l WHERE name = 'upg-a'"
	"SELECT rp_release(l) FROM rp_leases() l WHERE name = 'upg-a'"
	"SELECT (rp_acquire_xact('upg-x', 60000, 0, 0, true)).fence > 0"
	"SELECT (rp_acquire('upg-b', 60000, 0, 0)) IS NOT NULL"
	"SELECT rp_release('upg-b')"
	"SELECT rp_release_all() = 0"
	"SELECT rp_ratelimit('upg-r', 2, 60000)"
	"SELECT (rp_ratelimit_consume('upg-r', 2, 60000)).allowed"
	"SELECT (rp_ratelimit_peek('upg-r', 2, 60000, 1, 'sliding_log')).remaining = 0"
	"SELECT rp_ratelimit_reset('upg-r')"
	"SELECT rp_campaign('upg-e', 'n1', 60000) > 0"
	"SELECT rp_is_leader('upg-e', 'n1')"
	"SELECT (rp_leader('upg-e')).node_id = 'n1'"
	"SELECT rp_resign('upg-e', 'n1')"
	"SELECT rp_key_slot('upg') BETWEEN 0 AND 16383"
	"SELECT count(*) >= 0 FROM rp_elections()")
out=$(dq $OLD "${calls[@]}" 2>&1 | tr '\n' ' ')
is "$out" "$(printf 't %.0s' "${calls[@]}")" \
	"all ${#calls[@]} calls of 1.0 lock, rate-limit and election functions work on the $CUR library before the update"

# Data a 1.0 user has: store rows, a guarded table, a lease held across the
# update (by the session that runs it).
dq $OLD "SELECT rp_fenced_write('job', '{\"a\": 1}', 5), rp_fenced_write('other', '[2]', 9)" >/dev/null
dq $OLD "CREATE TABLE account (id int PRIMARY KEY, balance int, fence_token bigint)" \
	"CREATE TRIGGER account_fence BEFORE INSERT OR UPDATE ON account
	   FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token')" \
	"INSERT INTO account VALUES (1, 100, 7)"
is "$(dq_state $OLD "UPDATE account SET balance = 0, fence_token = 6")" "RP001" "1.0: the guard refuses a stale token"

# ---- the update ----------------------------------------------------------
out=$(dq $OLD "SELECT (rp_acquire('upg-held', 60000)).fence > 0" \
	"ALTER EXTENSION redis_primitives UPDATE" \
	"SELECT extversion FROM pg_extension WHERE extname = 'redis_primitives'" \
	"SELECT (rp_extend(l, 60000)).fence = l.fence FROM rp_leases() l WHERE name = 'upg-held'" \
	"SELECT rp_release('upg-held')" 2>&1)
is "$(echo "$out" | tr '\n' ' ')" "t $CUR t t " \
	"ALTER EXTENSION UPDATE reaches $CUR; a lease held across it still extends and releases"
is "$(redis-cli -p "$REDIS_PORT" exists "$(key upg-held lock)")" "0" \
	"and the released lease is gone from Redis"

is "$(dq_state $NEW "CREATE EXTENSION redis_primitives")" "OK" "a fresh CREATE EXTENSION installs $CUR"
is "$(dq $NEW "SELECT extversion FROM pg_extension WHERE extname = 'redis_primitives'")" "$CUR" "the fresh database is at $CUR"
n=$(listing "$NEW" | wc -l)
cmp_ok "$n" -gt 150 "the catalog listing covers the extension ($n lines)"
compare "$OLD" "$NEW" "the 1.0 database after ALTER EXTENSION UPDATE" "a fresh $CUR install"
ok $? "the updated 1.0 catalog equals a fresh $CUR install, line for line"

# ---- 1.1, as shipped, to the current version ------------------------------
is "$(dq_state $MID "CREATE EXTENSION redis_primitives VERSION '1.1'")" "OK" \
	"CREATE EXTENSION ... VERSION '1.1' against the $CUR library"
# What a DBA did to 1.1's functions survives the update: a role granted
# rp_fence_check (whose rows gain a column in 1.2) and a view over it.
q "CREATE ROLE rp_upg_monitor" >/dev/null
dq $MID "GRANT EXECUTE ON FUNCTION rp_fence_check(regclass), rp_fence_floor(regclass) TO rp_upg_monitor" \
	"CREATE VIEW store_guard_problems AS SELECT trigger_name, problem FROM rp_fence_check('rp_fenced_store')" >/dev/null
out=$(dq $MID "SELECT (rp_acquire('upg-mid', 60000)).fence > 0" \
	"SELECT (rp_semaphore_acquire('upg-sem', 2, 60000)).fence > 0" \
	"ALTER EXTENSION redis_primitives UPDATE" \
	"SELECT extversion FROM pg_extension WHERE extname = 'redis_primitives'" \
	"SELECT rp_release('upg-mid')" \
	"SELECT rp_release_all()" 2>&1)
is "$(echo "$out" | tr '\n' ' ')" "t t $CUR t 1 " \
	"1.1 -> $CUR: a lock and a permit held across the update still release"
is "$(redis-cli -p "$REDIS_PORT" exists "$(key upg-mid lock)")" "0" \
	"and the released 1.1 lease is gone from Redis"
is "$(dq $MID "SELECT has_function_privilege('rp_upg_monitor', 'rp_fence_check(regclass)', 'EXECUTE'),
                      has_function_privilege('rp_upg_monitor', 'rp_fence_floor(regclass)', 'EXECUTE'),
                      (SELECT count(*) FROM store_guard_problems),
                      (SELECT count(*) FROM rp_fence_check('rp_fenced_store') WHERE relation IS NOT NULL)")" "t|t|0|0" \
	"1.1 -> $CUR: the role granted rp_fence_check keeps it, and the view over it still reads it"
dq $MID "DROP VIEW store_guard_problems" "REVOKE ALL ON FUNCTION rp_fence_check(regclass), rp_fence_floor(regclass) FROM rp_upg_monitor" >/dev/null
compare "$MID" "$NEW" "the 1.1 database after ALTER EXTENSION UPDATE" "a fresh $CUR install"
ok $? "the updated 1.1 catalog equals a fresh $CUR install, line for line"

# ---- old data and functions after the update -----------------------------
is "$(dq $OLD "SELECT value::text || ' ' || fence FROM rp_fenced_read('job')")" '{"a": 1} 5' "store rows survive the update"
is "$(dq $OLD "SELECT rp_fenced_write('job', '{\"a\": 0}', 4)")" "f" "the store still refuses a stale token"
is "$(dq $OLD "SELECT rp_fenced_write('job', '{\"a\": 2}', 6)")" "t" "and accepts a newer one"
is "$(dq_state $OLD "UPDATE account SET balance = 0, fence_token = 6")" "RP001" "the 1.0 user table's guard still refuses a stale token"
is "$(dq_state $OLD "UPDATE account SET balance = 50, fence_token = 8")" "OK" "and accepts a newer one"
is "$(dq $OLD "SELECT balance || ' ' || fence_token FROM account")" "50 8" "the guarded row holds the accepted write"
is "$(dq $OLD "SELECT rp_fence_floor('account')")" "8" "rp_fence_floor reads the guarded table"
dq $OLD "SELECT rp_ratelimit_reset('upg-r2')" >/dev/null
is "$(dq $OLD "SELECT rp_ratelimit('upg-r2', 1, 60000), rp_ratelimit('upg-r2', 1, 60000)")" "t|f" \
	"the rate limiter works after the update"
is "$(dq $OLD "SELECT extconfig::regclass[]::text FROM pg_extension WHERE extname = 'redis_primitives'")" "{rp_fenced_store}" \
	"after the update pg_dump dumps the store (pg_extension_config_dump)"

# ---- the comparison sees what an upgrade script forgets ------------------
# As if the upgrade script had missed rp_ping() and made rp_release_all()
# STABLE: a comparison of names alone (\dx+) misses the second.
dq $BROKEN "CREATE EXTENSION redis_primitives VERSION '1.0'" "ALTER EXTENSION redis_primitives UPDATE" \
	"ALTER EXTENSION redis_primitives DROP FUNCTION rp_ping()" "DROP FUNCTION rp_ping()" \
	"ALTER FUNCTION rp_release_all() STABLE"
msg=$(compare "$BROKEN" "$NEW" "the broken update" "a fresh $CUR install")
rc=$?
ok $([ $rc -ne 0 ]; echo $?) "the comparison fails for an upgrade that lost a function and changed another"
printf '%s\n' "$msg" | head -30
idents=$(printf '%s\n' "$msg" | sed -n 's/^#     \(.*\) | .*$/\1/p' | sort -u | tr '\n' ';')
is "$idents" "function rp_ping();function rp_release_all();" "it names exactly the two objects, and nothing else"
printf '%s\n' "$msg" | grep -q '^#     function rp_ping() | member$'
ok $? "the missing function is listed as only in the fresh install"
printf '%s\n' "$msg" | grep -q '^#     function rp_release_all() | definition [0-9]*:  STABLE'
ok $? "the changed attribute is shown as the definition line that differs (STABLE)"
naive() { psql -X -At -d "$1" -c "SELECT pg_describe_object(classid, objid, objsubid) FROM pg_depend
	WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'redis_primitives') AND deptype = 'e'
	  AND pg_describe_object(classid, objid, objsubid) <> 'function rp_ping()' ORDER BY 1"; }
is "$(naive $BROKEN | md5sum)" "$(naive $NEW | md5sum)" \
	"naive twin: a comparison of member names (\\dx+) cannot see the changed volatility"

finish
