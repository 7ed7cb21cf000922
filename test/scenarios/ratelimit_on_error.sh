#!/usr/bin/env bash
# test/scenarios/ratelimit_on_error.sh -- redis_primitives.ratelimit_on_error
# with Redis stopped, stalled and restarted.
#
# When Redis cannot be reached, the caller chooses what a limiter means:
# error (default), allow (fail open) or deny (fail closed), with a WARNING.
# Only "cannot be reached" (SQLSTATE class 08) is answered that way: a
# cancelled statement (57014) and an argument error (22023) must still be
# raised.  The naive fail-open -- a PL/pgSQL wrapper with EXCEPTION WHEN
# OTHERS THEN RETURN true -- is shown turning a caller's bug into "allowed".
#
# A private Redis is started on a free port for this script, used by one
# psql session as superuser (SET redis_primitives.port), shut down in the
# middle of the session, stalled (SIGSTOP until the stalled call has
# failed, then SIGCONT: no clock decides whether it is still stalled when the
# call is sent), and started again.
# Run by scripts/test.sh (prove) with PGHOST, PGPORT, PGUSER, REDIS_PORT set.
set -uo pipefail
: "${PGHOST:?}" "${PGPORT:?}" "${PGUSER:?}" "${REDIS_PORT:?}"
export PGDATABASE=rp_test
WORK=$(mktemp -d /tmp/rl_on_error.XXXXXX)
chmod 755 "$WORK"

source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
PORT=$(rp_free_port)

# Start (or restart) the private Redis and wait for it to answer.
cat > "$WORK/start-redis" <<EOF
#!/bin/sh
redis-server --port $PORT --bind 127.0.0.1 --save '' --appendonly no \
	--daemonize yes --dir $WORK \
	--pidfile $WORK/redis.pid --logfile $WORK/redis.log
for i in \$(seq 600); do redis-cli -p $PORT ping >/dev/null 2>&1 && exit 0; sleep 0.05; done   # 30 s at least
exit 1
EOF
# Stop it and wait until the port is closed.
cat > "$WORK/stop-redis" <<EOF
#!/bin/sh
redis-cli -p $PORT shutdown nosave >/dev/null 2>&1
for i in \$(seq 600); do redis-cli -p $PORT ping >/dev/null 2>&1 || exit 0; sleep 0.05; done
exit 1
EOF
chmod +x "$WORK/start-redis" "$WORK/stop-redis"

cleanup() {
	local pid
	pid=$(cat "$WORK/redis.pid" 2>/dev/null) && kill -9 "$pid" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

# Not a skip: a skip would drop every check below while the run passes.
"$WORK/start-redis" || { echo "Bail out! could not start a private Redis on port $PORT"; exit 1; }

# \! runs a shell without psql's variable interpolation: pass what it needs in
# the environment.
RL_WORK=$WORK psql -X -At -v port="$PORT" > "$WORK/out" 2>&1 <<'SQL'
SET client_min_messages = warning;
SET redis_primitives.port = :port;
-- Generous: a stopped Redis refuses at once, and a loaded machine may keep
-- a running one from answering for a while.
SET redis_primitives.connect_timeout = 5000;
SET redis_primitives.command_timeout = 5000;
CREATE TEMP TABLE answers (step text, allowed boolean, remaining bigint, retry_after_ms bigint, reset_after_ms bigint);

-- The naive fail-open: catch everything, answer true.
CREATE FUNCTION pg_temp.naive_fail_open(key text, max_requests bigint, window_ms bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RETURN rp_ratelimit(key, max_requests, window_ms);
EXCEPTION WHEN OTHERS THEN
  RETURN true;
END $$;

SELECT 'up|' || rp_ratelimit('oe', 5, 60000);

\! "$RL_WORK/stop-redis"

-- error (default): the failure is raised.
SELECT rp_ratelimit('oe', 5, 60000);
\echo error-mode|:SQLSTATE

-- allow: fail open, with a WARNING; only the answer is known.
SET redis_primitives.ratelimit_on_error = allow;
INSERT INTO answers SELECT 'allow-consume', * FROM rp_ratelimit_consume('oe', 5, 60000);
INSERT INTO answers SELECT 'allow-peek', * FROM rp_ratelimit_peek('oe', 5, 60000, 1, 'gcra');
SELECT 'allow-bool|' || rp_ratelimit('oe', 5, 60000, 1, 'sliding_window');
-- A request that can never be admitted is not admitted by fail-open either.
INSERT INTO answers SELECT 'allow-never', * FROM rp_ratelimit_consume('oe', 5, 60000, 6);
-- ... and an argument error is still an error, and reset is not a limiter.
SELECT rp_ratelimit('oe', 5, 0);
\echo allow-bad-window|:SQLSTATE
SELECT rp_ratelimit_reset('oe');
\echo allow-reset|:SQLSTATE
-- The naive fail-open hides the same bug.
SELECT 'naive-bad-window|' || pg_temp.naive_fail_open('oe', 5, 0);

-- deny: fail closed, with a WARNING.
SET redis_primitives.ratelimit_on_error = deny;
INSERT INTO answers SELECT 'deny-consume', * FROM rp_ratelimit_consume('oe', 5, 60000);
SELECT 'deny-bool|' || rp_ratelimit('oe', 5, 60000, 1, 'gcra');

-- Redis is back: the same session gets real answers again.
\! "$RL_WORK/start-redis"
INSERT INTO answers SELECT 'back', * FROM rp_ratelimit_consume('oe', 5, 60000);

-- Redis stalls past command_timeout: 08006, answered by allow.  Redis is
-- stopped (SIGSTOP) before the call and let go (SIGCONT) after it failed.
SET redis_primitives.ratelimit_on_error = allow;
SET redis_primitives.command_timeout = 300;
\! kill -STOP "$(cat "$RL_WORK/redis.pid")"
INSERT INTO answers SELECT 'stall', * FROM rp_ratelimit_consume('oe', 5, 60000);
\! kill -CONT "$(cat "$RL_WORK/redis.pid")"

-- Redis stalls and the statement is cancelled by statement_timeout first:
-- 57014 is raised, never turned into "allowed".
SET redis_primitives.command_timeout = 5000;
SET statement_timeout = 300;
\! kill -STOP "$(cat "$RL_WORK/redis.pid")"
SELECT rp_ratelimit('oe', 5, 60000);
\echo stall-cancel|:SQLSTATE
RESET statement_timeout;
\! kill -CONT "$(cat "$RL_WORK/redis.pid")"
SELECT 'after-stall|' || rp_ratelimit('oe', 5, 60000);

SELECT step || '|' || allowed || '|' || coalesce(remaining::text, 'null') || '|' ||
       coalesce(retry_after_ms::text, 'null') || '|' || coalesce(reset_after_ms::text, 'null')
FROM answers;
SQL

# line STEP: the output line for a step, without its "STEP|" prefix.
line() { grep -m1 "^$1|" "$WORK/out" | cut -d'|' -f2-; }

# ---- Redis at maxclients -----------------------------------------------------
# Redis accepts the connection and answers its first command with "ERR max
# number of clients reached", then closes it: a Redis that cannot be reached
# (08001), for ratelimit_on_error as for every call, not an error reply that
# a call raises as 38000.  One connection, held open by this shell, fills
# the private Redis at maxclients 1; it restores the limit at the end.
exec 7<>"/dev/tcp/127.0.0.1/$PORT"
redis-cli -p "$PORT" CONFIG SET maxclients 1 >/dev/null
RL_WORK=$WORK psql -X -At -v port="$PORT" > "$WORK/out-maxclients" 2>&1 <<'SQL'
SET redis_primitives.port = :port;
SET redis_primitives.connect_timeout = 5000;
SET redis_primitives.command_timeout = 5000;
SELECT rp_acquire('mc', 60000);
\echo mc-acquire|:SQLSTATE
SET redis_primitives.ratelimit_on_error = allow;
SELECT 'mc-allow|' || rp_ratelimit('mc', 5, 60000);
SQL
printf '*4\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n' >&7
IFS= read -r -t 30 restored <&7
exec 7<&-
mc() { grep -m1 "^$1|" "$WORK/out-maxclients" | cut -d'|' -f2-; }

plan 18
is "$(line up)" "true" \
	"Redis up: a request is admitted"
err=$(line error-mode)
is "${err:0:2}" "08" \
	"Redis stopped, on_error = error: the call fails with SQLSTATE class 08 (got $err)"
is "$(line allow-consume)" "true|null|0|null" \
	"on_error = allow: consume is allowed; remaining, reset_after_ms unknown (NULL), retry_after_ms 0"
is "$(line allow-peek)" "true|null|0|null" \
	"on_error = allow: peek is allowed too"
is "$(line allow-bool)" "true" \
	"on_error = allow: rp_ratelimit returns true"
is "$(grep -c 'WARNING:  Redis could not be reached: rate limit on "oe" allowed' "$WORK/out")" "4" \
	"on_error = allow: each of the 4 answers (3 here, the stall below) comes with a WARNING"
is "$(line allow-never)" "false|null|-1|null" \
	"on_error = allow: cost > max_requests is still refused (retry -1)"
is "$(line allow-bad-window)" "22023" \
	"on_error = allow: a bad argument is still 22023, not allowed"
is "$(line naive-bad-window)" "true" \
	"naive fail-open (EXCEPTION WHEN OTHERS): the same bad argument is silently allowed"
err=$(line allow-reset)
is "${err:0:2}" "08" \
	"on_error = allow: rp_ratelimit_reset still raises the connection error (got $err)"
is "$(line deny-consume)" "false|null|null|null" \
	"on_error = deny: consume is denied; nothing but the answer is known (all NULL)"
is "$(line deny-bool)|$(grep -c 'WARNING:  Redis could not be reached: rate limit on "oe" denied' "$WORK/out")" "false|3" \
	"on_error = deny: rp_ratelimit returns false; the 2 denials (and the never above) came with a WARNING"
is "$(line back)" "true|4|0|60000" \
	"Redis back: the same session gets a real answer (a fresh Redis: 4 remaining)"
is "$(line stall)" "true|null|0|null" \
	"Redis stalled past command_timeout (08006): answered by allow"
is "$(line stall-cancel)" "57014" \
	"Redis stalled and statement_timeout fires: 57014 is raised even with on_error = allow"
is "$(line after-stall)" "true" \
	"after the stall, the session reconnects and answers from Redis"
is "$(mc mc-acquire)|${restored%$'\r'}" "08001|+OK" \
	"Redis at maxclients: rp_acquire fails with 08001 (cannot be reached), not 38000"
is "$(mc mc-allow)|$(grep -c 'WARNING:  Redis could not be reached: rate limit on "mc" allowed' "$WORK/out-maxclients")" "true|1" \
	"Redis at maxclients: ratelimit_on_error = allow answers, with a WARNING"

if [ "$_tap_failed" -ne 0 ]; then
	echo "# session output:"; sed 's/^/#   /' "$WORK/out" "$WORK/out-maxclients"
fi
finish
