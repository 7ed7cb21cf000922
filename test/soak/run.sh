#!/usr/bin/env bash
# test/soak/run.sh -- `make soak`: a randomized robustness run (docs/testing.md,
# "The soak").  Starts its own Redis and two PostgreSQL servers (both with the
# background elector contending for 'soak-leader'), runs soak/driver.py
# (workers + nemesis + samplers, writing a JSON-lines history), then
# soak/check.py, which decides every invariant from the history and the final
# tables alone, then soak/selftest.py, which doctors copies of this run's
# history and shows the checker reporting each kind of violation.
#
#   make soak                                  # SOAK_SECONDS=90, a random seed
#   make soak SOAK_SECONDS=1200 SOAK_SEED=42   # the nightly shape
#   SOAK_OUT=/tmp/soak-42 make soak ...        # keep the history there
#
# The one thing to know: everything the checker reads is written to
# $SOAK_OUT (default: a folder under /tmp that is kept and printed), outside
# the servers under test, so a failing seed can be re-checked and studied
# after the servers are gone.  Exits 1 on any violation.
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
# The whole run is one function, so bash reads all of it before it starts:
# editing this file during a long run cannot change what that run does next.
main() {
SOAK_SECONDS=${SOAK_SECONDS:-90}
SOAK_SEED=${SOAK_SEED:-$(( (RANDOM << 15) | RANDOM ))}
PY=/usr/bin/python3          # Debian's, where python3-psycopg is installed

rp_setup
# Acked commits must survive an immediate restart of PostgreSQL: the
# test configuration's synchronous_commit = off would lose the last ones
# and read as lost writes.  The elector: a lease of 3 s renewed every second.
common_conf="synchronous_commit = on
max_connections = 100
redis_primitives.election_lease = 3000
redis_primitives.election_renew = 1000
redis_primitives.election_margin = 500
redis_primitives.lease_margin = 300
redis_primitives.elections = 'soak-leader'
redis_primitives.command_timeout = 1500
log_min_messages = warning"
rp_prepare_servers
# SOAK_SENTINEL=1: the Redis started above becomes the master of a replica
# watched by three sentinels, the servers find the master through them, and
# the nemesis adds 'sentinel_failover' (and its Redis faults hit whichever
# node is master at the time).
SOAK_SENTINELS=""
if [ "${SOAK_SENTINEL:-0}" = 1 ]; then
	replica=$(rp_free_port)
	rp_start_redis "$replica" --replicaof 127.0.0.1 "$REDIS_PORT" --dbfilename "dump-$replica.rdb" || exit 1
	redis-cli -p "$REDIS_PORT" config set dbfilename "dump-$REDIS_PORT.rdb" >/dev/null
	for i in 1 2 3; do
		p=$(rp_free_port)
		cat > "$RP_TMP/sentinel-$p.conf" <<CONF
port $p
bind 127.0.0.1
daemonize yes
pidfile $RP_TMP/redis-$p.pid
logfile $RP_TMP/redis-$p.log
dir $RP_TMP
sentinel monitor soakm 127.0.0.1 $REDIS_PORT 2
sentinel down-after-milliseconds soakm 1000
sentinel failover-timeout soakm 3000
sentinel parallel-syncs soakm 1
CONF
		redis-sentinel "$RP_TMP/sentinel-$p.conf" || exit 1
		SOAK_SENTINELS="$SOAK_SENTINELS${SOAK_SENTINELS:+,}127.0.0.1:$p"
	done
	for i in $(seq 200); do
		[ "$(redis-cli -p "${SOAK_SENTINELS##*:}" sentinel sentinels soakm | grep -c '^name$')" -ge 2 ] &&
		redis-cli -p "$replica" info replication | grep -q master_link_status:up && break
		sleep 0.1
	done
	# fence_replicas = 1: a failover to a replica that missed a term or a
	# token would otherwise let a second holder take the same epoch or
	# fence (docs/topology.md); the soak checks the deployment the docs
	# recommend.  The WAIT gets the command's time: a replica descheduled
	# for a moment on a loaded machine is still in sync.
	common_conf="$common_conf
redis_primitives.sentinels = '$SOAK_SENTINELS'
redis_primitives.sentinel_master = 'soakm'
redis_primitives.fence_replicas = 1
redis_primitives.fence_replicas_timeout = 700"
	export SOAK_REDIS_NODES="$REDIS_PORT $replica"
fi
rp_start_pg pg "$PGPORT" "$common_conf
redis_primitives.node_id = 'n1'" || exit 1
PG2PORT=$(rp_free_port)
rp_start_pg pg2 "$PG2PORT" "$common_conf
redis_primitives.node_id = 'n2'"

SOAK_OUT=${SOAK_OUT:-$(mktemp -d /tmp/soak-$SOAK_SEED.XXXX)}
mkdir -p "$SOAK_OUT"; rm -f "$SOAK_OUT"/*.jsonl "$SOAK_OUT"/*.json
chmod 777 "$SOAK_OUT"
for port in "$PGPORT" "$PG2PORT"; do
	psql -X -q -p "$port" -c "CREATE DATABASE soak" >/dev/null || exit 1
	psql -X -q -p "$port" -d soak -v ON_ERROR_STOP=1 -f "$RP_ROOT/test/soak/sql/common.sql" >/dev/null || exit 1
done
psql -X -q -p "$PGPORT" -d soak -v ON_ERROR_STOP=1 -f "$RP_ROOT/test/soak/sql/node1.sql" >/dev/null || exit 1
for port in "$PGPORT" "$PG2PORT"; do
	psql -X -q -p "$port" -d soak -v ON_ERROR_STOP=1 -f "$RP_ROOT/test/soak/sql/leader.sql" >/dev/null || exit 1
done
# Every guard must be able to guard its table, or the run proves nothing.
problems=$(psql -X -At -p "$PGPORT" -d soak -c "SELECT t, p.* FROM unnest(ARRAY['t_token','t_skip','t_strict','t_lock','t_leader','rp_fenced_store']) t, rp_fence_check(t::regclass) p")
[ -z "$problems" ] || { rp_log "rp_fence_check: $problems"; exit 1; }

rp_log "soak: seed $SOAK_SEED, $SOAK_SECONDS s, history in $SOAK_OUT"
export SOAK_SECONDS SOAK_SEED SOAK_OUT PGPORT PG2PORT REDIS_PORT RP_TMP PGHOST SOAK_SENTINELS
export SOAK_PGBIN=$PGBIN
# The servers' logs go with the history (a failed driver's too): a failed
# run on a CI machine is then diagnosed from what the servers said, after
# $RP_TMP is gone.
keep_logs() { mkdir -p "$SOAK_OUT/logs"; cp "$RP_TMP"/*.log "$SOAK_OUT/logs/" 2>/dev/null; }
$PY "$RP_ROOT/test/soak/driver.py" || { keep_logs; rp_log "soak: the driver failed"; exit 1; }
keep_logs
$PY "$RP_ROOT/test/soak/check.py" "$SOAK_OUT"; rc=$?
# The selftest re-runs the checker once per invariant: on the short runs
# (CI), where it is cheap; SOAK_SELFTEST=1 forces it on a long one.
if [ "$SOAK_SECONDS" -le 300 ] || [ "${SOAK_SELFTEST:-0}" = 1 ]; then
	$PY "$RP_ROOT/test/soak/selftest.py" "$SOAK_OUT" || rc=1
fi
rp_log "soak: seed $SOAK_SEED, history kept in $SOAK_OUT (re-check: $PY test/soak/check.py $SOAK_OUT)"
exit $rc
}
main "$@"
