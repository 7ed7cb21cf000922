# scripts/lib.sh -- shared by scripts/test.sh, scripts/demo.sh and bench/run.sh.
#
# rp_setup installs what is missing (as root) and builds and installs the
# extension; rp_start_servers starts a throwaway PostgreSQL and Redis on free
# private ports under one temporary folder; an EXIT trap stops both and
# removes the folder, whatever happened.  PostgreSQL refuses to run as root,
# so when we are root its processes run as the postgres user.

RP_PACKAGES="build-essential postgresql-15 postgresql-server-dev-15 libhiredis-dev
redis-server redis-tools redis-sentinel postgresql-15-pgtap
libtap-parser-sourcehandler-pgtap-perl libipc-run-perl prometheus-postgres-exporter curl pgbouncer python3-psycopg"

RP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

rp_log() { printf '%s\n' "$*" >&2; }

rp_install_packages() {
	local missing=() p
	for p in $RP_PACKAGES "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		rp_log "Missing Debian packages. Install them with:"
		rp_log "  sudo apt-get update && sudo apt-get install -y ${missing[*]}"
		exit 1
	fi
	rp_log "Installing: ${missing[*]}"
	apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# PG_CONFIG (default: pg_config on PATH) chooses the PostgreSQL installation
# the extension is built for, installed into and tested against: Debian's
# (/usr/lib/postgresql/N/bin/pg_config), one built from source
# (/usr/local/pgsql-N/bin/pg_config: configured with --enable-tap-tests,
# contrib, src/test/isolation and src/test/perl installed too), any major
# from 15 on.  A private copy of an installation (scripts/private-pg.sh) lets
# several work trees test at once without installing over each other's
# library.
rp_setup() {
	rp_install_packages "$@"
	export PG_CONFIG=${PG_CONFIG:-pg_config}
	PGBIN=$("$PG_CONFIG" --bindir)
	export PATH="$PGBIN:$PATH"
	# Its own libpq for its psql, pg_regress and servers, also where the
	# installation was moved after its build (its binaries' rpath names the
	# old place, and the system's older libpq lacks symbols they need).
	export LD_LIBRARY_PATH="$("$PG_CONFIG" --libdir)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	rp_log "PostgreSQL: $("$PG_CONFIG" --version) ($PGBIN)"
	# The Redis the suites start is redis-server on PATH (Valkey's, where its
	# binaries come first): name it, so a run says what it tested.
	command -v redis-server >/dev/null &&
		rp_log "Redis: $(redis-server --version | sed 's/ sha=.*//') ($(command -v redis-server))"
	# A failed build must stop here, not test the library installed before.
	make -C "$RP_ROOT" -s RP_WERROR=-Werror >/dev/null || { rp_log "Build failed."; exit 1; }
	[ -w "$("$PG_CONFIG" --pkglibdir)" ] || {
		rp_log "Cannot write to $("$PG_CONFIG" --pkglibdir): run as root or 'sudo make install' first."
		exit 1; }
	make -C "$RP_ROOT" -s install >/dev/null || { rp_log "make install failed."; exit 1; }
	rp_install_pgtap
}

# pgTAP is SQL only: an installation that lacks it (any but Debian's 15)
# gets the extension files of Debian's postgresql-15-pgtap, as they are.
rp_install_pgtap() {
	local ext f
	ext=$("$PG_CONFIG" --sharedir)/extension
	[ -f "$ext/pgtap.control" ] && return 0
	for f in $(dpkg-query -L postgresql-15-pgtap | grep '/extension/pgtap.*\.\(sql\|control\)$'); do
		cp "$f" "$ext/" || { rp_log "Could not install pgTAP into $ext."; exit 1; }
	done
	[ -f "$ext/pgtap.control" ] || { rp_log "No pgTAP files found for $ext."; exit 1; }
}

# Run a command as the owner of the PostgreSQL processes.
rp_as_pg() {
	if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

now_ms() { date +%s%3N; }
# wait_for SECONDS CONDITION...: evaluate the condition (a command line, as
# for eval) every 0.05 s until it holds (status 0) or SECONDS have passed (1).
wait_for() {
	local end=$(( $(now_ms) + $1 * 1000 )); shift
	until eval "$*"; do
		[ "$(now_ms)" -ge "$end" ] && return 1
		sleep 0.05
	done
}

rp_port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A free port below 32768, where Linux hands out ephemeral ports: a client
# socket bound there passes the probe yet makes listen() fail.
rp_free_port() {
	local p
	until p=$(( 20000 + RANDOM % 12000 )); ! rp_port_taken "$p"; do :; done
	echo "$p"
}

# rp_alive PID: that process runs (a zombie nobody reaped does not).
rp_alive() { [ -n "$1" ] && [ "$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null)" != Z ] && [ -e "/proc/$1" ]; }

# rp_listening PID PORT: process PID has a TCP socket listening on PORT
# (read from /proc: whichever server it is, whatever it would answer).
rp_listening() {
	local i
	for i in $(awk -v p=":$(printf '%04X' "$2")" '$4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null); do
		ls -l "/proc/$1/fd" 2>/dev/null | grep -qF "socket:[$i]" && return 0
	done
	return 1
}

# rp_start_redis PORT [ARGS...]: a Redis (redis-server on PATH: Redis, or
# Valkey under that name) on PORT, its files in $RP_TMP.
rp_start_redis() {  # port [extra args...]
	local port=$1 pid; shift
	rm -f "$RP_TMP/redis-$port.pid"	# a killed server's: only this start's counts
	# Not daemonized, so $! is its pid, but in a session of its own as a
	# daemon is; what it says before it opens its log goes there too.
	pid=$(setsid redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--maxmemory-policy noeviction --enable-debug-command local \
		--dir "$RP_TMP" --pidfile "$RP_TMP/redis-$port.pid" \
		--logfile "$RP_TMP/redis-$port.log" "$@" \
		</dev/null >>"$RP_TMP/redis-$port.log" 2>&1 & echo $!)
	# Ours once that process listens on the port and the port answers: an
	# answer alone may come from another server that took the port first
	# (slots and other runs pick free ports at the same instant), and when a
	# server writes its pid file differs (Redis after it listens, Valkey
	# before).  A process that is gone could not start: its log says why.
	wait_for 30 "rp_listening $pid $port && redis-cli -p $port ping >/dev/null 2>&1 || ! rp_alive $pid" &&
		rp_alive "$pid" && { echo "$pid" >"$RP_TMP/redis-$port.pid"; return 0; }
	rp_log "Redis on port $port did not start"; cat "$RP_TMP/redis-$port.log" >&2; return 1
}

# rp_kill_ours PID...: SIGKILL (after SIGCONT: it may be stopped) each
# process working in our folder, and no other: a pid file outlives its
# server and pids wrap, so a pid may be anyone's by now.
rp_kill_ours() {
	local p
	[ -n "${RP_TMP:-}" ] || return 1  # no folder: nothing is ours
	for p in "$@"; do
		case $(readlink "/proc/$p/cwd") in "$RP_TMP"|"$RP_TMP"/*) kill -CONT "$p"; kill -9 "$p" ;; esac
	done 2>/dev/null
}

rp_stop_redis() {  # port
	timeout 5 redis-cli -p "$1" shutdown nosave >/dev/null 2>&1 || true  # a stopped one never answers
	rp_kill_ours $(cat "$RP_TMP/redis-$1.pid" 2>/dev/null)
	rm -f "$RP_TMP/redis-$1.pid"
}

rp_stop_servers() {
	[ -n "${RP_TMP:-}" ] && [ -d "$RP_TMP" ] || return 0
	local f
	# our servers, the slots' of scripts/test.sh, and the nodes a t/*.pl
	# test left behind when it was killed
	for f in "$RP_TMP"/*/postmaster.pid "$RP_TMP"/*/*/postmaster.pid "$RP_TMP"/tmp_check/*/pgdata/postmaster.pid; do
		[ -f "$f" ] && rp_as_pg pg_ctl -D "$(dirname "$f")" -m immediate stop >/dev/null 2>&1
	done
	# every Redis and Sentinel working in our folder, pid file or not (it
	# may be lost); never one of another run, even on our REDIS_PORT
	rp_kill_ours $(pgrep redis)
	rm -rf "$RP_TMP"
}

# rp_make_tmp: the temporary folder, removed with every server in it on exit
# (whatever happened); exports RP_TMP PGUSER PGDATABASE.
rp_make_tmp() {
	RP_TMP=$(mktemp -d /tmp/redis_primitives.XXXXXX)
	chmod 755 "$RP_TMP"
	[ "$(id -u)" -eq 0 ] && chown postgres: "$RP_TMP"
	trap rp_stop_servers EXIT
	trap 'exit 130' INT TERM
	export RP_TMP PGUSER=postgres PGDATABASE=postgres
}

# rp_make_tmp, the ports, and a running Redis; exports PGHOST PGPORT
# REDIS_PORT too.
rp_prepare_servers() {
	rp_make_tmp
	export REDIS_PORT=$(rp_free_port) PGPORT=$(rp_free_port) PGHOST=$RP_TMP
	rp_start_redis "$REDIS_PORT"
}

# Start PostgreSQL and Redis.
rp_start_servers() {
	rp_prepare_servers && rp_start_pg pg "$PGPORT" "${RP_EXTRA_CONF:-}"
}

# Start one more PostgreSQL server under $RP_TMP/NAME (e.g. a second node for
# election tests), configured like the main one plus extra conf lines; it is
# stopped by rp_stop_pg NAME, or at the latest by rp_stop_servers.
rp_start_pg() {  # name port [extra conf lines]
	rp_init_pg "$@"
	rp_as_pg pg_ctl -D "$RP_TMP/$1" -l "$RP_TMP/$1.log" -w start >/dev/null || {
		cat "$RP_TMP/$1.log" >&2; return 1; }
}

# initdb under $RP_TMP/NAME and the test configuration; extra lines come
# last, so they override.
rp_init_pg() {  # name port [extra conf lines]
	local dir=$RP_TMP/$1 port=$2
	rp_as_pg initdb -D "$dir" -U postgres --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 >/dev/null
	cat >> "$dir/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$RP_TMP'
max_connections = 250
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 128MB
max_prepared_transactions = 10
shared_preload_libraries = 'redis_primitives'
redis_primitives.port = $REDIS_PORT
redis_primitives.connect_timeout = 1000
redis_primitives.command_timeout = 1000
${3:-}
CONF
}

rp_stop_pg() {  # name [mode]
	rp_as_pg pg_ctl -D "$RP_TMP/$1" -m "${2:-fast}" -w stop >/dev/null 2>&1
}

# tls_make_certs DIR: throwaway certificates for TLS tests, owned by the
# PostgreSQL user (what it writes: test/t/lib/RedisPrimitives/Test/Certs.pm, the
# one copy of the recipe).  tls_redis_args DIR CERT PORT: the redis-server
# arguments of a TLS-only server on PORT with the certificate DIR/CERT.crt.
tls_make_certs() {
	perl -I "$RP_ROOT/test/t/lib" -MRedisPrimitives::Test::Certs \
		-e 'RedisPrimitives::Test::Certs::make_certs(@ARGV)' "$1" ||
		{ rp_log "# could not make the test certificates"; return 1; }
	[ "$(id -u)" -ne 0 ] || chown -R postgres: "$1"
}
tls_redis_args() {
	echo --port 0 --tls-port "$3" --tls-cert-file "$1/$2.crt" --tls-key-file "$1/$2.key" \
		--tls-ca-cert-file "$1/ca.crt" --tls-auth-clients no
}
