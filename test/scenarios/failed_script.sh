#!/usr/bin/env bash
# test/scenarios/failed_script.sh -- a script that fails leaves no lease.
#
# The failure it exists to prevent: a name's fence counter holds something
# INCR refuses (written by hand, by another program, by a bug).  Redis does
# not roll a script back, so an acquire script that SETs the lock key and
# only then INCRs the counter fails with the lock key written; the backend,
# seeing an error reply, knows the command ran and forgets the token.  The
# lock then sits until its TTL, held by nobody, and every other caller waits
# on it.  The scripts check the counter (as INCR would read it) before their
# first write, so the error comes with nothing written, and the caller gets
# the error (38000, Redis' text in the detail) rather than a lease.
source "$(dirname "$0")/tap.bash"
plan 16

k() { echo "rp:{$1}:$2"; }
detail() { psql -X -At -q -d "$RP_DB" -c "$1" 2>&1 | sed -n 's/^DETAIL:  //p' | head -1; }

# --- The naive twin: today's order, SET then INCR, run by hand -------------
redis SET "$(k fs-naive fence)" not-a-number >/dev/null
out=$(redis EVAL "redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', 60000) return redis.call('INCR', KEYS[2])" \
	2 "$(k fs-naive lock)" "$(k fs-naive fence)" 0123456789abcdef0123456789abcdef 2>&1)
case $out in *"not an integer"*) r=0 ;; *) r=1 ;; esac
ok $r "naive: the INCR of a counter holding text fails ($out)"
is "$(redis EXISTS "$(k fs-naive lock)")" "1" \
	"naive: and the lock key it SET first is left behind, held by a token nobody has"

# --- rp_acquire --------------------------------------------------------------
for bad in not-a-number 9223372036854775808 -3 007; do
	redis SET "$(k fs-one fence)" "$bad" >/dev/null
	st=$(q_state "SELECT rp_acquire('fs-one', 60000)")
	is "$st|$(redis EXISTS "$(k fs-one lock)")|$(redis GET "$(k fs-one fence)")" "38000|0|$bad" \
		"rp_acquire with the counter at '$bad': 38000, no lock key written, the counter untouched"
done
redis SET "$(k fs-one fence)" not-a-number >/dev/null
d=$(detail "SELECT rp_acquire('fs-one', 60000)")
case $d in *"rp:{fs-one}:fence does not hold a non-negative 64-bit integer"*) r=0 ;; *) r=1 ;; esac
ok $r "the detail names the counter and what is wrong with it ($d)"
is "$(q "SELECT rp_acquire('fs-one', 60000, 300) IS NULL" 2>&1 | sed -n 's/^ERROR: *//p' | cut -c1-24)" \
	"Redis returned an error" "a waiting rp_acquire fails at once too (it does not wait on a lock nobody holds)"
is "$(q "SELECT count(*) FROM rp_leases()")" "0" "the session believes it holds nothing"
redis DEL "$(k fs-one fence)" >/dev/null
is "$(q "SELECT (rp_acquire('fs-one', 60000)).fence" "SELECT rp_release('fs-one')" | head -1)" "1" \
	"once the counter is repaired, the name is free at once: fence 1"

# --- rp_acquire_all: one bad counter among several --------------------------
redis SET "$(k fs-b fence)" not-a-number >/dev/null
st=$(q_state "SELECT rp_acquire_all(ARRAY['fs-a', 'fs-b', 'fs-c'], 60000)")
is "$st" "38000" "rp_acquire_all with one counter holding text: 38000"
is "$(redis EXISTS "$(k fs-a lock)" "$(k fs-b lock)" "$(k fs-c lock)")|$(redis EXISTS "$(k fs-a fence)")" "0|0" \
	"no lock key of the three was written, and no counter was raised"
redis DEL "$(k fs-b fence)" >/dev/null
is "$(q "SELECT string_agg(fence::text, ',') FROM unnest(rp_acquire_all(ARRAY['fs-a', 'fs-b', 'fs-c'], 60000))" "SELECT rp_release_all()" | head -1)" \
	"1,1,1" "once repaired, all three are free at once"

# --- rp_semaphore_acquire ---------------------------------------------------
redis SET "$(k fs-sem fence)" not-a-number >/dev/null
st=$(q_state "SELECT rp_semaphore_acquire('fs-sem', 2, 60000)")
is "$st|$(redis EXISTS "$(k fs-sem sem)")" "38000|0" \
	"rp_semaphore_acquire with the counter holding text: 38000, and no permit written"

# --- rp_campaign ------------------------------------------------------------
redis SET "$(k fs-el fence)" not-a-number >/dev/null
st=$(q_state "SELECT rp_campaign('fs-el', 'n1', 60000)")
is "$st|$(redis EXISTS "$(k fs-el leader)" "$(k fs-el lock)")" "38000|0" \
	"rp_campaign with the counter holding text: 38000, no term and no lock key written"
st=$(q_state "SELECT rp_campaign('fs-el', 'n1', 60000, 1000000000000)")
is "$st|$(redis EXISTS "$(k fs-el leader)" "$(k fs-el lock)")|$(redis GET "$(k fs-el fence)")" "38000|0|not-a-number" \
	"with a floor above it too: refused, not silently overwritten"
finish
