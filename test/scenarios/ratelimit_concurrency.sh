#!/usr/bin/env bash
# test/scenarios/ratelimit_concurrency.sh -- the rate limiter under real
# concurrency: separate PostgreSQL connections, released at the same instant.
#
# The failure: a sliding window written correctly but as three round trips
# (ZREMRANGEBYSCORE, ZCARD, ZADD).  Every caller reads ZCARD before the others
# have run ZADD, so every caller sees room; the reference measured 100 of 100
# admitted against a limit of 5.  Ours decides inside one Lua script, so it
# admits exactly the limit: 5 of 100, and 50 of 200, under every algorithm.
#
# The barrier: this script holds pg_advisory_lock(k) in a session of its own;
# every caller first asks for pg_advisory_lock_shared(k) and blocks; once
# pg_locks shows all of them waiting, the lock is released and they all run.
# A caller prints ADMITTED when let in, and DONE at its end.
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
CTL_PID=

cleanup() {
	exec 3>&- 2>/dev/null
	[ -n "$CTL_PID" ] && kill "$CTL_PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

source "$(dirname "$0")/tap.bash"
RACES=0

# Wait until at most $1 client backends are connected (the previous race's
# backends may still be exiting after their psql has gone).
wait_backends() {
	local i
	for i in $(seq 600); do
		[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")" -le "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# The callers' SQL.  Ours: one call.  Naive: three round trips through
# redis-cli (rp_test.redis), deciding in between, as the client-side code does.
cat > "$WORK/ours.sql" <<'SQL'
SELECT pg_advisory_lock_shared(:lock) \g /dev/null
SELECT 'ADMITTED' WHERE rp_ratelimit(:'key', :limit, :window, 1, :'alg');
\echo DONE
SQL
cat > "$WORK/naive.sql" <<'SQL'
SET client_min_messages = warning;
SELECT pg_advisory_lock_shared(:lock) \g /dev/null
SELECT rp_test.redis('ZREMRANGEBYSCORE', :'key', '-inf',
                     ((extract(epoch FROM clock_timestamp()) * 1000)::bigint - :window)::text) \g /dev/null
SELECT rp_test.redis('ZCARD', :'key')::int < :limit AS room \gset
\if :room
SELECT rp_test.redis('ZADD', :'key', (extract(epoch FROM clock_timestamp()) * 1000)::bigint::text,
                     'caller-' || :i) \g /dev/null
\echo ADMITTED
\endif
\echo DONE
SQL

# race NAME SQLFILE CALLERS LIMIT ALG: sets ADMITTED and ANSWERED.
race() {
	local name=$1 sql=$2 callers=$3 limit=$4 alg=$5
	local lock=$((100000 + RACES)) i waiting pids=()
	RACES=$((RACES + 1))

	wait_backends "$BASELINE" || echo "# previous backends still connected"
	rm -f "$WORK/ctl"; mkfifo "$WORK/ctl"
	psql -X -q -v ON_ERROR_STOP=1 < "$WORK/ctl" > "$WORK/ctl.out" 2>&1 &
	CTL_PID=$!
	exec 3> "$WORK/ctl"
	echo "SELECT pg_advisory_lock($lock);" >&3
	for i in $(seq 600); do
		[ "$(q "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $lock AND granted")" -ge 1 ] && break
		sleep 0.1
	done

	for i in $(seq "$callers"); do
		psql -X -At -q -v lock="$lock" -v key="$name" -v limit="$limit" -v window="$WINDOW" \
			-v alg="$alg" -v i="$i" -f "$WORK/$sql" > "$WORK/$name.$i.out" 2>&1 &
		pids+=($!)
	done
	for i in $(seq 1200); do
		waiting=$(q "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $lock AND NOT granted")
		[ "$waiting" -ge "$callers" ] && break
		sleep 0.1
	done
	[ "$waiting" -ge "$callers" ] || echo "# only $waiting of $callers callers reached the barrier"

	echo "SELECT pg_advisory_unlock($lock);" >&3   # everyone runs now
	exec 3>&-
	wait "${pids[@]}"
	wait "$CTL_PID" 2>/dev/null; CTL_PID=

	ADMITTED=$(cat "$WORK/$name".*.out | grep -c '^ADMITTED$')
	ANSWERED=$(cat "$WORK/$name".*.out | grep -c '^DONE$')
	if grep -q 'ERROR' "$WORK/$name".*.out; then
		echo "# errors from callers of $name:"
		grep -h 'ERROR' "$WORK/$name".*.out | sort | uniq -c | head -5 | sed 's/^/#   /'
	fi
	echo "# $name: $ADMITTED of $callers admitted against a limit of $limit ($alg)"
}

plan 19
# Backends that other suites left behind are not ours to wait for.
q "SELECT '# already connected: ' || coalesce(application_name, '') || ' ' || left(query, 60) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
BASELINE=$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")

# ---- The naive client-side sliding window: 100 callers, limit 5 -------------
race naive-100 naive.sql 100 5 naive
naive=$ADMITTED
cmp_ok "$ANSWERED" -eq 100 "naive three-round-trip sliding window: all 100 callers answered"
cmp_ok "$naive" -gt 5 "naive three-round-trip sliding window admits far more than 5 of 100 (admitted $naive)"
cmp_ok "$(redis-cli -p "$REDIS_PORT" zcard naive-100)" -eq "$naive" "naive: its sorted set agrees: $naive members recorded"

# ---- Ours, the same race: exactly the limit ---------------------------------
for alg in sliding_log sliding_window gcra; do
	race "conc-$alg-100" ours.sql 100 5 "$alg"
	cmp_ok "$ANSWERED" -eq 100 "$alg: all 100 callers answered"
	cmp_ok "$ADMITTED" -eq 5 "$alg: exactly 5 of 100 concurrent callers admitted against a limit of 5 (naive: $naive)"
done
cmp_ok "$(redis-cli -p "$REDIS_PORT" zcard "$(q "LOAD 'redis_primitives'; SELECT rp_test.key('conc-sliding_log-100', 'rl:sliding_log')")")" -eq 5 \
	"sliding_log: the sorted set holds exactly the 5 admitted"

for alg in sliding_log sliding_window gcra; do
	race "conc-$alg-200" ours.sql 200 50 "$alg"
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
	-c "DO \$\$ BEGIN PERFORM rp_test.redis('INCR', 'naive:crash'); PERFORM pg_sleep(30);
	    PERFORM rp_test.redis('PEXPIRE', 'naive:crash', '60000'); END \$\$" >/dev/null 2>&1 &
crash=$!
wait_for 10 '[ "$(redis-cli -p "$REDIS_PORT" get naive:crash)" = 1 ]'
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
