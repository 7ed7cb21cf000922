#!/usr/bin/env bash
# test/scenarios/harness_servers.sh -- the harness's own servers
# (scripts/lib.sh).  Engineers, the mutation run and scripts/test.sh's slots
# start servers on random free ports of one machine at the same time, so two
# of them can pick the same port at the same instant.  Then:
#   1. rp_start_redis on a port that another Redis holds fails (its own
#      server could not listen) instead of succeeding because the other one
#      answers PING -- the naive readiness check, shown answering PONG -- and
#      then running a test against someone else's Redis; with Valkey as
#      with Redis (Valkey writes its pid file before it listens, so a pid
#      file does not say that it listens);
#   2. so does rp_start_servers, whose parts a slot of scripts/test.sh retries on
#      other ports when it fails;
#   3. rp_stop_servers never kills a Redis it did not start, even one that
#      listens on its REDIS_PORT;
#   4. rp_stop_redis never kills the process that took the pid its pid file
#      names once its Redis was gone (pids wrap within minutes here).
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 7

P=$(rp_free_port)
THEIRS=$(mktemp -d /tmp/redis_primitives.XXXXXX)
MINE=$(mktemp -d /tmp/redis_primitives.XXXXXX)
trap 'redis-cli -p "$P" shutdown nosave >/dev/null 2>&1; rm -rf "$THEIRS" "$MINE"' EXIT
( RP_TMP=$THEIRS; rp_start_redis "$P" ) >/dev/null 2>&1
theirs_pid=$(cat "$THEIRS/redis-$P.pid" 2>/dev/null)
is "$(redis-cli -p "$P" ping)" "PONG" "another lane's Redis listens on port $P"

( RP_TMP=$MINE; rp_start_redis "$P" ) >/dev/null 2>&1; rc=$?
cmp_ok "$rc" -ne 0 "rp_start_redis on that port fails: its own server could not listen"
is "$(redis-cli -p "$P" ping)" "PONG" "naive twin: a PING readiness check gets PONG there (from the other Redis)"

( RP_TMP=$MINE REDIS_PORT=$P; rp_stop_servers ) >/dev/null 2>&1
is "$(redis-cli -p "$P" info server | tr -d '\r' | sed -n 's/^process_id://p')" "$theirs_pid" \
	"rp_stop_servers with REDIS_PORT=$P left the other lane's Redis running"

# The PostgreSQL half stubbed out: only the Redis half can fail here.
( rp_free_port() { echo "$P"; }; rp_start_pg() { return 0; }
  rp_start_servers ) >/dev/null 2>&1; rc=$?
cmp_ok "$rc" -ne 0 "rp_start_servers whose Redis could not listen on port $P fails"
is "$(redis-cli -p "$P" info server | tr -d '\r' | sed -n 's/^process_id://p')" "$theirs_pid" \
	"and its exit left the other lane's Redis running"

# A Redis killed by a test leaves its pid file; its pid now belongs to
# another process (one of ours here, working in another folder).
mkdir -p "$MINE"
sleep 60 & other=$!
echo "$other" >"$MINE/redis-1.pid"
( RP_TMP=$MINE; rp_stop_redis 1 ) >/dev/null 2>&1
kill -0 "$other" 2>/dev/null
ok $? "rp_stop_redis whose pid file is stale left the process that took that pid running"
kill "$other" 2>/dev/null
