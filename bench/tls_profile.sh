#!/usr/bin/env bash
# bench/tls_profile.sh -- where the cost of TLS goes, in instructions
# (`make bench-tls-profile`).  On demand: it runs PostgreSQL and
# Redis under valgrind's callgrind and takes several minutes.
#
# Wall-clock ratios on a shared 2-core machine move with the load (the
# scheduling wait of a round trip is most of its time); instruction counts
# do not.  Three tables:
#   1. one backend's instructions per call, plain TCP and TLS (verify-full,
#      connection established): the difference between a backend making
#      RP_PROFILE_N2 calls and one making RP_PROFILE_N1, so start-up, the
#      connect and the handshake cancel out; user space only (the kernel's
#      share -- the same system calls on both paths -- is not counted);
#   2. the floor any client pays, from Redis's own tools: redis-benchmark's
#      instructions per PING round trip plain and over TLS (hiredis +
#      OpenSSL, the least a client does), and the Redis server's;
#   3. the server side of table 1: Redis's instructions per PING round trip.
# Writes bench/results/tls_profile.md.  Reports; never fails because a
# number is bad.
set -uo pipefail
source "$(dirname "$0")/../scripts/lib.sh"

N1=${RP_PROFILE_N1:-100}
N2=${RP_PROFILE_N2:-600}
OUT=$RP_ROOT/bench/results/tls_profile.md

command -v valgrind >/dev/null || rp_install_packages valgrind
rp_setup
cd "$RP_ROOT"
rp_prepare_servers
tls_make_certs "$RP_TMP/tls" || exit 1
C=$RP_TMP/tls
TLS_PORT=$(rp_free_port)
rp_stop_redis "$REDIS_PORT"
rp_start_redis "$REDIS_PORT" --tls-port "$TLS_PORT" --tls-cert-file "$C/server.crt" \
	--tls-key-file "$C/server.key" --tls-ca-cert-file "$C/ca.crt" --tls-auth-clients no || exit 1

# PostgreSQL under callgrind: every backend writes its own count at exit.
CG=$RP_TMP/cg
mkdir -p "$CG"; chmod 777 "$CG"
rp_init_pg pg "$PGPORT" "max_connections = 20
shared_buffers = 32MB
redis_primitives.connect_timeout = 60000
redis_primitives.command_timeout = 60000"
rp_log "starting PostgreSQL under callgrind (slow)..."
rp_as_pg valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$CG/pg.%p" \
	"$("$PG_CONFIG" --bindir)/postgres" -D "$RP_TMP/pg" >"$RP_TMP/pg.log" 2>&1 &
# pg_isready gives up after 3 s, less than a backend under callgrind takes.
for i in $(seq 300); do
	PGCONNECT_TIMEOUT=60 psql -X -q -At -c "SELECT 1" >/dev/null 2>&1 && break
	sleep 1
done
psql -X -q -c "CREATE DATABASE rp_bench" >/dev/null || exit 1
psql -X -q -d rp_bench -c "CREATE EXTENSION redis_primitives" >/dev/null || exit 1

total() { grep -m1 '^totals:\|^summary:' "$1" | awk '{ print $2 }'; }

# backend mode kind n: the instructions of one backend making n calls.
backend() {
	local set body pid f i
	if [ "$1" = tls ]; then
		set="SET redis_primitives.port = $TLS_PORT; SET redis_primitives.tls = 'verify-full'; SET redis_primitives.tls_ca_file = '$C/ca.crt';"
	else
		set="SET redis_primitives.port = $REDIS_PORT;"
	fi
	case $2 in
		acquire+release) body="l := rp_acquire('prof', 10000); PERFORM rp_release(l);" ;;
		rp_ratelimit) body="PERFORM rp_ratelimit('prof-rl', 1000000000, 60000, 1, 'gcra');" ;;
		rp_ping) body="PERFORM rp_ping();" ;;
	esac
	pid=$(psql -X -q -At -d rp_bench -v ON_ERROR_STOP=1 <<SQL | tail -1
$set
SELECT rp_ping() IS NULL;
DO \$\$ DECLARE l rp_lease; BEGIN FOR i IN 1..$3 LOOP $body END LOOP; END \$\$;
SELECT pg_backend_pid();
SQL
	) || return 1
	f=$CG/pg.$pid
	for i in $(seq 600); do [ -n "$(total "$f" 2>/dev/null)" ] && break; sleep 0.1; done
	total "$f"
}
# The first backend after start loads caches the others find loaded.
backend plain rp_ping 5 >/dev/null

declare -A PER
for kind in "acquire+release" rp_ratelimit rp_ping; do
	for mode in plain tls; do
		a=$(backend "$mode" "$kind" "$N1") && b=$(backend "$mode" "$kind" "$N2") ||
			{ rp_log "the $mode $kind run failed"; exit 1; }
		PER[$mode.$kind]=$(( (b - a) / (N2 - N1) ))
		rp_log "$kind $mode: ${PER[$mode.$kind]} instructions per call"
	done
done
rp_as_pg pg_ctl -D "$RP_TMP/pg" -m fast -w -t 300 stop >/dev/null 2>&1

# The floor: redis-benchmark and a Redis of its own, both under callgrind,
# PING round trips at two counts, plain and TLS (instruction counts are
# exact: 1,000 round trips of difference are plenty).
F1=300 F2=1300
declare -A FLOOR
for mode in plain tls; do
	for n in $F1 $F2; do
		p=$(rp_free_port); tp=$(rp_free_port)
		while [ "$tp" = "$p" ]; do tp=$(rp_free_port); done
		valgrind --tool=callgrind --callgrind-out-file="$CG/srv.$mode.$n" redis-server --port "$p" --tls-port "$tp" \
			--bind 127.0.0.1 --save '' --appendonly no --tls-cert-file "$C/server.crt" --tls-key-file "$C/server.key" \
			--tls-ca-cert-file "$C/ca.crt" --tls-auth-clients no --logfile "$RP_TMP/floor-$mode-$n.log" >/dev/null 2>&1 &
		sp=$!
		for i in $(seq 300); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.3; done
		if [ $mode = tls ]; then o=(--tls --cacert "$C/ca.crt" -p "$tp"); else o=(-p "$p"); fi
		timeout 900 valgrind --tool=callgrind --callgrind-out-file="$CG/cli.$mode.$n" redis-benchmark "${o[@]}" -c 1 -n "$n" -q PING >/dev/null 2>&1
		rc=$?
		kill -0 "$sp" 2>/dev/null || rc=1
		redis-cli -p "$p" shutdown nosave >/dev/null 2>&1
		wait "$sp"
		[ $rc -eq 0 ] || { rp_log "the $mode floor run ($n PINGs) failed"; cat "$RP_TMP/floor-$mode-$n.log" >&2; exit 1; }
	done
	for w in srv cli; do
		FLOOR[$w.$mode]=$(( ($(total "$CG/$w.$mode.$F2") - $(total "$CG/$w.$mode.$F1")) / (F2 - F1) ))
	done
	rp_log "floor $mode: redis-benchmark ${FLOOR[cli.$mode]}, redis-server ${FLOOR[srv.$mode]} instructions per PING"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", b / a }'; }
{
	echo "# TLS to Redis: instructions per call (callgrind)"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD), $(openssl version | cut -d' ' -f1-2), Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), TLS 1.3, verify-full."
	echo "User-space instructions (valgrind callgrind), the difference between $N2 and $N1 calls: independent of the machine's load."
	echo
	echo "## One backend, per call, connection established"
	echo
	echo "| call | plain | TLS | TLS - plain | TLS / plain |"
	echo "| --- | ---: | ---: | ---: | ---: |"
	for kind in "acquire+release" rp_ratelimit rp_ping; do
		echo "| $kind | ${PER[plain.$kind]} | ${PER[tls.$kind]} | $(( PER[tls.$kind] - PER[plain.$kind] )) | $(ratio "${PER[plain.$kind]}" "${PER[tls.$kind]}") |"
	done
	echo
	echo "Round trips per call: acquire+release 2, rp_ratelimit 1, rp_ping 2."
	echo
	echo "## The floor: Redis's own client and server, per PING round trip"
	echo
	echo "| process | plain | TLS | TLS - plain |"
	echo "| --- | ---: | ---: | ---: |"
	echo "| redis-benchmark (hiredis + OpenSSL) | ${FLOOR[cli.plain]} | ${FLOOR[cli.tls]} | $(( FLOOR[cli.tls] - FLOOR[cli.plain] )) |"
	echo "| redis-server | ${FLOOR[srv.plain]} | ${FLOOR[srv.tls]} | $(( FLOOR[srv.tls] - FLOOR[srv.plain] )) |"
} >"$OUT"
cat "$OUT"
