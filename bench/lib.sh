# bench/lib.sh -- the CSV that bench/run.sh and the bench/measure/*.sh
# scripts write (sourced).  One row per measurement; bench/report.py reads
# it.  Know before editing: the column list is the file format, and
# bench/report.py and every committed results CSV depend on it: add columns
# at the end, never rename or reorder them.
#
# Columns:
#   run_id        one per runner invocation (UTC start time and commit)
#   timestamp     UTC, when the row was measured
#   commit        git commit of the tree measured (+ "-dirty")
#   load1         the machine's 1-minute load average when measured
#   tool          pgbench | redis-benchmark | metric | skip | meta
#   name          workload (bench/workloads/<name>.sql), raw_<floor>, or a metric
#   clients       pgbench -c / redis-benchmark -c
#   rep           repetition, from 1
#   seconds       wall time of the measurement
#   transactions  transactions (pgbench) or requests (redis-benchmark)
#   failed        failed transactions
#   tps           transactions (or requests) per second
#   lat_mean_ms   mean latency: pgbench's clients / tps (exact)
#   lat_p50_ms, lat_p99_ms  from pgbench's per-transaction log
#   pctl_ok       0 when the log's own mean strays > 15% from lat_mean_ms
#                 (pgbench 15 reads its clock lazily with several fast
#                 clients): the percentiles are then understated
#   rt_per_txn    Redis round trips per transaction (INFO commandstats:
#                 EVALSHA, EVAL and the connection commands, every Redis the
#                 runner started), where counted
#   rt_per_call   rt_per_txn / the workload's `-- redis-calls:` (when > 0)
#   cpu_us_per_txn  CPU time of the PostgreSQL backends per transaction
#                 (the postmaster's reaped children, /proc stat cutime+cstime)
#   baseline      the workload's `-- baseline:`
#   value, unit   a metric row's figure
#   note          free text (a skip's reason, a metric's detail, meta data)

BENCH_COLUMNS="run_id,timestamp,commit,load1,tool,name,clients,rep,seconds,transactions,failed,tps,lat_mean_ms,lat_p50_ms,lat_p99_ms,pctl_ok,rt_per_txn,rt_per_call,cpu_us_per_txn,baseline,value,unit,note"

# bench_csv_init FILE: start a CSV (header) unless it exists.
bench_csv_init() {
	[ -s "$1" ] || echo "$BENCH_COLUMNS" > "$1"
}

# One field into the variable named $1, quoted when it holds a comma, a
# quote or a newline (no subshell: a row is written per measurement).
bench_csv_field() {
	local -n _out=$1
	local v=$2
	if [[ $v == *[,\"$'\n']* ]]; then v=${v//\"/\"\"}; _out="\"$v\""; else _out=$v; fi
}

# bench_row key=value ...: append one row to $BENCH_CSV; columns not given
# are empty; run_id, timestamp, commit and load1 are filled in.
bench_row() {
	local -A f=()
	local kv c fv line="" sep=""
	for kv in "$@"; do f[${kv%%=*}]=${kv#*=}; done
	: "${f[run_id]:=$BENCH_RUN_ID}" "${f[commit]:=$BENCH_COMMIT}"
	if [ -z "${f[timestamp]:-}" ]; then TZ=UTC printf -v 'f[timestamp]' '%(%Y-%m-%dT%H:%M:%SZ)T' -1; fi
	if [ -z "${f[load1]:-}" ]; then read -r 'f[load1]' _ < /proc/loadavg; fi
	for c in ${BENCH_COLUMNS//,/ }; do
		bench_csv_field fv "${f[$c]:-}"; line+=$sep$fv; sep=,
	done
	printf '%s\n' "$line" >> "$BENCH_CSV"
}

# A metric row: bench_metric name value unit [note] [clients].
bench_metric() {
	bench_row tool=metric "name=$1" "value=$2" "unit=$3" "note=${4:-}" "clients=${5:-}" rep="${BENCH_REP:-1}"
}
