#!/usr/bin/env bash
# scripts/test.sh -- the one command for every test (`make test`; .ci/run).
#
# Builds and installs the extension, starts a throwaway PostgreSQL and Redis,
# and runs every suite against them:
#   pg_regress      sql/ + expected/           deterministic SQL behaviour
#   isolation       test/isolation/specs/      concurrency interleavings
#   pgTAP           test/pgtap/*.sql           via pg_prove
#   scenarios       test/scenarios/*.sh        timing, faults, load (TAP, via prove)
#   tap             t/*.pl                     several servers: PostgreSQL::Test::Cluster
#                                              nodes and Redis servers of their own
# and, first, one check on the build: no two modules of src/ include or call
# each other in a circle (scripts/check-layers.py), whatever RP_SUITES says.
# Redis is flushed between suites and between files.  The servers are stopped
# and the folders are removed on exit, whatever happened.  Ends with
# "N passed, N failed".
#
# Lanes: the scenario and t/*.pl files are one queue, heaviest first, taken
# file by file by RP_LANES lanes running side by side (default 3).  Lane 0
# uses the first PostgreSQL + Redis once pg_regress, isolation and pgTAP are
# done on it; every other lane starts a PostgreSQL + Redis of its own when it
# first takes a scenario (scenarios restart Redis and change server settings,
# so two of them never share servers); a t/*.pl file starts its own.  Output
# is kept per file and printed in file-name order at the end, as one run
# would print it.  RP_LANES=1 runs everything one file at a time.
#
# RP_SUITES="regress pgtap isolation scenarios tap" selects suites;
# RP_ONLY=pattern runs only pgTAP/scenario/t files whose name matches.
# A skipped plan ("1..0 # SKIP") counts as a failure: a skip silently drops
# every check of its file.  RP_ALLOW_SKIP=1 lets a run skip (say so in CI).
set -uo pipefail
source "$(dirname "$0")/lib.sh"

start=$(date +%s)
rp_setup
rp_start_servers
cd "$RP_ROOT"

suites=${RP_SUITES:-regress isolation pgtap scenarios tap}
lanes=${RP_LANES:-3}
passed=0 failed=0 failures=()
OUT=$RP_TMP/out
mkdir -p "$OUT/scenarios" "$OUT/tap"
chmod 755 "$OUT"

echo "==== layers"
if python3 scripts/check-layers.py; then
	passed=$((passed + 1))
else
	failed=$((failed + 1)); failures+=(layers)
fi

# The lanes' own servers are stopped by the lanes; if we are stopped first
# (a timeout, ^C), end the lanes, then stop whatever they left.
lane_pids=()
stop_all() {
	local d p
	for p in "${lane_pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${lane_pids[@]}"; do wait "$p" 2>/dev/null; done
	for d in $(cat "$OUT/lane-dirs" 2>/dev/null); do
		( RP_TMP=$d REDIS_PORT=0; rp_stop_servers )
	done
	rp_stop_servers
}
trap stop_all EXIT

flush() { redis-cli -p "$REDIS_PORT" flushall >/dev/null; redis-cli -p "$REDIS_PORT" script flush >/dev/null; }

# The database every suite expects, on the servers of PGHOST/PGPORT/REDIS_PORT.
setup_db() {
	psql -X -q -c "CREATE DATABASE rp_test" >/dev/null
	psql -X -q -d rp_test -c "CREATE EXTENSION pgtap; CREATE EXTENSION redis_primitives;" >/dev/null
	psql -X -q -d rp_test -v ON_ERROR_STOP=1 -f test/setup.sql >/dev/null
	psql -X -q -c "ALTER DATABASE rp_test SET rp_test.redis_port = '$REDIS_PORT'" >/dev/null
}

# count FILE KIND RC: add FILE's checks to the totals.
count() {
	local out=$1 kind=$2 rc=$3 ok bad skipped
	grep -q '^Result: FAIL' "$out" && rc=1
	ok=$(grep -cE '^ *ok [0-9]+' "$out")
	bad=$(grep -cE '^ *not ok [0-9]+' "$out")
	# a script that died before its plan counts as a failure too
	bad=$((bad + $(grep -cE 'Bad plan|Dubious|Parse errors|No plan found' "$out")))
	# so does a skipped plan, unless skips are allowed
	skipped=$(grep -ciE '^ *1\.\.0 *# *skip|\.\. skipped' "$out")
	if [ "$skipped" -gt 0 ]; then
		if [ -n "${RP_ALLOW_SKIP:-}" ]; then
			echo "# $skipped skipped plan(s), allowed by RP_ALLOW_SKIP"
		else
			echo "# $skipped skipped plan(s): a skip fails the run (RP_ALLOW_SKIP=1 allows it)"
			bad=$((bad + skipped))
		fi
	fi
	# prove failed although no check did (a script that exited non-zero)
	[ "$rc" -ne 0 ] && [ "$bad" -eq 0 ] && bad=1
	passed=$((passed + ok)); failed=$((failed + bad))
	[ "$bad" -gt 0 ] && failures+=("$kind")
}

# pg_regress and isolation write results/ and output_iso/ into the tree.
run_pgxs() {  # regress|isolation
	local out=$OUT/$1.out skip=REGRESS= rc ok bad f
	[ "$1" = regress ] && skip=ISOLATION=
	make -s installcheck "$skip" TAP_TESTS= >"$out" 2>&1; rc=$?
	cat "$out"
	ok=$(grep -cE '^(ok|test) .*\.\.\. ok|^ok [0-9]+' "$out")
	bad=$(grep -cE '\.\.\. FAILED|^not ok' "$out")
	passed=$((passed + ok)); failed=$((failed + bad))
	[ "$rc" -eq 0 ] && return
	[ "$bad" -eq 0 ] && failed=$((failed + 1))
	failures+=("$1")
	for f in regression.diffs output_iso/regression.diffs; do
		[ -f "$f" ] && { echo "---- $f"; head -200 "$f"; }
	done
}

run_pgtap() {
	local out=$OUT/pgtap.out f rc=0 f_rc
	for f in test/pgtap/*.sql; do
		[ -n "${RP_ONLY:-}" ] && [[ "$f" != *${RP_ONLY}* ]] && continue
		flush
		pg_prove -d rp_test -v "$f"; f_rc=$?
		[ "$f_rc" -ne 0 ] && { rc=$f_rc; echo "# $f: exit status $f_rc"; }
	done >"$out" 2>&1
	cat "$out"
	count "$out" pgtap "$rc"
}

# ---- the queue of scenario and t/*.pl files --------------------------------
# Heaviest first (a lane that takes a long file last ends the run late):
# files whose name holds one of these words, in this order, then the rest in
# name order.  A new file needs no entry; a new heavy one runs sooner with one.
HEAVY="ratelimit_concurrency lock_mutual_exclusion sentinel cluster fuzz_bad_input
election tls_topology resources semaphore fence_workers faults examples
leases_never_stranded xact_and_exit observe_notify standby logical"
queue_files() {
	local f w rank
	{
		case " $suites " in *" scenarios "*) for f in test/scenarios/*.sh; do echo "$f"; done ;; esac
		case " $suites " in *" tap "*) for f in t/*.pl; do [ -f "$f" ] && echo "$f"; done ;; esac
	} | while read -r f; do
		[ -n "${RP_ONLY:-}" ] && [[ "$f" != *${RP_ONLY}* ]] && continue
		rank=0 w=
		for w in $HEAVY; do rank=$((rank + 1)); [[ "$(basename "$f")" == *"$w"* ]] && break; w=; done
		[ -z "$w" ] && rank=999
		printf '%03d %s\n' "$rank" "$f"
	done | sort | cut -d' ' -f2
}
queue_pop() {  # prints the next file, nothing when the queue is empty
	flock "$OUT/queue.lock" bash -c 'head -1 "$1"; sed -i 1d "$1"' _ "$OUT/queue"
}

# run_file FILE: one scenario or t/*.pl file, its output and exit status
# kept under $OUT/KIND/.  A file still running after RP_FILE_TIMEOUT seconds
# (900) is killed and fails: a hung test must not hang make test.
run_file() {
	local f=$1 kind name t0 rc limit=${RP_FILE_TIMEOUT:-900}
	case $f in t/*) kind=tap ;; *) kind=scenarios ;; esac
	name=$OUT/$kind/$(basename "$f")
	t0=$(date +%s)
	if [ "$kind" = tap ]; then
		# What PGXS's prove_installcheck does (TAP_TESTS = 1), with the
		# nodes' folders under $RP_TMP, as the postgres user when we are
		# root: PostgreSQL::Test::Cluster starts its own servers.
		# PG_TEST_TIMEOUT_DEFAULT bounds every poll and wait of the harness
		# (180 s by default, and counted in attempts, which a loaded machine
		# stretches): a broken test fails in minutes, not quarter-hours.
		rp_as_pg timeout -k 10 "$limit" env TESTDIR="$TAPDIR" PATH="$PGBIN:$PATH" \
			PG_TEST_TIMEOUT_DEFAULT="${PG_TEST_TIMEOUT_DEFAULT:-60}" \
			PG_REGRESS="$PGXS_DIR/test/regress/pg_regress" \
			prove -v -I "$PGXS_DIR/test/perl" -I t/lib "$f" >"$name.out" 2>&1 &
	else
		flush
		timeout -k 10 "$limit" prove -v "$f" >"$name.out" 2>&1 &
	fi
	CHILD=$!
	wait "$CHILD"; rc=$?
	CHILD=
	[ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] &&
		echo "not ok 0 - $f: killed after $limit s (RP_FILE_TIMEOUT)" >>"$name.out"
	echo "$rc" >"$name.rc"
	echo "$(( $(date +%s) - t0 )) s, lane $LANE" >"$name.time"
}

# lane N: take files from the queue until it is empty.  Lane 0 runs on the
# first servers; another lane starts its own for its first scenario (its
# EXIT trap, from rp_prepare_servers, stops them when the lane ends).
lane_stop() {
	[ -n "${CHILD:-}" ] && kill "$CHILD" 2>/dev/null
	exit 130
}
lane() {
	LANE=$1 CHILD=
	local f have_servers=0 try
	[ "$LANE" -eq 0 ] && have_servers=1
	trap lane_stop INT TERM
	while f=$(queue_pop); [ -n "$f" ]; do
		if [[ "$f" == test/* ]] && [ "$have_servers" -eq 0 ]; then
			# two lanes may pick the same free port at the same instant
			for try in 1 2 3; do
				rp_start_servers && redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && have_servers=1
				echo "$RP_TMP" >>"$OUT/lane-dirs"
				trap lane_stop INT TERM
				[ "$have_servers" -eq 1 ] && break
				rp_stop_servers
			done
			if [ "$have_servers" -eq 0 ]; then
				echo "not ok 1 - lane $LANE: its PostgreSQL and Redis did not start" >"$OUT/scenarios/$(basename "$f").out"
				echo 1 >"$OUT/scenarios/$(basename "$f").rc"
				exit 1
			fi
			setup_db
		fi
		run_file "$f"
	done
}

# the files' outputs, in name order, with their totals
report_files() {  # kind
	local kind=$1 all=$OUT/$1.all rc=0 o f_rc
	: >"$all"
	for o in "$OUT/$kind"/*.out; do
		[ -f "$o" ] || continue
		cat "$o"
		f_rc=$(cat "${o%.out}.rc" 2>/dev/null || echo 1)
		echo "# $(basename "${o%.out}"): $(cat "${o%.out}.time" 2>/dev/null)"
		[ "$f_rc" -ne 0 ] && { rc=$f_rc; echo "# $(basename "${o%.out}"): exit status $f_rc"; }
	done >"$all"
	# keep the nodes' logs of a failed run where the runner prints them
	[ "$kind" = tap ] && [ "$rc" -ne 0 ] && for o in "$TAPDIR"/tmp_check/log/*; do
		[ -f "$o" ] && { echo "---- $o (last 30 lines)"; tail -30 "$o"; }
	done >>"$all"
	# a file the queue gave out that has no result (its lane died) fails
	for o in $(grep -E "^$( [ "$kind" = tap ] && echo t || echo test/scenarios )/" "$OUT/queue.all"); do
		[ -f "$OUT/$kind/$(basename "$o").rc" ] || { rc=1; echo "not ok 0 - $o: never ran (its lane ended early)"; } >>"$all"
	done
	cat "$all"
	count "$all" "$kind" "$rc"
}

setup_db
PGXS_DIR=$(dirname "$(dirname "$("$PG_CONFIG" --pgxs)")")
TAPDIR=$RP_TMP/tap
mkdir -p "$TAPDIR"
[ "$(id -u)" -eq 0 ] && chown postgres: "$TAPDIR"

queue_files >"$OUT/queue"
cp "$OUT/queue" "$OUT/queue.all"
: >"$OUT/lane-dirs"
# Lanes 1.. start now, beside the single-server suites on lane 0's servers.
if [ -s "$OUT/queue" ]; then
	for ((l = 1; l < lanes; l++)); do
		( lane "$l" ) >"$OUT/lane-$l.log" 2>&1 &
		lane_pids+=($!)
	done
fi

declare -A ran  # suite -> checks it counted
for s in $suites; do
	before=$((passed + failed))
	case $s in
		regress|isolation) echo "==== $s"; flush; run_pgxs "$s" ;;
		pgtap)             echo "==== $s"; flush; run_pgtap ;;
	esac
	ran[$s]=$((passed + failed - before))
done
# in the background, so that a TERM to us is handled while the lanes run
( lane 0 ) >"$OUT/lane-0.log" 2>&1 &
lane_pids+=($!)
for p in "${lane_pids[@]}"; do wait "$p"; done
lane_pids=()
for l in "$OUT"/lane-*.log; do [ -s "$l" ] && { echo "---- $l"; cat "$l"; }; done

for s in $suites; do
	case $s in
		scenarios|tap) echo "==== $s"; before=$((passed + failed)); report_files "$s"
			ran[$s]=$((passed + failed - before)) ;;
	esac
done

# A suite that counted no check fails the run (a misspelt name in RP_SUITES,
# a glob that matched nothing, output the counting no longer recognises).
# With RP_ONLY a suite may match no file, but the run must check something.
empty=()
for s in $suites; do [ "${ran[$s]:-0}" -eq 0 ] && empty+=("$s"); done
if [ ${#empty[@]} -gt 0 ] && { [ -z "${RP_ONLY:-}" ] || [ $((passed + failed)) -eq 0 ]; }; then
	echo "# suites that ran no check: ${empty[*]}${RP_ONLY:+ (RP_ONLY=$RP_ONLY)}"
	failures+=("${empty[@]}")
fi

echo
echo "suites: $suites; lanes: $lanes; wall time $(( $(date +%s) - start )) s"
[ ${#failures[@]} -gt 0 ] && echo "failing suites: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ ${#failures[@]} -eq 0 ]
