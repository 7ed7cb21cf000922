#!/usr/bin/env bash
# test/scenarios/ratelimit_cache.sh -- the rate limiter's refusal cache
# (redis_primitives.ratelimit_cache, src/prim/ratecache.c; docs/ratelimit.md,
# "The refusal cache").
#
# Under abuse most calls are refusals, and in 1.0 each one cost a Redis round
# trip.  With the cache, a refusal Redis gave answers rp_ratelimit from shared
# memory until the moment Redis said a retry could succeed:
#   1. a flood of refused callers, 1 and 8 at once, new backends included,
#      makes 0 Redis round trips (Redis' own INFO commandstats, on a Redis of
#      this test's own so that nothing else is counted); with the cache off
#      the same flood makes one per call (the control);
#   2. it never refuses what Redis would admit: a mixed flood (three
#      algorithms, several costs, an admission under another window on the
#      same key, a reset, the pinned clock moved on) gives call for call the
#      same answers with the cache on as with it off, and so does the
#      admitted count of 8 concurrent callers.  "Pinned" means
#      redis_primitives.ratelimit_clock_ms: Redis' scripts decide at that
#      fixed time, so both runs see the same decisions whatever the machine's
#      speed; the cache's own lifetimes still run on the real clock, bounded
#      by the key's TTL.  The naive twin -- a cache keyed by the rate-limit
#      key alone, holding a refusal for the window -- answers differently;
#   3. shadow-mode calls are never answered from it, a reset on this server
#      clears it, rp_stats counts cached refusals as refused calls, and once
#      retry_after has passed the next call reaches Redis and is admitted;
#   4. an admission under another limit whose reply was lost (the call timed
#      out, Redis ran it later) clears that key's refusals as an answered
#      one does;
#   5. a refusal answers only callers with the same limit: one cached under
#      max_requests 1 is not the answer for a caller asking with 100;
#   6. a cached refusal lives from when the call was *sent*: a refusal
#      whose reply came back later than its retry_after is not cached at
#      all (counted from the reply, it would outlive the moment Redis
#      admits again);
#   7. a reset cut short by statement_timeout, which Redis runs later, clears
#      the key's cached refusals as a reset that was answered does;
#   8. so do a reset and an admission under another limit whose backend was
#      terminated while it waited on Redis.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"

plan 29

own_redis
# Redis' pid, to stall it (SIGSTOP) until the test lets it go (SIGCONT).
rpid=$(rc INFO server | tr -d '\r' | sed -n 's/^process_id://p')
trap 'kill -CONT "$rpid" 2>/dev/null; rp_stop_redis "$RPORT"' EXIT
hits() { q "SELECT hits FROM rp_ratelimit_cache_info()"; }

is "$(q "SELECT enabled AND capacity > 0 FROM rp_ratelimit_cache_info()")" "t" \
	"the cache exists (the library is preloaded) and is on by default"

# --- 1. A refused flood costs no round trip ------------------------------
q "SELECT rp_ratelimit('flood', 1, 600000, 1, 'gcra')" >/dev/null   # the one admitted
is "$(q "SELECT rp_ratelimit('flood', 1, 600000, 1, 'gcra')")" "f" "the second call is refused by Redis (and fills the cache)"
before=$(round_trips)
out=$(q "SELECT count(*) FILTER (WHERE NOT rp_ratelimit('flood', 1, 600000, 1, 'gcra')) FROM generate_series(1, 300)")
is "$out" "300" "one client: 300 calls refused"
is "$(( $(round_trips) - before ))" "0" "one client: 0 Redis round trips for 300 refusals"

before=$(round_trips); h0=$(hits)
pids=()
for c in $(seq 8); do
	q "SELECT count(*) FILTER (WHERE NOT rp_ratelimit('flood', 1, 600000, 1, 'gcra')) FROM generate_series(1, 100)" \
		> "$RP_TMP/rlc.$c" 2>&1 &
	pids+=($!)
done
wait "${pids[@]}"
is "$(cat "$RP_TMP"/rlc.{1..8} | awk '{ n += $1 } END { print n + 0 }')" "800" "8 clients (8 new backends): 800 calls refused"
is "$(( $(round_trips) - before ))" "0" "8 clients: 0 Redis round trips for 800 refusals"
is "$(( $(hits) - h0 ))" "800" "rp_ratelimit_cache_info counts the 800 answers as hits"

# The control: the same flood with the cache off reaches Redis every time.
before=$(round_trips)
q "SET redis_primitives.ratelimit_cache = off" \
	"SELECT count(*) FROM generate_series(1, 100) WHERE rp_ratelimit('flood', 1, 600000, 1, 'gcra')" >/dev/null
is "$(( $(round_trips) - before ))" "100" "with the cache off, 100 refusals are 100 round trips"

# rp_stats: a cached refusal is a call and a refusal of its algorithm.
q "SELECT rp_stats_reset()" >/dev/null
q "SELECT count(*) FROM generate_series(1, 200) WHERE rp_ratelimit('flood', 1, 600000, 1, 'gcra')" >/dev/null
is "$(q "SELECT calls || ' ' || refused || ' ' || errors FROM rp_stats WHERE primitive = 'ratelimit_gcra'")" \
	"200 200 0" "rp_stats counts 200 cached refusals as 200 calls, 200 refused"

# --- 2. Never refuses what Redis would admit ------------------------------
# One session, a deterministic mixed flood; the answers as a string.
# rlc.naive on: the naive twin, a cache keyed by the rate-limit key alone
# that holds any refusal for the whole window (what a quick local cache
# does), in front of the real limiter with the cache off.
FLOOD=$(cat <<'SQL'
SET redis_primitives.ratelimit_clock_ms = '1000000';
CREATE TEMP TABLE answers (i int, a bool);
DO $$
DECLARE
  algs text[] := ARRAY['gcra', 'sliding_window', 'sliding_log'];
  costs int[] := ARRAY[3, 1, 5, 2, 1, 4, 6, 1];
  prefix text := current_setting('rlc.prefix');
  naive bool := current_setting('rlc.naive')::bool;
  until_ jsonb := '{}';
  k text;
  r bool;
BEGIN
  FOR i IN 1..360 LOOP
    k := prefix || (i % 3);
    IF i = 120 THEN
      -- the same key under another window: Redis may now admit earlier
      PERFORM rp_ratelimit(prefix || '0', 10, 1000, 1, 'gcra');
      PERFORM rp_ratelimit(prefix || '1', 10, 1000, 1, 'sliding_window');
    ELSIF i = 200 THEN
      PERFORM rp_ratelimit_reset(prefix || '2');
    ELSIF i = 280 THEN
      -- the pinned clock moves on by half a window: some units age out
      PERFORM set_config('redis_primitives.ratelimit_clock_ms', '1030000', false);
    END IF;
    IF naive AND (until_ ->> k) IS NOT NULL AND clock_timestamp() < (until_ ->> k)::timestamptz THEN
      r := false;
    ELSE
      r := rp_ratelimit(k, 10, 60000, costs[1 + i % 8], algs[1 + i % 3]);
      IF naive AND NOT r THEN
        until_ := until_ || jsonb_build_object(k, clock_timestamp() + interval '60 s');
      END IF;
    END IF;
    INSERT INTO answers VALUES (i, r);
  END LOOP;
END $$;
SELECT string_agg(CASE WHEN a THEN '1' ELSE '0' END, '' ORDER BY i) FROM answers;
SQL
)
flood() {  # prefix cache(on|off) naive(on|off)
	echo "$FLOOD" | psql -X -At -q -v ON_ERROR_STOP=1 -d "$RP_DB" \
		-c "SET redis_primitives.ratelimit_cache = $2" -c "SET rlc.prefix = '$1'" \
		-c "SET rlc.naive = ${3:-off}" -f - | tail -1
}
h0=$(hits)
off=$(flood mixed-off- off)
on=$(flood mixed-on- on)
hit=$(( $(hits) - h0 ))
diag "answers (cache off): $off"
is "$on" "$off" "a mixed flood (3 algorithms, 8 costs, another window, a reset, the clock moved): same 360 answers with the cache on as off"
cmp_ok "$hit" -gt 100 "and the cache answered many of them ($hit)"
cmp_ok "$(echo "$off" | tr -cd 1 | wc -c)" -gt 20 "the flood admits some calls too ($(echo "$off" | tr -cd 1 | wc -c) of 360)"
naive=$(flood mixed-naive- off on)
diag "answers (naive):     $naive"
isnt_naive=1; [ ${#naive} -eq 360 ] && [ "$naive" != "$off" ] && isnt_naive=0
ok $isnt_naive "the naive twin (a key-only cache) gives other answers: it refuses what Redis would admit"

# 8 concurrent callers, pinned clock: the admitted count is the limit either way.
conc() {  # key cache
	local pids=() c
	for c in $(seq 8); do
		psql -X -At -q -d "$RP_DB" -c "SET redis_primitives.ratelimit_clock_ms = '5000000'" \
			-c "SET redis_primitives.ratelimit_cache = $2" \
			-c "SELECT count(*) FROM generate_series(1, 40) g WHERE rp_ratelimit('$1', 25, 60000, 1, 'sliding_log')" \
			> "$RP_TMP/rlc.$c" 2>&1 &
		pids+=($!)
	done
	wait "${pids[@]}"
	cat "$RP_TMP"/rlc.{1..8} | awk '{ n += $1 } END { print n + 0 }'
}
a_off=$(conc conc-off off); a_on=$(conc conc-on on)
is "$a_on" "$a_off" "8 concurrent callers, limit 25: admitted $a_on with the cache on, $a_off with it off"
is "$a_on" "25" "which is the limit"

# --- 3. Shadow mode, reset, refresh ---------------------------------------
q "SELECT rp_ratelimit('sh', 1, 600000, 1, 'gcra')" "SELECT rp_ratelimit('sh', 1, 600000, 1, 'gcra')" >/dev/null
before=$(round_trips)
is "$(q "SELECT rp_ratelimit('sh', 1, 600000, 1, 'gcra', 'shadow')")" "t" "a shadow-mode call is admitted"
is "$(( $(round_trips) - before ))" "1" "and went to Redis (never answered from the cache)"

q "SELECT rp_ratelimit_reset('sh')" >/dev/null
is "$(q "SELECT rp_ratelimit('sh', 1, 600000, 1, 'gcra')")" "t" "after rp_ratelimit_reset on this server, the next call is admitted"

# Refresh: an entry lives until retry_after_ms, not longer.  The clock is
# pinned, so Redis refuses the same way whatever the machine's speed (20 per
# 40 s, the whole burst taken at once: one unit every 2 s, retry_after
# 2000 ms; the test then takes the key's TTL away (PERSIST), so that no
# stall of a loaded machine can let it expire under the check -- the cached
# refusal is bounded by retry_after alone); past retry_after the cached refusal
# has expired and the call asks Redis again (one round trip, refused again:
# the pinned clock never moves).  A cache that held the refusal for the whole
# window (40 s) would make none.
rf() { PGOPTIONS="$PGOPTIONS -c redis_primitives.ratelimit_clock_ms=7000000" q "$@"; }
out="$(rf "SELECT rp_ratelimit('rf', 20, 40000, 20, 'gcra')") $(rc PERSIST "$(key rf rl:gcra)") "
out=$out$(rf "SELECT rp_ratelimit('rf', 20, 40000, 1, 'gcra')" \
	"SELECT retry_after_ms FROM rp_ratelimit_consume('rf', 20, 40000, 1, 'gcra')" | tr '\n' ' ')
sleep 2.3
b=$(round_trips)
r=$(rf "SELECT rp_ratelimit('rf', 20, 40000, 1, 'gcra')")
is "$out$r:$(( $(round_trips) - b ))" "t 1 f 2000 f:1" \
	"past retry_after (2000 ms) the cached refusal has expired: the next call asks Redis (1 round trip)"


# --- 4. An admission under another limit whose reply was lost --------------
# The call times out (command_timeout 300 ms, Redis stopped by SIGSTOP until
# the call has failed: no clock decides whether Redis is still asleep when
# the call is sent) but its bytes were sent, and Redis runs it on SIGCONT.  Pinned clock 1000000: under (1, 60000)
# sliding_window's bucket starts at 960000, under (1, 50000) at 1000000, so
# that admission starts the key afresh and Redis then admits a (1, 60000)
# call -- which a refusal still cached from before would answer "no".
lost() {  # cache(on|off): the four answers
	local a
	LOSTKEY="rp:{lost-$1}:rl:sliding_window"
	q "SELECT rp_ratelimit_reset('lost-$1')" >/dev/null
	session_open "l$1"
	session_q "l$1" "SET redis_primitives.ratelimit_cache = $1; SET redis_primitives.ratelimit_clock_ms = '1000000'; SET redis_primitives.command_timeout = 300" >/dev/null
	a=$(session_q "l$1" "SELECT rp_ratelimit('lost-$1', 1, 60000, 1, 'sliding_window')")
	a="$a $(session_q "l$1" "SELECT rp_ratelimit('lost-$1', 1, 60000, 1, 'sliding_window')")"
	kill -STOP "$rpid"
	a="$a $(session_q "l$1" "SELECT rp_ratelimit('lost-$1', 1, 50000, 1, 'sliding_window')" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\).*/\1/p')"
	kill -CONT "$rpid"
	wait_for 30 '[ "$(rc HGET "$LOSTKEY" s)" = 1000000 ]' || a="$a (Redis did not run it)"
	a="$a $(session_q "l$1" "SELECT rp_ratelimit('lost-$1', 1, 60000, 1, 'sliding_window')")"
	session_close "l$1"
	echo "$a"
}
is "$(lost off)" "t f 08006 t" "cache off: refused, the other limit's call times out (Redis runs it later), then admitted"
is "$(lost on)" "t f 08006 t" "cache on: the same answers (the lost admission cleared the cached refusal)"
is "$(q "SELECT rp_ratelimit_reset('lost-on')")" "t" "(the key existed)"

# --- 5. Only the same limit is answered ------------------------------------
# sliding_log: one admission under limit 1 fills the key; under limit 100 the
# same key has room for 99 more, so Redis admits that caller.
q "SELECT rp_ratelimit_reset('lim')" >/dev/null
is "$(q "SELECT rp_ratelimit('lim', 1, 600000, 1, 'sliding_log')" "SELECT rp_ratelimit('lim', 1, 600000, 1, 'sliding_log')" | tr '\n' ' ')" \
	"t f " "limit 1: the second call is refused (and the refusal cached)"
b=$(round_trips)
is "$(q "SELECT rp_ratelimit('lim', 100, 600000, 1, 'sliding_log')"):$(( $(round_trips) - b ))" "t:1" \
	"a caller asking with limit 100 on the same key is asked of Redis and admitted, not answered with the limit-1 refusal"

# --- 6. A cached refusal lives from when the call was sent -----------------
# Pinned clock: the burst of 20 per 100 s taken at once, the next unit is
# refused with retry_after 5000 ms whatever the machine's speed.  That call's
# reply is held back: Redis is stopped (SIGSTOP) before it is sent, and let
# go 6 s after the backend is seen waiting for it.  Counted from the send,
# the refusal's life (5 s) is over when the reply comes, so it is not cached
# and the next call asks Redis again; counted from the reply, it would be
# cached for 5 s more, past the moment Redis said a retry could succeed.
session_open rs
session_q rs "SET redis_primitives.ratelimit_clock_ms = '9000000'; SET redis_primitives.command_timeout = 60000" >/dev/null
out=$(session_q rs "SELECT rp_ratelimit('rs', 20, 100000, 20, 'gcra')")
out="$out $(rc PERSIST "$(key rs rl:gcra)")"
pid=$(session_pid rs)
kill -STOP "$rpid"
printf '%s\n\\echo __done_6_1\n' "SELECT rp_ratelimit('rs', 20, 100000, 1, 'gcra');" >&"$_fd_rs"
wait_for 30 "[ -n \"\$(q \"SELECT 1 FROM pg_stat_activity WHERE pid = $pid AND wait_event_type = 'Extension' AND query LIKE '%rp_ratelimit(''rs''%'\")\" ]" ||
	out="$out (not seen waiting)"
sleep 6
kill -CONT "$rpid"
wait_for 60 "grep -q '^__done_6_1\$' '$RP_TMP/rs.out'" || out="$out (no reply)"
out="$out $(awk '$0 == "__done_6_1" { exit } /^__done_[0-9]+_[0-9]+$/ { o = ""; next } { o = o $0 } END { printf "%s", o }' "$RP_TMP/rs.out")"
b=$(round_trips)
out="$out $(session_q rs "SELECT rp_ratelimit('rs', 20, 100000, 1, 'gcra')"):$(( $(round_trips) - b ))"
session_close rs
is "$out" "t 1 f f:1" \
	"a refusal (retry_after 5 s) whose reply came 6 s after the send is not cached: the next call asks Redis (1 round trip)"
q "SELECT rp_ratelimit_reset('rs')" >/dev/null


# --- 7. A reset cut short by statement_timeout ------------------------------
# rp_ratelimit_reset is sent while Redis is frozen by a signal, and
# statement_timeout (300 ms) ends the call with 57014 before any reply; Redis
# runs the reset once thawed (the key is seen gone), so Redis admits the next
# call -- which a refusal still cached from before the reset would answer
# "no" (1.2 before this check: "t f 57014 f" with the cache on).
cut() {  # cache(on|off): the four answers
	local a
	CUTKEY=$(key "cut-$1" rl:gcra)
	session_open "c$1"
	session_q "c$1" "SET redis_primitives.ratelimit_cache = $1" >/dev/null
	a=$(session_q "c$1" "SELECT rp_ratelimit('cut-$1', 1, 600000, 1, 'gcra')")
	a="$a $(session_q "c$1" "SELECT rp_ratelimit('cut-$1', 1, 600000, 1, 'gcra')")"
	kill -STOP "$rpid"
	a="$a $(session_q "c$1" "SET statement_timeout = 300; SELECT rp_ratelimit_reset('cut-$1'); RESET statement_timeout" |
		sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\).*/\1/p')"
	kill -CONT "$rpid"
	wait_for 30 '[ "$(rc EXISTS "$CUTKEY")" = 0 ]' || a="$a (Redis did not run it)"
	a="$a $(session_q "c$1" "RESET statement_timeout; SELECT rp_ratelimit('cut-$1', 1, 600000, 1, 'gcra')")"
	session_close "c$1"
	echo "$a"
}
is "$(cut off)" "t f 57014 t" "cache off: refused, the reset cut by statement_timeout (Redis runs it later), then admitted"
is "$(cut on)" "t f 57014 t" "cache on: the same answers (the cut reset cleared the cached refusal)"
q "SELECT rp_ratelimit_reset('cut-off'), rp_ratelimit_reset('cut-on')" >/dev/null


# --- 8. A backend terminated while its call waits on Redis ------------------
# As 4 and 7, but the call is ended by pg_terminate_backend while Redis is
# frozen by a signal (the backend seen waiting on it): a FATAL, after which no
# error handler of the call runs.  Redis runs the call once thawed (the state
# is seen changed), and another session's next call is admitted by Redis --
# which a refusal still cached from before would answer "no".  Under the
# pinned clock 1000000 a (1, 50000) sliding_window admission starts the key
# afresh, as in 4.  (1.2 before this check: "t f f" for both.)
killed() {  # what (reset|other): the four answers
	local a pid k=kill-$1 sql fdvar=_fd_k$1
	KILLKEY=$(key "kill-$1" rl:sliding_window)
	case $1 in
	reset) sql="SELECT rp_ratelimit_reset('$k')" ;;
	other) sql="SELECT rp_ratelimit('$k', 1, 50000, 1, 'sliding_window')" ;;
	esac
	a=$(q "SET redis_primitives.ratelimit_clock_ms = '1000000'" "SELECT rp_ratelimit('$k', 1, 60000, 1, 'sliding_window')" \
		"SELECT rp_ratelimit('$k', 1, 60000, 1, 'sliding_window')" | tr '\n' ' ')
	session_open "k$1"
	pid=$(session_pid "k$1")
	# connected to Redis before it is frozen: the call's bytes are sent at once
	session_q "k$1" "SET redis_primitives.ratelimit_clock_ms = '1000000'; SET redis_primitives.command_timeout = 60000;
		SELECT rp_ratelimit_shadow_refusals('$k')" >/dev/null
	kill -STOP "$rpid"
	printf '%s;\n' "$sql" >&"${!fdvar}"
	wait_for 30 "[ -n \"\$(q \"SELECT 1 FROM pg_stat_activity WHERE pid = $pid AND wait_event_type = 'Extension'\")\" ]" ||
		a="$a(not seen waiting) "
	q "SELECT pg_terminate_backend($pid)" >/dev/null
	wait_for 30 "[ -z \"\$(q \"SELECT 1 FROM pg_stat_activity WHERE pid = $pid\")\" ]" || a="$a(not gone) "
	kill -CONT "$rpid"
	case $1 in
	reset) wait_for 30 '[ "$(rc EXISTS "$KILLKEY")" = 0 ]' || a="$a(Redis did not run it) " ;;
	other) wait_for 30 '[ "$(rc HGET "$KILLKEY" s)" = 1000000 ]' || a="$a(Redis did not run it) " ;;
	esac
	session_close "k$1" 2>/dev/null
	a="$a$(q "SET redis_primitives.ratelimit_clock_ms = '1000000'" "SELECT rp_ratelimit('$k', 1, 60000, 1, 'sliding_window')")"
	echo "$a"
}
is "$(killed reset)" "t f t" \
	"a reset whose backend was terminated while Redis was frozen (Redis runs it later): the next call is admitted, not answered from the cache"
is "$(killed other)" "t f t" \
	"an admission under another window whose backend was terminated (Redis runs it later) clears the cached refusal too"
q "SELECT rp_ratelimit_reset('kill-reset'), rp_ratelimit_reset('kill-other')" >/dev/null

finish
