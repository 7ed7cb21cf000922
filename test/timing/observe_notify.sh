#!/usr/bin/env bash
# test/timing/observe_notify.sh -- the elector renews at its interval while
# its notifier is blocked.  test/scenarios/observe_notify.sh asserts that it
# keeps renewing, steps down and is elected again while a NOTIFY cannot be
# sent; this file bounds the rate: four renewals (1 s at 250 ms) within the
# 6 s lease.  (Only waiting for four passed an elector renewing every 2 s:
# four in 7251 ms.)
source "$(dirname "$0")/../scenarios/tap.bash"
plan 1

port=$(rp_free_port)
rm -rf "$RP_TMP/obs_notify_timing"
trap 'rp_stop_pg obs_notify_timing immediate' EXIT
rp_start_pg obs_notify_timing "$port" "redis_primitives.node_id = 'obs-n1'
redis_primitives.election_lease = 6000
redis_primitives.election_renew = 250
redis_primitives.election_margin = 300
redis_primitives.elector_database = 'postgres'
redis_primitives.leader_channel = 'rp_leader'"
qn() { psql -X -At -q -v ON_ERROR_STOP=1 -p "$port" -d postgres "$@"; }
qn -c "CREATE EXTENSION redis_primitives" -c "CREATE TABLE obs_blk (i int)" >/dev/null
qn -c "ALTER SYSTEM SET redis_primitives.elections = 'obs-job'" -c "SELECT pg_reload_conf()" >/dev/null
wait_for 60 '[ "$(qn -c "SELECT rp_is_leader('"'obs-job'"')")" = t ]' || diag "not elected in 60 s"
epoch=$(qn -c "SELECT epoch FROM rp_elections() WHERE name = 'obs-job'")

# NOTIFY's commit lock held: a session that committed a NOTIFY waits for a
# synchronous standby that does not exist.
qn -c "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" -c "SELECT pg_reload_conf()" >/dev/null
psql -X -q -p "$port" -d postgres -c "SET synchronous_commit = on" -c "BEGIN" \
	-c "INSERT INTO obs_blk VALUES (1)" -c "NOTIFY other" -c "COMMIT" >/dev/null 2>&1 &
blocker=$!
wait_for 60 '[ "$(qn -c "SELECT count(*) FROM pg_stat_activity WHERE wait_event = '"'SyncRep'"'")" = 1 ]' ||
	diag "the blocker was not seen waiting for the standby in 60 s"
# Another node takes the term for 800 ms: ours steps down (a notification
# its notifier cannot send: it blocks on the lock), then wins again.
redis SET "rp:{obs-job}:leader" "someone-else#x" PX 800 >/dev/null
wait_for 60 '[ "$(qn -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = '"'redis_primitives notifier'"' AND wait_event_type = '"'Lock'"'")" = 1 ]' ||
	diag "the notifier was not seen blocked in 60 s"
wait_for 60 '[ "$(qn -c "SELECT is_leader AND epoch > $epoch FROM rp_elections() WHERE name = '"'obs-job'"'")" = t ]' ||
	diag "not elected again in 60 s"
# Counted from here, the notifier still blocked.
renewed="SELECT calls - $(qn -c "SELECT calls FROM rp_stats WHERE primitive = 'elector_renew'") FROM rp_stats WHERE primitive = 'elector_renew'"
t0=$(now_ms)
wait_for 30 '[ "$(qn -c "$renewed")" -ge 4 ]'
renews=$(qn -c "$renewed") el=$(( $(now_ms) - t0 ))
blocked=$(qn -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'redis_primitives notifier' AND wait_event_type = 'Lock'")
within "$([ "${renews:-0}" -ge 4 ] && echo "renewing, notifier blocked: $blocked")" "renewing, notifier blocked: 1" "$el" 6000 \
	"the elector renews every 250 ms while its notifier is blocked: four renewals within the 6 s lease (${renews:-?} in $el ms)"
qn -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'" \
	-c "ALTER SYSTEM RESET synchronous_standby_names" -c "SELECT pg_reload_conf()" >/dev/null
wait "$blocker" 2>/dev/null
finish
