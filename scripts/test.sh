#!/usr/bin/env bash
# scripts/test.sh -- the one command for every test (`make test`; .ci/run).
#
# Builds and installs the extension into the PostgreSQL that PG_CONFIG
# names (default: pg_config on PATH; `make test PG_CONFIG=...` tests another
# major: scripts/lib.sh's rp_setup), starts throwaway PostgreSQL and Redis
# servers (a pair per slot, below), and runs every suite against them:
#   pg_regress      test/sql, expected         deterministic SQL behaviour
#   isolation       test/isolation/specs/      concurrency interleavings
#   pgTAP           test/pgtap/*.sql           psql, as pg_prove runs them
#   scenarios       test/scenarios/*.sh        faults, load, races (TAP, via prove)
#   tap             test/t/*.pl                 several servers: PostgreSQL::Test::Cluster
#                                              nodes and Redis servers of their own
#   timing          test/timing/*.{sql,sh,pl}  how fast: bounds on elapsed time only
# and, first, one check on the build: no two modules of src/ include or call
# each other in a circle (scripts/check-layers.py), whatever RP_SUITES says.
# The servers are stopped and the folders are removed on exit, whatever
# happened.  Ends with "N passed, N failed" for every suite but timing.
#
# The timing suite holds the checks whose only subject is elapsed time (a
# call ends within N ms of its timeout, a failover takes less than N s):
# what a loaded machine, not a bug, can fail.  Every other suite asserts
# behaviour, ordered on observed state.  It runs last, after every other
# suite's files have ended, one file at a time (RP_TIMING_LANES, 1), and
# is reported apart: "timing: N passed, N failed" after the line above.
# Named in RP_SUITES (make test-timing; CI, on a machine with nothing else
# running) its failures fail the run; run by default (make test, perhaps
# beside other work) they are reported and do not.
#
# Every suite's files but timing's are run by one `prove -j RP_LANES`
# (default 3; RP_LANES=1 runs one file at a time), heaviest first (timing's
# by a second prove, after it), each through this
# script's --file mode (run_file); pg_regress and isolation are one "file"
# each, their "test NAME ... ok|FAILED" lines turned into TAP.  A file other
# than a .pl one takes a slot: a PostgreSQL + Redis pair no other file uses
# meanwhile (scenarios restart Redis and change server settings), started
# for the first file that takes it and kept for the next, Redis flushed and
# rp_test afresh, unless the file failed or was killed (then its servers are
# stopped).  A .pl file (test/t/, test/timing/) starts its own.  Each file's output is printed
# in file-name order at the end, suite by suite, then prove's summary with
# each file's wall time.  A run stopped midway (TERM, ^C, a timeout) ends
# prove and every file it runs before stopping the servers.
#
# RP_SUITES="regress pgtap isolation scenarios tap timing" selects suites
# (default: all of them); RP_ONLY=pattern runs only pgTAP/scenario/t/timing
# files whose name matches (and pg_regress and isolation whole).
# A skipped plan ("1..0 # SKIP") counts as a failure: a skip silently drops
# every check of its file.  RP_ALLOW_SKIP=1 lets a run skip (say so in CI).
set -uo pipefail
source "$(dirname "$0")/lib.sh"

# count FILE KIND [RC]: FILE's checks: passed in c_ok, failed in c_bad,
# both in counted; KIND added to c_fail when one failed.
count() {
	local out=$1 kind=$2 rc=${3:-0} ok bad skipped
	ok=$(grep -cE '^ *ok [0-9]+' "$out")
	# a failed check, and a script that died before its plan (prove's words)
	bad=$(grep -cE '^ *not ok [0-9]+|Bad plan|Dubious|Parse errors|No plan found' "$out")
	# so does a skipped plan, unless skips are allowed
	skipped=$(grep -ciE '^ *1\.\.0 *# *skip|\.\. skipped' "$out")
	if [ "$skipped" -gt 0 ] && [ -n "${RP_ALLOW_SKIP:-}" ]; then
		echo "# $skipped skipped plan(s), allowed by RP_ALLOW_SKIP"
	elif [ "$skipped" -gt 0 ]; then
		echo "# $skipped skipped plan(s): a skip fails the run (RP_ALLOW_SKIP=1 allows it)"
		bad=$((bad + skipped))
	fi
	# prove failed although no check did (a script that exited non-zero)
	[ "$rc" -ne 0 ] && [ "$bad" -eq 0 ] && bad=1
	c_ok=$ok c_bad=$bad counted=$((ok + bad)) c_fail=()
	[ "$bad" -gt 0 ] && c_fail=("$kind")
}
# tally FILE KIND [RC]: count, into the other suites' totals
tally() { count "$@"; passed=$((passed + c_ok)); failed=$((failed + c_bad)); failures+=("${c_fail[@]}"); }
# tally_timing FILE KIND [RC]: count, into the timing suite's
tally_timing() { count "$@"; tpassed=$((tpassed + c_ok)); tfailed=$((tfailed + c_bad)); tfailures+=("${c_fail[@]}"); }

# The files of the suites, heaviest first (a long file started last ends
# the run late): files whose path holds one of these words, in this order,
# then the rest in name order.  The order is the files' mean wall times in
# four recent runs of make test, longest first (fuzz_bad_input 69 s,
# lease_belief 56 s ... fence_names 8 s); the rest take under 8 s each.  A
# new file needs no entry; a new heavy one runs sooner with one.  RP_ONLY
# does not narrow pg_regress and isolation (names without a /).
HEAVY="fuzz_bad_input lease_belief orphan_queue resources /tls.sh ratelimit_concurrency
tls_topology observe_notify 003_sentinel pool_exclusion cluster /semaphore.sh faults
election_replicas orphan_wakeup ratelimit_cache fence_workers pool_semaphore
installcheck_twice release_at_commit election_failover late_reply leases_never_stranded
examples security sentinel_idle splitbrain lock_mutual_exclusion lock_all.sh fence_names"
files_heaviest_first() {  # SUITE...
	local all w
	all=$(for s in "$@"; do
		case $s in regress|isolation) echo "$s" ;; pgtap) ls test/pgtap/*.sql ;;
			scenarios) ls test/scenarios/*.sh ;; tap) ls test/t/*.pl ;;
			timing) ls test/timing/*.sql test/timing/*.sh test/timing/*.pl ;; esac
	done 2>/dev/null | sort | while read -r f; do [[ $f == *${RP_ONLY:-}* || $f != */* ]] && echo "$f"; done)
	for w in $HEAVY; do grep -F "$w" <<<"$all"; done
	echo "$all"
}

# take_slot: lock a free slot (fd $SLOT, held until this file ends; nothing
# started meanwhile may inherit it) and export its servers' PGHOST PGPORT
# REDIS_PORT RP_TMP.  Each file gets Redis flushed (a reply other than OK:
# a password set; none in 30 s: a stopped Redis) and rp_test afresh, a copy
# of rp_template: no table, function or session a file left behind is seen
# by the next.  A slot that has no servers yet, or whose reset fails, gets
# a new pair (three tries: another run may take a free port first); after
# the third, a failed check.
take_slot() {
	local try
	# k: the slot's number, run_file's
	for ((k = 0; ; k = (k + 1) % RP_LANES)); do
		exec {SLOT}>"$OUT/slot-$k.lock"
		flock -n "$SLOT" && break
		exec {SLOT}>&-
		sleep 0.1
	done
	for try in 1 2 3; do
		{ [ -f "$RUN/slot-$k/env" ] || start_slot; } && source "$RUN/slot-$k/env" &&
			[ "$(printf 'flushall\nscript flush\n' | timeout -k 5 30 redis-cli -p "$REDIS_PORT")" = $'OK\nOK' ] &&
			timeout -k 5 60 psql -X -q -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS rp_test WITH (FORCE)" \
				-c "CREATE DATABASE rp_test TEMPLATE rp_template" \
				-c "ALTER DATABASE rp_test SET rp_test.redis_port = '$REDIS_PORT'" >/dev/null && return 0
		echo "# slot $k: servers not started, Redis not flushed in 30 s, or rp_test not made: new servers"
		retire_slot
	done
	echo "not ok 1 - its PostgreSQL and Redis did not start, or rp_test could not be made"
	return 1
}
# start_slot: a new pair for slot $k, and rp_template (pgTAP, the extension
# and test/setup.sql).
start_slot() {
	export RP_TMP=$RUN/slot-$k PGHOST=$RUN/slot-$k REDIS_PORT=$(rp_free_port) PGPORT=$(rp_free_port)
	rp_as_pg mkdir -p "$RP_TMP"
	rp_start_redis "$REDIS_PORT" {SLOT}>&- && rp_start_pg pg "$PGPORT" "${RP_EXTRA_CONF:-}" {SLOT}>&- &&
		psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE rp_template" -c '\c rp_template' \
			-c "CREATE EXTENSION pgtap" -c "CREATE EXTENSION redis_primitives" -f test/setup.sql >/dev/null &&
		echo "export RP_TMP=$RP_TMP PGHOST=$PGHOST PGPORT=$PGPORT REDIS_PORT=$REDIS_PORT" >"$RP_TMP/env"
}
# retire_slot: stop every server of slot $k (a server a file started there
# too, a stopped Redis as well) and remove its folder, env included: the
# next file starts anew.
retire_slot() { RP_TMP=$RUN/slot-$k rp_stop_servers; }

# run_file FILE (prove's --exec): one file of a suite, its output kept in
# $OUT/KIND/ (printed at the end) and then handed to prove as its TAP.  A
# file still running after RP_FILE_TIMEOUT seconds (900) is killed and
# fails: a hung test must not hang make test.
run_file() {
	local f=$1 kind=scenarios limit=${RP_FILE_TIMEOUT:-900} rc out k= diffs= cmd=(bash "$1")
	# a timing file is a pgTAP, scenario or t/ file by its name's ending
	case $f in test/t/*) kind=tap ;; test/pgtap/*) kind=pgtap ;; test/timing/*) kind=timing ;; esac
	case $f in
	# a pgTAP file as pg_prove runs it
	*.sql) cmd=(psql -X -A -q -t -P pager=off -v ON_ERROR_STOP=1 -d rp_test -f "$f") ;;
	# pg_regress and isolation write results/ and output_iso/ into the tree
	regress) kind=regress diffs=regression.diffs cmd=(make -s installcheck ISOLATION= TAP_TESTS=) ;;
	isolation) kind=isolation diffs=output_iso/regression.diffs cmd=(make -s installcheck REGRESS= TAP_TESTS=) ;;
	esac
	out=$OUT/$kind/$(basename "$f").out
	echo "---- $f" >"$out"
	if [[ $f == *.pl ]]; then
		# What PGXS's prove_installcheck does (TAP_TESTS = 1), with the
		# nodes' folders under $TESTDIR, as the postgres user when we are
		# root (runuser keeps the environment): PostgreSQL::Test::Cluster
		# starts its own servers.
		rp_as_pg timeout -k 10 "$limit" perl -I "$PGXS_DIR/test/perl" -I test/t/lib "$f"
	else
		take_slot && timeout -k 10 "$limit" "${cmd[@]}" {SLOT}>&-
	fi >>"$out" 2>&1
	rc=$?
	# pg_regress's "test NAME ... ok|FAILED" as TAP (15; from 16 on
	# pg_regress writes TAP itself, "ok 1 - NAME", its plan last), and its
	# diffs.  No test line at all (pg_regress did not start, or ran
	# nothing) gives the plan "1..", which prove fails as "No plan found"
	# even with RP_ALLOW_SKIP, where "1..0" would pass as a skip: keep it so.
	if [ -n "$diffs" ]; then
		echo "$(awk '/^test .* \.\.\. (ok|FAILED)/ { print ($4 == "ok" ? "" : "not ") "ok " ++n " - " $2 }
			/^(not )?ok [0-9]+ +- / { tap = 1 }
			END { if (!tap) print "1.." n }' "$out")" >>"$out"
		[ "$rc" -ne 0 ] && [ -f "$diffs" ] && { echo "---- $diffs"; head -200 "$diffs"; } | sed 's/^/# /' >>"$out"
	fi
	cat "$out"  # to prove
	case $rc in 124|137) echo "not ok 0 - $f: killed after $limit s (RP_FILE_TIMEOUT)" >>"$out" ;; esac
	# A file that failed or was killed may have left anything behind (a
	# server setting, a password or maxmemory in Redis, a stopped Redis, a
	# server still campaigning): its slot is retired, not handed to the
	# next file.
	if [ -n "$k" ] && { [ "$rc" -ne 0 ] || grep -q '^ *not ok' "$out"; }; then
		echo "# the file failed (exit status $rc): slot $k is retired" >>"$out"
		retire_slot
	fi
	# the logs of a failed t/*.pl file's nodes, where the report prints them
	[ "$rc" -ne 0 ] && [[ $f == *.pl ]] && tail -v -n 30 "$TESTDIR"/tmp_check/log/*"$(basename "$f" .pl)"* >>"$out" 2>/dev/null
	return "$rc"
}
[ "${1:-}" = --file ] && { run_file "$2"; exit; }

# A name in RP_SUITES that is no suite fails at once, RP_ONLY or not (the
# guard at the end lets a suite match no file when RP_ONLY is set).
suites=${RP_SUITES:-regress isolation pgtap scenarios tap timing}
bad=$(printf '%s\n' $suites | grep -vxE 'regress|isolation|pgtap|scenarios|tap|timing') &&
	{ rp_log "RP_SUITES: no suite named" $bad; exit 2; }
# The timing suite apart: run after the others, its failures failing the
# run only when RP_SUITES names it (make test-timing, CI).
others=$(printf '%s\n' $suites | grep -vx timing | paste -sd' ')
timing=$(printf '%s\n' $suites | grep -x timing)
timing_strict=${RP_SUITES:+$timing}
start=$(date +%s)
rp_setup
# The suites use two contrib modules (a second session inside a pgTAP file,
# a foreign table): Debian's server package has them; a build from source
# installs them with `make -C contrib install` (or `make install-world`).
for e in dblink postgres_fdw; do
	[ -f "$("$PG_CONFIG" --sharedir)/extension/$e.control" ] || {
		rp_log "make test needs contrib's $e in $("$PG_CONFIG" --sharedir)/extension (make -C contrib install)."
		exit 1; }
done
rp_make_tmp
cd "$RP_ROOT"

[ "${RP_LANES:-3}" -ge 1 ] 2>/dev/null || RP_LANES=1  # one slot per job: 0 would wait for ever
RP_TIMING_LANES=${RP_TIMING_LANES:-1}
[ "$RP_TIMING_LANES" -ge 1 ] 2>/dev/null || RP_TIMING_LANES=1
export RP_LANES=${RP_LANES:-3} RUN=$RP_TMP OUT=$RP_TMP/out TESTDIR=$RP_TMP
# t/*.pl's folders: PostgreSQL::Test::Utils takes $TESTDIR/tmp_check on 15,
# TESTDATADIR and TESTLOGDIR from 16 on (as PGXS's prove_installcheck sets).
export TESTDATADIR=$RP_TMP/tmp_check TESTLOGDIR=$RP_TMP/tmp_check/log
export PGXS_DIR=$(dirname "$(dirname "$("$PG_CONFIG" --pgxs)")")
# for the .pl files: PG_TEST_TIMEOUT_DEFAULT bounds every wait of the
# harness and of test/t/lib: wait_for_catchup, wait_for_subscription_sync
# and wait_for_log die when it runs out, wait_until gives up, a session's
# query and a background statement (twice as long) are killed.  It is the
# harness's own 180 s: a wait on observed state costs its limit only when
# it fails, and with 60 s t/001 and t/002 died on a busy machine (exit 29,
# the errno a die after psql leaves: their only dies are those waits and
# a failing safe_psql).
export PG_REGRESS=$PGXS_DIR/test/regress/pg_regress PG_TEST_TIMEOUT_DEFAULT=${PG_TEST_TIMEOUT_DEFAULT:-180}
passed=0 failed=0 failures=() empty=() checked=0 tpassed=0 tfailed=0 tfailures=()
mkdir -p "$OUT"/{regress,isolation,pgtap,scenarios,tap,timing}

echo "==== layers"
if python3 scripts/check-layers.py; then
	passed=$((passed + 1))
else
	failed=$((failed + 1)); failures+=(layers)
fi

# prove runs in a session of its own: on a TERM, ^C or timeout, end it and
# every file it runs (children of theirs too) before stopping the servers.
stop_all() {
	if [ -n "${files_sid:-}" ] && pkill -TERM -s "$files_sid"; then
		sleep 2; pkill -KILL -s "$files_sid"
	fi
	rp_stop_servers
}
trap stop_all EXIT
# run_prove LANES OUT FILE...: the files by one prove, its output in OUT.
run_prove() {
	local lanes=$1 out=$2; shift 2
	setsid prove -j "$lanes" --timer --exec "bash $RP_ROOT/scripts/test.sh --file" "$@" >"$out" 2>&1 &
	files_sid=$!
	wait "$files_sid"
}

# No file at all (an RP_ONLY that matches none): prove runs none (t/ holds
# no .t file), and the run fails below for checking nothing.
files_rc=0 timing_rc=0
if [ -n "$others" ]; then
	run_prove "$RP_LANES" "$OUT/prove.out" $(files_heaviest_first $others | awk 'NF && !seen[$0]++')
	files_rc=$?
fi
# Last, when nothing else runs: a timing file must not share the machine
# with this run's other files, nor, by default, with another timing file.
# Its slot is one the files above used (their servers are kept).
if [ -n "$timing" ]; then
	run_prove "$RP_TIMING_LANES" "$OUT/timing-prove.out" $(files_heaviest_first timing)
	timing_rc=$?
fi

# A suite that counted no check fails the run (a glob that matched nothing,
# output the counting no longer recognises).
# With RP_ONLY a suite may match no file, but the run must check something.
# Each suite's files' output, then prove's; timing's last.
suite_out() {  # SUITE TALLY: print and count the suite's files' output
	echo "==== $1"; cat "$OUT/$1"/*.out >"$OUT/$1.all" 2>/dev/null
	cat "$OUT/$1.all"; "$2" "$OUT/$1.all" "$1"
	checked=$((checked + counted))
	[ "$counted" -eq 0 ] && empty+=("$1")
}
for s in $others; do suite_out "$s" tally; done
if [ -n "$others" ]; then
	echo "==== prove ($others)"
	cat "$OUT/prove.out"; tally "$OUT/prove.out" prove "$files_rc"
fi
if [ -n "$timing" ]; then
	suite_out timing tally_timing
	echo "==== prove (timing)"
	cat "$OUT/timing-prove.out"; tally_timing "$OUT/timing-prove.out" prove "$timing_rc"
fi
if [ ${#empty[@]} -gt 0 ] && { [ -z "${RP_ONLY:-}" ] || [ "$checked" -eq 0 ]; }; then
	echo "# suites that ran no check: ${empty[*]}${RP_ONLY:+ (RP_ONLY=$RP_ONLY)}"
	for s in "${empty[@]}"; do
		if [ "$s" = timing ]; then tfailures+=(timing); else failures+=("$s"); fi
	done
fi

echo
echo "suites: $suites; lanes: $RP_LANES${timing:+, timing $RP_TIMING_LANES}; wall time $(( $(date +%s) - start )) s"
[ ${#failures[@]} -gt 0 ] && echo "failing suites: ${failures[*]}"
if [ -n "$timing" ] && [ ${#tfailures[@]} -gt 0 ]; then
	# the files with a failed check (each output begins "---- FILE"), or
	# else what failed (a file that died, a suite that checked nothing)
	tfiles=$(grep -l '^ *not ok' "$OUT"/timing/*.out 2>/dev/null | xargs -r -n1 head -1 | cut -c6- | paste -sd' ')
	echo "failing in the timing suite: ${tfiles:-${tfailures[*]}}"
	[ -z "$timing_strict" ] && echo "# timing failures do not fail this run (RP_SUITES does not name timing: the machine may be busy); make test-timing fails on them"
fi
echo "$passed passed, $failed failed"
[ -n "$timing" ] && echo "timing: $tpassed passed, $tfailed failed"
[ "$failed" -eq 0 ] && [ ${#failures[@]} -eq 0 ] &&
	{ [ -z "$timing_strict" ] || { [ "$tfailed" -eq 0 ] && [ ${#tfailures[@]} -eq 0 ]; }; }
