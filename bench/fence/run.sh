#!/usr/bin/env bash
# bench/fence/run.sh -- what a fence guard costs per row UPDATE
# (`make bench-fence`).  One throwaway PostgreSQL + Redis, one pgbench run in
# which every transaction draws one of four scripts at random (the machine is
# shared: variants drawn in one run see the same load): a row UPDATE of a
# random row of 1,000 with no trigger, with 1.0's token guard, with
# 'strict', and with the lock-bound guard (the writer holds the lease and
# passes no token).  Compares the UPDATE statement's mean latency (pgbench
# -r), and the same for an UPDATE of all 1,000 rows, whose difference to
# no trigger is the guard's cost per row.  An autocommit statement's latency includes its commit, so the
# lock-bound guard's commit-time check is counted.
#
# Knobs: RP_BENCH_T (s, default 20), RP_BENCH_CLIENTS (1).
set -uo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
T=${RP_BENCH_T:-20} C=${RP_BENCH_CLIENTS:-1}
HERE=$(cd "$(dirname "$0")" && pwd)

rp_setup
rp_start_servers
psql -X -q -v ON_ERROR_STOP=1 -f "$HERE/setup.sql" >/dev/null 2>&1 || { echo "setup failed" >&2; exit 1; }
log=$RP_TMP/pgbench.log
pgbench -n -r -c "$C" -j "$C" -T "$T" \
	-f "$HERE/plain.sql@10" -f "$HERE/token.sql@10" -f "$HERE/strict.sql@10" -f "$HERE/lock.sql@10" \
	-f "$HERE/bulk_plain.sql" -f "$HERE/bulk_token.sql" -f "$HERE/bulk_strict.sql" -f "$HERE/bulk_lock.sql" \
	>"$log" 2>&1 ||
	{ cat "$log"; exit 1; }
[ "$(psql -X -At -c "SELECT count(*) FROM t_lock WHERE fence_token > 0")" -gt 0 ] ||
	{ echo "the lock-bound guard stamped no row" >&2; exit 1; }
echo "pgbench: $T s, $C client(s), scripts drawn at random in one run"
printf '%-8s %8s %10s %8s %8s %10s %12s\n' guard tx update_ms vs_none bulk_tx bulk_ms us_per_row
# pgbench -r: "SQL script N: <file>", " - <n> transactions ...", then
# "   <latency>  <failures>  <statement>" lines.
awk '
	/^SQL script [0-9]+:/ { n = $NF; sub(/.*\//, "", n); sub(/\.sql$/, "", n); name = n }
	/^ - [0-9]+ transactions/ { tx[name] = $2 }
	/^ +[0-9.]+ +[0-9]+ +UPDATE/ { upd[name] = $1 }
	END {
		for (i = 1; i <= 4; i++) {
			n = (i == 1 ? "plain" : i == 2 ? "token" : i == 3 ? "strict" : "lock")
			b = "bulk_" n
			printf "%-8s %8s %10s %7.1f%% %8s %10s %12.2f\n", n, tx[n], upd[n],
				(upd[n] / upd["plain"] - 1) * 100, tx[b], upd[b], (upd[b] - upd["bulk_plain"])
		}
	}' "$log"
echo "us_per_row: (bulk UPDATE ms - the same without trigger) / 1,000 rows, in microseconds"
