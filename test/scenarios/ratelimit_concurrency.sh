#!/usr/bin/env bash
# test/scenarios/ratelimit_concurrency.sh -- the rate limiter under real
# concurrency: separate PostgreSQL connections, released at the same instant.
#
# The failure: a sliding window written correctly but as three round trips
# (ZREMRANGEBYSCORE, ZCARD, ZADD).  Every caller reads ZCARD before the others
# have run ZADD, so every caller sees room; the TypeScript redis-primitives
# library measured 100 of 100 admitted against a limit of 5, and this
# scenario's naive twin 17 to 43 of 100 over nine runs on a 2-core machine
# (docs/ratelimit.md).  Ours decides inside one Lua script, so it admits
# exactly the limit: 5 of 100, and 50 of 200, under every algorithm.
#
# The barrier (race.py, one client process with a connection per caller):
# it holds pg_advisory_lock(k) in a session of its own; every caller first
# asks for pg_advisory_lock_shared(k) and blocks; once pg_locks shows all of
# them waiting, the lock is released and they all run.  A caller prints
# ADMITTED when let in, and DONE at its end.
#
# Run by scripts/test.sh (prove), with PGHOST, PGPORT, PGUSER and REDIS_PORT
# set; the database rp_test has the extension and test/setup.sql.  Windows are
# an hour long and the clock is Redis' own, so no assertion depends on speed.
set -uo pipefail
: "${PGHOST:?}" "${PGPORT:?}" "${PGUSER:?}" "${REDIS_PORT:?}"
export PGDATABASE=rp_test
WINDOW=3600000
WORK=$(mktemp -d /tmp/rl_concurrency.XXXXXX)
chmod 755 "$WORK"
trap 'rm -rf "$WORK"' EXIT

source "$(dirname "$0")/tap.bash"
RACES=0

# race NAME CALLERS LIMIT ALG STEP...: CALLERS connections of race.py
# (one round) run the STEPs at once against key NAME; sets ADMITTED (callers
# that printed ADMITTED) and ANSWERED (callers that got to the end).
race() {
	local name=$1 callers=$2 limit=$3 alg=$4; shift 4
	RACES=$((RACES + 1))
	/usr/bin/python3 "$(dirname "$0")/race.py" -n "$callers" -k $((100000 + 10 * RACES)) \
		-v key="$name" -v limit="$limit" -v window="$WINDOW" -v alg="$alg" "$@" >"$WORK/$name.out" 2>&1
	ADMITTED=$(grep -c '^1 [0-9]* ADMITTED$' "$WORK/$name.out")
	ANSWERED=$(grep -c '^1 [0-9]* DONE$' "$WORK/$name.out")
	grep '^#' "$WORK/$name.out"
	if grep -q 'ERROR\|Traceback' "$WORK/$name.out"; then
		echo "# errors from callers of $name:"
		grep -h 'ERROR\|Error' "$WORK/$name.out" | cut -d' ' -f3- | sort | uniq -c | head -5 | sed 's/^/#   /'
	fi
	echo "# $name: $ADMITTED of $callers admitted against a limit of $limit ($alg)"
}

# The callers' SQL.  Ours: one call.  Naive: three round trips through
# redis-cli (rp_test.redis), deciding in between on the client, as the
# client-side code does.
OURS="SELECT 'ADMITTED' WHERE rp_ratelimit(%(key)s, %(limit)s, %(window)s, 1, %(alg)s)"
NAIVE=(
	"SELECT rp_test.redis('ZREMRANGEBYSCORE', %(key)s, '-inf',
	        ((extract(epoch FROM clock_timestamp()) * 1000)::bigint - %(window)s)::text) IS NOT NULL"
	"?SELECT rp_test.redis('ZCARD', %(key)s)::int < %(limit)s"
	"SELECT rp_test.redis('ZADD', %(key)s, (extract(epoch FROM clock_timestamp()) * 1000)::bigint::text,
	        'caller-' || %(i)s) IS NOT NULL"
	"SELECT 'ADMITTED'"
)

plan 19

# ---- The naive client-side sliding window: 100 callers, limit 5 -------------
race naive-100 100 5 naive "${NAIVE[@]}"
naive=$ADMITTED
cmp_ok "$ANSWERED" -eq 100 "naive three-round-trip sliding window: all 100 callers answered"
cmp_ok "$naive" -gt 5 "naive three-round-trip sliding window admits far more than 5 of 100 (admitted $naive)"
cmp_ok "$(redis-cli -p "$REDIS_PORT" zcard naive-100)" -eq "$naive" "naive: its sorted set agrees: $naive members recorded"

# ---- Ours, the same race: exactly the limit ---------------------------------
for alg in sliding_log sliding_window gcra; do
	race "conc-$alg-100" 100 5 "$alg" "$OURS"
	cmp_ok "$ANSWERED" -eq 100 "$alg: all 100 callers answered"
	cmp_ok "$ADMITTED" -eq 5 "$alg: exactly 5 of 100 concurrent callers admitted against a limit of 5 (naive: $naive)"
done
cmp_ok "$(redis-cli -p "$REDIS_PORT" zcard "$(q "LOAD 'redis_primitives'; SELECT rp_test.key('conc-sliding_log-100', 'rl:sliding_log')")")" -eq 5 \
	"sliding_log: the sorted set holds exactly the 5 admitted"

for alg in sliding_log sliding_window gcra; do
	race "conc-$alg-200" 200 50 "$alg" "$OURS"
	cmp_ok "$ANSWERED" -eq 200 "$alg: all 200 callers answered"
	cmp_ok "$ADMITTED" -eq 50 "$alg: exactly 50 of 200 concurrent callers admitted against a limit of 50"
done

# Every key the races left has a TTL (and there are six of them).
prefix=$(q "LOAD 'redis_primitives'; SHOW redis_primitives.key_prefix")
keys=$(redis-cli -p "$REDIS_PORT" --scan --pattern "${prefix}*:rl:*")
no_ttl=0
for k in $keys; do
	[ "$(redis-cli -p "$REDIS_PORT" pttl "$k")" -gt 0 ] || no_ttl=$((no_ttl + 1))
done
is "$(echo "$keys" | grep -c .) keys, $no_ttl without a TTL" "6 keys, 0 without a TTL" \
	"every rate-limit key the races left (six) has a TTL"
# ---- The naive limiter killed between its two round trips --------------------
# INCR, then EXPIRE: the backend running it is terminated in between (a
# crash, a deploy, an OOM kill), and the counter is left without a TTL.
psql -X -q -c "SET application_name = 'naive-crash'" \
	-c "DO \$\$ BEGIN PERFORM rp_test.redis('INCR', 'naive:crash'); PERFORM pg_sleep(600);
	    PERFORM rp_test.redis('PEXPIRE', 'naive:crash', '60000'); END \$\$" >/dev/null 2>&1 &
crash=$!
wait_for 30 '[ "$(redis-cli -p "$REDIS_PORT" get naive:crash)" = 1 ]'
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'naive-crash'" >/dev/null
wait $crash
is "$(redis-cli -p "$REDIS_PORT" get naive:crash)|$(redis-cli -p "$REDIS_PORT" pttl naive:crash)" "1|-1" \
	"naive: killed between INCR and EXPIRE, the counter is left with no TTL (PTTL -1): it never resets"
# Ours, killed at any point, writes and sets the TTL inside one script.
q "SELECT rp_ratelimit('crash-ours', 5, 60000, 1, a) FROM unnest('{sliding_log,sliding_window,gcra}'::text[]) a" >/dev/null
no_ttl=0
for k in $(redis-cli -p "$REDIS_PORT" --scan --pattern "*crash-ours*"); do
	[ "$(redis-cli -p "$REDIS_PORT" pttl "$k")" -gt 0 ] || no_ttl=$((no_ttl + 1))
done
is "$(redis-cli -p "$REDIS_PORT" --scan --pattern "*crash-ours*" | grep -c .)/$no_ttl" "3/0" \
	"ours: each algorithm's key has its TTL from the same script that wrote it"
finish
