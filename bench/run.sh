#!/usr/bin/env bash
# bench/run.sh -- what each primitive costs (`make bench`).
#
# Builds and installs the extension, starts a throwaway PostgreSQL and Redis
# (scripts/lib.sh), and measures, each as a ratio within this one run:
#   1 round trips      Redis commands per SQL call (INFO commandstats deltas)
#   2 latency          single client, against SELECT 1 + one Redis round trip;
#                      then the same over Redis's unix socket (a second Redis)
#   3 scaling          1..32 clients: TPS, p50/p99, against SELECT 1 and raw Redis
#   4 fence trigger    UPDATE with no trigger / PostgreSQL's own C row trigger /
#                      rp_fence_guard / PL/pgSQL
#   5 alternatives     advisory locks; the same lease straight from Redis
#   6 memory           backend RSS and Redis memory over many calls
#   7 profile          where one acquire+release spends its time
# and writes bench/results/report.md and bench/results/*.png.  It reports; it
# never fails because a number is bad (only when it cannot run at all).
#
# Every pgbench run is short (RP_BENCH_T seconds, default 5): the machine is
# small and shared, so compare ratios within one run, not across runs.
#
# Adding a primitive is one line in ROWS below (and, for its raw-Redis floor,
# one line in RAW).  A row whose function is not installed is skipped with a
# note, so rows for primitives still being built can sit here already.
#
# Knobs: RP_BENCH_T (s per pgbench run), RP_BENCH_CLIENTS ("1 2 4 8 16 32"),
# RP_BENCH_RT_CALLS (transactions per round-trip count), RP_BENCH_MEM_SECONDS
# and RP_BENCH_MEM_CALLS (memory loop bounds).
set -uo pipefail
source "$(dirname "$0")/../scripts/lib.sh"

T=${RP_BENCH_T:-5}
CLIENTS=${RP_BENCH_CLIENTS:-1 2 4 8 16 32}
RT_CALLS=${RP_BENCH_RT_CALLS:-5000}
MEM_SECONDS=${RP_BENCH_MEM_SECONDS:-60}
MEM_CALLS=${RP_BENCH_MEM_CALLS:-1000000}
PREFIX=rp:		# redis_primitives.key_prefix (the default)
TOKEN=0123456789abcdef0123456789abcdef	# a lease token written straight into Redis
# The background elector (rp_is_leader(name) reads its shared memory): one
# election, a node_id, and a lease long enough that it campaigns once at
# start and never again during the run, so its renewals neither add to the
# round-trip counts of section 1 nor compete with the timed rows.  A user's
# RP_EXTRA_CONF comes after these lines and wins.
ELECTION=bench-election
RP_EXTRA_CONF="redis_primitives.node_id = 'bench-node'
redis_primitives.elections = '$ELECTION'
redis_primitives.election_lease = 3600000
redis_primitives.election_renew = 1800000
${RP_EXTRA_CONF:-}"
export RP_EXTRA_CONF

# ---------------------------------------------------------------------------
# What is measured.  One line per row:
#
#   id|label|k|raw|needs|flags|body
#
#   k      Redis round trips one transaction must make (the round-trip target;
#          '-' = not counted)
#   raw    RAW entries whose round trips make this row's floor, comma-separated;
#          empty with k > 0: k round trips of lock_acquire, a small script
#   needs  the function the row calls, as regprocedure text ('-' = none); the
#          row is skipped with a note when it is not installed
#   flags  r = count round trips, l = single-client latency, s = scaling,
#          c = contended (reported as acquire attempts/s)
#   body   the pgbench script; \n separates lines; :client_id is pgbench's
#
# The floor of a row is (SQL statements in body) x latency(SELECT 1) + its raw
# round trips: what the call would cost if the extension itself were free.
# ---------------------------------------------------------------------------
ACQ='rp_acquire(text,bigint,bigint,bigint)'
RL='rp_ratelimit(text,bigint,bigint,bigint,text)'
ROWS=(
"select1|SELECT 1|0||-|rls|SELECT 1;"
"pair|rp_acquire + rp_release (2 statements)|2|lock_acquire,lock_release|$ACQ|rls|SELECT fence FROM rp_acquire('bench-' || :client_id, 10000);\nSELECT rp_release('bench-' || :client_id);"
"extend|rp_extend (lease held)|1|lock_extend|rp_extend(rp_lease,bigint)|rl|SELECT fence FROM rp_extend(ROW('bench-ext-' || :client_id, '$TOKEN', 1, now())::rp_lease, 600000);"
"info|rp_lock_info|1|lock_info|rp_lock_info(text)|rl|SELECT held FROM rp_lock_info('bench-held');"
"held|rp_acquire of a held lock (NULL)|1|lock_acquire_held|$ACQ|rl|SELECT fence FROM rp_acquire('bench-held', 10000);"
"lost|rp_release of a lost lease (false)|1|lock_release|rp_release(rp_lease)|r|SELECT rp_release(ROW('bench-gone-' || :client_id, '$TOKEN', 1, now())::rp_lease);"
"xact|rp_acquire_xact in BEGIN..COMMIT|2|lock_acquire,lock_release|rp_acquire_xact(text,bigint,bigint,bigint,boolean)|rl|BEGIN;\nSELECT fence FROM rp_acquire_xact('bench-x-' || :client_id, 10000);\nCOMMIT;"
"contended|rp_acquire + rp_release, every client on one name|-||$ACQ|c|SELECT fence FROM rp_acquire('bench-contended', 10000);\nSELECT rp_release('bench-contended');"
"sem|rp_semaphore_acquire + rp_release (2 statements)|2|sem_acquire,sem_release|rp_semaphore_acquire(text,integer,bigint,bigint)|rls|SELECT fence FROM rp_semaphore_acquire('bench-sem-' || :client_id, 4, 10000);\nSELECT rp_release('bench-sem-' || :client_id);"
"sem_shared|rp_semaphore_acquire + rp_release, every client on one semaphore of 4|-||rp_semaphore_acquire(text,integer,bigint,bigint)|c|SELECT fence FROM rp_semaphore_acquire('bench-sem-shared', 4, 10000);\nSELECT rp_release('bench-sem-shared');"
"advisory|pg_try_advisory_lock + pg_advisory_unlock|0||-|rls|SELECT pg_try_advisory_lock(:client_id);\nSELECT pg_advisory_unlock(:client_id);"
"fence|UPDATE of a fenced table (rp_fence_guard)|0||-|r|\\set id random(1, 1000)\nUPDATE bench_fence_c SET balance = balance + 1, fence_token = 7 WHERE id = :id;"
"rl_log|rp_ratelimit sliding_log|1|rl_log|$RL|rls|SELECT rp_ratelimit('bench-' || :client_id, 100000, 1000, 1, 'sliding_log');"
"rl_win|rp_ratelimit sliding_window|1|rl_win|$RL|rls|SELECT rp_ratelimit('bench-' || :client_id, 100000, 1000, 1, 'sliding_window');"
"rl_gcra|rp_ratelimit gcra|1|rl_gcra|$RL|rls|SELECT rp_ratelimit('bench-' || :client_id, 100000, 1000, 1, 'gcra');"
"campaign|rp_campaign (renewing)|1|campaign|rp_campaign(text,text,bigint)|rls|SELECT rp_campaign('bench-camp-' || :client_id, 'node-' || :client_id, 10000);"
"is_leader|rp_is_leader(name) (shared memory, elector leading)|0||rp_is_leader(text)|rl|SELECT rp_is_leader('$ELECTION');"
)

# Raw Redis: one script, straight from redis-benchmark.  id|lua file|args
# (__rand_int__ is redis-benchmark's; each occurrence gets its own number).
# They run in Redis database RAWDB so their keys can be dropped before the
# memory section.
RAW=(
"lock_acquire|src/lua/lock_acquire.lua|2 ${PREFIX}{rb:__rand_int__}:lock ${PREFIX}{rb:__rand_int__}:fence $TOKEN 10000 0"
"lock_release|src/lua/lock_release.lua|1 ${PREFIX}{rb:__rand_int__}:lock $TOKEN"
"lock_extend|src/lua/lock_extend.lua|1 ${PREFIX}{bench-ext-raw}:lock $TOKEN 600000"
"lock_info|src/lua/lock_info.lua|2 ${PREFIX}{bench-held}:lock ${PREFIX}{bench-held}:fence"
"lock_acquire_held|src/lua/lock_acquire.lua|2 ${PREFIX}{bench-held}:lock ${PREFIX}{bench-held}:fence $TOKEN 10000 0"
"rl_log|src/lua/ratelimit_sliding_log.lua|1 ${PREFIX}{bench-rl-raw}:rl:sliding_log 100000 1000 1 1 0 rb.__rand_int__.__rand_int__"
"rl_win|src/lua/ratelimit_sliding_window.lua|1 ${PREFIX}{bench-rl-raw}:rl:sliding_window 100000 1000 1 1 0"
"rl_gcra|src/lua/ratelimit_gcra.lua|1 ${PREFIX}{bench-rl-raw}:rl:gcra 100000 1000 1 1 0"
"sem_acquire|src/lua/semaphore_acquire.lua|4 ${PREFIX}{rb:__rand_int__}:sem ${PREFIX}{rb:__rand_int__}:fence ${PREFIX}{rb:__rand_int__}:semq ${PREFIX}{rb:__rand_int__}:semw s$TOKEN 4 10000 0 2000"
"sem_release|src/lua/semaphore_release.lua|1 ${PREFIX}{rb:__rand_int__}:sem s$TOKEN"
"campaign|src/lua/election_campaign.lua|2 ${PREFIX}{bench-camp-raw}:leader ${PREFIX}{bench-camp-raw}:fence node-raw 10000"
)

# Fence trigger variants: id|label|table
FENCE=(
"none|no trigger|bench_fence_none"
"builtin|suppress_redundant_updates_trigger (PostgreSQL's own C row trigger)|bench_fence_builtin"
"c|rp_fence_guard (C)|bench_fence_c"
"plpgsql|equivalent PL/pgSQL trigger|bench_fence_plpgsql"
)

# ---------------------------------------------------------------------------
start=$(date +%s)
rp_setup gnuplot-nox
rp_start_servers
cd "$RP_ROOT"
OUT=$RP_ROOT/bench/results
W=$RP_TMP/bench
mkdir -p "$OUT" "$W"
chmod 777 "$W"
export PGDATABASE=rp_bench
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
say() { printf '%s\n' "$*" >&2; }
section() { say ""; say "== $* ($(( $(date +%s) - start )) s)"; }

psql -X -q -d postgres -c "CREATE DATABASE rp_bench" >/dev/null
q -c "CREATE EXTENSION redis_primitives" >/dev/null

# Fixtures: a lock held by someone else, leases this benchmark holds by token,
# three fenced tables.
rcli set "${PREFIX}{bench-held}:lock" othertokenothertokenothertoken00 px 3600000 >/dev/null
rcli set "${PREFIX}{bench-held}:fence" 41 >/dev/null
for c in $(seq 0 63); do
	rcli set "${PREFIX}{bench-ext-$c}:lock" "$TOKEN" px 3600000 >/dev/null
done
RAWDB=1
rcli -n $RAWDB set "${PREFIX}{bench-ext-raw}:lock" "$TOKEN" px 3600000 >/dev/null
rcli -n $RAWDB set "${PREFIX}{bench-held}:lock" othertokenothertokenothertoken00 px 3600000 >/dev/null
rcli -n $RAWDB set "${PREFIX}{bench-held}:fence" 41 >/dev/null
q >/dev/null <<'SQL'
CREATE FUNCTION bench_fence_plpgsql() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- the same rule as rp_fence_guard('fence_token'), written by hand
  IF NEW.fence_token IS NULL THEN
    RAISE EXCEPTION 'fence token must not be NULL' USING ERRCODE = '22004';
  END IF;
  IF TG_OP = 'UPDATE' AND OLD.fence_token IS NOT NULL
     AND NEW.fence_token < OLD.fence_token THEN
    RAISE EXCEPTION 'stale fence token' USING ERRCODE = 'RP001';
  END IF;
  RETURN NEW;
END $$;
CREATE TABLE bench_fence_none (id int PRIMARY KEY, balance bigint NOT NULL,
  fence_token bigint NOT NULL) WITH (fillfactor = 50);
CREATE TABLE bench_fence_builtin (LIKE bench_fence_none INCLUDING ALL) WITH (fillfactor = 50);
CREATE TABLE bench_fence_c (LIKE bench_fence_none INCLUDING ALL) WITH (fillfactor = 50);
CREATE TABLE bench_fence_plpgsql (LIKE bench_fence_none INCLUDING ALL) WITH (fillfactor = 50);
CREATE TRIGGER guard BEFORE UPDATE ON bench_fence_builtin
  FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger();
CREATE TRIGGER guard BEFORE INSERT OR UPDATE ON bench_fence_c
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token');
CREATE TRIGGER guard BEFORE INSERT OR UPDATE ON bench_fence_plpgsql
  FOR EACH ROW EXECUTE FUNCTION bench_fence_plpgsql();
INSERT INTO bench_fence_none SELECT i, 0, 7 FROM generate_series(1, 1000) i;
INSERT INTO bench_fence_builtin SELECT * FROM bench_fence_none;
INSERT INTO bench_fence_c SELECT * FROM bench_fence_none;
INSERT INTO bench_fence_plpgsql SELECT * FROM bench_fence_none;
VACUUM ANALYZE bench_fence_none, bench_fence_builtin, bench_fence_c, bench_fence_plpgsql;
SQL

# rp_is_leader(name) is measured with the elector leading: wait (bounded) for
# its first campaign to land in shared memory.
LEADING=no
if [ "$(q -c "SELECT to_regprocedure('rp_is_leader(text)') IS NOT NULL")" = t ]; then
	for i in $(seq 100); do
		[ "$(q -c "SELECT rp_is_leader('$ELECTION')" 2>/dev/null)" = t ] && { LEADING=yes; break; }
		sleep 0.2
	done
	say "elector leading $ELECTION: $LEADING"
fi

declare -A LABEL K RAWOF NEEDS FLAGS BODY SKIP NSTMT
ORDER=()
for line in "${ROWS[@]}"; do
	IFS='|' read -r id label k raw needs flags body <<<"$line"
	ORDER+=("$id")
	LABEL[$id]=$label K[$id]=$k RAWOF[$id]=$raw NEEDS[$id]=$needs FLAGS[$id]=$flags
	BODY[$id]=${body//\\n/$'\n'}
	printf '%s\n' "${BODY[$id]}" > "$W/$id.sql"
	NSTMT[$id]=$(grep -vc '^\\' "$W/$id.sql")
	SKIP[$id]=""
	if [ "$needs" != - ] && [ "$(q -c "SELECT to_regprocedure('$needs') IS NULL")" = t ]; then
		SKIP[$id]="not measured: \`$needs\` is not in this build of the extension"
		say "skip $id: $needs not installed"
	fi
done
if [ -z "${SKIP[is_leader]:-}" ] && [ "$LEADING" != yes ]; then
	SKIP[is_leader]="not measured: the background elector did not lead \`$ELECTION\` within 20 s"
fi
# A trial transaction per row: a row that errors would abort the pgbench run
# it shares with other rows, so it is skipped with its error instead.
for id in "${ORDER[@]}"; do
	[ -n "${SKIP[$id]}" ] && continue
	if ! (cd "$W" && pgbench -n -M prepared -c 1 -t 1 -f "$W/$id.sql" >"$W/trial.$id" 2>&1) ||
		grep -qE 'aborted|ERROR' "$W/trial.$id"; then
		SKIP[$id]="not measured: a trial transaction failed: $(grep -m1 -E 'ERROR|aborted' "$W/trial.$id" | cut -c1-200)"
		say "skip $id: trial failed"
	fi
done
has() { [[ ${FLAGS[$1]} == *$2* ]] && [ -z "${SKIP[$1]}" ]; }

# ---------------------------------------------------------------------------
# Helpers.
# ---------------------------------------------------------------------------

# pgbench; prints "tps mean_ms p50_ms p99_ms failed" from per-transaction logs.
# Leaves the -r output in $W/<tag>.out.
pgb() {  # tag clients seconds script [extra pgbench args...]
	local tag=$1 n=$2 secs=$3 file=$4; shift 4
	local j=$(( n < 2 ? 1 : 2 ))
	rm -f "$W/log.$tag".*
	(cd "$W" && pgbench -n -M prepared -r -c "$n" -j "$j" -T "$secs" -f "$file" \
		--log --log-prefix="log.$tag" "$@" >"$W/$tag.out" 2>&1)
	local tps failed
	tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$W/$tag.out")
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$W/$tag.out")
	if [ -z "$tps" ]; then
		say "pgbench $tag failed:"; sed 's/^/  /' "$W/$tag.out" | tail -5 >&2
		echo "0 0 0 0 ${failed:-all} lazy"; return 1
	fi
	# The mean is pgbench's own (clients / tps), which is exact.  p50/p99
	# come from the per-transaction log, whose clock pgbench 15 reads lazily:
	# with several clients and sub-0.1 ms transactions it under-reports.  When
	# the log's mean strays more than 15% from the true mean, the
	# percentiles are marked "lazy" (printed with a dagger).
	cat "$W/log.$tag".* 2>/dev/null | awk '{print $3}' | sort -n | awk -v tps="$tps" -v n="$n" -v f="${failed:-0}" '
		{ a[NR] = $1; s += $1 }
		END {
			mean = n * 1000 / tps
			if (NR == 0) { printf "%.1f %.4f 0 0 %s lazy\n", tps, mean, f; exit }
			i50 = int(NR * 0.50); if (i50 < 1) i50 = 1
			i99 = int(NR * 0.99); if (i99 < 1) i99 = 1
			lm = s / NR / 1000
			printf "%.1f %.4f %.4f %.4f %s %s\n", tps, mean, a[i50] / 1000, a[i99] / 1000, f,
				(lm < mean * 0.85 || lm > mean * 1.15) ? "lazy" : "ok"
		}'
	rm -f "$W/log.$tag".*
}

# One pgbench client, several scripts drawn at random with equal weight.
# Prints per script, in order: "mean_ms p50_ms p99_ms transactions ok|lazy".
pgb_mix() {  # tag seconds script...
	local tag=$1 secs=$2; shift 2
	local args=() f
	for f in "$@"; do args+=(-f "$f@1"); done
	rm -f "$W/log.$tag".*
	(cd "$W" && pgbench -n -M prepared -r -c 1 -j 1 -T "$secs" "${args[@]}" \
		--log --log-prefix="log.$tag" >"$W/$tag.out" 2>&1)
	local tps
	tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$W/$tag.out")
	if [ -z "$tps" ]; then
		say "pgbench $tag failed:"; sed 's/^/  /' "$W/$tag.out" | tail -5 >&2
		for f in "$@"; do echo "0 0 0 0 lazy"; done; return 1
	fi
	cat "$W/log.$tag".* | awk '{ print $4, $3 }' | sort -k1,1n -k2,2n | awk -v n=$# -v tps="$tps" '
		{ s = $1; c[s]++; v[s, c[s]] = $2; sum[s] += $2; all += $2; N++ }
		END {
			lm = all / N / 1000; mean = 1000 / tps
			ok = (lm < mean * 0.85 || lm > mean * 1.15) ? "lazy" : "ok"
			for (s = 0; s < n; s++) {
				if (c[s] == 0) { print "0 0 0 0 lazy"; continue }
				i50 = int(c[s] * 0.50); if (i50 < 1) i50 = 1
				i99 = int(c[s] * 0.99); if (i99 < 1) i99 = 1
				printf "%.4f %.4f %.4f %d %s\n", sum[s] / c[s] / 1000, v[s, i50] / 1000, v[s, i99] / 1000, c[s], ok
			}
		}'
	rm -f "$W/log.$tag".*
}

# redis-benchmark of one RAW entry; prints "rps mean_ms p50_ms p99_ms".
declare -A RAWFILE RAWARGS SHA
for line in "${RAW[@]}"; do
	IFS='|' read -r id file args <<<"$line"
	RAWFILE[$id]=$file RAWARGS[$id]=$args
done
raw_load() {
	local id
	for id in "${!RAWFILE[@]}"; do
		SHA[$id]=$(rcli -x script load < "${RAWFILE[$id]}")	# byte for byte: the extension's SHA1
	done
}
rawb() {  # id clients requests
	local id=$1 n=$2 req=$3
	# shellcheck disable=SC2086
	redis-benchmark -p "$REDIS_PORT" --dbnum "$RAWDB" -c "$n" -n "$req" -r 100000000 --csv \
		EVALSHA "${SHA[$id]}" ${RAWARGS[$id]} 2>/dev/null | tail -1 |
		awk -F'"' '{ printf "%.1f %s %s %s\n", $4, $6, $10, $14 }'
}

# Redis command counts: "name calls" per line, from INFO commandstats.
cmdstats() {
	rcli info commandstats | tr -d '\r' |
		sed -n 's/^cmdstat_\([^:]*\):calls=\([0-9]*\),.*failed_calls=\([0-9]*\).*/\1 \2 \3/p'
}
# Wait (bounded) until no pgbench backend is left: exit callbacks may still talk to Redis.
wait_backends_gone() {
	local i
	for i in $(seq 50); do
		[ "$(q -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'")" = 0 ] && return 0
		sleep 0.1
	done
}
ms() { awk -v x="$1" 'BEGIN { printf "%.3f", x }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

REPORT=$W/report.md
: > "$REPORT"
md() { printf '%s\n' "$*" >> "$REPORT"; }

# ---------------------------------------------------------------------------
section "machine"
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
MACHINE="$(nproc) cores ($CPU), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r), load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
PGV=$(q -c "SHOW server_version")
RV=$(rcli info server | tr -d '\r' | sed -n 's/^redis_version://p')
HV=$(dpkg-query -W -f='${Version}' libhiredis-dev 2>/dev/null)
md "# redis_primitives benchmark"
md ""
md "Run $(date -u '+%Y-%m-%d %H:%M UTC') on $MACHINE; PostgreSQL $PGV, Redis $RV, hiredis $HV."
md "Commit $(git -C "$RP_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'). pgbench runs are $T s each, \`-M prepared\`, over the unix socket; the extension and redis-benchmark reach Redis over TCP on 127.0.0.1."
md "The machine is small and shared: **compare ratios within this report, not absolute numbers across runs.** How to read each table: \`bench/README.md\`."
say "$MACHINE"

skipped=()
for id in "${ORDER[@]}"; do
	[ -n "${SKIP[$id]}" ] && skipped+=("- ${LABEL[$id]}: ${SKIP[$id]}")
done
if [ ${#skipped[@]} -gt 0 ]; then
	md ""
	md "Rows not measured in this run:"
	md ""
	for s in "${skipped[@]}"; do md "$s"; done
fi

# ---------------------------------------------------------------------------
section "1. round trips"
# The backend sends EVALSHA (EVAL after NOSCRIPT), and AUTH/SELECT when it
# connects with a password or a database; every other command Redis counts
# ran inside a script.
TOPLEVEL='evalsha eval auth select hello ping client'
rt_run() {  # tag script transactions -> "xacts evalsha eval other inner conns noscript"
	local tag=$1 file=$2 n=$3
	local b a c0 c1
	b=$(cmdstats); c0=$(rcli info stats | tr -d '\r' | sed -n 's/^total_connections_received://p')
	(cd "$W" && pgbench -n -M prepared -c 1 -t "$n" -f "$file" >"$W/rt.$tag.out" 2>&1)
	wait_backends_gone
	a=$(cmdstats); c1=$(rcli info stats | tr -d '\r' | sed -n 's/^total_connections_received://p')
	local done
	done=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$W/rt.$tag.out")
	awk -v top="$TOPLEVEL" -v x="${done:-0}" -v conns=$(( c1 - c0 - 2 )) '
		BEGIN { n = split(top, t, " "); for (i = 1; i <= n; i++) istop[t[i]] = 1 }
		NR == FNR { bc[$1] = $2; bf[$1] = $3; next }
		{ d = $2 - bc[$1]; if ($1 == "info") next
		  if ($1 == "evalsha") { es = d; ns = $3 - bf[$1] }
		  else if ($1 == "eval") ev = d
		  else if ($1 in istop) other += d
		  else inner += d }
		END { printf "%d %d %d %d %d %d %d\n", x, es, ev, other, inner, conns, ns }' \
		<(printf '%s\n' "$b") <(printf '%s\n' "$a")
}
md ""
md "## 1. Redis round trips per SQL call"
md ""
md "One connection, \`pgbench -c 1 -t $RT_CALLS\`, Redis \`INFO commandstats\` before and after. The backend only ever sends EVALSHA (EVAL after a NOSCRIPT) and, when it connects with a password or a database number, AUTH/SELECT; every other command Redis counts ran inside a script (\"inner\"). \"conns\" counts connections the backend opened to Redis during the run. Target: exactly 1.00 per Redis-backed call; 0 for calls that must not touch Redis."
md ""
md "| call | SQL calls × transactions | EVALSHA | EVAL | NOSCRIPT | AUTH/SELECT/other | inner | conns | round trips per call | target | met |"
md "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"

# Cold script cache first: what the first call after SCRIPT FLUSH (or a Redis
# restart) costs, then the steady state for every row.
rcli script flush >/dev/null
if [ -z "${SKIP[pair]}" ]; then
	read -r x es ev oth inn con ns <<<"$(rt_run cold "$W/pair.sql" 1000)"
	per=$(awk -v t=$((es + ev + oth)) -v n=$((2 * x)) 'BEGIN { printf "%.4f", t / n }')
	md "| ${LABEL[pair]}, **cold script cache** (after SCRIPT FLUSH) | 2 × $x | $es | $ev | $ns | $oth | $inn | $con | $per | 1.00 + 1 per script | $( [ "$ev" -le 2 ] && [ "$ns" -le 2 ] && echo yes || echo no) |"
	say "cold: evalsha=$es eval=$ev noscript=$ns per call $per"
fi
raw_load	# every script cached from here on: the steady state
for id in "${ORDER[@]}"; do
	has "$id" r || continue
	k=${K[$id]}
	read -r x es ev oth inn con ns <<<"$(rt_run "$id" "$W/$id.sql" "$RT_CALLS")"
	calls=$(( (k > 0 ? k : 1) * x ))
	per=$(awk -v t=$((es + ev + oth)) -v n="$calls" 'BEGIN { printf "%.4f", n ? t / n : 0 }')
	if [ "$k" = 0 ]; then
		target=0; met=$( [ $((es + ev + oth)) -eq 0 ] && echo yes || echo no ); per=$((es + ev + oth)); calls="0 × $x"
	else
		target=1.00; met=$(awk -v p="$per" 'BEGIN { print (p >= 0.9995 && p <= 1.0005) ? "yes" : "no" }'); calls="$k × $x"
	fi
	md "| ${LABEL[$id]} | $calls | $es | $ev | $ns | $oth | $inn | $con | $per | $target | $met |"
	say "$id: evalsha=$es eval=$ev other=$oth inner=$inn conns=$con per call $per"
done
md ""
md "In the acquire + release row, the inner commands are GET, SET NX and INCR (acquire) and GET and DEL (release) — 5 per pair — so each of the two calls made exactly one round trip. Connecting costs no command here (no password, database 0); with a password it would add one AUTH per connection, not per call. After SCRIPT FLUSH each script costs one failed EVALSHA (NOSCRIPT) and one EVAL, once; every later call is a single EVALSHA."

# ---------------------------------------------------------------------------
section "2. single-client latency"
# Raw Redis: each script three times, round robin; the median of the means.
declare -A RAWRES
for round in 1 2 3; do
	for line in "${RAW[@]}"; do
		id=${line%%|*}
		echo "$(rawb "$id" 1 10000)" >> "$W/raw.$id"
	done
done
for line in "${RAW[@]}"; do
	id=${line%%|*}
	RAWRES[$id]=$(sort -k2,2n "$W/raw.$id" | sed -n 2p)
	say "raw $id: ${RAWRES[$id]}"
done
# Every latency row in one pgbench run, transactions drawn at random among
# them: whatever else the machine is doing hits every row alike.
LROWS=()
for id in "${ORDER[@]}"; do has "$id" l && LROWS+=("$id"); done
declare -A LAT
mixfiles=()
for id in "${LROWS[@]}"; do mixfiles+=("$W/$id.sql"); done
i=0
while read -r line; do
	LAT[${LROWS[$i]}]=$line
	say "latency ${LROWS[$i]}: $line"
	i=$((i + 1))
done < <(pgb_mix lat $(( T * ${#LROWS[@]} )) "${mixfiles[@]}")
read -r sel1 sel1p50 _ _ _ <<<"${LAT[select1]}"
md ""
md "## 2. Latency against the floor, one client"
md ""
md "One pgbench client for $(( T * ${#LROWS[@]} )) s, each transaction drawn at random among the rows below (pgbench \`-f row.sql@1\` per row), so the load from anything else on the machine falls on every row alike. Mean, p50 and p99 per row from pgbench's per-transaction log. **Floor** = (SQL statements in the transaction) × the mean of \`SELECT 1\` + the round trip of the same script straight from \`redis-benchmark -c 1\` (EVALSHA of the script the call runs). Target: every Redis-backed call within **1.2×** its floor. The floor is computed twice, from means and from medians; *met* is judged on the medians, because on a shared machine the means are dominated by other tenants' stalls (see the p99 column), which fall on the pgbench run and the separate redis-benchmark runs unequally."
md ""
md "Raw Redis, one client, \`redis-benchmark -c 1 -n 10000\` running EVALSHA, three runs round robin, the median run:"
md ""
md "| script (path taken) | ops/s | mean ms | p50 ms | p99 ms |"
md "| --- | ---: | ---: | ---: | ---: |"
for line in "${RAW[@]}"; do
	id=${line%%|*}
	read -r r m p50 p99 <<<"${RAWRES[$id]}"
	case $id in
		lock_acquire) what="lock_acquire.lua (free lock: GET, SET NX PX, INCR)" ;;
		lock_release) what="lock_release.lua (key absent: GET)" ;;
		lock_extend) what="lock_extend.lua (held: GET, PEXPIRE)" ;;
		lock_info) what="lock_info.lua (held: PTTL, GET)" ;;
		lock_acquire_held) what="lock_acquire.lua (held: GET, SET NX fails)" ;;
		rl_log) what="ratelimit_sliding_log.lua (admitted: TIME, ZCOUNT, ZREMRANGEBYSCORE, ZADD, ZRANGE, PEXPIRE)" ;;
		rl_win) what="ratelimit_sliding_window.lua (admitted: TIME, HMGET, HSET, PEXPIRE)" ;;
		rl_gcra) what="ratelimit_gcra.lua (admitted: TIME, GET, SET PX)" ;;
		campaign) what="election_campaign.lua (renewing: HGET, PEXPIRE, HGET)" ;;
		*) what=$id ;;
	esac
	md "| $what | $r | $m | $p50 | $p99 |"
done
md ""
md "| call | stmts | transactions | mean ms | p50 ms | p99 ms | floor mean / p50 ms | × floor (mean) | × floor (p50) | target | met |"
md "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
: > "$W/latency.dat"
for id in "${LROWS[@]}"; do
	read -r m p50 p99 cnt ok <<<"${LAT[$id]}"
	[ "$ok" = lazy ] && { p50="$p50 †"; p99="$p99 †"; }
	k=${K[$id]}; raws=${RAWOF[$id]}; note=""
	if [ "$k" != - ] && [ "$k" -gt 0 ] && [ -z "$raws" ]; then
		raws=$(printf 'lock_acquire%.0s,' $(seq "$k")); raws=${raws%,}; note=" ¹"
	fi
	floor=$(awk -v s="${NSTMT[$id]}" -v l="$sel1" 'BEGIN { print s * l }')
	floor50=$(awk -v s="${NSTMT[$id]}" -v l="$sel1p50" 'BEGIN { print s * l }')
	for r in ${raws//,/ }; do
		read -r _ rm r50 _ <<<"${RAWRES[$r]}"
		floor=$(awk -v a="$floor" -v b="$rm" 'BEGIN { print a + b }')
		floor50=$(awk -v a="$floor50" -v b="$r50" 'BEGIN { print a + b }')
	done
	xm=$(ratio "$m" "$floor")
	x=$(ratio "${p50% †}" "$floor50")
	if [ "$id" = select1 ]; then target="(the floor)"; met=""
	elif [ "$k" = 0 ] && [[ $id == is_leader ]]; then target="≈ SELECT 1 (1.2×)"; met=$(awk -v x="$x" 'BEGIN { print (x <= 1.2) ? "yes" : "no" }')
	elif [ "$k" = 0 ]; then target="—"; met=""
	else target="≤ 1.2×"; met=$(awk -v x="$x" 'BEGIN { print (x <= 1.2) ? "yes" : "no" }')
	fi
	md "| ${LABEL[$id]}$note | ${NSTMT[$id]} | $cnt | $m | $p50 | $p99 | $(ms "$floor") / $(ms "$floor50") | $xm | $x | $target | $met |"
	printf '"%s" %s %s\n' "${LABEL[$id]}" "${p50% †}" "$floor50" >> "$W/latency.dat"
done
md ""
grep -q '¹' "$REPORT" && md "¹ No raw script of its own in RAW yet: the floor counts lock_acquire's round trip as \"one small script\"."
if [ -n "${LAT[pair]:-}" ]; then
	md ""
	md "Per statement (pgbench \`-r\`), acquire + release:"
	md ""
	md '```'
	awk -v f="$W/pair.sql" '/^SQL script/ { on = ($NF == f) } on && /^ +[0-9]/' "$W/lat.out" >> "$REPORT"
	md '```'
fi

# ---------------------------------------------------------------------------
section "2b. transport"
# The same calls with the extension on a unix socket instead of loopback TCP:
# a second Redis listening on both, a second database pointed at its socket,
# each against the floor of its own transport.
REDIS2_PORT=$(rp_free_port)
SOCK=$RP_TMP/redis2.sock
rp_start_redis "$REDIS2_PORT" --unixsocket "$SOCK" --unixsocketperm 777
r2() { redis-cli -p "$REDIS2_PORT" "$@"; }
for c in $(seq 0 63); do r2 set "${PREFIX}{bench-ext-$c}:lock" "$TOKEN" px 3600000 >/dev/null; done
r2 -n "$RAWDB" set "${PREFIX}{bench-ext-raw}:lock" "$TOKEN" px 3600000 >/dev/null
for id in lock_acquire lock_release lock_extend; do r2 -x script load < "${RAWFILE[$id]}" >/dev/null; done
q -d postgres >/dev/null <<SQL
CREATE DATABASE rp_bench_tcp;
CREATE DATABASE rp_bench_unix;
ALTER DATABASE rp_bench_tcp SET redis_primitives.port = $REDIS2_PORT;
ALTER DATABASE rp_bench_unix SET redis_primitives.unix_socket = '$SOCK';
SQL
q -d rp_bench_tcp -c "CREATE EXTENSION redis_primitives" >/dev/null
q -d rp_bench_unix -c "CREATE EXTENSION redis_primitives" >/dev/null
declare -A TR
for via in tcp unix; do
	if [ $via = tcp ]; then conn=(-h 127.0.0.1 -p "$REDIS2_PORT"); else conn=(-s "$SOCK"); fi
	for id in lock_acquire lock_release lock_extend; do
		# shellcheck disable=SC2086
		TR[$via.$id]=$(redis-benchmark "${conn[@]}" --dbnum "$RAWDB" -c 1 -n 10000 -r 100000000 --csv \
			EVALSHA "${SHA[$id]}" ${RAWARGS[$id]} 2>/dev/null | tail -1 | awk -F'"' '{ printf "%s %s\n", $6, $10 }')
	done
	i=0
	while read -r m p50 _ cnt _; do TR[$via.$i]="$m $p50 $cnt"; i=$((i + 1)); done \
		< <(PGDATABASE=rp_bench_$via pgb_mix tr.$via $(( T * 3 )) "$W/select1.sql" "$W/pair.sql" "$W/extend.sql")
	say "transport $via: select1 ${TR[$via.0]}, pair ${TR[$via.1]}, extend ${TR[$via.2]}; raw acquire ${TR[$via.lock_acquire]}"
done
md ""
md "### Transport: the extension on Redis's unix socket"
md ""
md "The same rows against a second Redis, first over loopback TCP (as above) and then over its unix socket (\`redis_primitives.unix_socket\`), $(( T * 3 )) s each, one pgbench client with the three rows interleaved; each floor uses redis-benchmark over the same transport (\`-s\` for the socket). ms."
md ""
md "| transport | statistic | SELECT 1 | raw acquire script | acquire + release | its floor | × floor | rp_extend | its floor | × floor |"
md "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for via in tcp unix; do
	for st in mean p50; do
		f=1; [ $st = p50 ] && f=2
		sv=$(cut -d' ' -f$f <<<"${TR[$via.0]}"); pv=$(cut -d' ' -f$f <<<"${TR[$via.1]}"); ev=$(cut -d' ' -f$f <<<"${TR[$via.2]}")
		ra=$(cut -d' ' -f$f <<<"${TR[$via.lock_acquire]}"); rr=$(cut -d' ' -f$f <<<"${TR[$via.lock_release]}"); re=$(cut -d' ' -f$f <<<"${TR[$via.lock_extend]}")
		pf=$(awk -v s="$sv" -v a="$ra" -v b="$rr" 'BEGIN { print 2 * s + a + b }')
		ef=$(awk -v s="$sv" -v a="$re" 'BEGIN { print s + a }')
		md "| $( [ $via = tcp ] && echo "loopback TCP" || echo "unix socket") | $st | $sv | $ra | $pv | $(ms "$pf") | $(ratio "$pv" "$pf") | $ev | $(ms "$ef") | $(ratio "$ev" "$ef") |"
	done
done

# ---------------------------------------------------------------------------
section "3. scaling"
: > "$W/scaling.csv"
echo "clients,row,tps,mean_ms,p50_ms,p99_ms,acquired_per_s,percentiles" >> "$W/scaling.csv"
for n in $CLIENTS; do
	for id in "${ORDER[@]}"; do
		if has "$id" s; then
			res=$(pgb "s$n.$id" "$n" "$T" "$W/$id.sql")
			read -r tps m p50 p99 f ok <<<"$res"
			echo "$n,$id,$tps,$m,$p50,$p99,,$ok" >> "$W/scaling.csv"
			say "scale $n $id: $res"
		elif has "$id" c; then
			f0=$(rcli get "${PREFIX}{bench-contended}:fence"); f0=${f0:-0}
			res=$(pgb "s$n.$id" "$n" "$T" "$W/$id.sql")
			f1=$(rcli get "${PREFIX}{bench-contended}:fence"); f1=${f1:-0}
			read -r tps m p50 p99 f ok <<<"$res"
			acq=$(awk -v d=$((f1 - f0)) -v t="$T" 'BEGIN { printf "%.1f", d / t }')
			echo "$n,$id,$tps,$m,$p50,$p99,$acq,$ok" >> "$W/scaling.csv"
			say "scale $n $id: $res acquired/s=$acq"
		fi
	done
	res=$(rawb lock_acquire "$n" $(( n < 4 ? 20000 : 50000 )))
	read -r r m p50 p99 <<<"$res"
	echo "$n,raw_redis_acquire,$r,$m,$p50,$p99,,ok" >> "$W/scaling.csv"
	say "scale $n raw: $res"
done
cp "$W/scaling.csv" "$OUT/scaling.csv"

md ""
md "## 3. Throughput and scaling"
md ""
md "\`pgbench -c N -j 2 -T $T\` per cell (\`-j 1\` at one client). TPS counts pgbench transactions: an acquire + release pair is one transaction of two statements. \"raw Redis\" is \`redis-benchmark -c N\` running the acquire script (EVALSHA, free lock): the ceiling if every client spoke to Redis directly, in script calls per second. Each lock client uses its own lock name (\`'bench-' || :client_id\`), so nothing waits on anything but the machine. Chart: \`scaling_tps.png\`, \`scaling_latency.png\`."
md ""
hdr="| clients |"; sep="| ---: |"
SCOLS=()
for id in "${ORDER[@]}"; do has "$id" s && SCOLS+=("$id"); done
for id in "${SCOLS[@]}"; do hdr="$hdr ${LABEL[$id]}: tps / mean / p50 / p99 ms |"; sep="$sep ---: |"; done
md "$hdr raw Redis acquire: ops/s / mean / p50 / p99 ms |"
md "$sep ---: |"
for n in $CLIENTS; do
	line="| $n |"
	for id in "${SCOLS[@]}" raw_redis_acquire; do
		cell=$(awk -F, -v n="$n" -v id="$id" '$1 == n && $2 == id { d = ($8 == "lazy") ? " †" : ""; printf "%.0f / %.3f / %.3f%s / %.3f%s", $3, $4, $5, d, $6, d }' "$W/scaling.csv")
		line="$line ${cell:--} |"
	done
	md "$line"
done
# Where does the machine saturate: the first client count after which the
# pair's TPS grows by less than 10%.
sat=$(awk -F, '$2 == "pair" { n[++k] = $1; t[k] = $3 } END {
	for (i = 2; i <= k; i++) if (t[i] < t[i-1] * 1.10) { print n[i-1]; exit } print n[k] }' "$W/scaling.csv")
best=$(awk -F, '$2 == "pair" && $3 > m { m = $3; n = $1 } END { printf "%.0f tps at %s clients", m, n }' "$W/scaling.csv")
bests=$(awk -F, '$2 == "select1" && $3 > m { m = $3; n = $1 } END { printf "%.0f tps at %s clients", m, n }' "$W/scaling.csv")
md ""
md "Mean latency is pgbench's own (clients / tps). † p50/p99 from pgbench's per-transaction log are understated here: pgbench 15 reads its clock lazily, which matters with several clients and sub-0.1 ms transactions (the log's mean strays more than 15% from the true mean); trust the mean in those cells."
md ""
md "Saturation: acquire + release stops growing (less than +10% per doubling) after **$sat clients**; best $best, against SELECT 1's best $bests. With 2 cores shared by pgbench, PostgreSQL backends and Redis, beyond that point more clients only add queueing: p99 grows with the client count while TPS stays flat."
if [ -n "${FLAGS[contended]:-}" ] && [ -z "${SKIP[contended]}" ]; then
	md ""
	md "Contended: every client on **one** lock name; a transaction is one acquire attempt (\`wait_ms = 0\`: NULL when held) and, only when it got the lease, a release (a release of a name this session does not hold costs no round trip). Acquired/s from the lock's fence counter."
	md ""
	md "| clients | acquire attempts/s | leases acquired/s | share acquired | p50 ms | p99 ms |"
	md "| ---: | ---: | ---: | ---: | ---: | ---: |"
	awk -F, '$2 == "contended" { d = ($8 == "lazy") ? " †" : ""; printf "| %s | %.0f | %.0f | %.0f%% | %.3f%s | %.3f%s |\n", $1, $3, $7, ($3 > 0 ? 100 * $7 / $3 : 0), $5, d, $6, d }' "$W/scaling.csv" >> "$REPORT"
fi

# ---------------------------------------------------------------------------
section "4. fence trigger"
# Every variant in one pgbench run (transactions drawn at random among them),
# once for single-row UPDATEs and once for bulk UPDATEs of all 1,000 rows,
# where the per-row trigger cost dominates.
declare -A FT FB FTN FBN
rowf=() bulkf=() fids=()
for line in "${FENCE[@]}"; do
	IFS='|' read -r id label table <<<"$line"
	fids+=("$id")
	printf '\\set id random(1, 1000)\nUPDATE %s SET balance = balance + 1, fence_token = 7 WHERE id = :id;\n' "$table" > "$W/fence.$id.sql"
	printf 'UPDATE %s SET balance = balance + 1, fence_token = fence_token;\n' "$table" > "$W/fbulk.$id.sql"
	rowf+=("$W/fence.$id.sql"); bulkf+=("$W/fbulk.$id.sql")
done
i=0
while read -r m _ _ cnt _; do FT[${fids[$i]}]=$m; FTN[${fids[$i]}]=$cnt; i=$((i + 1)); done \
	< <(pgb_mix fence $(( T * ${#FENCE[@]} )) "${rowf[@]}")
i=0
while read -r m _ _ cnt _; do FB[${fids[$i]}]=$m; FBN[${fids[$i]}]=$cnt; i=$((i + 1)); done \
	< <(pgb_mix fbulk $(( T * 2 )) "${bulkf[@]}")
for id in "${fids[@]}"; do say "fence $id: row ${FT[$id]} ms, bulk ${FB[$id]} ms"; done
md ""
md "## 4. The fence trigger's cost"
md ""
md "One client. **Row UPDATE**: \`UPDATE t SET balance = balance + 1, fence_token = 7 WHERE id = :id\` on a 1,000-row table (random id; the token is equal to the stored one, so the write passes), $(( T * ${#FENCE[@]} )) s with every variant drawn at random in the same pgbench run. **Bulk**: \`UPDATE t SET balance = balance + 1, fence_token = fence_token\` of all 1,000 rows, $(( T * 2 )) s likewise, so the per-row trigger cost dominates; (bulk − bulk without trigger) ms / 1,000 rows = µs per row. The PL/pgSQL trigger implements the same rule (NULL refused, lower token refused, equal passes). Target: rp_fence_guard within 5% of no trigger, and cheaper than PL/pgSQL."
md ""
md "| variant | row UPDATE mean ms | vs no trigger | bulk 1,000 rows mean ms | trigger cost µs per row |"
md "| --- | ---: | ---: | ---: | ---: |"
base=${FT[none]}; bbase=${FB[none]}
for line in "${FENCE[@]}"; do
	IFS='|' read -r id label table <<<"$line"
	pct=$(awk -v a="${FT[$id]}" -v b="$base" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }')
	per=$(awk -v a="${FB[$id]}" -v b="$bbase" 'BEGIN { printf "%.2f", a - b }')
	md "| $label | ${FT[$id]} (${FTN[$id]} tx) | $pct | ${FB[$id]} (${FBN[$id]} tx) | $per |"
done
cm=${FT[c]}; pm=${FT[plpgsql]}; bm=${FT[builtin]}
fence_c_pct=$(awk -v a="$cm" -v b="$base" 'BEGIN { printf "%+.1f", 100 * (a - b) / b }')
fence_c_met=$(awk -v a="$cm" -v b="$base" -v p="$pm" -v ca="${FB[c]}" -v pa="${FB[plpgsql]}" 'BEGIN { print (a <= b * 1.05 && a < p && ca < pa) ? "yes" : "no" }')
md ""
md "rp_fence_guard vs no trigger: **${fence_c_pct}%** per row UPDATE; vs PostgreSQL's own C row trigger: $(awk -v a="$cm" -v b="$bm" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }'); vs PL/pgSQL: $(awk -v a="$cm" -v b="$pm" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }') per row UPDATE, $(awk -v a="${FB[c]}" -v b="$bbase" 'BEGIN { printf "%.2f", a - b }') vs $(awk -v a="${FB[plpgsql]}" -v b="$bbase" 'BEGIN { printf "%.2f", a - b }') µs per row in bulk. Target met: **$fence_c_met**."
md ""
md "\`suppress_redundant_updates_trigger\` is a C trigger that ships with PostgreSQL and does comparable work (it compares the old and new row), so its row is what *any* BEFORE ROW UPDATE trigger costs here: the executor fetches and locks the old row for the trigger and builds the call. The gap between it and rp_fence_guard is rp_fence_guard's own code."

# ---------------------------------------------------------------------------
section "5. alternatives"
read -r am _ <<<"${LAT[advisory]:-0 0 0 0 0}"
read -r pm2 _ <<<"${LAT[pair]:-0 0 0 0 0}"
read -r _ ra _ _ <<<"${RAWRES[lock_acquire]}"
read -r _ rr _ _ <<<"${RAWRES[lock_release]}"
rawpair=$(awk -v a="$ra" -v b="$rr" 'BEGIN { printf "%.3f", a + b }')
md ""
md "## 5. Against what a user would pick instead"
md ""
md "The same lease cycle (take, then give back), one client, mean latency:"
md ""
md "| how | mean ms | vs rp_acquire + rp_release | fencing token | reach |"
md "| --- | ---: | ---: | --- | --- |"
md "| rp_acquire + rp_release through PostgreSQL | $pm2 | 1.00 | yes | any client of Redis |"
md "| pg_try_advisory_lock + pg_advisory_unlock | $am | $(ratio "$am" "$pm2") | no | this database only |"
md "| the same two scripts straight from Redis (redis-benchmark, sum of the two round trips) | $rawpair | $(ratio "$rawpair" "$pm2") | yes | any client of Redis |"
md ""
md "Going through PostgreSQL costs $(awk -v a="$pm2" -v b="$rawpair" 'BEGIN { printf "%.3f", a - b }') ms per cycle over talking to Redis directly. Of that, $(awk -v s="$sel1" 'BEGIN { printf "%.3f", 2 * s }') ms is two round trips to PostgreSQL (2 × SELECT 1); the remaining $(awk -v a="$pm2" -v b="$rawpair" -v s="$sel1" 'BEGIN { printf "%.3f", a - b - 2 * s }') ms is what making the Redis calls from inside a backend costs beyond what a direct client pays (sections 2 and 7). At scale see section 3, where advisory locks and raw Redis are columns."

# ---------------------------------------------------------------------------
section "6. memory ($MEM_SECONDS s at most, $MEM_CALLS pairs at most)"
redis_mem() { rcli info memory | tr -d '\r' | sed -n 's/^used_memory:\([0-9]*\)/\1/p'; }
rcli del "${PREFIX}{bench-mem}:lock" >/dev/null
rcli -n "$RAWDB" flushdb >/dev/null	# the raw benchmark's keys would expire under us
cat > "$W/memloop.sql" <<'SQL'
DO $$
DECLARE
  i bigint := 0;
  maxcalls bigint := current_setting('bench.calls')::bigint;
  t0 timestamptz := clock_timestamp();
  deadline timestamptz := clock_timestamp() + make_interval(secs => current_setting('bench.secs')::float8);
BEGIN
  LOOP
    PERFORM rp_release(rp_acquire('bench-mem', 10000));
    i := i + 1;
    IF i % 1000 = 0 THEN
      COMMIT;
      EXIT WHEN i >= maxcalls OR clock_timestamp() >= deadline;
    END IF;
  END LOOP;
  PERFORM set_config('bench.done', i::text, false);
  PERFORM set_config('bench.elapsed', extract(epoch FROM clock_timestamp() - t0)::text, false);
END $$;
SQL
# Two phases: the first quarter shows warm-up growth, the rest steady state.
s1=$(awk -v s="$MEM_SECONDS" 'BEGIN { printf "%.1f", s / 4 }'); c1=$(( MEM_CALLS / 4 ))
s2=$(awk -v s="$MEM_SECONDS" 'BEGIN { printf "%.1f", s * 3 / 4 }'); c2=$(( MEM_CALLS - c1 ))
snap() {  # name: psql lines that record the backend's and Redis' memory
	printf '%s\n' "\\! grep -E '^(VmRSS|RssAnon)' /proc/\$RP_PID/status > \$RP_W/mem.$1" \
		"\\! redis-cli -p \$REDIS_PORT info memory | tr -d '\\r' | sed -n 's/^used_memory:\\([0-9]*\\)/\\1/p' > \$RP_W/redis.$1"
}
{
	echo "SELECT pg_backend_pid() AS pid \\gset"
	echo "\\setenv RP_PID :pid"
	echo "\\setenv RP_W $W"
	echo "-- warm up: connect, load the scripts, fill the caches"
	echo "SELECT count(rp_release(rp_acquire('bench-mem', 10000))) FROM generate_series(1, 1000) \\g /dev/null"
	snap 0
	echo "SELECT set_config('bench.secs', '$s1', false), set_config('bench.calls', '$c1', false) \\g /dev/null"
	echo "\\i $W/memloop.sql"
	snap 1
	echo "SELECT current_setting('bench.done'), current_setting('bench.elapsed');"
	echo "SELECT set_config('bench.secs', '$s2', false), set_config('bench.calls', '$c2', false) \\g /dev/null"
	echo "\\i $W/memloop.sql"
	snap 2
	echo "SELECT current_setting('bench.done'), current_setting('bench.elapsed');"
} > "$W/mem.sql"
q -f "$W/mem.sql" >"$W/mem.out" 2>&1 || { say "memory run failed:"; tail -5 "$W/mem.out" >&2; }
read -r d1 e1 < <(sed -n 1p "$W/mem.out" | tr '|' ' ')
read -r d2 e2 < <(sed -n 2p "$W/mem.out" | tr '|' ' ')
kb() { sed -n "s/^$1:[[:space:]]*\([0-9]*\).*/\1/p" "$W/mem.$2"; }
mdone=$(( ${d1:-0} + ${d2:-0} )); melapsed=$(awk -v a="${e1:-0}" -v b="${e2:-0}" 'BEGIN { print a + b }')
say "memory: pairs=$d1+$d2 in ${e1}+${e2} s; RSS $(kb VmRSS 0) $(kb VmRSS 1) $(kb VmRSS 2) kB; anon $(kb RssAnon 0) $(kb RssAnon 1) $(kb RssAnon 2) kB; redis $(cat "$W"/redis.0 "$W"/redis.1 "$W"/redis.2 | tr '\n' ' ')"
md ""
md "## 6. Memory"
md ""
md "One backend runs \`rp_release(rp_acquire('bench-mem', 10000))\` in a PL/pgSQL loop, committing every 1,000 pairs, until $MEM_CALLS pairs or $MEM_SECONDS s in all, whichever comes first, after a 1,000-pair warm-up; the first quarter is reported apart from the rest, so that warm-up growth and steady growth can be told apart. Backend memory from \`/proc/<pid>/status\` (RssAnon is its private heap; VmRSS also counts the shared buffers it touched), Redis from \`INFO memory\` used_memory."
md ""
md "| phase | pairs | seconds | pairs/s | VmRSS kB | RssAnon kB | RssAnon growth per 1,000 pairs | Redis used_memory bytes |"
md "| --- | ---: | ---: | ---: | --- | --- | ---: | --- |"
memrow() {  # label pairs secs from to
	local a0 a1 r0 r1
	a0=$(kb RssAnon "$4"); a1=$(kb RssAnon "$5"); r0=$(cat "$W/redis.$4"); r1=$(cat "$W/redis.$5")
	md "| $1 | $2 | $(ms "$3") | $(awk -v n="$2" -v s="$3" 'BEGIN { printf "%.0f", (s > 0) ? n / s : 0 }') | $(kb VmRSS "$4") → $(kb VmRSS "$5") | $a0 → $a1 | $(awk -v a="${a0:-0}" -v b="${a1:-0}" -v n="$2" 'BEGIN { printf "%.3f kB", (n > 0) ? (b - a) * 1000 / n : 0 }') | $r0 → $r1 ($(( ${r1:-0} - ${r0:-0} ))) |"
}
memrow "first quarter" "${d1:-0}" "${e1:-0}" 0 1
memrow "rest" "${d2:-0}" "${e2:-0}" 1 2
memrow "**all**" "$mdone" "$melapsed" 0 2
md ""
md "In all, **$mdone** acquire + release pairs in $(ms "$melapsed") s$( [ "$mdone" -lt "$MEM_CALLS" ] && echo " (the time bound ended it before $MEM_CALLS)")."
md ""

# Rate-limit keys: Redis' own count of one key's bytes (MEMORY USAGE SAMPLES
# 0: every member of a sorted set, not a sample), after one request and when
# full.  A window of one hour, so nothing ages out while the key fills; the
# key is filled the way an application fills it, by requests of cost 1 (a
# request of cost n stores n longer members in sliding_log).
if [ -z "${SKIP[rl_log]}" ]; then
	md ""
	md "### Bytes per rate-limit key"
	md ""
	md "\`MEMORY USAGE <key> SAMPLES 0\` (every member counted, key name and Redis' per-key overhead included) of one rate-limit key per algorithm and limit (\`max_requests\`; window 1 hour so nothing ages out), after one admitted request and when full: filled by requests of cost 1 (\`max_requests\` separate \`rp_ratelimit\` calls), as an application fills it. Key names are \`rp:{bench-rl-<L>}:rl:<algorithm>\`. sliding_log keeps one sorted-set member per admitted unit within the window (the C code caps it at max_requests ≤ 100,000); the other two keep a fixed-size value (gcra's keeps refilling while a large limit is being filled, which does not change its size)."
	md ""
	md "| algorithm | limit | bytes after 1 request | bytes when full | encoding when full | bytes per admitted unit (full − 1 request) / (limit − 1) |"
	md "| --- | ---: | ---: | ---: | --- | ---: |"
	for algo in sliding_log sliding_window gcra; do
		for L in 10 1000 100000; do
			key="${PREFIX}{bench-rl-$L}:rl:$algo"
			q -c "SELECT rp_ratelimit('bench-rl-$L', $L, 3600000, 1, '$algo')" >/dev/null
			one=$(rcli memory usage "$key" samples 0)
			adm=$(q -c "SELECT count(*) FILTER (WHERE rp_ratelimit('bench-rl-$L', $L, 3600000, 1, '$algo')) FROM generate_series(2, $L)")
			full=$(rcli memory usage "$key" samples 0)
			enc=$(rcli object encoding "$key")
			rem=$(q -c "SELECT remaining FROM rp_ratelimit_peek('bench-rl-$L', $L, 3600000, 1, '$algo')")
			per=$(awk -v a="${one:-0}" -v b="${full:-0}" -v l="$L" 'BEGIN { printf "%.1f", (b - a) / (l - 1) }')
			md "| $algo | $L | $one | $full | $enc | $per |"
			say "rl memory $algo $L: one=$one full=$full enc=$enc admitted=$((adm + 1)) remaining=$rem"
			[ "$algo" != sliding_log ] || [ "$rem" = 0 ] || md "| ↑ not full: $((adm + 1)) of $L admitted, $rem remaining | | | | | |"
			rcli del "$key" >/dev/null
		done
	done
fi

# ---------------------------------------------------------------------------
section "7. profile"
# CPU accounting without a profiler: the backend's, Redis' and pgbench's CPU
# per transaction against the wall clock, for the pair and for two SELECT 1s
# (the same two statements without Redis).  perf, where the kernel lets us
# sample, on the pair's backend.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
redis_cpu() { rcli info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }'; }
HZ=$(getconf CLK_TCK)
PERF_OK=no
printf 'SELECT 1;\nSELECT 1;\n' > "$W/select2.sql"
cpu_account() {  # tag script perf(yes|no) -> "xacts wall_us backend_us redis_us pgbench_us"
	local tag=$1 file=$2 perf=$3 bpid="" i
	rm -f "$W/log.$tag".*
	(cd "$W" && exec pgbench -n -M prepared -c 1 -T 6 -f "$file" --log --log-prefix="log.$tag" >"$W/$tag.out" 2>&1) &
	local pgbpid=$!
	for i in $(seq 50); do
		bpid=$(q -d postgres -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND datname = 'rp_bench' LIMIT 1")
		[ -n "$bpid" ] && break; sleep 0.1
	done
	sleep 0.5
	local b0 b1 p0 p1 r0 r1 w0 w1
	b0=$(ticks "$bpid"); p0=$(ticks "$pgbpid"); r0=$(redis_cpu); w0=$(date +%s.%N)
	sleep 2
	b1=$(ticks "$bpid"); p1=$(ticks "$pgbpid"); r1=$(redis_cpu); w1=$(date +%s.%N)
	if [ "$perf" = yes ] && [ -n "$bpid" ] && command -v perf >/dev/null &&
		perf record -e cpu-clock -o "$W/perf.probe" -- true >/dev/null 2>&1; then
		perf record -e cpu-clock -F 1999 --call-graph dwarf,16384 -o "$W/perf.data" -p "$bpid" -- sleep 1.5 >/dev/null 2>&1
	fi
	wait "$pgbpid"
	cat "$W/log.$tag".* 2>/dev/null | awk -v w0="$w0" -v w1="$w1" -v b=$(( b1 - b0 )) -v p=$(( p1 - p0 )) \
		-v r0="$r0" -v r1="$r1" -v hz="$HZ" '
		{ t = $5 + $6 / 1e6; if (t >= w0 && t < w1) n++ }
		END {
			if (n == 0) { print "0 0 0 0 0"; exit }
			printf "%d %.1f %.1f %.1f %.1f\n", n, (w1 - w0) * 1e6 / n, b / hz * 1e6 / n, (r1 - r0) * 1e6 / n, p / hz * 1e6 / n
		}'
	rm -f "$W/log.$tag".*
}
read -r sx sw sb sr sp <<<"$(cpu_account prof.select2 "$W/select2.sql" no)"
rm -f "$W/perf.data"
read -r pairs wall_us bcpu_us rcpu_us pcpu_us <<<"$(cpu_account prof.pair "$W/pair.sql" yes)"
[ -s "$W/perf.data" ] && mv "$W/perf.data" "$W/perf.pair"
# The same accounting for two rate-limit calls (gcra), without perf.
RLPROF=""
if [ -z "${SKIP[rl_gcra]}" ]; then
	sed -n 1p "$W/rl_gcra.sql" > "$W/rl2.sql"; sed -n 1p "$W/rl_gcra.sql" >> "$W/rl2.sql"
	read -r rlx rlw rlb rlr rlp <<<"$(cpu_account prof.rl2 "$W/rl2.sql" no)"
	RLPROF=yes
fi
[ -s "$W/perf.pair" ] && mv "$W/perf.pair" "$W/perf.data"
[ -s "$W/perf.data" ] && PERF_OK=yes	# set inside the subshell above
say "cpu: select2 $sx $sw $sb $sr $sp; pair $pairs $wall_us $bcpu_us $rcpu_us $pcpu_us"
# The client side of a raw round trip: redis-benchmark's own CPU per call.
rb_cpu=$( { /usr/bin/time -f '%U %S' redis-benchmark -p "$REDIS_PORT" --dbnum "$RAWDB" -c 1 -n 20000 -r 100000000 -q \
	EVALSHA "${SHA[lock_acquire]}" ${RAWARGS[lock_acquire]} >/dev/null; } 2>&1 | tail -1 |
	awk '{ printf "%.1f", ($1 + $2) * 1e6 / 20000 }')
md ""
md "## 7. Profile: where one rp_acquire + rp_release spends its time"
md ""
md "One client, 2 s each, CPU time from \`/proc/<pid>/stat\` (backend, pgbench) and \`INFO cpu\` (Redis), per transaction (clock ticks are 1/$HZ s: coarse). The same two statements with \`SELECT 1\` in place of the calls show what the two Redis calls add."
md ""
md "| per transaction | transactions | wall µs | backend CPU µs | Redis CPU µs | pgbench CPU µs | wall − the three µs |"
md "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
md "| SELECT 1; SELECT 1 | $sx | $sw | $sb | $sr | $sp | $(awk -v w="$sw" -v a="$sb" -v b="$sr" -v c="$sp" 'BEGIN { printf "%.1f", w - a - b - c }') |"
md "| rp_acquire; rp_release | $pairs | $wall_us | $bcpu_us | $rcpu_us | $pcpu_us | $(awk -v w="$wall_us" -v a="$bcpu_us" -v b="$rcpu_us" -v c="$pcpu_us" 'BEGIN { printf "%.1f", w - a - b - c }') |"
[ -n "$RLPROF" ] && md "| rp_ratelimit(gcra); rp_ratelimit(gcra) | $rlx | $rlw | $rlb | $rlr | $rlp | $(awk -v w="$rlw" -v a="$rlb" -v b="$rlr" -v c="$rlp" 'BEGIN { printf "%.1f", w - a - b - c }') |"
md "| **the two Redis calls add** (acquire; release) | | $(awk -v a="$wall_us" -v b="$sw" 'BEGIN { printf "%.1f", a - b }') | $(awk -v a="$bcpu_us" -v b="$sb" 'BEGIN { printf "%.1f", a - b }') | $(awk -v a="$rcpu_us" -v b="$sr" 'BEGIN { printf "%.1f", a - b }') | $(awk -v a="$pcpu_us" -v b="$sp" 'BEGIN { printf "%.1f", a - b }') | |"
md ""
md "For comparison, redis-benchmark (one client) spends **$rb_cpu µs** of its own CPU per acquire-script round trip: that is what a Redis client's side of one round trip costs on this machine; the backend spends about $(awk -v a="$bcpu_us" -v b="$sb" 'BEGIN { printf "%.1f", (a - b) / 2 }') µs per Redis call."
if [ "$PERF_OK" = yes ]; then
	perf report -i "$W/perf.data" --no-children --sort dso -g none --stdio 2>/dev/null | grep -E '^ +[0-9]' > "$W/perf.dso"
	perf report -i "$W/perf.data" --children --sort sym -g none --stdio 2>/dev/null | grep -E '^ +[0-9]' > "$W/perf.sym"
	dso() { awk -v d="$1" '$2 == d { gsub("%", "", $1); s += $1 } END { printf "%.1f", s }' "$W/perf.dso"; }
	incl() { awk -v s="$1" '$NF == s || ($(NF-1) == s && $NF == "(inlined)") { gsub("%", "", $1); print $1; exit }' "$W/perf.sym"; }
	self_ext=$(dso redis_primitives.so); self_hir=$(dso libhiredis.so.0.14); self_cry=$(dso libcrypto.so.3)
	self_pg=$(dso postgres); self_k=$(dso '[kernel.kallsyms]'); self_c=$(dso libc.so.6)
	i_acq=$(incl rp_acquire_common); i_rel=$(incl rp_release_name); i_eval=$(incl rp_eval_internal)
	i_write=$(incl redisBufferWrite); i_wait=$(incl WaitLatchOrSocket); i_read=$(incl redisBufferRead)
	i_tok=$(incl pg_strong_random); i_stale=$(incl rp_conn_is_stale); i_cwes=$(incl CreateWaitEventSet); i_fwes=$(incl FreeWaitEventSet)
	i_rpwait=$(incl rp_wait); i_wesw=$(incl WaitEventSetWait); i_mwe=$(incl ModifyWaitEvent); i_epw=$(incl epoll_wait)
	i_ecreate=$(incl __GI_epoll_create1); i_ectl=$(incl __GI_epoll_ctl); i_close=$(incl __GI___close)
	i_client=$(incl secure_write); i_cread=$(incl secure_read)
	md ""
	md "\`perf record -e cpu-clock --call-graph dwarf\` on the backend for 1.5 s. Share of the backend's CPU samples. *Self* is time in that code itself; *inclusive* adds everything it calls, kernel included (a loopback \`write\` runs the receiver's TCP stack in the sender's time slice)."
	md ""
	md "| where | share of backend CPU |"
	md "| --- | ---: |"
	md "| inclusive: rp_acquire (whole call) | ${i_acq:-0}% |"
	md "| inclusive: rp_release by name (whole call) | ${i_rel:-0}% |"
	md "| inclusive: rp_eval (one Redis exchange: send, wait, read, parse) | ${i_eval:-0}% |"
	md "| — of which redisBufferWrite (the \`write\` syscall into loopback TCP) | ${i_write:-0}% |"
	md "| — of which rp_wait (waiting on the connection's one WaitEventSet; ModifyWaitEvent when the direction changes) | ${i_rpwait:-0}% (ModifyWaitEvent ${i_mwe:-0}%) |"
	md "| — of which a per-wait epoll set (WaitLatchOrSocket; CreateWaitEventSet, FreeWaitEventSet), the previous report's top item | ${i_wait:-0}% (CreateWaitEventSet ${i_cwes:-0}%, FreeWaitEventSet ${i_fwes:-0}%) |"
	md "| — of which redisBufferRead (the \`read\` syscall) | ${i_read:-0}% |"
	md "| — — epoll syscalls: epoll_create1 / epoll_ctl / close (all 0 when the set is kept) | ${i_ecreate:-0}% / ${i_ectl:-0}% / ${i_close:-0}% |"
	md "| inclusive: WaitEventSetWait / epoll_wait, every caller (the Redis waits and PostgreSQL waiting for its SQL client) | ${i_wesw:-0}% / ${i_epw:-0}% |"
	md "| inclusive: rp_conn_is_stale (a \`recv(MSG_PEEK)\` per call) | ${i_stale:-0}% |"
	md "| inclusive: pg_strong_random (the lease token's 16 random bytes, OpenSSL) | ${i_tok:-0}% |"
	md "| inclusive: secure_write + secure_read (talking to the SQL client) | $(awk -v a="${i_client:-0}" -v b="${i_cread:-0}" 'BEGIN { print a + b }')% |"
	md "| self: redis_primitives.so | ${self_ext}% |"
	md "| self: libhiredis | ${self_hir}% |"
	md "| self: libcrypto (the token) | ${self_cry}% |"
	md "| self: postgres (parse/bind/execute, executor, protocol) | ${self_pg}% |"
	md "| self: libc | ${self_c}% |"
	md "| self: kernel (syscalls, TCP/unix sockets, scheduling) | ${self_k}% |"
	own=$(awk -v a="$self_ext" -v b="$self_hir" -v c="$self_cry" 'BEGIN { printf "%.1f", a + b + c }')
	md ""
	chosen=$(awk -v a="${i_ecreate:-0}" -v b="${i_ectl:-0}" -v c="${i_close:-0}" -v d="${i_stale:-0}" 'BEGIN { printf "%.1f", a + b + c + d }')
	md "The extension's own user-space code (redis_primitives.so + hiredis + the token's random bytes) is **${own}%** of the backend's CPU, about $(awk -v o="$own" -v b="$bcpu_us" 'BEGIN { printf "%.1f", o * b / 100 }') µs of the $bcpu_us µs the backend spends per pair. The syscalls it makes beyond send, receive and the wait itself — epoll_create1/epoll_ctl/close (in the previous report a new epoll set per wait, 12–14% of the backend's CPU; with one WaitEventSet per connection only the epoll_ctl of ModifyWaitEvent is left) and a \`recv(MSG_PEEK)\` staleness probe before every command — are **${chosen}%** (about $(awk -v o="$chosen" -v b="$bcpu_us" 'BEGIN { printf "%.1f", o * b / 100 }') µs per pair). The Redis exchanges as a whole (inclusive rp_eval) are ${i_eval:-0}%, mostly the kernel's loopback TCP path (a send runs the receiving side's stack too); PostgreSQL serving the two statements (its own code plus the client socket) is most of the rest."
	PROFILE_CHOSEN=$chosen
	PROFILE_OWN=$own
else
	md ""
	md "perf could not sample here; only the CPU accounting above is reported."
	PROFILE_OWN=""
fi

# ---------------------------------------------------------------------------
section "charts"
awk -F, -v ids="select1 pair advisory contended raw_redis_acquire rl_log rl_win rl_gcra campaign" 'NR > 1 { v[$2 "," $1] = $3; p50[$2 "," $1] = $4; if ($8 != "lazy") p99[$2 "," $1] = $6; if (!($1 in seen)) { seen[$1] = 1; ns[++k] = $1 } }
	END {
		n = split(ids, id, " ")
		for (i = 1; i <= k; i++) {
			line = ns[i]; l2 = ns[i]
			for (j = 1; j <= n; j++) {
				key = id[j] "," ns[i]
				line = line " " ((key in v) ? v[key] : "NaN")
				l2 = l2 " " ((key in p50) ? p50[key] : "NaN") " " ((key in p99) ? p99[key] : "NaN")
			}
			print line > "/dev/stdout"; print l2 > "/dev/stderr"
		}
	}' "$W/scaling.csv" > "$W/tps.dat" 2> "$W/lat.dat"
gnuplot <<GP 2>"$W/gnuplot.err" || say "gnuplot failed: $(head -3 "$W/gnuplot.err")"
set terminal pngcairo size 900,560 noenhanced font "sans,10"
set datafile missing "NaN"
set grid
set key outside right top
set logscale x 2
set xtics ($(echo $CLIENTS | awk '{ for (i = 1; i <= NF; i++) printf "%s\"%s\" %s", (i > 1 ? ", " : ""), $i, $i }'))
set xlabel "clients"

set output "$OUT/scaling_tps.png"
set title "Throughput by clients (2 cores, $T s per point)"
set ylabel "transactions/s (redis-benchmark: script calls/s)"
plot "$W/tps.dat" using 1:2 with linespoints lw 2 title "SELECT 1", \
     "" using 1:3 with linespoints lw 2 title "rp_acquire + rp_release", \
     "" using 1:4 with linespoints lw 2 title "advisory lock + unlock", \
     "" using 1:5 with linespoints lw 2 title "acquire attempts, one name", \
     "" using 1:6 with linespoints lw 2 dt 2 title "raw Redis acquire script", \
     "" using 1:7 with linespoints lw 1 title "rp_ratelimit sliding_log", \
     "" using 1:8 with linespoints lw 1 title "rp_ratelimit sliding_window", \
     "" using 1:9 with linespoints lw 1 title "rp_ratelimit gcra", \
     "" using 1:10 with linespoints lw 1 title "rp_campaign"

set output "$OUT/scaling_latency.png"
set title "Latency by clients: mean (solid) and p99 (dashed, where pgbench's log is reliable)"
set ylabel "ms"
set logscale y
plot "$W/lat.dat" using 1:2 with linespoints lw 2 lc 1 title "SELECT 1 mean", \
     "" using 1:3 with linespoints lw 1 lc 1 dt 2 title "SELECT 1 p99", \
     "" using 1:4 with linespoints lw 2 lc 2 title "acquire + release mean", \
     "" using 1:5 with linespoints lw 1 lc 2 dt 2 title "acquire + release p99", \
     "" using 1:6 with linespoints lw 2 lc 3 title "advisory mean", \
     "" using 1:7 with linespoints lw 1 lc 3 dt 2 title "advisory p99", \
     "" using 1:8 with linespoints lw 2 lc 4 title "one-name attempts mean", \
     "" using 1:10 with linespoints lw 2 lc 7 title "raw Redis mean", \
     "" using 1:11 with linespoints lw 1 lc 7 dt 2 title "raw Redis p99"

unset logscale
set output "$OUT/latency.png"
set title "One client: median latency against its floor (SELECT 1 per statement + the script's raw round trip)"
set xlabel ""
set ylabel "ms"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -30 left
set yrange [0:*]
set key inside left top
plot "$W/latency.dat" using 2:xtic(1) title "measured", "" using 3 title "floor"
GP
md ""
md "## Charts"
md ""
md "![throughput](scaling_tps.png)"
md ""
md "![latency by clients](scaling_latency.png)"
md ""
md "![one client against the floor](latency.png)"
md ""
md "Wall time of this run: $(( $(date +%s) - start )) s."

cp "$REPORT" "$OUT/report.md"
echo
cat "$OUT/report.md"
