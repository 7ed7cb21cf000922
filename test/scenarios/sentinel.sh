#!/usr/bin/env bash
# sentinel.sh -- Redis Sentinel: a master, one replica and three sentinels on
# local ports.  The failures this tells the story of:
#
#  A. the master dies under load: the sentinels promote the replica, and the
#     same PostgreSQL session's calls resume against the new master by
#     themselves, within the failover time;
#  B. replication is asynchronous, so a failover can lose the last fence
#     counter increments: without a floor the counter goes backwards and
#     re-issues a token a fenced table already accepted from another lease;
#     with the database-side floor (rp_fence_floor) the next token is above
#     every token the table holds.  fence_replicas (WAIT) refuses to hand out
#     a token no replica has;
#  C. a master demoted under a connected session: READONLY drops the
#     connection, the next call asks the sentinels again, and ROLE refuses
#     a server that is not a master.
#
# The replica is made to lag deterministically: it is given a wrong
# masterauth and its link is cut, so it stays a healthy, promotable replica
# that simply misses the increments made while it is cut off.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 29

MASTER=rpm
PM=$(rp_free_port); PR=$(rp_free_port)
while [ "$PR" = "$PM" ]; do PR=$(rp_free_port); done
SPORTS=()
for i in 1 2 3; do
	p=$(rp_free_port)
	while [[ " $PM $PR ${SPORTS[*]} " == *" $p "* ]]; do p=$(rp_free_port); done
	SPORTS+=("$p")
done
SENTINELS="127.0.0.1:${SPORTS[0]},127.0.0.1:${SPORTS[1]},127.0.0.1:${SPORTS[2]}"
export PGOPTIONS="-c redis_primitives.sentinels=$SENTINELS -c redis_primitives.sentinel_master=$MASTER"

cleanup() {
	for p in "${SPORTS[@]}" "$PM" "$PR"; do rp_stop_redis "$p"; done
	psql -X -q -d "$RP_DB" -c "DROP TABLE IF EXISTS sent_acct, sent_log, sent_nofloor, sent_floor; DROP PROCEDURE IF EXISTS sent_load" >/dev/null 2>&1
}
trap cleanup EXIT

start_sentinel() {  # port
	local p=$1 conf=$RP_TMP/sentinel-$1.conf i
	cat >"$conf" <<CONF
port $p
bind 127.0.0.1
daemonize yes
pidfile $RP_TMP/redis-$p.pid
logfile $RP_TMP/redis-$p.log
dir $RP_TMP
sentinel monitor $MASTER 127.0.0.1 $PM 2
sentinel down-after-milliseconds $MASTER 1000
sentinel failover-timeout $MASTER 3000
sentinel parallel-syncs $MASTER 1
CONF
	redis-sentinel "$conf"
	for i in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
	return 1
}
sentinel_master_port() {  # sentinel port -> port of the master it names
	redis-cli -p "$1" sentinel get-master-addr-by-name "$MASTER" 2>/dev/null | sed -n 2p
}
link_up() { redis-cli -p "$1" info replication | grep -q 'master_link_status:up'; }
# Every sentinel names $1 as master and lists $2 as a healthy replica, and
# knows the two other sentinels (a failover needs their votes).
topology_ready() {  # master-port replica-port
	local s
	for s in "${SPORTS[@]}"; do
		[ "$(sentinel_master_port "$s")" = "$1" ] || return 1
		redis-cli -p "$s" sentinel replicas "$MASTER" | tr '\n' ' ' |
			grep -qE "port $2 runid [^ ]* flags slave " || return 1
		[ "$(redis-cli -p "$s" sentinel sentinels "$MASTER" | grep -c '^name$')" -ge 2 ] || return 1
	done
}
ms_of() { q "SELECT (extract(epoch FROM $1) * 1000)::bigint"; }
calls_work() { [ "$(q "SELECT held FROM rp_lock_info('x')" 2>/dev/null)" = f ]; }

rp_start_redis "$PM"
rp_start_redis "$PR" --replicaof 127.0.0.1 "$PM"
for p in "${SPORTS[@]}"; do start_sentinel "$p"; done
wait_for 30 link_up "$PR" && wait_for 30 topology_ready "$PM" "$PR"
ok $? "master, replica and three sentinels are up and know each other"

# ---- discovery -------------------------------------------------------------
is "$(q "SELECT redis_version IS NOT NULL FROM rp_ping()")" "t" "rp_ping through the sentinels"
q "SELECT rp_acquire('sent-where', 60000)" >/dev/null
is "$(redis-cli -p "$PM" get "$(key sent-where fence)")" "1" "the lease was taken on the master the sentinels named"
is "$(PGOPTIONS="-c redis_primitives.sentinels=127.0.0.1:1,$SENTINELS -c redis_primitives.sentinel_master=$MASTER" \
	q "SELECT last_fence FROM rp_lock_info('sent-where')")" "1" "a dead sentinel first in the list is skipped"
t=$(now_ms)
out=$(PGOPTIONS="-c redis_primitives.sentinels=127.0.0.1:1,127.0.0.1:2 -c redis_primitives.sentinel_master=$MASTER" \
	q_state "SELECT rp_lock_info('x')")
el=$(( $(now_ms) - t ))
is "$out" "08001" "no sentinel reachable: 08001"
is "$(PGOPTIONS="-c redis_primitives.sentinels=$SENTINELS -c redis_primitives.sentinel_master=nosuch" \
	q_state "SELECT rp_lock_info('x')")" "08001" "a master name the sentinels do not know: 08001"

# ---- A. the master dies under load -------------------------------------------
q "CREATE TABLE sent_acct (id int PRIMARY KEY, fence bigint NOT NULL, writes int NOT NULL)" \
  "CREATE INDEX ON sent_acct (fence)"
q "CREATE TRIGGER guard BEFORE INSERT OR UPDATE ON sent_acct FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence')" \
  "INSERT INTO sent_acct VALUES (1, 0, 0)" \
  "CREATE TABLE sent_log (at timestamptz NOT NULL, ok bool NOT NULL, state text, fence bigint)"
q "CREATE PROCEDURE sent_load(secs float8, lock_name text, fenced regclass) LANGUAGE plpgsql AS \$\$
DECLARE
  l rp_lease;
  stop timestamptz := clock_timestamp() + secs * interval '1 second';
BEGIN
  WHILE clock_timestamp() < stop LOOP
    BEGIN
      l := rp_acquire(lock_name, 2000, 0, rp_fence_floor(fenced));
      IF l IS NOT NULL THEN
        EXECUTE format('UPDATE %s SET fence = \$1, writes = writes + 1 WHERE id = 1', fenced) USING l.fence;
        PERFORM rp_release(l);
      END IF;
      INSERT INTO sent_log VALUES (clock_timestamp(), true, NULL, l.fence);
    EXCEPTION WHEN OTHERS THEN
      INSERT INTO sent_log VALUES (clock_timestamp(), false, SQLSTATE, NULL);
      BEGIN PERFORM rp_release_all(); EXCEPTION WHEN OTHERS THEN NULL; END;
    END;
    COMMIT;
    PERFORM pg_sleep(0.02);
  END LOOP;
END \$\$"
q "SELECT rp_release_all()" >/dev/null

psql -X -q -d "$RP_DB" -c "CALL sent_load(16, 'sent-acct', 'sent_acct')" >"$RP_TMP/sent-load.out" 2>&1 &
loader=$!
wait_for 20 '[ "$(q "SELECT count(*) FROM sent_log WHERE ok AND fence IS NOT NULL")" -ge 20 ]'
kill_at=$(now_ms)
kill -9 "$(cat "$RP_TMP/redis-$PM.pid")"; rm -f "$RP_TMP/redis-$PM.pid"
wait_for 30 '[ "$(sentinel_master_port "${SPORTS[0]}")" = "$PR" ]'
ok $? "the sentinels promote the replica"
promoted_at=$(now_ms)
wait $loader
# The pause: from the last call served before the first failure to the first
# call served after it.
first_fail="(SELECT min(at) FROM sent_log WHERE NOT ok AND at > to_timestamp($kill_at / 1000.0))"
first_ok=$(ms_of "(SELECT min(at) FROM sent_log WHERE ok AND at > $first_fail)")
last_ok=$(ms_of "(SELECT max(at) FROM sent_log WHERE ok AND at < $first_fail)")
ok $([ -n "$first_ok" ]; echo $?) "the same session's calls resume against the new master by themselves"
pause=$(( ${first_ok:-0} - ${last_ok:-0} ))
diag "failover A: last call served by the old master to first by the new one: ${pause} ms" \
	"(kill to promotion seen by a sentinel: $(( promoted_at - kill_at )) ms)"
cmp_ok "$pause" -lt 20000 "the pause is the failover time (sentinel down-after 1000 ms), not more ($pause ms)"
cmp_ok "$(q "SELECT count(*) FROM sent_log WHERE ok AND fence IS NOT NULL AND at > to_timestamp($kill_at / 1000.0)")" -ge 10 \
	"leases are taken and fenced writes made on the new master"
is "$(q "SELECT count(*) FROM sent_log WHERE NOT ok AND state NOT IN ('08001', '08006')")" "0" \
	"calls during the failover fail only as unreachable or lost ($(q "SELECT string_agg(DISTINCT state, ',') FROM sent_log WHERE NOT ok"))"
is "$(q "SELECT count(*) FROM (SELECT fence, max(fence) OVER (ORDER BY at ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev
         FROM sent_log WHERE fence IS NOT NULL) s WHERE fence <= prev")" "0" \
	"every accepted token is above every token accepted before it, across the failover"
diag "load: $(q "SELECT count(*) FILTER (WHERE ok) || ' calls ok, ' || count(*) FILTER (WHERE NOT ok) || ' failed, tokens ' || min(fence) || '..' || max(fence) FROM sent_log")"

# ---- B. a failover that loses counter increments ----------------------------
# The old master comes back as a replica of the new one.
rp_start_redis "$PM" --replicaof 127.0.0.1 "$PR"
wait_for 30 link_up "$PM" && wait_for 30 topology_ready "$PR" "$PM"
ok $? "the old master is back as a replica, and the sentinels see it"

q "CREATE TABLE sent_nofloor (id int PRIMARY KEY, fence bigint NOT NULL, writes int NOT NULL)" \
  "CREATE TABLE sent_floor (LIKE sent_nofloor)" \
  "CREATE TRIGGER guard BEFORE INSERT OR UPDATE ON sent_nofloor FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence')" \
  "CREATE TRIGGER guard BEFORE INSERT OR UPDATE ON sent_floor FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence')" \
  "INSERT INTO sent_nofloor VALUES (1, 0, 0)" "INSERT INTO sent_floor VALUES (1, 0, 0)"

is "$(q "SET redis_primitives.fence_replicas = 1" "SELECT (rp_acquire('sent-wait', 60000)).fence IS NOT NULL")" "t" \
	"fence_replicas = 1 with the replica in sync: the acquire returns after WAIT"

# Sentinels do not start another failover of the same master within twice
# failover-timeout (6 s) of the last one; the cut-off replica must still be
# fresh enough to be chosen when they do (10 x down-after).
left=$(( promoted_at + 7000 - $(now_ms) ))
[ "$left" -gt 0 ] && sleep "$(( left / 1000 )).$(printf %03d $(( left % 1000 )))"

# Cut the replica off: it keeps its data and stays promotable, but misses
# every increment from now on.
redis-cli -p "$PM" config set masterauth wrong-Pw >/dev/null
redis-cli -p "$PM" client kill type master >/dev/null
wait_for 10 '! link_up "$PM"'
ok $? "the replica is cut off from the master"

out=$(q_state "SET redis_primitives.fence_replicas = 1" "SET redis_primitives.fence_replicas_timeout = 200" "SELECT rp_acquire('sent-nowait', 60000)")
is "$out" "RP003" "fence_replicas = 1 with no replica acknowledging: the acquire fails with RP003"
is "$(q "SELECT held FROM rp_lock_info('sent-nowait')")" "f" "and the lease it took was released"

# Five leases on each lock, each writing its token to its fenced table.
for t in nofloor floor; do
	for i in 1 2 3 4 5; do
		if [ $t = floor ]; then fl="rp_fence_floor('sent_floor')"; else fl=0; fi
		q "SELECT set_config('x.l', (SELECT row(l.*)::text FROM rp_acquire('sent-$t', 60000, 0, $fl) l), false)" \
		  "UPDATE sent_$t SET fence = (current_setting('x.l')::rp_lease).fence, writes = writes + 1 WHERE id = 1" \
		  "SELECT rp_release(current_setting('x.l')::rp_lease)" >/dev/null
	done
done
is "$(q "SELECT (SELECT fence || '/' || writes FROM sent_nofloor) || ' ' || (SELECT fence || '/' || writes FROM sent_floor)")" "5/5 5/5" \
	"both tables accepted tokens 1..5 (five different leases each)"
is "$(redis-cli -p "$PM" get "$(key sent-nofloor fence)")|$(redis-cli -p "$PM" get "$(key sent-floor fence)")" "|" \
	"the cut-off replica has none of those increments"

kill_at=$(now_ms)
kill -9 "$(cat "$RP_TMP/redis-$PR.pid")"; rm -f "$RP_TMP/redis-$PR.pid"
wait_for 40 '[ "$(sentinel_master_port "${SPORTS[0]}")" = "$PM" ]' && wait_for 30 calls_work
ok $? "the lagging replica is promoted, and calls work against it"
diag "failover B: kill to first call served: $(( $(now_ms) - kill_at )) ms"

# Without the floor: the counter went backwards.
nf=$(q "SELECT (rp_acquire('sent-nofloor', 60000)).fence")
cmp_ok "$nf" -le 5 "without the floor, the next token ($nf) is not above the 5 the table already accepted"
# and the guard accepts a re-issued token from a different lease: the
# property fencing rests on is broken.
for i in 1 2 3 4 5; do
	f=$(q "SELECT set_config('x.l', (SELECT row(l.*)::text FROM rp_acquire('sent-nofloor', 60000) l), false)" \
	      "SELECT (current_setting('x.l')::rp_lease).fence" \
	      "SELECT rp_release(current_setting('x.l')::rp_lease)" | sed -n 2p)
	[ "$f" = 5 ] && break
done
# The token written is the one the new lease was issued, not a literal: a
# loop that never reached 5 writes NULL, which the guard refuses (22004).
is "$f|$(q "WITH u AS (UPDATE sent_nofloor SET fence = ${f:-NULL}, writes = writes + 1 WHERE id = 1 RETURNING 1) SELECT count(*) FROM u" 2>/dev/null)" "5|1" \
	"without the floor, token 5 is issued again to another lease and the table accepts it"

# With the floor: above every token the table holds.
fl=$(q "SELECT (rp_acquire('sent-floor', 60000, 0, rp_fence_floor('sent_floor'))).fence")
cmp_ok "$fl" -gt 5 "with rp_fence_floor, the next token ($fl) is above every token the table accepted"
is "$(q "WITH u AS (UPDATE sent_floor SET fence = $fl, writes = writes + 1 WHERE id = 1 RETURNING 1) SELECT count(*) FROM u")" "1" \
	"and its write is accepted"

# ---- C. demoted under a connected session --------------------------------------
session_open ro
is "$(session_q ro "SELECT held FROM rp_lock_info('sent-ro')")" "f" "a session connected to the master"
redis-cli -p "$PM" replicaof 127.0.0.1 1 >/dev/null	# a replica of nothing
is "$(session_q ro "SELECT rp_acquire('sent-ro', 10000)")" "ERROR:  25006" \
	"the demoted server refuses the acquire with READONLY (25006)"
is "$(redis-cli -p "$PM" exists "$(key sent-ro lock)")" "0" "the refused script did not run"
is "$(session_q ro "SELECT rp_acquire('sent-ro', 10000)")" "ERROR:  08001" \
	"the next call asks the sentinels again; ROLE refuses the replica they still name (08001)"
redis-cli -p "$PM" replicaof no one >/dev/null
is "$(session_q ro "SELECT (rp_acquire('sent-ro', 10000)).fence IS NOT NULL")" "t" \
	"a master again: the same session works, no action needed"
session_close ro
finish
