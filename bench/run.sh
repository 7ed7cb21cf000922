#!/usr/bin/env bash
# bench/run.sh -- measure the workloads and write raw results (`make bench`).
#
# Builds and installs the extension, starts a throwaway PostgreSQL (with the
# background elector leading one election) and Redis (scripts/lib.sh), a
# second Redis with a unix socket, and a TLS Redis when a tls workload is
# selected; runs every bench/workloads/<name>.sql with pgbench at each of its
# `-- clients:` counts, and every bench/measure/<name>.sh; and appends one CSV
# row per workload x clients x repetition (columns: bench/lib.sh).  It only
# measures: bench/report.py turns the CSV into bench/results/report.md.
#
# Know before editing: a workload file is data (bench/workloads/README.md
# lists its headers); add a workload there, not here.  This script never
# judges a number; it fails only when it cannot measure (and, with --strict,
# when a workload's run fails).
#
# Usage: bench/run.sh [--quick] [--filter REGEX] [--out FILE] [--seconds N]
#                     [--reps N] [--strict] [--report] [--history OLD.csv]
#   --quick     each workload once at its first client count, 100
#               transactions per client, measures in their short form;
#               implies --strict (BENCH_QUICK=1 does the same)
#   --filter    only workloads and measures whose name matches (bash regex)
#   --out       the CSV (overwritten; default bench/results/results.csv, or
#               bench/results/quick.csv with --quick)
#   --seconds   pgbench -T per run (RP_BENCH_T, default 2; a second more
#               per 8 clients, as pgbench's clock runs while they connect)
#   --reps      repetitions, round robin over all workloads (RP_BENCH_REPS, 1)
#   --strict    exit 1 when a workload or measure could not run (skips for
#               `requires` excepted)
#   --report    run bench/report.py on the CSV at the end: FILE.csv gives
#               FILE.md (results.csv gives report.md)
#   --history   with --report: compare with an earlier run's CSV
set -uo pipefail
export TZ=UTC
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../scripts/lib.sh"
source "$HERE/lib.sh"

T=${RP_BENCH_T:-2}
REPS=${RP_BENCH_REPS:-1}
QUICK=${BENCH_QUICK:-0}
FILTER=""
OUT=""
HISTORY=""
STRICT=0
REPORT=0
QUICK_TXN=100
while [ $# -gt 0 ]; do
	case $1 in
		--quick) QUICK=1 ;;
		--filter) FILTER=$2; shift ;;
		--out) OUT=$(realpath -m "$2"); shift ;;
		--seconds) T=$2; shift ;;
		--reps) REPS=$2; shift ;;
		--strict) STRICT=1 ;;
		--report) REPORT=1 ;;
		--history) HISTORY=$(realpath -m "$2"); shift ;;
		*) sed -n '/^# Usage/,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
	esac
	shift
done
[ "$QUICK" = 1 ] && { STRICT=1; REPS=1; }
[ -n "$OUT" ] || { OUT=$HERE/results/results.csv; [ "$QUICK" = 1 ] && OUT=$HERE/results/quick.csv; }
REPORT_OUT=${OUT%.csv}.md
[ "$(basename "$OUT")" = results.csv ] && REPORT_OUT=$(dirname "$OUT")/report.md
export BENCH_QUICK=$QUICK

# The background elector leads one election with a lease of an hour, so it
# campaigns once at start and never during a measurement (rp_is_leader(name)
# reads its shared memory).  A user's RP_EXTRA_CONF comes last and wins.
export ELECTION=bench-election
export TOKEN=0123456789abcdef0123456789abcdef	# a lease token written straight into Redis
RP_EXTRA_CONF="redis_primitives.node_id = 'bench-node'
redis_primitives.elections = '$ELECTION'
redis_primitives.election_lease = 3600000
redis_primitives.election_renew = 1800000
autovacuum = off
${RP_EXTRA_CONF:-}"
export RP_EXTRA_CONF

say() { printf '%s\n' "$*" >&2; }

# ---------------------------------------------------------------------------
# The workloads: headers into arrays, the body (variables replaced) into $W.
declare -A TITLE CLIENTS BASELINE REQUIRES SETUP ENVS REDIS_SETUP RCALLS DEFINES SKIP
NAMES=()
header() {  # file key -> every value of "-- key: value", one per line
	awk -v k="$2" '!/^-- [a-z-]+: / { exit } { p = "-- " k ": " } index($0, p) == 1 { print substr($0, length(p) + 1) }' "$1"
}
for f in "$HERE"/workloads/*.sql; do
	name=$(basename "$f" .sql)
	[ -n "$FILTER" ] && ! [[ $name =~ $FILTER ]] && continue
	NAMES+=("$name")
	TITLE[$name]=$(header "$f" title)
	CLIENTS[$name]=$(header "$f" clients | head -1)
	BASELINE[$name]=$(header "$f" baseline | head -1)
	REQUIRES[$name]=$(header "$f" requires | tr '\n' ' ')
	SETUP[$name]=$(header "$f" setup)
	ENVS[$name]=$(header "$f" env)
	REDIS_SETUP[$name]=$(header "$f" redis-setup)
	RCALLS[$name]=$(header "$f" redis-calls | head -1)
	DEFINES[$name]=$(header "$f" define)
	SKIP[$name]=""
	[ -n "${TITLE[$name]}" ] && [ -n "${CLIENTS[$name]}" ] ||
		{ say "$f: a workload needs '-- title:' and '-- clients:' headers"; exit 2; }
	[ "$QUICK" = 1 ] && CLIENTS[$name]=${CLIENTS[$name]%% *}
done
MEASURES=()
for f in "$HERE"/measure/*.sh; do
	[ -e "$f" ] || continue
	name=$(basename "$f" .sh)
	[ -n "$FILTER" ] && ! [[ $name =~ $FILTER ]] && continue
	MEASURES+=("$name")
done
[ ${#NAMES[@]} -gt 0 ] || [ ${#MEASURES[@]} -gt 0 ] || { say "no workload or measure matches '$FILTER'"; exit 2; }
NEED_TLS=no
for name in "${NAMES[@]}"; do [[ ${REQUIRES[$name]} == *tls* ]] && NEED_TLS=yes; done

# ---------------------------------------------------------------------------
start=$(date +%s)
rp_setup
rp_start_servers
cd "$RP_ROOT"
W=$RP_TMP/bench
mkdir -p "$W" "$(dirname "$OUT")"
chmod 777 "$W"
# Rows go to a scratch file that replaces OUT only when the run is over,
# so an interrupted run never leaves a committed CSV half rewritten.
export PGDATABASE=rp_bench BENCH_CSV=$W/results.csv W
export BENCH_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- src bench 2>/dev/null || BENCH_COMMIT+=-dirty
export BENCH_RUN_ID="$(date -u +%Y%m%dT%H%M%SZ)-$BENCH_COMMIT"
bench_csv_init "$BENCH_CSV"
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
psql -X -q -d postgres -c "CREATE DATABASE rp_bench" >/dev/null
q -c "CREATE EXTENSION redis_primitives" >/dev/null
PM=$(head -1 "$RP_TMP/pg/postmaster.pid")
HZ=$(getconf CLK_TCK)

# A second Redis, on TCP and a unix socket (the transport workloads).
export REDIS2_PORT=$(rp_free_port) REDIS2_SOCKET=$RP_TMP/redis2.sock
rp_start_redis "$REDIS2_PORT" --unixsocket "$REDIS2_SOCKET" --unixsocketperm 777
REDIS_PORTS="$REDIS_PORT $REDIS2_PORT"

# A TLS Redis: one server on a plain port and a TLS port, throwaway
# certificates (a CA and a server certificate for 127.0.0.1).
export TLS_PLAIN_PORT="" TLS_PORT="" TLS_DIR=$RP_TMP/tls
TLS_OK=no
if [ $NEED_TLS = yes ]; then
	mkdir -p "$TLS_DIR"
	if (cd "$TLS_DIR" && set -e &&
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=rp bench ca" &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr -subj "/CN=localhost" &&
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > server.ext &&
		openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile server.ext
	) >/dev/null 2>&1; then
		chmod 644 "$TLS_DIR"/*.crt; chmod 600 "$TLS_DIR"/*.key
		[ "$(id -u)" -eq 0 ] && chown -R postgres: "$TLS_DIR"
		TLS_PLAIN_PORT=$(rp_free_port); TLS_PORT=$(rp_free_port)
		while [ "$TLS_PORT" = "$TLS_PLAIN_PORT" ]; do TLS_PORT=$(rp_free_port); done
		rp_start_redis "$TLS_PLAIN_PORT" --tls-port "$TLS_PORT" --tls-cert-file "$TLS_DIR/server.crt" \
			--tls-key-file "$TLS_DIR/server.key" --tls-ca-cert-file "$TLS_DIR/ca.crt" --tls-auth-clients no &&
			{ TLS_OK=yes; REDIS_PORTS+=" $TLS_PLAIN_PORT"; }
	fi
	[ $TLS_OK = yes ] || say "no TLS Redis: the tls workloads are skipped"
fi

# ${VAR} in a workload or a floor line: the runner's variables only.
expand() {
	local s=$1 v
	for v in REDIS_PORT REDIS2_PORT REDIS2_SOCKET TLS_PLAIN_PORT TLS_PORT TLS_DIR TOKEN ELECTION; do
		s=${s//\$\{$v\}/${!v}}
	done
	printf '%s' "$s"
}
export -f expand

# The elector leads before anything is measured (bounded wait).
LEADING=no
for i in $(seq 100); do
	[ "$(q -c "SELECT rp_is_leader('$ELECTION')" 2>/dev/null)" = t ] && { LEADING=yes; break; }
	sleep 0.2
done
say "elector leading $ELECTION: $LEADING"

# Meta rows: what this run ran on.
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
bench_row tool=meta name=machine "note=$(nproc) cores ($CPU), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r)"
bench_row tool=meta name=versions "note=PostgreSQL $(q -c 'SHOW server_version'), Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), hiredis $(dpkg-query -W -f='${Version}' libhiredis-dev 2>/dev/null)"
bench_row tool=meta name=method "note=$( [ "$QUICK" = 1 ] && echo "quick: pgbench -t $QUICK_TXN per client" || echo "pgbench -T $T") -M prepared over the unix socket, $REPS repetition(s) round robin; Redis over TCP on 127.0.0.1"

# ---------------------------------------------------------------------------
# Counters read around each run.
# Redis round trips so far, over every Redis the runner started: the
# commands a backend sends itself (EVALSHA, EVAL after NOSCRIPT, and the
# connection's AUTH/SELECT/HELLO/PING/CLIENT); everything else Redis counts
# ran inside a script.
redis_rt() {
	local p
	for p in $REDIS_PORTS; do
		redis-cli -p "$p" info commandstats
	done | awk -F'[:=,]' '/^cmdstat_(evalsha|eval|auth|select|hello|ping|client):/ { s += $3 } END { print s + 0 }'
}
# CPU of every backend that has exited and been reaped (postmaster's
# cutime + cstime, clock ticks); first wait until no rp_bench backend is
# left (an exiting backend may still talk to Redis).
backends_gone() {
	local i
	for i in $(seq 200); do
		pgrep -P "$PM" -f 'postgres: .* rp_bench' >/dev/null || return 0
		sleep 0.02
	done
}
children_ticks() {  # -> TICKS (no subshell)
	local st f
	read -r st < "/proc/$PM/stat"
	read -r -a f <<<"${st##*) }"
	TICKS=$(( f[13] + f[14] ))
}

# pgbench with the workload's environment.
pgb() {  # name clients [pgbench args...]
	local name=$1 n=$2; shift 2
	local opts="" e d defs=()
	while IFS= read -r e; do [ -n "$e" ] && opts+=" -c $(expand "$e")"; done <<<"${ENVS[$name]}"
	while IFS= read -r d; do [ -n "$d" ] && defs+=(-D "$d"); done <<<"${DEFINES[$name]}"
	(cd "$W" && PGOPTIONS="${PGOPTIONS:-}$opts" pgbench -n -M prepared -c "$n" -j $(( n < 2 ? 1 : 2 )) \
		"${defs[@]}" -f "$W/$name.sql" "$@")
}

# ---------------------------------------------------------------------------
# Requirements and setup, once per workload (identical setup text once per
# run).  There is no separate trial run: a workload whose first measured run
# fails is skipped from then on, with pgbench's error in the CSV.
declare -A DONE_SETUP
FAILED=()
for name in "${NAMES[@]}"; do
	expand "$(< "$HERE/workloads/$name.sql")" > "$W/$name.sql"
	for r in ${REQUIRES[$name]}; do
		case $r in
			preload) [ "$LEADING" = yes ] || SKIP[$name]="requires preload: the background elector did not lead $ELECTION within 20 s" ;;
			cluster) SKIP[$name]="requires cluster: the runner starts no Redis Cluster" ;;
			tls) [ $TLS_OK = yes ] || SKIP[$name]="requires tls: no TLS Redis could be started" ;;
			*) SKIP[$name]="requires $r: unknown to the runner" ;;
		esac
	done
	if [ -n "${SKIP[$name]}" ]; then
		say "skip $name: ${SKIP[$name]}"
		bench_row tool=skip "name=$name" "note=${SKIP[$name]}"
		continue
	fi
	if [ -n "${REDIS_SETUP[$name]}" ] && [ -z "${DONE_SETUP[r:${REDIS_SETUP[$name]}]:-}" ]; then
		while IFS= read -r c; do
			# shellcheck disable=SC2046
			redis-cli -p "$REDIS_PORT" $(expand "$c") >/dev/null
		done <<<"${REDIS_SETUP[$name]}"
		DONE_SETUP[r:${REDIS_SETUP[$name]}]=1
	fi
	if [ -n "${SETUP[$name]}" ] && [ -z "${DONE_SETUP[s:${SETUP[$name]}]:-}" ]; then
		if ! err=$(cd "$HERE/workloads" && expand "${SETUP[$name]}" | sed -E '/^\\/!s/;?[[:space:]]*$/;/' | q -f - 2>&1 >/dev/null); then
			SKIP[$name]="setup failed: $(grep -m1 ERROR <<<"$err")"
			FAILED+=("$name")
			say "FAIL $name: ${SKIP[$name]}"
			bench_row tool=skip "name=$name" "note=${SKIP[$name]}"
			continue
		fi
		DONE_SETUP[s:${SETUP[$name]}]=1
	fi
done

# ---------------------------------------------------------------------------
# One measured run: a CSV row.  Few processes per run: on a loaded 2-core
# machine every fork costs tens of milliseconds.
measure() {  # name clients rep
	local name=$1 n=$2 rep=$3 tag="$1.$2.$3"
	local rt0 rt1 c0 c1 w0 w1 out=$W/$1.$2.$3.out line tps="" xacts=0 failed=0 err=""
	backends_gone; rt0=$(redis_rt); children_ticks; c0=$TICKS; w0=$EPOCHREALTIME
	# pgbench's -T clock starts before its clients connect, and at load 40
	# sixteen connections take two seconds: a second more per 8 clients.
	local len=(-T $(( T + (n + 3) / 8 ))); [ "$QUICK" = 1 ] && len=(-t "$QUICK_TXN")
	pgb "$name" "$n" "${len[@]}" --log --log-prefix="log.$tag" >"$out" 2>&1
	w1=$EPOCHREALTIME
	backends_gone; rt1=$(redis_rt); children_ticks; c1=$TICKS
	while IFS= read -r line; do
		case $line in
			"tps = "*) line=${line#tps = }; tps=${line%% *} ;;
			"number of transactions actually processed: "*) line=${line#*: }; xacts=${line%%/*} ;;
			"number of failed transactions: "*) line=${line#*: }; failed=${line%% *} ;;
			*ERROR*|*aborted*|*error:*) [ -z "$err" ] && err=${line:0:300} ;;
		esac
	done < "$out"
	if [ -z "$tps" ] || [ "$xacts" = 0 ] || [ -n "$err" ]; then
		[ -n "$err" ] || err="no transactions ($(grep -m1 -E '^(number of transactions|pgbench)' "$out" | cut -c1-200))"
		say "FAIL $tag: $err"
		FAILED+=("$name")
		SKIP[$name]="pgbench failed"
		bench_row tool=skip "name=$name" "clients=$n" "rep=$rep" "note=pgbench failed: $err"
		rm -f "$W"/log."$tag".*
		return
	fi
	# mean = clients / tps (exact); p50/p99 from the per-transaction log,
	# flagged when the log's own mean says pgbench read its clock lazily.
	local r
	r=$(sort -n -k3,3 "$W"/log."$tag".* 2>/dev/null | awk -v tps="$tps" -v n="$n" -v x="$xacts" \
		-v drt=$((rt1 - rt0)) -v k="${RCALLS[$name]:-0}" -v dt=$((c1 - c0)) -v hz="$HZ" -v w0="$w0" -v w1="$w1" '
		{ a[NR] = $3; s += $3 }
		END {
			mean = n * 1000 / tps; p50 = "-"; p99 = "-"; ok = "-"; rpc = "-"
			if (NR > 0) {
				i50 = int(NR * 0.50); if (i50 < 1) i50 = 1
				i99 = int(NR * 0.99); if (i99 < 1) i99 = 1
				lm = s / NR / 1000
				p50 = sprintf("%.4f", a[i50] / 1000); p99 = sprintf("%.4f", a[i99] / 1000)
				ok = 1; if (lm < mean * 0.85 || lm > mean * 1.15) ok = 0
			}
			rpt = drt / x
			if (k > 0) rpc = sprintf("%.4f", rpt / k)
			printf "%.4f %s %s %s %.4f %s %.1f %.2f\n", mean, p50, p99, ok, rpt, rpc, dt / hz * 1e6 / x, w1 - w0
		}')
	rm -f "$W"/log."$tag".*
	local mean p50 p99 ok rpt rpc cpu secs
	read -r mean p50 p99 ok rpt rpc cpu secs <<<"$r"
	[ "$p50" = - ] && p50="" p99="" ok=""
	[ "$rpc" = - ] && rpc=""
	bench_row tool=pgbench "name=$name" "clients=$n" "rep=$rep" "seconds=$secs" \
		"transactions=$xacts" "failed=$failed" "tps=$tps" "lat_mean_ms=$mean" \
		"lat_p50_ms=$p50" "lat_p99_ms=$p99" "pctl_ok=$ok" "rt_per_txn=$rpt" "rt_per_call=$rpc" \
		"cpu_us_per_txn=$cpu" "baseline=${BASELINE[$name]}"
	say "$(printf '%-24s c=%-3s rep %s: tps %-9s mean %-8s p99 %-8s rt/txn %-7s cpu %s µs/txn' "$name" "$n" "$rep" "$tps" "$mean" "$p99" "$rpt" "$cpu")"
}

# The measures (bench/measure/*.sh) first: the floors, memory, the
# wrapper's cost.  They write their own rows.
SCALE_CLIENTS=$(for name in "${NAMES[@]}"; do echo "${CLIENTS[$name]}"; done | tr ' ' '\n' | grep -v '^$' | sort -nu | tr '\n' ' ')
export SCALE_CLIENTS REDIS_PORT REPS RP_ROOT HERE
for m in "${MEASURES[@]}"; do
	say "== measure $m ($(( $(date +%s) - start )) s)"
	bash "$HERE/measure/$m.sh" || { say "measure $m failed"; FAILED+=("measure:$m"); }
done

# Round robin: every workload once per repetition, so a slow stretch of the
# machine falls on all of them rather than on one.
for rep in $(seq "$REPS"); do
	say "== repetition $rep of $REPS ($(( $(date +%s) - start )) s)"
	for name in "${NAMES[@]}"; do
		[ -n "${SKIP[$name]}" ] && continue
		for n in ${CLIENTS[$name]}; do
			[ -n "${SKIP[$name]}" ] && break
			measure "$name" "$n" "$rep"
		done
	done
done
bench_row tool=meta name=wall "value=$(( $(date +%s) - start ))" unit=s "note=wall time of the run"
cp "$BENCH_CSV" "$OUT.tmp" && mv "$OUT.tmp" "$OUT"
say "wrote $OUT ($(( $(date +%s) - start )) s)"

if [ "$REPORT" = 1 ]; then
	PY=/usr/bin/python3; [ -x $PY ] || PY=python3
	$PY "$HERE/report.py" --out "$REPORT_OUT" ${HISTORY:+--history "$HISTORY"} "$OUT" || FAILED+=("report")
fi
if [ ${#FAILED[@]} -gt 0 ]; then
	say "could not measure: ${FAILED[*]}"
	[ "$STRICT" = 1 ] && exit 1
fi
exit 0
