#!/usr/bin/env bash
# scripts/test.sh -- the one command for every test (`make test`; .ci/run).
#
# Builds and installs the extension, starts a throwaway PostgreSQL and Redis,
# and runs every suite against them:
#   pg_regress      sql/ + expected/           deterministic SQL behaviour
#   isolation       test/isolation/specs/      concurrency interleavings
#   pgTAP           test/pgtap/*.sql           psql, as pg_prove runs them
#   scenarios       test/scenarios/*.sh        timing, faults, load (TAP, via prove)
#   tap             t/*.pl                     several servers: PostgreSQL::Test::Cluster
#                                              nodes and Redis servers of their own
# and, first, one check on the build: no two modules of src/ include or call
# each other in a circle (scripts/check-layers.py), whatever RP_SUITES says.
# Redis is flushed between suites and between files.  The servers are stopped
# and the folders are removed on exit, whatever happened.  Ends with
# "N passed, N failed".
#
# The pgTAP, scenario and t/*.pl files are run by one `prove -j RP_LANES`
# (default 3; RP_LANES=1 runs one file at a time), heaviest first, each
# through this script's --file mode (run_file), while pg_regress and
# isolation run on the first servers.  A pgTAP or scenario file takes a
# slot: a PostgreSQL + Redis pair no other file uses meanwhile (scenarios
# restart Redis and change server settings), started for the first file
# that takes it and kept for the next, unless the file failed or was killed
# (then its servers are stopped: on_slot).  A t/*.pl file starts its own.  Each
# file's output is printed in file-name order at the end, then prove's
# summary with each file's wall time.  A run stopped midway (TERM, ^C, a
# timeout) ends prove and every file it runs before stopping the servers.
#
# RP_SUITES="regress pgtap isolation scenarios tap" selects suites;
# RP_ONLY=pattern runs only pgTAP/scenario/t files whose name matches.
# A skipped plan ("1..0 # SKIP") counts as a failure: a skip silently drops
# every check of its file.  RP_ALLOW_SKIP=1 lets a run skip (say so in CI).
set -uo pipefail
source "$(dirname "$0")/lib.sh"

# flush: empty Redis, or fail (a reply other than OK: a password set; no
# reply in 30 s: a stopped Redis).
flush() {
	[ "$(timeout -k 5 30 redis-cli -p "$REDIS_PORT" flushall)" = OK ] &&
		[ "$(timeout -k 5 30 redis-cli -p "$REDIS_PORT" script flush)" = OK ]
}

# The database every suite expects, on the servers of PGHOST/PGPORT/REDIS_PORT.
# A slot's servers serve file after file, of any suite: each file gets
# rp_test afresh from rp_template, so that no table, function or session a
# file left behind is seen by the next.
setup_db() {
	psql -X -q -c "CREATE DATABASE rp_template" >/dev/null &&
		psql -X -q -d rp_template -c "CREATE EXTENSION pgtap; CREATE EXTENSION redis_primitives;" >/dev/null &&
		psql -X -q -d rp_template -v ON_ERROR_STOP=1 -f test/setup.sql >/dev/null
}
fresh_db() {
	timeout -k 5 60 psql -X -q -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS rp_test WITH (FORCE)" \
		-c "CREATE DATABASE rp_test TEMPLATE rp_template" \
		-c "ALTER DATABASE rp_test SET rp_test.redis_port = '$REDIS_PORT'" >/dev/null
}

# count FILE KIND RC: add FILE's checks to the totals and to ran[KIND].
count() {
	local out=$1 kind=$2 rc=$3 ok bad skipped
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
	passed=$((passed + ok)); failed=$((failed + bad)); ran[$kind]=$((ok + bad))
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
	passed=$((passed + ok)); failed=$((failed + bad)); ran[$1]=$((ok + bad))
	[ "$rc" -eq 0 ] && return
	[ "$bad" -eq 0 ] && failed=$((failed + 1))
	failures+=("$1")
	for f in regression.diffs output_iso/regression.diffs; do
		[ -f "$f" ] && { echo "---- $f"; head -200 "$f"; }
	done
}

# The pgTAP, scenario and t/*.pl files, heaviest first (a long file started
# last ends the run late): files whose path holds one of these words, in
# this order, then the rest in name order.  The order is the files' mean
# wall times in six runs of make test, longest first (fuzz_bad_input 97 s
# ... cleanup_face 21 s); the rest take under 20 s each.  A new file needs no
# entry; a new heavy one runs sooner with one.
HEAVY="fuzz_bad_input ratelimit_concurrency resources sentinel tls_topology cluster
semaphore.sh /tls.sh lock_mutual_exclusion faults splitbrain logical observe_notify
leases_never_stranded failover security ratelimit_cache standby lock_all.sh
dump_restore fence_workers examples cleanup_face"
files_heaviest_first() {
	local all w
	all=$(for s in $suites; do
		case $s in pgtap) ls test/pgtap/*.sql ;; scenarios) ls test/scenarios/*.sh ;; tap) ls t/*.pl ;; esac
	done 2>/dev/null | sort | while read -r f; do [[ $f == *${RP_ONLY:-}* ]] && echo "$f"; done)
	for w in $HEAVY; do grep -F "$w" <<<"$all"; done
	echo "$all"
}

# take_slot: lock the first free slot (fd $SLOT, held until this file ends;
# nothing started meanwhile may inherit it) and export its servers' PGHOST
# PGPORT REDIS_PORT RP_TMP, Redis flushed and rp_test afresh.  A slot that
# has no servers yet, or whose reset fails, gets a new pair (three tries:
# another run may take a free port first).
take_slot() {
	local try
	# k: the slot's number, on_slot's
	while :; do
		for ((k = 0; k < RP_LANES; k++)); do
			exec {SLOT}>"$OUT/slot-$k.lock"
			flock -n "$SLOT" && break 2
			exec {SLOT}>&-
		done
		sleep 1
	done
	for try in 1 2 3; do
		[ -f "$OUT/slot-$k.env" ] || start_slot
		[ -f "$OUT/slot-$k.env" ] && source "$OUT/slot-$k.env" && flush && fresh_db && return 0
		echo "# slot $k: servers not started, Redis not flushed in 30 s, or rp_test not made: new servers"
		retire_slot
	done
	return 1
}
start_slot() {
	export RP_TMP=$RUN/slot-$k PGHOST=$RUN/slot-$k REDIS_PORT=$(rp_free_port) PGPORT=$(rp_free_port)
	rp_as_pg mkdir -p "$RP_TMP"
	rp_start_redis "$REDIS_PORT" {SLOT}>&- && rp_start_pg pg "$PGPORT" "${RP_EXTRA_CONF:-}" {SLOT}>&- && setup_db &&
		echo "export RP_TMP=$RP_TMP PGHOST=$PGHOST PGPORT=$PGPORT REDIS_PORT=$REDIS_PORT" >"$OUT/slot-$k.env"
}
# retire_slot: stop every server of slot $k (a server a file started there
# too, a stopped Redis as well) and forget it: the next file starts anew.
retire_slot() {
	RP_TMP=$RUN/slot-$k rp_stop_servers
	rm -f "$OUT/slot-$k.env"
}

# on_slot CMD...: run a pgTAP or scenario file on a slot.  A file that
# failed or was killed may have left anything behind (a server setting, a
# password or maxmemory in Redis, a stopped Redis, a server still
# campaigning): its slot is retired, not handed to the next file.
on_slot() {
	local rc k
	take_slot || { echo "not ok 1 - its PostgreSQL and Redis did not start, or rp_test could not be made"; return 1; }
	timeout -k 10 "$limit" "$@" {SLOT}>&- 2>&1 | tee "$OUT/slot-$k.tap"
	rc=${PIPESTATUS[0]}
	if [ "$rc" -ne 0 ] || grep -q '^ *not ok' "$OUT/slot-$k.tap"; then
		echo "# the file failed (exit status $rc): slot $k is retired"
		retire_slot
	fi
	return "$rc"
}

# run_file FILE (prove's --exec): one pgTAP, scenario or t/*.pl file, its TAP on
# stdout for prove and kept in $OUT/KIND/ to be printed at the end.  A file
# still running after RP_FILE_TIMEOUT seconds (900) is killed and fails: a
# hung test must not hang make test.
run_file() {
	local f=$1 kind=scenarios limit=${RP_FILE_TIMEOUT:-900} rc out log cmd=(bash "$1")
	case $f in t/*) kind=tap ;; test/pgtap/*) kind=pgtap ;; esac
	# a pgTAP file as pg_prove runs it
	[ "$kind" = pgtap ] && cmd=(psql -X -A -q -t -P pager=off -v ON_ERROR_STOP=1 -d rp_test -f "$f")
	out=$OUT/$kind/$(basename "$f").out
	echo "---- $f" >"$out"
	if [ "$kind" = tap ]; then
		# What PGXS's prove_installcheck does (TAP_TESTS = 1), with the
		# nodes' folders under $TAPDIR, as the postgres user when we are
		# root: PostgreSQL::Test::Cluster starts its own servers.
		# PG_TEST_TIMEOUT_DEFAULT bounds every poll and wait of the harness
		# (180 s by default, and counted in attempts, which a loaded machine
		# stretches): a broken test fails in minutes, not quarter-hours.
		rp_as_pg timeout -k 10 "$limit" env TESTDIR="$TAPDIR" PATH="$PATH" \
			PG_TEST_TIMEOUT_DEFAULT="${PG_TEST_TIMEOUT_DEFAULT:-60}" \
			PG_REGRESS="$PGXS_DIR/test/regress/pg_regress" \
			perl -I "$PGXS_DIR/test/perl" -I t/lib "$f"
	else
		on_slot "${cmd[@]}"
	fi 2>&1 | tee -a "$out"
	rc=${PIPESTATUS[0]}
	[ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] &&
		echo "not ok 0 - $f: killed after $limit s (RP_FILE_TIMEOUT)" >>"$out"
	# the logs of a failed t/*.pl file's nodes, where the report prints them
	[ "$rc" -ne 0 ] && [ "$kind" = tap ] && for log in "$TAPDIR"/tmp_check/log/*"$(basename "$f" .pl)"*; do
		[ -f "$log" ] && { echo "---- $log (last 30 lines)"; tail -30 "$log"; }
	done >>"$out"
	return "$rc"
}
[ "${1:-}" = --file ] && { run_file "$2"; exit; }

start=$(date +%s)
rp_setup
rp_start_servers
cd "$RP_ROOT"

suites=${RP_SUITES:-regress isolation pgtap scenarios tap}
[ "${RP_LANES:-3}" -ge 1 ] 2>/dev/null || RP_LANES=1  # one slot per job: 0 would wait for ever
export RP_LANES=${RP_LANES:-3} RUN=$RP_TMP OUT=$RP_TMP/out TAPDIR=$RP_TMP/tap
export PGXS_DIR=$(dirname "$(dirname "$("$PG_CONFIG" --pgxs)")")
passed=0 failed=0 failures=()
declare -A ran  # suite -> checks it counted
mkdir -p "$OUT"/{pgtap,scenarios,tap}
rp_as_pg mkdir "$TAPDIR"

echo "==== layers"
if python3 scripts/check-layers.py; then
	passed=$((passed + 1))
else
	failed=$((failed + 1)); failures+=(layers)
fi

# prove runs in a session of its own: on a TERM, ^C or timeout, end it and
# every file it runs (children of theirs too) before stopping the servers.
files_sid=
stop_all() {
	if [ -n "$files_sid" ] && pkill -TERM -s "$files_sid"; then
		sleep 2; pkill -KILL -s "$files_sid"
	fi
	rp_stop_servers
}
trap stop_all EXIT

setup_db
files=$(files_heaviest_first | awk 'NF && !seen[$0]++')
if [ -n "$files" ]; then
	setsid prove -j "$RP_LANES" --timer --exec "bash $RP_ROOT/scripts/test.sh --file" $files \
		>"$OUT/prove.out" 2>&1 &
	files_sid=$!
fi

for s in $suites; do
	case $s in regress|isolation) echo "==== $s"; flush; run_pgxs "$s" ;; esac
done
files_rc=0
[ -n "$files_sid" ] && { wait "$files_sid"; files_rc=$?; }

for s in $suites; do
	case $s in pgtap|scenarios|tap)
		echo "==== $s"; cat "$OUT/$s"/*.out >"$OUT/$s.all" 2>/dev/null
		cat "$OUT/$s.all"; count "$OUT/$s.all" "$s" 0 ;;
	esac
done
if [ -n "$files_sid" ]; then
	echo "==== prove (the pgTAP, scenario and t/*.pl files)"
	cat "$OUT/prove.out"; count "$OUT/prove.out" prove "$files_rc"
fi

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
echo "suites: $suites; lanes: $RP_LANES; wall time $(( $(date +%s) - start )) s"
[ ${#failures[@]} -gt 0 ] && echo "failing suites: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ ${#failures[@]} -eq 0 ]
