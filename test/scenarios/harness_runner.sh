#!/usr/bin/env bash
# test/scenarios/harness_runner.sh -- the runner's own guards and helpers
# (scripts/test.sh, test/scenarios/tap.bash), each a way a test could pass
# while checking less than it says:
#   1. a misspelt name in RP_SUITES fails at once, even with RP_ONLY set
#      (the empty-suite guard lets a suite match no file then, so the
#      misspelt suite's files would silently not run);
#   2. session_q prints an output line that begins like its marker;
#   3. q runs the statements after an empty one;
#   4. a failed check's diagnostic that spans lines is a comment on every
#      line: a line of it is never read as a check or a plan.
source "$(dirname "$0")/tap.bash"
plan 4

out=$(RP_SUITES="pgtap scenario" RP_ONLY=topology timeout -k 5 120 bash "$RP_ROOT/scripts/test.sh" 2>&1)
is "$? $(tail -1 <<<"$out")" "2 RP_SUITES: no suite named scenario" \
	"RP_SUITES=\"pgtap scenario\" with RP_ONLY set fails at once (exit 2), naming the misspelt suite"

session_open s
is "$(session_q s "SELECT '__done_x' UNION ALL SELECT 'next'" | tr '\n' ' ')" "__done_x next " \
	"session_q prints an output line that begins like its marker"
session_close s

is "$(q "" "SELECT 1")" "1" "q runs the statement after an empty one"
out=$(is $'got\nok 9 - a line of the value\n1..9' expected "a check" | tail -n +2 | grep -v '^#')
is "$out" "" "a failed check prints each line of a multi-line value as a comment"
finish
