#!/usr/bin/env bash
# test/scenarios/fuzz_bad_input.sh -- bad input, tried systematically
# (docs/resources.md; the generator is test/fuzz/fuzz.sql).
#
# The failure: one strange argument -- a NULL where C expected a value, a
# 1 MB name, INT64_MIN, a lease record with a forged field -- crashes the
# backend (and PostgreSQL restarts every session), hangs it, or comes back as
# an "internal error" or as a NULL that the caller reads as "not acquired".
#
# Every function of the extension, read from pg_depend (a new one is fuzzed
# as soon as it exists), is called by test/fuzz/fuzz.sql with every pool value
# in every position, with trailing defaults omitted, with all NULLs, and with
# random combinations; each call in its own subtransaction, under
# lock_timeout and command_timeout, each batch under statement_timeout.  The
# trigger is fuzzed through tables declaring it right and wrong.  Then the
# same in a SQL_ASCII database, the one place where a text argument can carry
# invalid UTF-8 (in a UTF8 database, E'\xff' and convert_from fail before any
# function is called).
#
# Asserted: the postmaster never restarted and every process is still there;
# every failure is a documented SQLSTATE
# (never XX000, never a connection or cancel error); a call with exactly one
# bad argument raises exactly 22004 (NULL) or 22023 (out of range, empty);
# a call with any bad argument never returns a result (so NULL never means
# both "bad input" and "not acquired"); and normal calls work afterwards.
# That each call returned within a bound: test/timing/fuzz_bad_input.sh.
#
# RP_FUZZ_LONG=1: 5000 random combinations per function (100,000+ calls).
# RP_FUZZ_SEED: the random seed (default fixed; the long run picks one and
# prints it).
source "$(dirname "$0")/tap.bash"
FUZZ_SQL="$(cd "$(dirname "$0")/../fuzz" && pwd)/fuzz.sql"
plan 16

if [ "${RP_FUZZ_LONG:-0}" = 1 ]; then
	NRANDOM=5000 MIN_TOTAL=100000 SEED=${RP_FUZZ_SEED:-0.$RANDOM}
else
	NRANDOM=120 MIN_TOTAL=3000 SEED=${RP_FUZZ_SEED:-0.42}
fi
# A call is bounded by lock_timeout (100 ms) and, for each Redis round trip,
# by connect_timeout and command_timeout, set to 30 s for the batches: a
# call hung on Redis ends there (08006, not an allowed state).
diag "random combinations per function: $NRANDOM, seed $SEED"

# Every SQLSTATE a bad argument may legitimately produce, and why.
#   22004 22023  ours: NULL where a value is required, out of range / empty
#   55P03        lock_timeout ended an rp_acquire wait (set to 100 ms here)
#   42704        rp_is_leader(name) of an election this server does not run
#   54000        rp_fenced_write: a resource name too long for the btree index
#   RP001        the fence trigger refusing a stale token ('error' mode)
#   22003        smallint out of range: PostgreSQL's cast, before the trigger
#   39P01 42703 42804  the trigger declared wrongly (protocol, column, type)
#   38000        only "fence counter exhausted", after floor = INT64_MAX - 1
#   42P01        rp_fence_check, rp_fence_floor, rp_lock_name of a relation
#                that does not exist (OID 0)
ALLOWED="22004 22023 55P03 42704 54000 RP001 22003 39P01 42703 42804 38000 42P01"

psqlf() { psql -X -At -q -v ON_ERROR_STOP=1 "$@"; }

pm_start=$(q "SELECT pg_postmaster_start_time()")
# The server's own processes (checkpointer, writers, launchers): a
# crash restarts every one.  Not sessions or autovacuum workers, which end
# on their own (one caught here on a busy server would read as lost).
procs_before=$(q "SELECT string_agg(pid::text, ' ' ORDER BY pid) FROM pg_stat_activity
                  WHERE backend_type NOT IN ('client backend', 'autovacuum worker', 'parallel worker')")

q "DROP SCHEMA IF EXISTS rp_fuzz CASCADE" >/dev/null 2>&1
psqlf -d "$RP_DB" -f "$FUZZ_SQL" >/dev/null
# rp_fenced_store is shared with other tests: remember what was there.
q "CREATE TABLE rp_fuzz.store_before AS SELECT resource FROM rp_fenced_store" >/dev/null

# (Not the event trigger's function, which nothing can call: it runs on
# every CREATE TRIGGER, the guard tables' of fuzz.sql included.)
funcs=$(q "SELECT p.oid::regprocedure FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
           WHERE d.classid = 'pg_proc'::regclass AND d.refclassid = 'pg_extension'::regclass
             AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'redis_primitives')
             AND d.deptype = 'e' AND p.prorettype <> 'event_trigger'::regtype ORDER BY 1::text")
nfuncs=$(echo "$funcs" | grep -c .)
cmp_ok "$nfuncs" -ge 20 "the extension's functions, from pg_depend: $nfuncs"

# One psql per function, so a crash would name the function that caused it.
# Only errors reach the output (a call count is read from it): warnings such
# as rp_release(name)'s "holds no lease" are expected here.
# A batch is one transaction: when rp_acquire_xact(..., verify_at_commit =>
# true) took a name whose lease expired and was taken again in that same
# transaction, COMMIT refuses with RP002 (docs/lock.md), and that is the
# documented answer, not a lost backend: such a batch counts as run to its end.
run_batch() {  # db sql -> prints psql's output; status of psql
	local out rc
	out=$(timeout 600 psql -X -At -q -v ON_ERROR_STOP=1 -d "$1" \
		-c "SET client_min_messages = error" -c "SET lock_timeout = '100ms'" \
		-c "SET redis_primitives.connect_timeout = '30s'" -c "SET redis_primitives.command_timeout = '30s'" \
		-c "SET statement_timeout = '300s'" -c "$2" 2>&1)
	rc=$?
	if [ $rc -ne 0 ] && [ "$(grep -c '^ERROR:' <<<"$out")" = 1 ] &&
		grep -q '^ERROR:  lease on ".*" was lost before commit$' <<<"$out"; then
		echo "# batch refused at COMMIT with RP002 (a verified lease lost and re-taken in it): documented" >&2
		echo 0; return 0
	fi
	echo "$out"; return $rc
}
failed_batches=0 started=$(now_ms)
while IFS= read -r fn; do
	[ -n "$fn" ] || continue
	if [ "$fn" = "rp_fence_guard()" ]; then
		sql="SELECT rp_fuzz.run_trigger($NRANDOM, $SEED)"
	else
		sql="SELECT rp_fuzz.run('$fn'::regprocedure, $NRANDOM, $SEED)"
	fi
	if ! out=$(run_batch "$RP_DB" "$sql"); then
		failed_batches=$((failed_batches + 1)); diag "batch for $fn failed: $out"
	fi
	# Redis memory stays bounded (1 MB keys, 100000-member logs): start clean.
	redis flushall >/dev/null
done <<<"$funcs"

# Invalid UTF-8 can reach a text argument only in a SQL_ASCII database.
q "DROP DATABASE IF EXISTS rp_fuzz_ascii" >/dev/null 2>&1
q "CREATE DATABASE rp_fuzz_ascii ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0" >/dev/null
psqlf -d rp_fuzz_ascii -c "CREATE EXTENSION redis_primitives" -f "$FUZZ_SQL" \
	-c "INSERT INTO rp_fuzz.vals VALUES ('text', 'E''\\xff'''), ('text', 'E''\\xc3\\x28'''),
	      ('text', 'E''\\xed\\xa0\\x80'''), ('text', 'E''\\xf4\\x90\\x80\\x80'''),
	      ('text', 'E''\\xc0\\xaf'''), ('text', 'E''ok\\xffname{\\xfe}'''),
	      ('text', 'repeat(E''\\xff'', 1048577)')" \
	-c "DELETE FROM rp_fuzz.vals WHERE expr ~ '\\\\u|chr\\(1114111\\)'" >/dev/null
ascii_calls=0
while IFS= read -r fn; do
	[ -n "$fn" ] || continue
	[ "$fn" = "rp_fence_guard()" ] && continue
	case $fn in *text*) ;; *) continue ;; esac
	if ! out=$(run_batch rp_fuzz_ascii "SELECT rp_fuzz.run('$fn'::regprocedure, $((NRANDOM / 2)), $SEED)"); then
		failed_batches=$((failed_batches + 1)); diag "SQL_ASCII batch for $fn failed: $out"
	else
		ascii_calls=$((ascii_calls + out))
	fi
	redis flushall >/dev/null
done <<<"$funcs"
invalid_utf8=$(psqlf -d rp_fuzz_ascii -c "SELECT count(*) FROM rp_fuzz.log WHERE args ~ 'xff|xc3|xed|xf4|xc0'")
elapsed=$(( $(now_ms) - started ))

is "$failed_batches" "0" "every batch ran to its end (no backend lost, no timeout)"
is "$(q "SELECT pg_postmaster_start_time()")" "$pm_start" "the postmaster never restarted"
missing=""
for p in $procs_before; do
	[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE pid = $p")" = 1 ] || missing="$missing $p"
done
is "$missing" "" "every process that was there before is still there"

# Merge the SQL_ASCII log into the main one for the assertions; its text
# (which may hold invalid UTF-8) is carried backslash-escaped.
esc() { echo "encode(convert_to($1, 'SQL_ASCII'), 'escape')"; }
psqlf -d rp_fuzz_ascii -c "COPY (SELECT fn::text, mode, pos, $(esc args), sqlstate, $(esc message), result_null, ms, expect FROM rp_fuzz.log) TO STDOUT (FORMAT csv)" |
	psqlf -d "$RP_DB" -c "CREATE TEMP TABLE a (fn text, mode text, pos int, args text, sqlstate text, message text, result_null bool, ms float8, expect text)" \
		-c "COPY a FROM STDIN (FORMAT csv)" \
		-c "INSERT INTO rp_fuzz.log (fn, mode, pos, args, sqlstate, message, result_null, ms, expect)
		    SELECT fn::regprocedure, 'ascii-' || mode, pos, args, sqlstate, message, result_null, ms, expect FROM a"
merged=$?
q "DROP DATABASE rp_fuzz_ascii" >/dev/null

total=$(q "SELECT count(*) FROM rp_fuzz.log")
cmp_ok "$total" -ge "$MIN_TOTAL" "calls tried: $total in $((elapsed / 1000)) s"
is "$merged/$(q "SELECT count(*) FROM rp_fuzz.log WHERE mode LIKE 'ascii-%'")" "0/$ascii_calls" \
	"calls in the SQL_ASCII database: $ascii_calls, $invalid_utf8 with invalid UTF-8, all checked below"
cmp_ok "$invalid_utf8" -gt 0 "invalid UTF-8 reached the functions"
uncovered=$(echo "$funcs" | while IFS= read -r fn; do
	[ "$(q "SELECT count(*) >= 50 FROM rp_fuzz.log WHERE fn = '$fn'::regprocedure")" = t ] || printf '%s ' "$fn"; done)
is "$uncovered" "" "every function was called at least 50 times"

diag "SQLSTATE histogram (ok = returned a value):"
q "SELECT rpad(coalesce(sqlstate, 'ok'), 6) || lpad(count(*)::text, 8) FROM rp_fuzz.log GROUP BY sqlstate ORDER BY count(*) DESC" |
	while IFS= read -r l; do diag "  $l"; done
diag "calls per function:"
q "SELECT rpad(fn::text, 55) || lpad(count(*)::text, 7) FROM rp_fuzz.log GROUP BY fn ORDER BY fn::text" |
	while IFS= read -r l; do diag "  $l"; done

show() {  # sql [limit]: print offending rows as diagnostics
	q "$1 LIMIT ${2:-20}" | while IFS= read -r l; do diag "  $l"; done
}
is "$(q "SELECT count(*) FROM rp_fuzz.log WHERE sqlstate = 'XX000'")" "0" "no internal error (XX000)"
show "SELECT fn, args, message FROM rp_fuzz.log WHERE sqlstate = 'XX000'"
bad_states="SELECT count(*) FROM rp_fuzz.log WHERE sqlstate IS NOT NULL AND (
    NOT sqlstate = ANY (string_to_array('$ALLOWED', ' '))
    OR (sqlstate = '38000' AND message !~ 'fence counter exhausted'))"
is "$(q "$bad_states")" "0" "every failure is a documented SQLSTATE (no 08xxx, 57014, XX000, 38000 from a script)"
show "SELECT fn, sqlstate, message, left(args, 120) FROM rp_fuzz.log WHERE sqlstate IS NOT NULL AND (
    NOT sqlstate = ANY (string_to_array('$ALLOWED', ' ')) OR (sqlstate = '38000' AND message !~ 'fence counter exhausted'))"
is "$(q "SELECT count(*) FROM rp_fuzz.log WHERE expect IN ('22004', '22023', '42804') AND sqlstate IS DISTINCT FROM expect")" "0" \
	"one bad argument: exactly 22004 for a NULL, 22023 for out of range or empty"
show "SELECT fn, mode, expect, sqlstate, left(args, 120) FROM rp_fuzz.log WHERE expect IN ('22004', '22023', '42804') AND sqlstate IS DISTINCT FROM expect"
is "$(q "SELECT count(*) FROM rp_fuzz.log WHERE expect = 'error' AND sqlstate IS NULL")" "0" \
	"any bad argument: an error, never a result (NULL never also means 'not acquired')"
show "SELECT fn, left(args, 150) FROM rp_fuzz.log WHERE expect = 'error' AND sqlstate IS NULL"
diag "the slowest calls (ms, function, arguments):"
show "SELECT round(ms), fn, left(args, 100) FROM rp_fuzz.log ORDER BY ms DESC" 3

# Normal calls work afterwards, in a new session and in the same one.
is "$(q "SELECT (rp_acquire('fz-after', 10000)).fence IS NOT NULL, rp_release('fz-after')" \
	"SELECT rp_ratelimit('fz-after', 5, 1000, 1, 'sliding_log')" \
	"SELECT rp_campaign('fz-after', 'n1', 10000) IS NOT NULL, rp_resign('fz-after', 'n1')" \
	"SELECT rp_fenced_write('fz-after', '{\"ok\":true}', 1)" "SELECT (rp_fenced_read('fz-after')).fence" \
	"SELECT (rp_ping()).redis_version IS NOT NULL" | tr '\n' ' ')" "t|t t t|t t 1 t " \
	"acquire, release, ratelimit, campaign, resign, fenced write and ping work afterwards"
is "$(q "SELECT count(*) FROM rp_leases()")" "0" "a new session believes it holds nothing"

# An empty resource is judged by its bytes, not by the caller's collation:
# under a nondeterministic one (ICU, ignorable characters), a zero-width
# space equals '', and the store must still take it (as rp_acquire takes
# such a name), while '' itself stays refused whatever the collation.
if [ "$(q_state "CREATE COLLATION IF NOT EXISTS rp_fz_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)")" = OK ]; then
	coll=rp_fz_ci
else
	coll='"C"'
	diag "nondeterministic collation left out: this PostgreSQL was built without ICU"
fi
is "$(q "SELECT rp_fenced_write(U&'\200B' COLLATE $coll, '{}', 1)" "SELECT octet_length(resource) FROM rp_fenced_store WHERE resource = U&'\200B' COLLATE \"C\"" | tr '\n' ' ')" "t 3 " \
	"a zero-width space is a resource under collation $coll: written, 3 bytes stored"
is "$(q_state "SELECT rp_fenced_write('' COLLATE $coll, '{}', 1)") $(q "SELECT count(*) FROM rp_fenced_store WHERE octet_length(resource) = 0")" "22023 0" \
	"'' under collation $coll: 22023, nothing stored"
q "DROP COLLATION IF EXISTS rp_fz_ci" >/dev/null

q "DELETE FROM rp_fenced_store s WHERE NOT EXISTS (SELECT FROM rp_fuzz.store_before b WHERE b.resource = s.resource)" >/dev/null
q "DROP SCHEMA rp_fuzz CASCADE" >/dev/null 2>&1
redis flushall >/dev/null
finish
