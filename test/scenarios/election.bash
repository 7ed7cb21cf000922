# test/scenarios/election.bash -- sourced by test/scenarios/election_*.sh
# (not a test itself: the runner only runs *.sh).
#
# Two "nodes" are two more PostgreSQL servers on this machine (rp_start_pg),
# each with its own background elector and node_id, on the runner's Redis,
# with a short lease so that failures happen in test time.  The observer is
# the runner's own server: a database rp_election with dblink asks both
# nodes in turn, so every sample is a pair of answers taken well under a
# millisecond apart on one clock, from separate connections.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

LEASE=400 RENEW=100 MARGIN=100
ELECTION=job
OBS=rp_election    # observer database on the runner's server

# ---- TAP: the one dialect of every scenario (tap.bash) --------------------
source "$(dirname "${BASH_SOURCE[0]}")/tap.bash"

# ---- nodes ---------------------------------------------------------------
# A node "n1" of election_failover.sh lives in $RP_TMP/election_failover-n1
# (log: the same name + .log): scenario files share $RP_TMP.
declare -A NODE_PORT
NODES=()
SCEN=$(basename "$0" .sh)
ndir() { echo "$SCEN-$1"; }
nlog() { echo "$RP_TMP/$SCEN-$1.log"; }

node_conf() {  # node_id
	cat <<CONF
log_min_messages = log
redis_primitives.node_id = '$1'
redis_primitives.elections = '$ELECTION'
redis_primitives.election_lease = $LEASE
redis_primitives.election_renew = $RENEW
redis_primitives.election_margin = $MARGIN
CONF
}

nsql() {  # nsql node sql...: one value, unaligned
	psql -X -q -At -v ON_ERROR_STOP=1 -p "${NODE_PORT[$1]}" -d postgres -c "$2"
}
osql() {  # on the observer
	psql -X -q -At -v ON_ERROR_STOP=1 -d "$OBS" -c "$1"
}

# Start node name (again, if it was stopped); install the extension and a
# poller in its database.  A first start retries on another port: another
# test run on this machine may take the free port found between probe and
# bind.
start_node() {
	local name=$1 try
	if [ -d "$RP_TMP/$(ndir "$name")" ]; then
		rp_as_pg pg_ctl -D "$RP_TMP/$(ndir "$name")" -l "$(nlog "$name")" -w start >/dev/null || return 1
	else
		NODES+=("$name")
		for try in 1 2 3; do
			NODE_PORT[$name]=$(rp_free_port)
			rp_start_pg "$(ndir "$name")" "${NODE_PORT[$name]}" "$(node_conf "$name")" && break
			rm -rf "${RP_TMP:?}/$(ndir "$name")"
			[ "$try" -eq 3 ] && return 1
		done
	fi
	nsql "$name" "
	CREATE EXTENSION IF NOT EXISTS redis_primitives;
	-- Poll rp_is_leader every 2 ms until it equals want; the wall-clock ms
	-- at which it did, or NULL after timeout_ms.
	CREATE OR REPLACE FUNCTION wait_leader(want bool, timeout_ms int) RETURNS float8
	LANGUAGE plpgsql AS \$\$
	DECLARE t_end timestamptz := clock_timestamp() + timeout_ms * interval '1 ms';
	BEGIN
	  WHILE clock_timestamp() < t_end LOOP
	    IF coalesce((SELECT is_leader FROM rp_elections() WHERE name = '$ELECTION'), false) = want THEN
	      RETURN extract(epoch FROM clock_timestamp()) * 1000;
	    END IF;
	    PERFORM pg_sleep(0.002);
	  END LOOP;
	  RETURN NULL;
	END \$\$;" >/dev/null
	wait_row "$name"
}

# Wait until node's elector publishes the election (it starts a moment after
# the server accepts connections, and after a reload).
wait_row() {  # node
	local i
	for i in $(seq 250); do
		[ "$(nsql "$1" "SELECT count(*) FROM rp_elections() WHERE name = '$ELECTION'" 2>/dev/null)" = 1 ] && return 0
		sleep 0.02
	done
	return 1
}

stop_nodes() {
	local n
	for n in "${NODES[@]}"; do
		rp_stop_pg "$(ndir "$n")" immediate
		rm -rf "${RP_TMP:?}/$(ndir "$n")"
	done
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $OBS WITH (FORCE)" >/dev/null 2>&1
}

elector_pid() {  # node -> pid of its background elector
	local pm; pm=$(head -1 "$RP_TMP/$(ndir "$1")/postmaster.pid")
	pgrep -P "$pm" -f 'redis_primitives elector'
}

# Wait (from bash) until node's rp_elections row shows is_leader = want.
wait_node() {  # node want timeout_ms -> prints the ms timestamp or nothing
	nsql "$1" "SELECT round(wait_leader($2, $3))"
}

node_epoch() { nsql "$1" "SELECT epoch FROM rp_elections() WHERE name = '$ELECTION'"; }

# ---- observer ------------------------------------------------------------
setup_observer() {
	psql -X -q -d postgres -c "CREATE DATABASE $OBS" >/dev/null
	osql "
	CREATE EXTENSION dblink;
	CREATE EXTENSION redis_primitives;
	CREATE TABLE samples (run text, t_ms float8, skew_ms float8,
	                      a_leader bool, b_leader bool, a_state text, b_state text);
	-- Ask node a, then node b, every step_ms for seconds: is_leader (the
	-- deadline-bounded belief) and state (the elector's own flag, what a
	-- plain isLeader would say).  skew_ms: how far apart the two answers were.
	CREATE FUNCTION sample(run text, a text, b text, seconds float8, step_ms float8) RETURNS int
	LANGUAGE plpgsql AS \$\$
	DECLARE
	  q text := 'SELECT is_leader, state FROM rp_elections() WHERE name = ''$ELECTION''';
	  t_end timestamptz := clock_timestamp() + seconds * interval '1 s';
	  ta timestamptz; al bool; bl bool; ast text; bst text; n int := 0;
	BEGIN
	  PERFORM dblink_connect('a', a);
	  PERFORM dblink_connect('b', b);
	  WHILE clock_timestamp() < t_end LOOP
	    ta := clock_timestamp();
	    SELECT l, s INTO al, ast FROM dblink('a', q) AS x(l bool, s text);
	    SELECT l, s INTO bl, bst FROM dblink('b', q) AS x(l bool, s text);
	    INSERT INTO samples VALUES (run, extract(epoch FROM ta) * 1000,
	      extract(epoch FROM clock_timestamp() - ta) * 1000, al, bl, ast, bst);
	    n := n + 1;
	    PERFORM pg_sleep(step_ms / 1000);
	  END LOOP;
	  PERFORM dblink_disconnect('a');
	  PERFORM dblink_disconnect('b');
	  RETURN n;
	END \$\$;
	-- The resource both leaders write to, fenced by the epoch, and a naive
	-- twin that trusts whoever believes it leads.
	CREATE TABLE schedule (id int PRIMARY KEY, owner text, epoch bigint NOT NULL);
	CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON schedule
	  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('epoch');
	CREATE TABLE naive_schedule (id int PRIMARY KEY, owner text, epoch bigint);
	INSERT INTO schedule VALUES (1, 'nobody', 0);
	INSERT INTO naive_schedule VALUES (1, 'nobody', 0);
	-- Run a statement; 'ok' or its SQLSTATE.
	CREATE FUNCTION try(stmt text) RETURNS text LANGUAGE plpgsql AS \$\$
	BEGIN EXECUTE stmt; RETURN 'ok';
	EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE; END \$\$;" >/dev/null
}

# Start sampling in the background: sample_start run a b seconds
sample_start() {
	local conn_a="host=$RP_TMP port=${NODE_PORT[$2]} dbname=postgres user=postgres application_name=rp_sampler"
	local conn_b="host=$RP_TMP port=${NODE_PORT[$3]} dbname=postgres user=postgres application_name=rp_sampler"
	osql "SELECT sample('$1', '$conn_a', '$conn_b', $4, 2)" >"$RP_TMP/sample-$1.out" 2>&1 &
	SAMPLER=$!
}

# Wait until the sampler is connected to its second node (so it is sampling),
# then let it take a few samples: on a loaded machine, connecting may take
# longer than any fixed sleep.
wait_sampler() {  # second node
	local node=$1
	wait_for 20 '[ "$(nsql "$node" "SELECT count(*) FROM pg_stat_activity WHERE application_name = '"'rp_sampler'"'")" -ge 1 ]' ||
		diag "the sampler did not connect to $1"
	sleep 0.3
}

# Stats of one run, relative to t0 (epoch ms); prints "name=value" lines.
# A window is the sum, over samples where the condition holds, of the time to
# the next sample; *_after: ms from t0 to the first sample after it with the
# condition (-1: never); a_last_true: ms from t0 to the last sample before
# t_end at which node a still said is_leader (a gap in the sampling can only
# make it earlier, never later: it is the sound bound to assert on).
sample_stats() {  # run t0 t_end
	osql "
	CREATE TEMP VIEW s AS
	  SELECT *, lead(t_ms) OVER (ORDER BY t_ms) - t_ms AS dt
	  FROM samples WHERE run = '$1';
	SELECT 'n=' || count(*) FROM s
	UNION ALL SELECT 'max_gap=' || coalesce(round(max(dt)::numeric), 0) FROM s
	UNION ALL SELECT 'max_skew=' || coalesce(round(max(skew_ms)::numeric, 2), 0) FROM s
	UNION ALL SELECT 'both_leader=' || count(*) FILTER (WHERE a_leader AND b_leader) FROM s
	UNION ALL SELECT 'both_state=' || count(*) FILTER (WHERE a_state = 'leader' AND b_state = 'leader') FROM s
	UNION ALL SELECT 'elector_window=' || round(coalesce(sum(dt) FILTER (WHERE a_leader AND b_leader), 0)::numeric) FROM s
	UNION ALL SELECT 'naive_window=' || round(coalesce(sum(dt) FILTER (WHERE a_state = 'leader' AND b_state = 'leader'), 0)::numeric) FROM s
	UNION ALL SELECT 'a_leader_before=' || count(*) FILTER (WHERE a_leader AND t_ms < $2) FROM s
	UNION ALL SELECT 'a_last_true=' || coalesce(round((max(t_ms) - $2)::numeric), -1) FROM s WHERE t_ms >= $2 AND t_ms < $3 AND a_leader
	UNION ALL SELECT 'a_believed_after=' || coalesce(round((min(t_ms) - $2)::numeric), -1) FROM s WHERE t_ms >= $2 AND NOT a_leader
	UNION ALL SELECT 'a_flag_after=' || coalesce(round((min(t_ms) - $2)::numeric), -1) FROM s WHERE t_ms >= $2 AND a_state <> 'leader'
	UNION ALL SELECT 'b_leads_after=' || coalesce(round((min(t_ms) - $2)::numeric), -1) FROM s WHERE t_ms >= $2 AND b_leader"
}
