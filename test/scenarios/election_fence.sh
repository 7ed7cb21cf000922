#!/usr/bin/env bash
# election_fence.sh -- one server with a background elector: the
# leader-bound guard, epochs that never go back after Redis lost the
# counter, and one set of election keys for every database of the server.
#
# Naive twins: an SQL campaign with no floor after the FLUSHALL starts again
# at epoch 1 (what 1.0's elector did); in a database with its own key_prefix
# 1.0's rp_leader showed nobody and an SQL campaign won a second leadership.
source "$(dirname "$0")/election.bash"

echo "1..14"
redis() { redis-cli -p "$REDIS_PORT" "$@"; }
trap stop_nodes EXIT

start_node n1
t=$(wait_node n1 true 5000)
ok $([ -n "$t" ]; echo $?) "n1's elector leads '$ELECTION'"
e1=$(node_epoch n1)

# ---- leader-bound guard ----------------------------------------------------
nsql n1 "CREATE TABLE sched (id int PRIMARY KEY, v text, epoch bigint);
  CREATE TRIGGER sched_fence BEFORE INSERT OR UPDATE OR DELETE ON sched
    FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('epoch', 'leader=$ELECTION');
  CREATE FUNCTION try(stmt text) RETURNS text LANGUAGE plpgsql AS \$\$
  BEGIN EXECUTE stmt; RETURN 'ok';
  EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE; END \$\$;" >/dev/null
nsql n1 "INSERT INTO sched (id, v) VALUES (1, 'a')" >/dev/null
is "$(nsql n1 "SELECT epoch FROM sched")" "$e1" "leader-bound: the row is stamped with the elector's epoch"
# Freeze the elector: its deadline passes and the writes stop at once.
pid=$(elector_pid n1)
kill -STOP "$pid"
sleep $(( (LEASE - MARGIN) / 1000 + 1 ))
is "$(nsql n1 "SELECT try('UPDATE sched SET v = ''b''')")" "RP004" \
	"leader-bound: once the elector's deadline passed, a write is refused (RP004)"
kill -CONT "$pid"
t=$(wait_node n1 true 5000)
ok $([ -n "$t" ]; echo $?) "the elector leads again after it resumes"

# ---- epochs never go back --------------------------------------------------
e2=$(node_epoch n1)
redis flushall >/dev/null
for i in $(seq 100); do
	e3=$(node_epoch n1)
	[ -n "$e3" ] && [ "$e3" != "$e2" ] && break
	sleep 0.05
done
cmp "$e3" '>' "$e2" "after FLUSHALL the elector's new epoch ($e3) is above the last one it held ($e2)"
nsql n1 "UPDATE sched SET v = 'c'" >/dev/null
is "$(nsql n1 "SELECT epoch FROM sched")" "$e3" "and the leader-bound table accepts the new term"
redis flushall >/dev/null
is "$(nsql n1 "SELECT rp_campaign('other', 'x', 10000)")" "1" \
	"naive twin: a campaign with no floor after a FLUSHALL starts again at epoch 1"
is "$(nsql n1 "SELECT rp_resign('other', 'x'); SELECT rp_campaign('other', 'x', 10000, 41)" | tail -1)" "42" \
	"rp_campaign's floor: the new term is above it"

# ---- every database sees the same election ----------------------------------
for i in $(seq 100); do e4=$(node_epoch n1); [ -n "$e4" ] && break; sleep 0.05; done
nsql n1 "CREATE DATABASE db2" >/dev/null
nsql n1 "ALTER DATABASE db2 SET redis_primitives.key_prefix = 'db2:'" >/dev/null
d2() { psql -X -q -At -v ON_ERROR_STOP=1 -p "${NODE_PORT[n1]}" -d db2 -c "$1"; }
d2 "CREATE EXTENSION redis_primitives" >/dev/null
is "$(d2 "SHOW redis_primitives.key_prefix")" "db2:" "db2 has its own key_prefix"
is "$(d2 "SELECT node_id || ' ' || epoch FROM rp_leader('$ELECTION')")" "n1 $(node_epoch n1)" \
	"in db2, rp_leader shows the elector's term (1.0: nobody)"
is "$(d2 "SELECT coalesce(rp_campaign('$ELECTION', 'intruder', 10000)::text, 'NULL')")" "NULL" \
	"in db2, an SQL campaign cannot win a second leadership"
is "$(d2 "SELECT rp_is_leader('$ELECTION')")" "t" "in db2, rp_is_leader reads the same belief"
d2 "SELECT rp_acquire('$ELECTION', 10000)" >/dev/null
is "$(nsql n1 "SELECT rp_is_leader('$ELECTION') AND (SELECT epoch FROM rp_leader('$ELECTION')) = $(node_epoch n1)")" "t" \
	"a lock of the same name in db2's own namespace leaves the election alone"
is "$(redis exists "db2:{$ELECTION}:fence") $(redis get "rp:{$ELECTION}:lock" | cut -d: -f1)" "1 election" \
	"db2's lock counts under db2:, the election holds its lock under the server-wide prefix"
