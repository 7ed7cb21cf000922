#!/usr/bin/env bash
# rp_stats counts every call exactly, from every backend, by outcome and by
# SQLSTATE class, without a lock that serializes backends.
#
# The naive twin is the instrumentation a user writes in SQL: a wrapper that
# logs each call into a table.  Its row is written in the caller's
# transaction, so every call that fails (Redis down, a cancel, bad input)
# rolls its own record back: it reports no errors at all, which is exactly
# when an operator needs the count.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 25

# snap: every counter of rp_stats into S[primitive.column] (one query).
declare -A S
COLS="calls ok refused errors errors_08 errors_53 errors_57 errors_rp errors_other timeouts reconnects noscript"
snap() {
	local row p v i cols
	read -ra cols <<<"$COLS"
	S=()
	while IFS='|' read -ra row; do
		p=${row[0]}
		for i in "${!cols[@]}"; do S[$p.${cols[$i]}]=${row[$((i + 1))]}; done
	done < <(q "SELECT primitive, ${COLS// /, } FROM rp_stats")
}
sql_stderr() {  # statements...: run in one session, continue past errors; print SQLSTATEs and results
	local args=() s
	for s in "$@"; do args+=(-c "$s"); done
	psql -X -At -q -d "$RP_DB" -c '\set VERBOSITY sqlstate' "${args[@]}" 2>&1 |
		sed 's/^psql:[^ ]* //; s/^ERROR: *//' | tr '\n' ' '
}

q "SELECT rp_stats_reset()" >/dev/null
is "$(q "SELECT sum(calls) FROM rp_stats WHERE primitive <> 'elector_renew'")" "0" \
	"after rp_stats_reset every counter reads zero"

# ---- exact under 8 concurrent backends ----------------------------------
# 8 pgbench clients over 4 names: acquires collide (NULL), releases of a
# name not held return false.  Redis' fence counters count the successful
# acquires independently of us; the sliding log admits exactly 100.  Each
# transaction also reads rp_locks while the others write it: a torn row
# (a name, fence or pid half written) fails the transaction.
T=100 N=$((8 * 100))
redis DEL "rp:{pb-1}:fence" "rp:{pb-2}:fence" "rp:{pb-3}:fence" "rp:{pb-4}:fence" \
	"rp:{pb-rl}:rl:sliding_log" >/dev/null
cat >"$RP_TMP/obs_pb.sql" <<'SQL'
\set n random(1, 4)
SELECT rp_acquire('pb-' || :n, 60000);
SELECT rp_release('pb-' || :n);
SELECT rp_ratelimit('pb-rl', 100, 600000);
SELECT 1 / (count(*) = 0)::int FROM rp_locks WHERE name !~ '^pb-[1-4]$' OR fence <= 0 OR pid <= 0;
SQL
pgbench -n -c 8 -j 2 -t $T -f "$RP_TMP/obs_pb.sql" "$RP_DB" >"$RP_TMP/obs_pb.out" 2>&1
ok $? "pgbench: 8 clients x $T transactions of acquire, release, rp_ratelimit, and an rp_locks read that never sees a torn row"
is "$(q "SELECT count(*) FROM rp_locks")|$(q "SELECT locks_not_shown FROM rp_stats_info")" "0|0" \
	"afterwards rp_locks is empty again"
fences=0
for i in 1 2 3 4; do v=$(redis GET "rp:{pb-$i}:fence"); fences=$((fences + ${v:-0})); done
snap
is "${S[acquire.calls]} ${S[release.calls]} ${S[ratelimit_sliding_log.calls]}" "$N $N $N" \
	"acquire, release, ratelimit_sliding_log: calls grew by exactly 8 x $T each"
is "${S[acquire.ok]}" "$fences" "acquire: ok equals the fence increments Redis made ($fences)"
is "$((S[acquire.ok] + S[acquire.refused])) ${S[acquire.errors]}" "$N 0" "acquire: ok + refused = calls, no errors"
cmp_ok "${S[acquire.refused]}" -gt 0 "collisions were counted as refused (${S[acquire.refused]})"
is "${S[release.ok]} ${S[release.refused]}" "${S[acquire.ok]} $((N - S[acquire.ok]))" \
	"release: each acquired lease released once (ok), releases of a name not held refused"
is "${S[ratelimit_sliding_log.ok]} ${S[ratelimit_sliding_log.refused]}" "100 $((N - 100))" \
	"rp_ratelimit(limit 100): exactly 100 admitted, the rest counted as refused"

# ---- errors by SQLSTATE class, through the naive wrapper too ------------
q "SELECT rp_stats_reset()" "SET client_min_messages = warning" \
	"CREATE TABLE IF NOT EXISTS obs_naive (outcome text)" "TRUNCATE obs_naive" \
	"CREATE OR REPLACE FUNCTION obs_naive_acquire(n text, ttl bigint, w bigint) RETURNS rp_lease
	 LANGUAGE plpgsql AS \$\$
	 DECLARE l rp_lease;
	 BEGIN
	   l := rp_acquire(n, ttl, w);
	   INSERT INTO obs_naive VALUES (CASE WHEN l IS NULL THEN 'refused' ELSE 'ok' END);
	   RETURN l;
	 EXCEPTION WHEN OTHERS THEN
	   INSERT INTO obs_naive VALUES ('error');
	   RAISE;
	 END \$\$" >/dev/null
redis SET "rp:{e57}:lock" someone-else PX 60000 >/dev/null
out=$(sql_stderr "SET redis_primitives.port = $(rp_free_port)" \
	"SELECT obs_naive_acquire('e08', 1000, 0)" "SELECT obs_naive_acquire('e08', 1000, 0)" \
	"SELECT obs_naive_acquire('e08', 1000, 0)" "RESET redis_primitives.port" \
	"SET statement_timeout = 300" "SELECT obs_naive_acquire('e57', 1000, 5000)" "RESET statement_timeout" \
	"SELECT rp_acquire('x', 0)" "SELECT rp_extend(NULL, 10)" \
	"SET redis_primitives.fence_replicas = 1" "SET redis_primitives.fence_replicas_timeout = 50" \
	"SELECT rp_acquire('erp', 1000)")
is "$out" "08001 08001 08001 57014 22023 22004 RP003 " \
	"Redis unreachable x3 (08001), statement_timeout in a wait (57014), bad input (22023, 22004), RP003"
snap
is "${S[acquire.errors_08]} ${S[acquire.errors_57]} ${S[acquire.errors_other]} ${S[acquire.errors_rp]} ${S[extend.errors_other]}" \
	"3 1 1 1 1" "rp_stats: three 08, one 57, one other, one RP error for acquire; one other for extend"
is "$(q "SELECT count(*) FROM obs_naive")" "0" \
	"the naive SQL wrapper recorded none of the five failed acquires: its rows rolled back with them"
redis DEL "rp:{e57}:lock" >/dev/null
# 53: Redis out of memory.
redis CONFIG SET maxmemory 1 >/dev/null
out=$(sql_stderr "SELECT rp_ratelimit('e53', 10, 1000, 1, 'gcra')")
redis CONFIG SET maxmemory 0 >/dev/null
is "$out" "53200 " "Redis out of memory: 53200"
# A timeout: Redis stalled past command_timeout; the same session reconnects.
# Redis is stopped (SIGSTOP) from inside the session right before the call
# and let go (SIGCONT) once the call has failed: no clock decides whether it
# is still stalled when the call is sent (a pause with a deadline could run
# out while a loaded machine stalls the backend).
rpid=$(redis INFO server | tr -d '\r' | sed -n 's/^process_id://p')
trap 'kill -CONT "$rpid" 2>/dev/null' EXIT
out=$(sql_stderr "SET redis_primitives.command_timeout = 200" "\\! kill -STOP $rpid" \
	"SELECT (rp_lock_info('eto')).held" "\\! kill -CONT $rpid" "SELECT (rp_lock_info('eto')).held")
is "$out" "08006 f " "a command past command_timeout fails with 08006; the next call succeeds"
snap
is "${S[ratelimit_gcra.errors_53]}" "1" "counted as class 53 under ratelimit_gcra"
is "${S[lock_info.timeouts]} ${S[lock_info.errors_08]} ${S[lock_info.reconnects]}" "1 1 1" \
	"lock_info: one timeout, one 08 error, one reconnect"
# NOSCRIPT: Redis forgot its scripts; two calls, one reload.
ns=${S[lock_info.noscript]} calls=${S[lock_info.calls]}
redis SCRIPT FLUSH >/dev/null
q "SELECT (rp_lock_info('ns')).held" "SELECT (rp_lock_info('ns')).held" >/dev/null
snap
is "$((S[lock_info.calls] - calls)) $((S[lock_info.noscript] - ns))" "2 1" \
	"SCRIPT FLUSH: one NOSCRIPT reload for the next two calls"
is "$(q "SELECT bool_and(calls = ok + refused + errors) FROM rp_stats")" "t" \
	"every row: calls = ok + refused + errors"
# Every call takes some time, however short: a call measured in whole
# microseconds rounded down took none (rp_extend(NULL, 10), refused before
# any work, did in CI on PostgreSQL 16: "extend calls 1 total_ms 0").
timed="SELECT bool_and(max_ms <= total_ms AND (calls = 0) = (total_ms = 0)) FROM rp_stats WHERE primitive <> 'elector_renew'"
[ "$(q "$timed")" = t ] ||
	diag "$(q "SELECT string_agg(primitive || ' calls ' || calls || ' total_ms ' || total_ms || ' max_ms ' || max_ms, '; ')
	           FROM rp_stats WHERE primitive <> 'elector_renew' AND NOT (max_ms <= total_ms AND (calls = 0) = (total_ms = 0))")"
is "$(q "$timed")" "t" \
	"max_ms <= total_ms, and time is counted exactly where calls are"

# ---- track = off, privileges --------------------------------------------
before=$(q "SELECT sum(calls) FROM rp_stats WHERE primitive <> 'elector_renew'")
q "SET redis_primitives.track = off" "SELECT (rp_lock_info('off')).held" \
	"SELECT rp_ratelimit('off', 5, 1000)" "SELECT rp_acquire('off', 10)" >/dev/null
is "$(q "SELECT sum(calls) FROM rp_stats WHERE primitive <> 'elector_renew'")" "$before" \
	"with redis_primitives.track = off nothing is counted"
is "$(q_state "SET redis_primitives.track = off")" "OK" "a superuser may turn tracking off"
q "SET client_min_messages = warning" "DROP ROLE IF EXISTS obs_plain" "CREATE ROLE obs_plain" >/dev/null
is "$(q_state "SET ROLE obs_plain" "SET redis_primitives.track = off")" "42501" \
	"a plain role cannot hide its calls (track is superuser-only, 42501)"
is "$(q_state "SET ROLE obs_plain" "SELECT rp_stats_reset()")" "42501" "nor reset the statistics (42501)"
is "$(q "SET ROLE obs_plain" "SELECT count(*) FROM rp_stats")" "$(q "SELECT count(*) FROM rp_stats")" \
	"but every role can read rp_stats"
is "$(q "SELECT count(*) FROM rp_stats WHERE primitive IN ('acquire', 'acquire_xact', 'release', 'extend', 'lock_info', 'ratelimit_sliding_log', 'ratelimit_sliding_window', 'ratelimit_gcra', 'campaign', 'resign', 'elector_renew')")" \
	"11" "a row for every primitive docs/monitoring.md names"
q "DROP ROLE obs_plain" "DROP FUNCTION obs_naive_acquire(text, bigint, bigint)" "DROP TABLE obs_naive" >/dev/null
finish
