#!/usr/bin/env bash
# scripts/valgrind.sh -- the regression suite with PostgreSQL under valgrind,
# for memory errors no check can see.  On demand, not part of
# scripts/test.sh: it takes several minutes.
#
#   bash scripts/valgrind.sh                 # pg_regress + every pgTAP file
#   RP_VALGRIND_PGTAP="lock" bash scripts/valgrind.sh   # pgTAP files matching
#   RP_VALGRIND_FUZZ=1 bash scripts/valgrind.sh   # and the bad-input scenario
#                                            # (several thousand odd calls)
#   RP_VALGRIND_SCENARIOS=tls RP_VALGRIND_PGTAP=none bash scripts/valgrind.sh
#                                            # scenario files matching "tls"
#   RP_VALGRIND_TLS=1 bash scripts/valgrind.sh   # every call of pg_regress and
#                                            # pgTAP over TLS (verify-full):
#                                            # OpenSSL in every backend
#   RP_VALGRIND_OUT=/some/dir                # where the logs are kept (default
#                                            # /tmp/rp-valgrind-logs)
#
# Builds and installs the extension, starts a throwaway Redis and a
# PostgreSQL whose postmaster runs under valgrind memcheck (every backend and
# the background elector are forks of it, so all of them are checked; one
# log per process), runs the pg_regress suite and the pgTAP files, stops the
# server cleanly and reports
#
#   valgrind errors in redis_primitives code: N
#
# counting each error whose stack passes through redis_primitives.so or
# libhiredis; errors elsewhere (PostgreSQL itself) are counted apart.  Exit
# status 1 when N > 0.
#
# Debian's PostgreSQL is not built with USE_VALGRIND, so palloc'd memory is
# not tracked chunk by chunk: what memcheck sees is malloc (hiredis' replies
# and contexts), the stack, and reads of uninitialised values.  The few
# PostgreSQL-wide false positives (padding bytes written to a socket or
# file) are suppressed by scripts/valgrind.supp.  Leak checking is off
# (--leak-check=no): a backend exits without freeing its memory contexts, by
# design; leaks per call are measured by test/scenarios/resources.sh.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

command -v valgrind >/dev/null || rp_install_packages valgrind
OUT=${RP_VALGRIND_OUT:-/tmp/rp-valgrind-logs}
rp_setup
cd "$RP_ROOT"

rp_prepare_servers
# TLS mode: the Redis serves a TLS port beside the plain one (the tests'
# redis-cli helper keeps the plain port: same data), and the server's
# configuration sends every call of the suites over TLS.  The scenario files
# set their own TLS settings and are run as they are.
TLS_CONF=""
if [ "${RP_VALGRIND_TLS:-0}" = 1 ]; then
	tls_make_certs "$RP_TMP/tls" || exit 1
	TLS_PORT=$(rp_free_port)
	rp_stop_redis "$REDIS_PORT"
	rp_start_redis "$REDIS_PORT" --tls-port "$TLS_PORT" --tls-cert-file "$RP_TMP/tls/server.crt" \
		--tls-key-file "$RP_TMP/tls/server.key" --tls-ca-cert-file "$RP_TMP/tls/ca.crt" --tls-auth-clients no || exit 1
	TLS_CONF="redis_primitives.port = $TLS_PORT
redis_primitives.tls = 'verify-full'
redis_primitives.tls_ca_file = '$RP_TMP/tls/ca.crt'"
fi
dir=$RP_TMP/pg
rp_init_pg pg "$PGPORT" "max_connections = 50
shared_buffers = 32MB
redis_primitives.connect_timeout = 5000
redis_primitives.command_timeout = 5000
$TLS_CONF"
mkdir -p "$RP_TMP/vg"; [ "$(id -u)" -eq 0 ] && chown postgres: "$RP_TMP/vg"
rp_log "starting PostgreSQL under valgrind (slow)..."
rp_as_pg valgrind --quiet --tool=memcheck --trace-children=yes --leak-check=no \
	--track-origins=no --num-callers=30 --error-limit=no \
	--error-markers=RP_VG_ERROR_BEGIN,RP_VG_ERROR_END \
	--suppressions="$RP_ROOT/scripts/valgrind.supp" \
	--log-file="$RP_TMP/vg/%p.log" \
	"$("${PG_CONFIG:-pg_config}" --bindir)/postgres" -D "$dir" >"$RP_TMP/pg.log" 2>&1 &
vgpid=$!
for i in $(seq 600); do
	pg_isready -q -h "$RP_TMP" -p "$PGPORT" && break
	kill -0 "$vgpid" 2>/dev/null || break
	sleep 0.5
done
pg_isready -q -h "$RP_TMP" -p "$PGPORT" || { cat "$RP_TMP/pg.log" "$RP_TMP"/vg/*.log >&2; exit 1; }

psql -X -q -c "CREATE DATABASE rp_test" >/dev/null
psql -X -q -d rp_test -c "CREATE EXTENSION pgtap; CREATE EXTENSION redis_primitives;" >/dev/null
psql -X -q -d rp_test -v ON_ERROR_STOP=1 -f test/setup.sql >/dev/null
psql -X -q -c "ALTER DATABASE rp_test SET rp_test.redis_port = '$REDIS_PORT'" >/dev/null
if [ -n "$TLS_CONF" ]; then
	# Proof that the calls go over TLS: the TLS port answers, the setting is on.
	tls_ok=$(psql -X -At -d rp_test -c "SELECT 'redis_primitives.tls = ' || current_setting('redis_primitives.tls') || ', port ' || current_setting('redis_primitives.port') || ', rp_ping: Redis ' || (SELECT redis_version FROM rp_ping())") ||
		{ echo "the TLS configuration does not work" >&2; exit 1; }
	echo "==== TLS: $tls_ok"
fi

start=$(date +%s)
echo "==== pg_regress (under valgrind)"
make -s installcheck ISOLATION= 2>&1 | tail -15
echo "==== pgTAP (under valgrind)"
for f in test/pgtap/*.sql; do
	[ -n "${RP_VALGRIND_PGTAP:-}" ] && [[ "$f" != *${RP_VALGRIND_PGTAP}* ]] && continue
	redis-cli -p "$REDIS_PORT" flushall >/dev/null
	pg_prove -d rp_test "$f" 2>&1 | tail -3
done
if [ "${RP_VALGRIND_FUZZ:-0}" = 1 ]; then
	echo "==== test/scenarios/fuzz_bad_input.sh (under valgrind)"
	redis-cli -p "$REDIS_PORT" flushall >/dev/null
	prove test/scenarios/fuzz_bad_input.sh 2>&1 | tail -3
fi
# RP_VALGRIND_SCENARIOS="tls" runs the scenario files whose name matches
# (e.g. the TLS scenario: OpenSSL inside every backend).  Their timing checks
# may fail under valgrind; what counts here is the error count below.
if [ -n "${RP_VALGRIND_SCENARIOS:-}" ]; then
	for f in test/scenarios/*.sh; do
		[[ "$f" == *${RP_VALGRIND_SCENARIOS}* ]] || continue
		echo "==== $f (under valgrind)"
		redis-cli -p "$REDIS_PORT" flushall >/dev/null
		prove "$f" 2>&1 | tail -3
	done
fi
echo "suites ran in $(( $(date +%s) - start )) s under valgrind"

# A clean stop, so that every process finishes its log.
rp_as_pg pg_ctl -D "$dir" -m fast -w -t 300 stop >/dev/null 2>&1

rm -rf "$OUT"; mkdir -p "$OUT"
cp "$RP_TMP"/vg/*.log "$OUT"/ 2>/dev/null
# One error = one block between valgrind's --error-markers; ours when a
# frame names our library or hiredis (with debug symbols a frame shows the
# function, "rp_lock_info (lock.c:719)", not the object: every function of
# ours is rp_*, every one of hiredis redis*).
count() {  # pattern-in-stack (ours) | "" (all)
	cat "$OUT"/*.log 2>/dev/null | awk -v want="$1" '
		/RP_VG_ERROR_BEGIN/ { inblk = 1; ours = 0; next }
		/RP_VG_ERROR_END/ { if (inblk && (want == "" || ours)) n++; inblk = 0; next }
		inblk && want != "" && $0 ~ want { ours = 1 }
		END { print n + 0 }'
}
ours=$(count 'redis_primitives\.so|libhiredis|(at|by) 0x[0-9A-F]+: (rp_|redis)')
all=$(count '')
nlogs=$(ls "$OUT"/*.log 2>/dev/null | wc -l)
echo
echo "valgrind logs: $nlogs processes, in $OUT"
echo "valgrind errors in PostgreSQL or elsewhere (not ours): $((all - ours))"
echo "valgrind errors in redis_primitives code: $ours"
[ "$ours" -eq 0 ]
