#!/usr/bin/env bash
# cluster.sh -- Redis Cluster: three masters on local ports.
#
# The failures this guards against: a key sent to a node that does not serve
# its slot (MOVED, or CROSSSLOT for a many-lease script), and a slot that
# moves while callers use it (ASK, TRYAGAIN, then MOVED).  Shown: our CRC16
# agrees with CLUSTER KEYSLOT, locks on many names land on all three
# masters, one round trip per call in steady state, releasing leases held on
# every node at once, and a resharding under load without a failed call.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 23

PORTS=()
for i in 1 2 3; do
	p=$(rp_free_port cluster)
	while [[ " ${PORTS[*]} " == *" $p "* ]]; do p=$(rp_free_port cluster); done
	PORTS+=("$p")
done
export PGOPTIONS="-c redis_primitives.cluster=on -c redis_primitives.port=${PORTS[0]}"

cleanup() {
	for p in "${PORTS[@]}"; do rp_stop_redis "$p"; rm -f "$RP_TMP/nodes-$p.conf"; done
	psql -X -q -d "$RP_DB" -c "DROP TABLE IF EXISTS clu_log; DROP PROCEDURE IF EXISTS clu_load" >/dev/null 2>&1
}
trap cleanup EXIT

cluster_ok() {
	local p
	for p in "${PORTS[@]}"; do
		redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok' || return 1
	done
}
stat() {  # port command: calls of that command (e.g. evalsha, cluster|slots)
	redis-cli -p "$1" info commandstats | tr -d '\r' | sed -n "s/^cmdstat_$2:calls=\([0-9]*\),.*/\1/p" | grep . || echo 0
}
sum_stat() { local t=0 p; for p in "${PORTS[@]}"; do t=$(( t + $(stat "$p" "$1") )); done; echo $t; }

for p in "${PORTS[@]}"; do
	rp_start_redis "$p" --cluster-enabled yes --cluster-config-file "nodes-$p.conf" --cluster-node-timeout 2000
done
redis-cli --cluster create "${PORTS[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >"$RP_TMP/cluster-create.out" 2>&1
wait_for 30 cluster_ok
formed=$?
ok $formed "three masters form a cluster (16384 slots covered)"
if [ $formed -ne 0 ]; then
	diag "ports: ${PORTS[*]}"
	tail -15 "$RP_TMP/cluster-create.out" | sed 's/^/#   /'
	for p in "${PORTS[@]}"; do tail -4 "$RP_TMP/redis-$p.log" | sed "s/^/#   $p: /"; done
fi

# ---- our CRC16 is Redis' ------------------------------------------------------
keys=(foo bar "{user1000}.following" "{user1000}.followers" "foo{}{bar}" "foo{{bar}}zap" "foo{bar}{zap}"
	"{}" "a}b{c" "rp:{account-42}:lock" "rp:{account-42}:fence" "rp:{k}:rl:gcra" "x{y")
for i in $(seq 1 40); do keys+=("rp:{name-$i}:lock" "key:$(( (i * 7919) % 100000 )):$i"); done
mismatch=0
for k in "${keys[@]}"; do
	ours=$(q "SELECT rp_key_slot(\$\$${k}\$\$)")
	theirs=$(redis-cli -p "${PORTS[0]}" cluster keyslot "$k")
	[ "$ours" = "$theirs" ] || { mismatch=$((mismatch + 1)); diag "slot of '$k': ours $ours, Redis $theirs"; }
done
is "$mismatch" "0" "rp_key_slot agrees with CLUSTER KEYSLOT on ${#keys[@]} keys (hash tags, empty tags, nested braces)"

# ---- many names spread over every master -----------------------------------
q "SELECT count(*) FROM generate_series(1, 60) n WHERE (rp_acquire('spread-' || n, 60000)).fence = 1" >/dev/null
session_open s
is "$(session_q s "SELECT count(*) FROM generate_series(1, 60) n WHERE (rp_acquire('spread-' || n, 60000)).fence = 2")" "60" \
	"60 leases taken through one session (the first session's were released at its exit)"
counts=()
for p in "${PORTS[@]}"; do counts+=("$(redis-cli -p "$p" dbsize)"); done
diag "keys per master: ${counts[*]} (a lock and a fence counter per name)"
cmp_ok "$(printf '%s\n' "${counts[@]}" | sort -n | head -1)" -ge 10 "every master holds a share of them"
is "$(( counts[0] + counts[1] + counts[2] ))" "120" "120 keys in all: each name's lock and counter on the node of its slot"
ok_nodes=0
for n in 1 17 33 59; do
	slot=$(redis-cli -p "${PORTS[0]}" cluster keyslot "rp:{spread-$n}:lock")
	for p in "${PORTS[@]}"; do
		[ "$(redis-cli -p "$p" cluster countkeysinslot "$slot")" -ge 2 ] && ok_nodes=$((ok_nodes + 1))
	done
done
is "$ok_nodes" "4" "each name's two keys sit together in its slot on exactly one master"

# ---- one round trip per call in steady state ----------------------------------
session_q s "SELECT count(*) FROM generate_series(1, 60) n WHERE (rp_lock_info('spread-' || n)).held" >/dev/null
e0=$(sum_stat evalsha); s0=$(sum_stat 'cluster|slots'); a0=$(sum_stat asking)
is "$(session_q s "SELECT count(*) FROM generate_series(1, 60) n WHERE (rp_lock_info('spread-' || n)).held")" "60" \
	"rp_lock_info on 60 names, each answered by its node"
is "$(( $(sum_stat evalsha) - e0 ))/$(( $(sum_stat 'cluster|slots') - s0 ))/$(( $(sum_stat asking) - a0 ))" "60/0/0" \
	"60 calls were 60 EVALSHAs: no map reload, no redirection"

# ---- releasing leases held on three nodes at once ----------------------------
is "$(session_q s "SELECT rp_release_all()")" "60" "rp_release_all releases leases on all three masters (one call per slot)"
is "$(session_q s "BEGIN; SELECT count(*) FROM generate_series(1, 9) n WHERE (rp_acquire_xact('spread-' || n, 60000, verify_at_commit => true)).fence IS NOT NULL; COMMIT; SELECT count(*) FROM generate_series(1, 9) n WHERE (rp_lock_info('spread-' || n)).held")" "9
0" "xact leases on many nodes are verified at commit and released at its end"

# ---- names whose hash tag would be empty (issue 10 item 9) -------------------
# "rp:{}x}:lock" and "rp:{}x}:fence" hash to different slots (an empty tag is
# no tag): 1.0 failed such names with CROSSSLOT.  Every name must route.
is "$(session_q s "SELECT (rp_acquire('}x', 10000)).fence IS NOT NULL, rp_release('}x'), rp_ratelimit_reset('}k'), rp_campaign('}e', 'n1', 10000) IS NOT NULL" | tr -d '\n')" \
	"t|t|f|t" "names starting with '}' work in rp_acquire, rp_release, rp_ratelimit_reset and rp_campaign"
# ---- semaphores: the four keys of a name in its slot (semaphore.sh has the rest)
is "$(session_q s "SELECT count(*) FROM generate_series(1, 30) n WHERE (rp_semaphore_acquire('sem-' || n, 1, 60000)).fence IS NOT NULL")" "30" \
	"a permit of each of 30 semaphores spread over the masters"
ok_nodes=0
for n in 1 11 21; do
	slot=$(redis-cli -p "${PORTS[0]}" cluster keyslot "rp:{sem-$n}:sem")
	for p in "${PORTS[@]}"; do
		[ "$(redis-cli -p "$p" cluster countkeysinslot "$slot")" -ge 2 ] && ok_nodes=$((ok_nodes + 1))
	done
done
is "$ok_nodes" "3" "each semaphore's permits and fence counter sit together in its slot on one master"
is "$(q "SELECT sum(in_use) FROM generate_series(1, 30) n, rp_semaphore_info('sem-' || n)")" "30" \
	"rp_semaphore_info of each is answered by its node"
is "$(q_state "SELECT count(*) FROM generate_series(1, 3) n WHERE rp_semaphore_acquire('sem-' || n, 1, 1000, 300) IS NULL")" "OK" \
	"a waiter on a full semaphore queues on its node and gives up without an error (no CROSSSLOT)"
is "$(session_q s "SELECT rp_release_all()")" "30" "rp_release_all releases the permits on every master"
session_close s

# ---- a slot range moves under load ---------------------------------------------
# Names whose slot is among the first 300 of the first master: those move.
names=$(q "SELECT string_agg(quote_literal(n), ',') FROM (SELECT n FROM (SELECT 'mig-' || i AS n FROM generate_series(1, 5000) i) s
           WHERE rp_key_slot('rp:{' || n || '}:lock') < 300 ORDER BY n LIMIT 6) t")
diag "names under load in the moving slots: $names"
# Filler keys in those slots make each slot's migration last long enough for
# calls to meet it half-moved (ASK and TRYAGAIN), not only after (MOVED).
for n in $(q "SELECT unnest(ARRAY[$names])" | head -6); do
	for i in $(seq 1 1500); do echo "SET rp:{$n}:filler:$i x"; done
done | redis-cli -p "${PORTS[0]}" >/dev/null
q "CREATE TABLE clu_log (at timestamptz NOT NULL, name text, ok bool NOT NULL, state text, fence bigint)"
q "CREATE PROCEDURE clu_load(secs float8, names text[]) LANGUAGE plpgsql AS \$\$
DECLARE
  l rp_lease;
  n text;
  stop timestamptz := clock_timestamp() + secs * interval '1 second';
BEGIN
  WHILE clock_timestamp() < stop LOOP
    FOREACH n IN ARRAY names LOOP
      BEGIN
        l := rp_acquire(n, 5000);
        PERFORM rp_lock_info(n);
        PERFORM rp_release(l);
        INSERT INTO clu_log VALUES (clock_timestamp(), n, true, NULL, l.fence);
      EXCEPTION WHEN OTHERS THEN
        INSERT INTO clu_log VALUES (clock_timestamp(), n, false, SQLSTATE || ' ' || SQLERRM, NULL);
        BEGIN PERFORM rp_release_all(); EXCEPTION WHEN OTHERS THEN NULL; END;
      END;
      COMMIT;
    END LOOP;
  END LOOP;
END \$\$"
psql -X -q -d "$RP_DB" -c "CALL clu_load(8, ARRAY[$names])" >"$RP_TMP/clu-load.out" 2>&1 &
loader=$!
wait_for 20 '[ "$(q "SELECT count(*) FROM clu_log WHERE ok")" -ge 50 ]'
from=$(redis-cli -p "${PORTS[0]}" cluster myid); to=$(redis-cli -p "${PORTS[1]}" cluster myid)
a0=$(sum_stat asking)
t=$(now_ms)
redis-cli --cluster reshard "127.0.0.1:${PORTS[0]}" --cluster-from "$from" --cluster-to "$to" \
	--cluster-slots 300 --cluster-pipeline 10 --cluster-yes >"$RP_TMP/reshard.out" 2>&1
ok $? "300 slots resharded from the first master to the second ($(( $(now_ms) - t )) ms) while calls run"
wait $loader
diag "during the move: $(q "SELECT count(*) FILTER (WHERE ok) || ' calls ok, ' || count(*) FILTER (WHERE NOT ok) || ' failed' FROM clu_log"), $(( $(sum_stat asking) - a0 )) ASKING redirections followed"
is "$(q "SELECT count(*) FROM clu_log WHERE NOT ok")" "0" "no call failed $(q "SELECT coalesce(' (' || min(state) || ')', '') FROM clu_log WHERE NOT ok")"
n1=$(q "SELECT (array[$names])[1]")
slot=$(q "SELECT rp_key_slot('rp:{$n1}:fence')")
is "$(redis-cli -p "${PORTS[1]}" cluster countkeysinslot "$slot")/$(redis-cli -p "${PORTS[0]}" cluster countkeysinslot "$slot")" "1501/0" \
	"a moved name's counter (and filler) now lives on the second master"
is "$(q "SELECT count(*) FROM (SELECT fence, lag(fence) OVER (PARTITION BY name ORDER BY at) AS prev FROM clu_log WHERE fence IS NOT NULL) s WHERE fence <= prev")" "0" \
	"every name's tokens went on from where they were: the counters moved with their slots"
is "$(q "SELECT (rp_acquire('$n1', 1000)).fence")" "$(q "SELECT max(fence) + 1 FROM clu_log WHERE name = '$n1'")" \
	"a new session goes to the new owner and continues the counter"
# ---- ASK, deterministically: a slot left half-moved by hand -------------------
# The name's slot is MIGRATING on its owner and IMPORTING on another master,
# and its keys are not on the owner yet: the owner answers ASK, and the call
# must follow it to the importing node with ASKING.
ask=$(q "SELECT n FROM (SELECT 'ask-' || i AS n FROM generate_series(1, 200000) i) s WHERE rp_key_slot('rp:{' || n || '}:lock') = 100 LIMIT 1")
src=${PORTS[1]} dst=${PORTS[0]}     # slot 100 moved to the second master above
# The name is held, so both of its keys exist and move with the slot: a
# multi-key script whose keys are all on the importing node is answered
# there after ASKING; one whose keys do not all exist there gets TRYAGAIN
# (Redis' rule for a slot being rehashed), which is not what this checks.
redis-cli -p "$src" set "rp:{$ask}:lock" someone-else px 600000 >/dev/null
redis-cli -p "$src" set "rp:{$ask}:fence" 7 >/dev/null
redis-cli -p "$dst" cluster setslot 100 importing "$(redis-cli -p "$src" cluster myid)" >/dev/null
redis-cli -p "$src" cluster setslot 100 migrating "$(redis-cli -p "$dst" cluster myid)" >/dev/null
# Move what the slot holds (the filler, the counter of the name above) first.
for k in $(redis-cli -p "$src" cluster getkeysinslot 100 5000); do
	redis-cli -p "$src" migrate 127.0.0.1 "$dst" "$k" 0 5000 >/dev/null
done
a0=$(stat "$dst" asking)
is "$(q "SELECT held::text || '/' || coalesce(last_fence::text, 'none') FROM rp_lock_info('$ask')" 2>&1)" "true/7" \
	"a call meeting a slot mid-migration gets its answer (ASK followed)"
cmp_ok "$(( $(stat "$dst" asking) - a0 ))" -ge 1 "the importing node saw ASKING: the redirection was followed, not MOVED after the move"
dst_id=$(redis-cli -p "$dst" cluster myid)
for p in "$dst" "$src"; do redis-cli -p "$p" cluster setslot 100 node "$dst_id" >/dev/null; done   # finish the move
finish
