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
# Redis is flushed between suites.  The servers are stopped and the folder is
# removed on exit, whatever happened.  Ends with "N passed, N failed".
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
passed=0 failed=0 failures=()

flush() { redis-cli -p "$REDIS_PORT" flushall >/dev/null; redis-cli -p "$REDIS_PORT" script flush >/dev/null; }

# pg_regress and isolation write results/ and output_iso/ into the tree.
run_pgxs() {  # target-kind
	local out rc
	out=$(mktemp)
	if [ "$1" = regress ]; then
		make -s installcheck ISOLATION= TAP_TESTS= >"$out" 2>&1; rc=$?
	else
		make -s installcheck REGRESS= TAP_TESTS= >"$out" 2>&1; rc=$?
	fi
	cat "$out"
	local ok bad
	ok=$(grep -cE '^(ok|test) .*\.\.\. ok|^ok [0-9]+' "$out")
	bad=$(grep -cE '\.\.\. FAILED|^not ok' "$out")
	passed=$((passed + ok)); failed=$((failed + bad))
	if [ "$rc" -ne 0 ]; then
		[ "$bad" -eq 0 ] && failed=$((failed + 1))
		failures+=("$1")
		for f in regression.diffs output_iso/regression.diffs; do
			[ -f "$f" ] && { echo "---- $f"; head -200 "$f"; }
		done
	fi
	rm -f "$out"
}

run_prove() {  # kind files...
	local kind=$1; shift
	local files=() f
	for f in "$@"; do
		[ -n "${RP_ONLY:-}" ] && [[ "$f" != *${RP_ONLY}* ]] && continue
		files+=("$f")
	done
	[ ${#files[@]} -eq 0 ] && return 0
	local out rc=0 f_rc
	out=$(mktemp)
	if [ "$kind" = tap ]; then
		# What PGXS's prove_installcheck does (TAP_TESTS = 1), with the
		# nodes' folders under $RP_TMP, as the postgres user when we are
		# root: PostgreSQL::Test::Cluster starts its own servers.
		local pgxs; pgxs=$(dirname "$(dirname "$("$PG_CONFIG" --pgxs)")")
		mkdir -p "$RP_TMP/tap"
		[ "$(id -u)" -eq 0 ] && chown postgres: "$RP_TMP/tap"
		# PG_TEST_TIMEOUT_DEFAULT bounds every poll and wait of the harness
		# (180 s by default, and counted in attempts, which a loaded machine
		# stretches): a broken test fails in minutes, not quarter-hours.
		rp_as_pg env TESTDIR="$RP_TMP/tap" PATH="$PGBIN:$PATH" \
			PG_TEST_TIMEOUT_DEFAULT="${PG_TEST_TIMEOUT_DEFAULT:-60}" \
			PG_REGRESS="$pgxs/test/regress/pg_regress" \
			prove -v -I "$pgxs/test/perl" -I t/lib "${files[@]}" >"$out" 2>&1
		rc=$?
		grep -q '^Result: FAIL' "$out" && rc=1
		# keep the nodes' logs of a failed run where the runner prints them
		[ "$rc" -ne 0 ] && for f in "$RP_TMP"/tap/tmp_check/log/*; do
			[ -f "$f" ] && { echo "---- $f (last 30 lines)"; tail -30 "$f"; }
		done >>"$out"
	else
		for f in "${files[@]}"; do
			flush
			if [ "$kind" = pgtap ]; then pg_prove -d rp_test -v "$f"; else prove -v "$f"; fi
			f_rc=$?
			[ "$f_rc" -ne 0 ] && { rc=$f_rc; echo "# $f: exit status $f_rc"; }
		done >"$out" 2>&1
		grep -q '^Result: FAIL' "$out" && rc=1
	fi
	cat "$out"
	local ok bad skipped
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
	rm -f "$out"
}

psql -X -q -c "CREATE DATABASE rp_test" >/dev/null
psql -X -q -d rp_test -c "CREATE EXTENSION pgtap; CREATE EXTENSION redis_primitives;" >/dev/null
psql -X -q -d rp_test -v ON_ERROR_STOP=1 -f test/setup.sql >/dev/null
export RP_REDIS_CLI="redis-cli -p $REDIS_PORT"
psql -X -q -c "ALTER DATABASE rp_test SET rp_test.redis_port = '$REDIS_PORT'" >/dev/null

for s in $suites; do
	echo "==== $s"
	flush
	case $s in
		regress)   run_pgxs regress ;;
		isolation) run_pgxs isolation ;;
		pgtap)     run_prove pgtap test/pgtap/*.sql ;;
		scenarios) run_prove scenarios test/scenarios/*.sh ;;
		tap)       run_prove tap t/*.pl ;;
	esac
done

echo
echo "suites: $suites; wall time $(( $(date +%s) - start )) s"
[ ${#failures[@]} -gt 0 ] && echo "failing suites: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ ${#failures[@]} -eq 0 ]
