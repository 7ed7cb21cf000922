#!/usr/bin/env bash
# test/scenarios/election_mark.sh -- an election's mark is never a token.
#
# The failure it exists to prevent: while a node leads, the lock key of the
# election's name holds "election:<owner>" (so a lock of the name waits for
# the term).  An SQL rp_campaign whose node_id is 23 bytes stores a mark of
# 32 characters, a lease token's length, and a by-token call that checks no
# more than the length takes the mark for a token: rp_release(name, mark)
# deletes the lock key under the sitting leader, rp_extend(name, mark, 1)
# cuts its term's lock to a millisecond.  A token is RP_TOKEN_LEN lowercase
# hex digits (a permit's first one 's'), which no mark can be (it holds
# "election:"), so a by-token call refuses anything else.
source "$(dirname "$0")/tap.bash"
plan 10

k() { echo "rp:{$1}:$2"; }
node=n23-abcdefghijklmnopqrs          # 23 bytes
mark="election:$node"

# --- The naive twin: compare-and-delete that trusts any 32 characters -------
q "SELECT rp_campaign('em-naive', '$node', 60000)" >/dev/null
is "$(redis GET "$(k em-naive lock)")|${#mark}" "$mark|32" "the term's mark is 32 characters, a token's length"
redis EVAL "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0" \
	1 "$(k em-naive lock)" "$mark" >/dev/null
is "$(redis EXISTS "$(k em-naive lock)")|$(q "SELECT node_id FROM rp_leader('em-naive')")" "0|$node" \
	"naive: a release by 'token' deletes the lock key under the sitting leader"

# --- rp_release and rp_extend by token refuse the mark ----------------------
epoch=$(q "SELECT rp_campaign('em', '$node', 60000)")
is "$(q "SELECT rp_extend('em', '$mark', 1) IS NULL")" "t" "rp_extend(name, mark, ttl) is NULL"
is "$(q "SELECT rp_extend(ROW('em', '$mark', $epoch, now())::rp_lease, 1) IS NULL")" "t" "rp_extend(lease, ttl) with the mark is NULL"
pttl=$(redis PTTL "$(k em lock)")
cmp_ok "$pttl" -gt 30000 "the term's lock was not shortened (pttl $pttl ms)"
is "$(q "SELECT rp_release('em', '$mark')")" "f" "rp_release(name, mark) is false"
is "$(q "SELECT rp_release(ROW('em', '$mark', $epoch, now())::rp_lease)")" "f" "rp_release(lease) with the mark as token is false"
is "$(redis GET "$(k em lock)")" "$mark" "the lock key still holds the term's mark"
is "$(q "SELECT held FROM rp_lock_info('em')")|$(q "SELECT rp_acquire('em', 1000) IS NULL")" "t|t" \
	"the name is still held: rp_acquire of it is refused"
is "$(q "SELECT rp_campaign('em', '$node', 60000)")" "$epoch" "the leader renews its term with the same epoch"
finish
