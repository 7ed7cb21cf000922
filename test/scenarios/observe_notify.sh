#!/usr/bin/env bash
# Leadership notifications: the elector's every change of belief is NOTIFYed
# on redis_primitives.leader_channel as JSON, and sending it never delays a
# renewal or a step-down.
#
# The naive twin is an elector that NOTIFYs in its own transaction.  NOTIFY
# takes a database-wide lock at commit; a session committing a NOTIFY while
# it waits for a synchronous standby holds that lock for as long as the
# standby is away.  The naive elector's commit waits behind it, its next
# renewal never comes, and its leadership lapses.  Ours keeps renewing and
# stepping down on time while its notifier waits, then sends what queued.
#
# The same server (one restart at the end) tests the bound of rp_locks and
# a notifier whose database does not exist.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 15

port=$(rp_free_port)
rm -rf "$RP_TMP/obs_notify" "$RP_TMP/obslis.in"
rp_start_pg obs_notify "$port" "redis_primitives.node_id = 'obs-n1'
redis_primitives.election_lease = 6000
redis_primitives.election_renew = 250
redis_primitives.election_margin = 300
redis_primitives.elector_database = 'postgres'
redis_primitives.leader_channel = 'rp_leader'
redis_primitives.max_tracked_leases = 3"
qn() { psql -X -At -q -v ON_ERROR_STOP=1 -p "$port" -d postgres "$@"; }
qn -c "CREATE EXTENSION redis_primitives" -c "CREATE TABLE obs_blk (i int)" >/dev/null

# The listener, then the election (so that the first win is heard).
PGPORT=$port RP_DB=postgres session_open obslis
session_q obslis "LISTEN rp_leader" >/dev/null
: >"$RP_TMP/obs_notes"
listen() {  # what reached the listener since the last look, into obs_notes
	session_q obslis "SELECT 1" | grep -o 'payload "{.*}"' | sed 's/^payload "//; s/"$//' >>"$RP_TMP/obs_notes"
}
# notes N: poll the listener until N notifications of the elector arrived
# (30 s at most; the naive twin's payload is no JSON and is not kept).
notes() {
	local n=$1
	wait_for 30 'listen; [ "$(wc -l <"$RP_TMP/obs_notes")" -ge "$n" ]'
	cat "$RP_TMP/obs_notes"
}
field() { qn -c "SELECT '$1'::json->>'$2'"; }
qn -c "ALTER SYSTEM SET redis_primitives.elections = 'obs-job'" -c "SELECT pg_reload_conf()" >/dev/null
first=$(notes 1 | head -1)
epoch=$(qn -c "SELECT epoch FROM rp_elections() WHERE name = 'obs-job'")
is "$(field "$first" name) $(field "$first" node_id) $(field "$first" is_leader) $(field "$first" epoch)" \
	"obs-job obs-n1 true $epoch" "elected: a JSON notification with name, node_id, is_leader, epoch"
is "$(qn -c "SELECT ('$first'::json->>'at')::timestamptz BETWEEN now() - interval '1 min' AND now()")" "t" \
	"and the time of the change"

# Block NOTIFY's commit lock: a session that committed a NOTIFY is waiting
# for a synchronous standby that does not exist.
qn -c "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" -c "SELECT pg_reload_conf()" >/dev/null
psql -X -q -p "$port" -d postgres -c "SET synchronous_commit = on" -c "BEGIN" \
	-c "INSERT INTO obs_blk VALUES (1)" -c "NOTIFY other" -c "COMMIT" >/dev/null 2>&1 &
blocker=$!
wait_for 30 '[ "$(qn -c "SELECT count(*) FROM pg_stat_activity WHERE wait_event = '"'SyncRep'"'")" = 1 ]' ||
	diag "the blocker was not seen waiting for the standby in 30 s"
# The naive elector: campaign, NOTIFY in its transaction, renew.
psql -X -q -p "$port" -d postgres -c "SET application_name = 'naive-elector'" \
	-c "SELECT rp_campaign('naive-job', 'naive', 1500)" -c "BEGIN" \
	-c "NOTIFY rp_leader, 'naive elected'" -c "COMMIT" -c "SELECT rp_campaign('naive-job', 'naive', 1500)" >/dev/null 2>&1 &
naive=$!
renew0=$(qn -c "SELECT calls FROM rp_stats WHERE primitive = 'elector_renew'")
t_renew0=$(now_ms)
# Another node takes obs-job for 800 ms: ours must step down, then win again.
# Every step below waits for the state it checks (30 s at most; the blocker
# holds NOTIFY's lock until this test cancels it, so no clock runs out).
redis SET "rp:{obs-job}:leader" "someone-else#x" PX 800 >/dev/null
notifier_blocked="SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'redis_primitives notifier' AND wait_event_type = 'Lock'"
wait_for 30 '[ "$(qn -c "$notifier_blocked")" = 1 ]'
is "$(qn -c "$notifier_blocked")" "1" "meanwhile the notifier is blocked on NOTIFY's lock"
# The naive elector is seen blocked in its COMMIT; its 1.5 s lease must lapse.
naive_lapsed="SELECT (SELECT count(*) FROM pg_stat_activity WHERE application_name = 'naive-elector' AND wait_event_type = 'Lock') = 1
                 AND (rp_leader('naive-job') IS NULL OR (rp_leader('naive-job')).node_id IS NULL)"
wait_for 30 '[ "$(qn -c "$naive_lapsed")" = t ]'
is "$(qn -c "$naive_lapsed")" "t" \
	"naive twin: the elector that notifies in its own transaction stopped renewing; its leadership lapsed"
reelected="SELECT is_leader AND epoch > $epoch FROM rp_elections() WHERE name = 'obs-job'"
wait_for 30 '[ "$(qn -c "$reelected")" = t ]'
epoch2=$(qn -c "SELECT epoch FROM rp_elections() WHERE name = 'obs-job'")
is "$(qn -c "SELECT is_leader FROM rp_elections() WHERE name = 'obs-job'") $((epoch2 > epoch))" "t 1" \
	"ours stepped down and was elected again under a new epoch, notifier blocked or not"
# Counted from here, with the notifier still blocked: four renewals (1 s at
# 250 ms; within the 6 s lease: test/timing/observe_notify.sh).
renew0=$(qn -c "SELECT calls FROM rp_stats WHERE primitive = 'elector_renew'") t_renew0=$(now_ms)
renewed="SELECT calls - $renew0 FROM rp_stats WHERE primitive = 'elector_renew'"
wait_for 60 '[ "$(qn -c "$renewed")" -ge 4 ]'
renews=$(qn -c "$renewed") el=$(( $(now_ms) - t_renew0 ))
cmp_ok "$renews" -ge 4 "and kept renewing meanwhile ($renews renewals in $el ms, every 250 ms, lease 6000 ms)"
is "$(qn -c "$notifier_blocked")|$(listen; wc -l <"$RP_TMP/obs_notes")" "1|1" "no notification could be sent while the lock was held"
# Let the blocker commit: cancel its wait for the standby (and the naive
# elector's, next in the queue for NOTIFY's lock), until the notifier holds
# the lock and sends.  No reload meanwhile: a SIGHUP sets the notifier's
# latch, which would hide a wake-up it lost while blocked (the elected
# change was queued then, and its wake-up was spent by the lock wait).
unblock="SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
wait_for 30 'qn -c "$unblock" >/dev/null; [ "$(qn -c "$notifier_blocked")" = 0 ]'
wait "$blocker" 2>/dev/null
out=$(notes 3 | grep -v naive | tail -n +2 | while read -r n; do echo "$(field "$n" is_leader):$(field "$n" epoch)"; done | tr '\n' ' ')
is "$out" "false:$epoch true:$epoch2 " "then both changes arrive, in order: stepped down from epoch $epoch, elected with $epoch2"
qn -c "ALTER SYSTEM RESET synchronous_standby_names" -c "SELECT pg_reload_conf()" >/dev/null
kill "$naive" 2>/dev/null
qn -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%naive-job%' AND pid <> pg_backend_pid()" >/dev/null
is "$(qn -c "SELECT ok > 0 AND calls = ok + refused + errors FROM rp_stats WHERE primitive = 'elector_renew'")" "t" \
	"the elector's renewals are counted in rp_stats"

# rp_locks is bounded: room for 3 leases.
out=$(qn -c "SELECT count(*) FROM (SELECT rp_acquire('small-' || i, 30000) FROM generate_series(1, 5) i) s" \
	-c "SELECT count(*) FROM rp_locks" \
	-c "SELECT locks_capacity || ' ' || locks_shown || ' ' || locks_not_shown || ' ' || locks_not_shown_total FROM rp_stats_info" \
	-c "SELECT rp_release_all()" \
	-c "SELECT locks_shown || ' ' || locks_not_shown || ' ' || locks_not_shown_total FROM rp_stats_info" | tr '\n' ' ')
is "$out" "5 3 3 3 2 2 5 0 0 2 " \
	"max_tracked_leases = 3: of five leases three are shown, two counted as not shown; none once released"

# Leaving the leader channel empty sends nothing.  The change of leadership
# is made only once the elector has taken the reload: the postmaster logged
# the new value (it signals its children after that), and then the elector
# renewed twice (it reloads at the top of its loop, before renewing).
session_q obslis "SELECT 1" >/dev/null
qn -c "ALTER SYSTEM SET redis_primitives.leader_channel = ''" -c "SELECT pg_reload_conf()" >/dev/null
wait_for 30 "grep -q 'parameter \"redis_primitives.leader_channel\" changed to \"\"' '$RP_TMP/obs_notify.log'" ||
	diag "the postmaster did not log the reload in 30 s"
renew1=$(qn -c "SELECT calls FROM rp_stats WHERE primitive = 'elector_renew'")
wait_for 30 '[ "$(qn -c "SELECT calls - $renew1 FROM rp_stats WHERE primitive = '"'elector_renew'"'")" -ge 2 ]'
redis SET "rp:{obs-job}:leader" "someone-else#x" PX 300 >/dev/null
wait_for 30 '[ "$(qn -c "SELECT epoch > $epoch2 AND is_leader FROM rp_elections() WHERE name = '"'obs-job'"'")" = t ]'
is "$(session_q obslis "SELECT 1" | grep -c payload)" "0" "with leader_channel empty, a change of leadership is not sent"
session_close obslis

# A notifier whose database does not exist: it fails (and says so in the
# log) over and over; the elector is not affected.
qn -c "ALTER SYSTEM SET redis_primitives.elector_database = 'obs_missing'" \
	-c "ALTER SYSTEM SET redis_primitives.leader_channel = 'rp_leader'" >/dev/null
rp_as_pg pg_ctl -D "$RP_TMP/obs_notify" -l "$RP_TMP/obs_notify.log" -m fast -w restart >/dev/null
wait_for 30 '[ "$(qn -c "SELECT rp_is_leader('"'obs-job'"')")" = t ]'
is "$(qn -c "SELECT rp_is_leader('obs-job')")" "t" "with elector_database naming no database, the elector still leads"
e3=$(qn -c "SELECT epoch FROM rp_elections() WHERE name = 'obs-job'")
redis SET "rp:{obs-job}:leader" "someone-else#x" PX 300 >/dev/null
wait_for 30 '[ "$(qn -c "SELECT epoch > $e3 AND is_leader FROM rp_elections() WHERE name = '"'obs-job'"'")" = t ]'
is "$(qn -c "SELECT epoch > $e3 AND is_leader FROM rp_elections() WHERE name = 'obs-job'")" "t" "and steps down and is re-elected as usual"
wait_for 30 "grep -q 'database \"obs_missing\" does not exist' '$RP_TMP/obs_notify.log'"
ok $? "the notifier's failure is in the log"
is "$(qn -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'redis_primitives notifier'")" "0" \
	"no notifier is connected"
rp_stop_pg obs_notify immediate
finish
