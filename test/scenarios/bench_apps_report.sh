#!/usr/bin/env bash
# bench_apps_report.sh -- bench/apps/report.py's goals table, from JSON
# lines written here (no servers): the time ratio is the base's throughput
# over the mode's, taken per round, then the median; a goal is met only by
# requests that completed.
#
# The naive twin divides whatever it finds: a base that completed no
# request in a round (node-redlock erroring on every call) gave a time
# ratio of 0.00, "met", and a mode that completed none (every call of the
# extension's statement failing) left its goal out of the table. A run
# under load, or one whose requests failed on either side, meets no goal
# whatever its ratio.
source "$(dirname "$0")/tap.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
plan 9

d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
# row GROUP ROUND MODE CLIENTS OPS_S ERRORS
row() {
	printf '{"kind":"round","group":"%s","round":%s,"pos":0,"mode":"%s","clients":%s,"ops_s":%s,"p50":0.1,"p99":0.2,"errors":%s}\n' "$@"
}
{
	# 1 client: the section faster than redlock's pattern by 0.5, 0.8 and
	# 0.857 of its time; the median of the throughputs' ratio would be 0.86.
	row section 0 redlock_section 1 1000 0; row section 0 rp_one_stmt 1 2000 0
	row section 1 redlock_section 1 4000 0; row section 1 rp_one_stmt 1 5000 0
	row section 2 redlock_section 1 3000 0; row section 2 rp_one_stmt 1 3500 0
	# 8 clients: node-redlock failed every call in every round.
	for r in 0 1 2; do row section $r redlock_section 8 0 900; row section $r rp_one_stmt 8 2000 0; done
	# The one string far under its goal, but 3 of its requests failed.
	for r in 0 1 2; do row section $r rp_one_trip 1 9000 $((r == 1 ? 3 : 0)); done
	# The folded rate limit failed every call, at both client counts.
	for r in 0 1 2; do for c in 1 8; do
		row admit $r rlf_admit $c 5000 0; row admit $r rp_admit $c 0 4000
	done; done
} >"$d/run.jsonl"
/usr/bin/python3 "$ROOT/bench/apps/report.py" "$d/run.jsonl" "$d/out.md" 0.1 0.1 >/dev/null 2>"$d/err"
ok $? "report.py writes the report"
goal() { grep -F "| $1 | $2 | $3 |" "$d/out.md" | head -1; }

is "$(goal 'rp: one statement (WITH lease)' 'node-redlock + INCR + UPDATE' 1)" \
	"| rp: one statement (WITH lease) | node-redlock + INCR + UPDATE | 1 | 0.80 | ≤ 0.7 | no |" \
	"the time ratio is the median over rounds of the base's ops/s over the mode's (0.80, not 0.86)"
r=$(goal 'rp: one statement (WITH lease)' 'node-redlock + INCR + UPDATE' 8)
[[ $r == *"| no |" || $r == *"| no: "*" |" ]]
ok $? "a base that completed no request meets no goal (got: ${r:-no row})"
r=$(goal 'rp_ratelimit folded' 'rate-limiter-flexible + query' 1)
[[ $r == *"| no |" || $r == *"| no: "*" |" ]]
ok $? "a mode that completed no request is in the table, not met (got: ${r:-no row})"
r=$(goal 'rp: one string (BEGIN … COMMIT)' 'node-redlock + INCR + UPDATE' 1)
[[ $r == *"| no: 3 failed requests |" ]]
ok $? "a ratio under its goal with failed requests is not met (got: ${r:-no row})"

# The same run under load (a load average at its end above any machine's
# cores): no goal is judged.
/usr/bin/python3 "$ROOT/bench/apps/report.py" "$d/run.jsonl" "$d/out.md" 0.1 9999 >/dev/null 2>"$d/err"
ok $? "report.py writes the report of a run under load"
r=$(goal 'rp: one statement (WITH lease)' 'node-redlock + INCR + UPDATE' 1)
[[ $r == *"| not judged: under load |" ]]
ok $? "under load the goals are not judged (got: ${r:-no row})"

# Given what other processes used of the machine while it ran (run.sh), a
# run is judged by that and the load at its start: the load at its end
# counts the benchmark's own clients.  Judged by the end alone, a quiet
# machine's run of 8 clients on 2 cores was "under load".
/usr/bin/python3 "$ROOT/bench/apps/report.py" "$d/run.jsonl" "$d/out.md" 0.1 9999 0.1 >/dev/null 2>"$d/err"
r=$(goal 'rp: one statement (WITH lease)' 'node-redlock + INCR + UPDATE' 1)
[[ $r == *"| 0.80 | ≤ 0.7 | no |" ]]
ok $? "a high load at the end, other processes idle: the goals are judged (got: ${r:-no row})"
/usr/bin/python3 "$ROOT/bench/apps/report.py" "$d/run.jsonl" "$d/out.md" 0.1 0.1 0.9 >/dev/null 2>"$d/err"
r=$(goal 'rp: one statement (WITH lease)' 'node-redlock + INCR + UPDATE' 1)
[[ $r == *"| not judged: under load |" ]]
ok $? "other processes using 0.9 of a core meanwhile: not judged (got: ${r:-no row})"
