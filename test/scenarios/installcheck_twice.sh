#!/usr/bin/env bash
# installcheck_twice.sh -- `make installcheck` is run against a user's own
# server and Redis, which nothing flushes between two runs.
#
# The regression and isolation suites are run three times in a row against
# one server with elections configured and one Redis, as a user's
# installcheck runs them: the second and third runs must pass as the first
# does.  Fence counters and election epochs live in Redis and never go back
# (by design), so a suite whose expected output printed absolute tokens
# passed once: the second run got token 103 where 1 was expected and its
# 'huge' name's counter, left at 2^63 - 1, refused (3 of 6 regression files
# failed).  The third run changes the server's key_prefix, which the
# suites must not depend on either.  Then: the suites left no lease behind
# (their fence counters stay, by design, under their own prefixes).
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 7

port=$(rp_free_port)
trap 'rp_stop_pg icpg' EXIT
rp_start_pg icpg "$port" "redis_primitives.elections = 'ic-nightly, ic-reports'"

pgxs=$(dirname "$(pg_config --pgxs)")/..
bindir=$(pg_config --bindir)
regress=(--inputdir="$RP_ROOT/test" --load-extension=redis_primitives --bindir="$bindir"
	--host="$RP_TMP" --port="$port" --user=postgres --dbname=contrib_regression)
# run N: the regression suite and the isolation specs, each into a folder
# of run N's own (not the source tree: another lane may be running them)
run() {
	local out=$RP_TMP/ic-$1 names specs rc=0
	mkdir -p "$out/regress" "$out/isolation"
	names=$(cd "$RP_ROOT/test/sql" && ls -- *.sql | sed 's/\.sql$//')
	specs=$(cd "$RP_ROOT/test/isolation/specs" && ls -- *.spec | sed 's/\.spec$//')
	# shellcheck disable=SC2086 # the names are words
	"$pgxs/test/regress/pg_regress" "${regress[@]}" --outputdir="$out/regress" $names \
		>"$out/regress.log" 2>&1 || rc=1
	# shellcheck disable=SC2086
	"$pgxs/test/isolation/pg_isolation_regress" "${regress[@]/--inputdir=*/--inputdir=$RP_ROOT/test/isolation}" \
		--outputdir="$out/isolation" $specs >"$out/isolation.log" 2>&1 || rc=$((rc + 2))
	# what failed, for the reader of a failed run
	[ "$rc" -eq 0 ] || cat "$out"/*.log "$out"/*/regression.diffs 2>/dev/null | head -60 | sed 's/^/# /'
	return "$rc"
}

run 1; is "$?" 0 "run 1: the regression suite and the isolation specs pass"
run 2; is "$?" 0 "run 2, same server and Redis, nothing flushed: they pass again"
PGPORT=$port PGHOST=$RP_TMP psql -X -q -U postgres -d postgres \
	-c "ALTER SYSTEM SET redis_primitives.key_prefix = 'ic-custom:'" -c "SELECT pg_reload_conf()" >/dev/null
is "$(PGPORT=$port PGHOST=$RP_TMP psql -X -At -U postgres -d postgres -c 'SHOW redis_primitives.key_prefix')" \
	"ic-custom:" "the server's key_prefix is now ic-custom:"
run 3; is "$?" 0 "run 3, under the server key_prefix ic-custom:: they pass"
# The elections the server runs are led still (the suites' own election
# names did not disturb them, under either prefix).
PQ() { PGPORT=$port PGHOST=$RP_TMP psql -X -At -U postgres -d contrib_regression -c "$1"; }
wait_for 10 '[ "$(PQ "SELECT count(*) FROM rp_elections() WHERE name LIKE '"'ic-%'"' AND is_leader")" = 2 ]'
is "$(PQ "SELECT string_agg(name || '=' || is_leader, ',' ORDER BY name) FROM rp_elections()")" \
	"ic-nightly=true,ic-reports=true" "the two configured elections are led by this server"
# No lease of the suites is left: what is under their prefixes is fence
# counters (no TTL, by design) and rate-limit windows (TTL), no lock or
# permit.
left=$(redis --scan --pattern 'rp-regress:*' | grep -E ':(lock|sem|semq|semw)$' | head -5)
is "$left" "" "no lease key of the suites is left in Redis"
cmp_ok "$(redis --scan --pattern 'rp-regress:*' | grep -c ':fence$')" -gt 0 \
	"the suites' keys were under rp-regress: (the check above saw them)"
finish
