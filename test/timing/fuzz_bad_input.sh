#!/usr/bin/env bash
# test/timing/fuzz_bad_input.sh -- no bad argument makes a call slow.
# test/scenarios/fuzz_bad_input.sh asserts what every bad argument does
# (a documented SQLSTATE, never a crash, a hang ended by a timeout, or a
# result); this file bounds how long any one call takes: every function of
# the extension with every pool value in every position (the 1 MB names
# among them) and a few random combinations (test/fuzz/fuzz.sql times each
# call inside the server).  A call is bounded by lock_timeout (100 ms) and,
# for each Redis round trip, by connect_timeout and command_timeout (30 s):
# a call that waited past lock_timeout, or on a hung Redis, fails the bound.
source "$(dirname "$0")/../scenarios/tap.bash"
FUZZ_SQL="$(cd "$(dirname "$0")/../fuzz" && pwd)/fuzz.sql"
plan 1
NRANDOM=10 SEED=0.42 MAX_CALL_MS=20000

q "DROP SCHEMA IF EXISTS rp_fuzz CASCADE" >/dev/null 2>&1
psql -X -At -q -v ON_ERROR_STOP=1 -d "$RP_DB" -f "$FUZZ_SQL" >/dev/null
q "CREATE TABLE rp_fuzz.store_before AS SELECT resource FROM rp_fenced_store" >/dev/null
funcs=$(q "SELECT p.oid::regprocedure FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
           WHERE d.classid = 'pg_proc'::regclass AND d.refclassid = 'pg_extension'::regclass
             AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'redis_primitives')
             AND d.deptype = 'e' ORDER BY 1::text")
while IFS= read -r fn; do
	[ -n "$fn" ] || continue
	if [ "$fn" = "rp_fence_guard()" ]; then
		sql="SELECT rp_fuzz.run_trigger($NRANDOM, $SEED)"
	else
		sql="SELECT rp_fuzz.run('$fn'::regprocedure, $NRANDOM, $SEED)"
	fi
	# as fuzz_bad_input.sh's batches, which assert how each ends
	timeout 600 psql -X -At -q -d "$RP_DB" -c "SET client_min_messages = error" -c "SET lock_timeout = '100ms'" \
		-c "SET redis_primitives.connect_timeout = '30s'" -c "SET redis_primitives.command_timeout = '30s'" \
		-c "SET statement_timeout = '300s'" -c "$sql" >/dev/null 2>&1
	redis flushall >/dev/null
done <<<"$funcs"
n=$(q "SELECT count(*) FROM rp_fuzz.log")
max_ms=$(q "SELECT round(max(ms))::int FROM rp_fuzz.log")
within "$([ "${n:-0}" -gt 500 ] && echo "calls logged")" "calls logged" "$max_ms" "$MAX_CALL_MS" \
	"the slowest of $n calls with bad arguments took ${max_ms:-?} ms (bounded: lock_timeout, command_timeout 30 s)"
[ -n "$max_ms" ] && [ "$max_ms" -ge "$MAX_CALL_MS" ] &&
	q "SELECT round(ms) || ' ms: ' || fn || ' ' || left(args, 100) FROM rp_fuzz.log ORDER BY ms DESC LIMIT 3" | sed 's/^/# /'

q "DELETE FROM rp_fenced_store s WHERE NOT EXISTS (SELECT FROM rp_fuzz.store_before b WHERE b.resource = s.resource)" >/dev/null
q "DROP SCHEMA rp_fuzz CASCADE" >/dev/null 2>&1
redis flushall >/dev/null
finish
