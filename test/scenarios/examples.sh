#!/usr/bin/env bash
# examples.sh -- the client examples in examples/ run against the throwaway
# servers, and what they print is checked: the three jobs (a fenced worker, a
# rate-limited API handler, a leader-only job) from node-postgres and from
# psycopg 3, and the pool traps of docs/applications.md, each shown failing
# the naive way and holding the documented way.
#
# node-postgres comes from npm: `npm ci` from the committed package-lock.json
# into a copy of examples/node under $RP_TMP (npm's cache makes repeats fast).
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 82
export PGDATABASE=$RP_DB
ex=$RP_ROOT/examples
PY=/usr/bin/python3   # Debian's, which has python3-psycopg

command -v node >/dev/null && command -v npm >/dev/null || { echo "not ok 1 - node and npm are required"; exit 1; }
mkdir -p "$RP_TMP/node"
cp "$ex"/node/package.json "$ex"/node/package-lock.json "$ex"/node/*.js "$RP_TMP/node/"
( cd "$RP_TMP/node" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error >"$RP_TMP/npm.log" 2>&1 )
ok $? "npm ci installs node-postgres from the committed package-lock.json"

# The Node and the Python programs touch different tables, keys and names:
# the two languages run side by side, each program after the other.
# run NAME CMD...: output in $RP_TMP/NAME.out, exit status in NAME.rc
run() { local n=$1; shift; "$@" >"$RP_TMP/$n.out" 2>"$RP_TMP/$n.err"; echo $? >"$RP_TMP/$n.rc"; }
( for p in worker api leader traps; do run node-$p node "$RP_TMP/node/$p.js"; done ) &
( for p in worker api leader traps; do run python-$p "$PY" "$ex/python/$p.py"; done ) &
wait
ran() {  # name: ok when it exited 0; else its stderr as diagnostics
	local rc; rc=$(cat "$RP_TMP/$1.rc" 2>/dev/null || echo 1)
	[ "$rc" -ne 0 ] && sed 's/^/# /' "$RP_TMP/$1.err"
	return "$rc"
}
v() { sed -n "s/^$2 //p" "$RP_TMP/$1.out" | head -1; }

for lang in node python; do
	# The fenced worker.
	ran $lang-worker
	ok $? "$lang worker: runs"
	a=$(v $lang-worker attempts)
	is "$(v $lang-worker deposits)" "$a" "$lang worker: every one of $a deposits got its lease within wait_ms"
	is "$(v $lang-worker balance_total)" "$a" "$lang worker: no increment lost under concurrency"
	is "$(v $lang-worker rows_fenced)" "true" "$lang worker: every row carries a fence token"
	is "$(v $lang-worker fence_is_the_lease)" "true" "$lang worker: each one-trip write landed with its own lease's fence"
	if [ $lang = node ]; then
		n=$(v $lang-worker deposit_prepared_on)
		cmp_ok "${n:-0}" -ge 1 "node worker: deposit() is a named statement, kept prepared on $n pooled connection(s)"
	else
		# psycopg prepares any statement by itself after 5 runs: look
		# after the first, where only prepare=True has prepared it.
		is "$(v $lang-worker deposit_prepared_at_first_run)" 2 \
			"python worker: deposit() is prepared from its first run (prepare=True) on both connections that ran it"
	fi
	is "$(v $lang-worker busy_deposit)" "$([ $lang = node ] && echo null || echo None)" \
		"$lang worker: a deposit on a lease held elsewhere, not waiting, returns no fence (zero rows)"
	is "$(v $lang-worker busy_deposit_string)" "$([ $lang = node ] && echo null || echo None)" \
		"$lang worker: the same as one string is refused by the guard (RP004)"
	is "$(v $lang-worker busy_balance_unchanged)" "true" "$lang worker: ... and wrote nothing; the connection works on"
	is "$(v $lang-worker stale_write)" "RP004" "$lang worker: the lock-bound guard refuses a write without a live lease (RP004)"
	# The API handler.
	ran $lang-api
	ok $? "$lang api: runs"
	u=$([ $lang = node ] && echo alice || echo carol); u2=$([ $lang = node ] && echo bob || echo dave)
	is "$(v $lang-api $u)" "200 200 200 200 200 429 429 429" "$lang api: 5 per minute, then 429"
	r=$(v $lang-api retry_after)
	ok $([ "${r:-0}" -ge 1 ] && [ "${r:-0}" -le 60 ]; echo $?) "$lang api: 429 carries Retry-After in seconds ($r)"
	is "$(v $lang-api $u2)" "200 200" "$lang api: another user has its own budget"
	is "$(v $lang-api work_done)" "$u=5 $u2=2" "$lang api: the request's work, in the limiter's statement, ran for the admitted only"
	# The leader-only job.
	ran $lang-leader
	ok $? "$lang leader: runs"
	ra=$(v $lang-leader runs_A); rb=$(v $lang-leader runs_B)
	is "$(( ${ra:-0} + ${rb:-0} ))" "9" "$lang leader: the job ran once per tick ($ra by A, $rb by B)"
	ok $([ "${ra:-0}" -ge 1 ] && [ "${rb:-0}" -ge 1 ]; echo $?) "$lang leader: A led, then B after A resigned"
	is "$(v $lang-leader both_ran)" "0" "$lang leader: never both in one tick"
	is "$(v $lang-leader epoch_advanced)" "true" "$lang leader: B's epoch is above A's"
	is "$(v $lang-leader deposed_write)" "RP001" "$lang leader: the deposed leader's late write is refused"
done

# ---- the traps, node-postgres -------------------------------------------
ran node-traps
ok $? "node traps: runs"
n=$(v node-traps pool_release_by_name_failed)
cmp_ok "${n:-0}" -gt 0 "naive: rp_release(name) through pool.query failed $n of 80 times (another backend)"
is "$(v node-traps pool_release_warnings)" "true" "... and each such release raised a WARNING the client can see"
is "$(v node-traps pool_release_by_token_failed)" "0" "rp_release(name, token) through pool.query: 0 of 80 failed"
is "$(v node-traps release_by_name_on_other_backend) $(v node-traps still_held) $(v node-traps release_by_token_on_other_backend)" \
	"false true true" "on another backend: by name false and the lock stays held; by token true"
is "$(v node-traps composite_typeof)" "string" "the lease as one value arrives as an unparsed string"
is "$(v node-traps composite_release_untyped)" "false" "naive: rp_release(\$1) with that string resolves to rp_release(text): false"
is "$(v node-traps composite_release_cast)" "true" "rp_release(\$1::rp_lease) releases"
is "$(v node-traps fence_typeof)" "string" "bigint fences arrive as strings"
is "$(v node-traps fence_string_compare)" "9<10=false" "naive: comparing them as strings orders 9 after 10"
is "$(v node-traps fence_bigint_compare)" "9<10=true" "BigInt() compares them right"
is "$(v node-traps not_acquired_rows) $(v node-traps not_acquired_token_null)" "1 true" \
	"naive: not acquired is one row (rows.length is 1) of NULLs"
is "$(v node-traps not_acquired_filtered_rows)" "0" "WHERE token IS NOT NULL turns it into zero rows"
is "$(v node-traps calls_star_expansion)" "4" "naive: SELECT (rp_acquire(...)).* calls rp_acquire once per column"
is "$(v node-traps calls_select_from)" "1" "SELECT * FROM rp_acquire(...) calls it once"
is "$(v node-traps columns_types)" "string string Date" \
	"SELECT token, fence, expires_at FROM rp_acquire(...): columns, the fence a string, expires_at a Date"
is "$(v node-traps fence_bigint_parser)" "bigint 99<100=true" \
	"int8 parsed as BigInt: fences compare right and pass back as parameters"
is "$(v node-traps fence_bigint_json)" "TypeError" "... but JSON.stringify refuses a BigInt"
is "$(v node-traps int8_parseint_exact)" "false" "naive: parseInt as the int8 parser rounds above 2^53"
is "$(v node-traps ratelimit_star_units)" "4" "naive: SELECT (rp_ratelimit_consume(...)).* consumes 4 units"
is "$(v node-traps ratelimit_from_units)" "1" "SELECT * FROM rp_ratelimit_consume(...) consumes 1"
is "$(v node-traps ratelimit_select_list_no_rows_units)" "0" \
	"naive: rp_ratelimit beside a FROM that matches no row is never called (no limit)"
is "$(v node-traps ratelimit_where_units)" "10" "naive: rp_ratelimit in WHERE is called once per row scanned"
is "$(v node-traps ratelimit_in_from_units)" "1" "rp_ratelimit in FROM, the query gated on it: called once"
is "$(v node-traps multi_statement_failed_then)" "RP004 25P02" \
	"naive: a failed BEGIN; ...; COMMIT string leaves the connection in an aborted transaction"
is "$(v node-traps multi_statement_after_rollback)" "true" "... until a ROLLBACK"
is "$(v node-traps multi_statement_implicit_failed_then)" "RP004 ok" \
	"without BEGIN/COMMIT the string is one implicit transaction: the failure leaves it clean"
is "$(v node-traps query_timeout_rejected_while_held) $(v node-traps query_timeout_error)" "true Query read timeout" \
	"naive: query_timeout rejects the waiting rp_acquire on the client"
is "$(v node-traps query_timeout_lock_taken_anyway) $(v node-traps query_timeout_waiter_backend_alive)" "true true" \
	"naive: ... yet the backend went on waiting, took the lease after the holder's (a newer fence) and holds it"
is "$(v node-traps released_when_connection_closed)" "true" "... until the connection closes"
is "$(v node-traps statement_timeout_holder) $(v node-traps statement_timeout_code)" "true 57014" \
	"statement_timeout ends the wait on the server (57014)"
is "$(v node-traps statement_timeout_ended_while_held)" "true" "... at the timeout, while the holder still held the lock"
is "$(v node-traps statement_timeout_lock_taken) $(v node-traps statement_timeout_session_leases)" "false 0" \
	"... and nothing was taken behind the client's back"

# ---- the traps, psycopg -----------------------------------------------------
ran python-traps
ok $? "python traps: runs"
is "$(v python-traps release_by_name_on_other_connection) $(v python-traps still_held) $(v python-traps release_by_token_on_other_connection)" \
	"false true true" "psycopg: on another connection, by name false (still held), by token true"
is "$(v python-traps composite_type)" "str" "psycopg: the lease as one value is a str"
is "$(v python-traps composite_registered_fence_type) $(v python-traps composite_release_registered)" "int true" \
	"psycopg: with register_composite it is an object (fence an int) that passes back as rp_lease"
is "$(v python-traps not_acquired_rows) $(v python-traps not_acquired_token_none) $(v python-traps not_acquired_filtered_rows)" \
	"1 true 0" "psycopg: not acquired is one row of NULLs; WHERE token IS NOT NULL gives zero rows"
is "$(v python-traps statement_timeout_code) $(v python-traps statement_timeout_ended_while_held) $(v python-traps statement_timeout_lock_taken)" \
	"57014 true false" "psycopg: statement_timeout ends the wait and nothing is taken"
finish
