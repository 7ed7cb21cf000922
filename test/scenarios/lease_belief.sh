#!/usr/bin/env bash
# lease_belief.sh -- what a backend believes about a lease it re-enters.
#
# Re-entry answers from the session's registry with no round trip, so what
# it hands back must be what the caller asked for:
#   - verify_at_commit asked of a held lease is added to it, whatever its
#     scope (a session lease too), never dropped silently;
#   - a lease inside its last lease_margin, which the lock-bound guard
#     already refuses, is extended (or taken anew), never handed back as it
#     is;
#   - a lease or permit released or shortened by token from another
#     connection of this server is no longer believed by the backend that
#     took it (re-entry, the lock-bound guard, permits), nor when the
#     call's reply was lost (it may have run), nor after the holder's own
#     release or shortening extend whose reply was lost; a lease so
#     doubted is still released;
#   - a semaphore waiter that is cancelled or times out leaves the queue at
#     its abort, not a heartbeat later.
# Each beside its naive twin where one exists.
source "$(dirname "$0")/tap.bash"
plan 64

sq() { q '\set VERBOSITY sqlstate' "$@" 2>&1 | sed -n 's/^.*ERROR: *\([0-9A-Z]\{5\}\).*$/\1/p;t;p'; }
# clock: the server's clock now, in seconds; wait_past T0 S: until it is S
# seconds past T0 (a lease's deadline, on the clock the server keeps it by).
clock() { q "SELECT extract(epoch FROM clock_timestamp())"; }
wait_past() { wait_for 30 "[ \"\$(q \"SELECT clock_timestamp() > to_timestamp($1) + interval '$2 s'\")\" = t ]"; }
steal() { echo "SELECT rp_test.redis('SET', rp_test.key('$1', 'lock'), 'other', 'PX', '30000') = 'OK'"; }

# ---- verify_at_commit asked of a session lease ------------------------------
# One transaction takes a session lease, then asks rp_acquire_xact for the
# name with verify_at_commit; the lease is lost (another holder takes the
# name) before COMMIT.
out=$(sq "BEGIN" "SELECT fence > 0 FROM rp_acquire('vac-1', 30000)" \
	"SELECT fence > 0 FROM rp_acquire_xact('vac-1', 30000, 0, 0, verify_at_commit => true)" \
	"$(steal vac-1)" "COMMIT")
is "$(echo $out)" "t t t RP002" \
	"verify_at_commit asked of a session lease the transaction holds: the lost lease fails COMMIT (RP002)"
# The control: without the session lease the same steps fail the same way.
out=$(sq "BEGIN" "SELECT fence > 0 FROM rp_acquire_xact('vac-2', 30000, 0, 0, verify_at_commit => true)" \
	"$(steal vac-2)" "COMMIT")
is "$(echo $out)" "t t RP002" "(without the session lease: RP002 as documented)"
# The check was this transaction's: the session lease goes on unchecked.
q "SELECT rp_test.redis('DEL', rp_test.key('vac-1', 'lock'))" "SELECT rp_release_all()" >/dev/null
out=$(sq "BEGIN" "SELECT fence > 0 FROM rp_acquire('vac-3', 30000)" \
	"SELECT fence > 0 FROM rp_acquire_xact('vac-3', 30000, 0, 0, verify_at_commit => true)" "COMMIT" \
	"$(steal vac-3)" "BEGIN" "SELECT 1" "COMMIT")
is "$(echo $out)" "t t t 1" "the check ends with that transaction: a later one of the session commits"
# Asked of a name an earlier transaction of the session holds: not re-entered
# (NULL, the name is held), never a lease that silently skips the check.
q "SELECT rp_release_all()" >/dev/null
out=$(sq "SELECT fence > 0 FROM rp_acquire('vac-4', 30000)" "BEGIN" \
	"SELECT rp_acquire_xact('vac-4', 30000, 0, 0, verify_at_commit => true) IS NULL" "COMMIT")
is "$(echo $out)" "t t" "asked of a name an earlier transaction holds: NULL, not a lease without the check"
q "SELECT rp_release_all()" "SELECT rp_test.redis('DEL', rp_test.key('vac-' || g, 'lock')) FROM generate_series(1, 4) g" >/dev/null

# ---- re-entry inside the last lease_margin ----------------------------------
# A lease of 3 s with a margin of 2.9 s is inside its margin 100 ms after it
# was sent: the guard already refuses it.  Re-entering it must hand back a
# lease the guard accepts.
# in_margin NAME SQL: in one transaction, take NAME for 3 s with a margin
# of 2.9 s, wait 200 ms (inside the margin), run SQL (which re-enters NAME
# asking 5 s), and print the first fence, SQL's output and Redis' PTTL.
in_margin() {
	q "SET redis_primitives.lease_margin = 2900" "BEGIN" \
		"SELECT fence FROM rp_acquire('$1', 3000)" "SELECT pg_sleep(0.2)" "$2" \
		"SELECT rp_test.redis('PTTL', rp_test.key('$1', 'lock'))" "COMMIT"
}
out=$(in_margin ra-1 "SELECT fence || ' ' || (expires_at - interval '2900 ms' > clock_timestamp()) FROM rp_acquire('ra-1', 5000)")
f1=$(echo "$out" | sed -n 1p); second=$(echo "$out" | sed -n 3p)
is "$second" "$f1 true" "re-entered inside its margin: the same lease (fence $f1), extended so the guard accepts it"
# Read in the same session: its exit releases the session lease.
cmp_ok "$(echo "$out" | sed -n 4p)" -gt 3000 "... and Redis holds it for the new ttl"
q "SELECT rp_release_all()" >/dev/null
# The guard's view: a lock-bound write after re-entering succeeds.
q "DROP TABLE IF EXISTS ra_account" "CREATE TABLE ra_account (id int PRIMARY KEY, fence_token bigint)" \
  "CREATE TRIGGER zz_fence BEFORE INSERT OR UPDATE OR DELETE ON ra_account FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=ra-{id}')" >/dev/null
out=$(sq "SET redis_primitives.lease_margin = 2900" "BEGIN" \
	"SELECT fence > 0 FROM rp_acquire('ra-2', 3000)" "SELECT pg_sleep(0.2)" \
	"SELECT fence > 0 FROM rp_acquire('ra-2', 5000)" "INSERT INTO ra_account VALUES (2)" "COMMIT" \
	"SELECT count(*) FROM ra_account")
is "$(echo $out)" "t t 1" "a lock-bound write after re-entering inside the margin lands"
q "SELECT rp_release_all()" >/dev/null
# The naive twin: the lease handed back as it is, inside its margin, is refused.
out=$(sq "SET redis_primitives.lease_margin = 2900" "BEGIN" \
	"SELECT fence > 0 FROM rp_acquire('ra-3', 3000)" "SELECT pg_sleep(0.2)" \
	"SELECT count(*) FROM rp_leases() WHERE name = 'ra-3'" "INSERT INTO ra_account VALUES (3)" "COMMIT")
is "$(echo $out)" "t 1 RP004" "naive (the registry's lease as it is): the guard refuses it (RP004)"
# rp_acquire_all re-enters by the same rule: a name of the set held inside
# its margin is extended by the ttl asked for, the others taken.
out=$(in_margin ra-4 "SELECT fence || ' ' || (expires_at - interval '2900 ms' > clock_timestamp()) FROM unnest(rp_acquire_all(ARRAY['ra-4', 'ra-5'], 5000)) WHERE name = 'ra-4'")
f1=$(echo "$out" | sed -n 1p); second=$(echo "$out" | sed -n 3p)
is "$second" "$f1 true" "rp_acquire_all re-entering a name inside its margin: the same lease (fence $f1), extended so the guard accepts it"
cmp_ok "$(echo "$out" | sed -n 4p)" -gt 3000 "... and Redis holds it for the new ttl"
q "SELECT rp_release_all()" >/dev/null
out=$(sq "SET redis_primitives.lease_margin = 2900" "BEGIN" \
	"SELECT fence > 0 FROM rp_acquire('ra-6', 3000)" "SELECT pg_sleep(0.2)" \
	"SELECT count(*) FROM unnest(rp_acquire_all(ARRAY['ra-6', 'ra-7'], 5000))" \
	"INSERT INTO ra_account VALUES (6)" "COMMIT" "SELECT count(*) FROM ra_account WHERE id = 6")
is "$(echo $out)" "t 2 1" "a lock-bound write after rp_acquire_all re-entered inside the margin lands"
q "SELECT rp_release_all()" "DROP TABLE ra_account" >/dev/null

# ---- released or shortened by token from another connection ---------------
q "DROP TABLE IF EXISTS tb_account" "CREATE TABLE tb_account (id int PRIMARY KEY, fence_token bigint)" \
  "CREATE TRIGGER zz_fence BEFORE INSERT OR UPDATE OR DELETE ON tb_account FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=tb-{id}')" >/dev/null
session_open sa; session_open sb
# A takes tb-1 in an open transaction; C releases it by token (the job-queue
# pattern); B takes it.
session_q sa "BEGIN" >/dev/null
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-1', 30000)")
released=$(q "SELECT rp_release('tb-1', '$tok')")
fb=$(session_q sb "SELECT fence FROM rp_acquire('tb-1', 30000)")
is "$released ${fb:+taken}" "t taken" "(C released A's lease by token, B took the name)"
is "$(session_q sa "SELECT rp_acquire('tb-1', 30000) IS NULL")" "t" \
	"A re-acquiring in its transaction gets NULL (B holds it), not its released lease"
is "$(session_q sa "INSERT INTO tb_account VALUES (1)")" "ERROR:  RP004" \
	"A's lock-bound write under the released lease is refused (RP004)"
session_q sa "ROLLBACK" >/dev/null
# Shortened by token from elsewhere: A's belief follows.
session_q sa "BEGIN" >/dev/null
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-2', 30000)")
q "SELECT rp_extend('tb-2', '$tok', 200) IS NOT NULL" >/dev/null
wait_for 30 '[ "$(q "SELECT (rp_lock_info('"'tb-2'"')).held")" = f ]'
is "$(session_q sa "INSERT INTO tb_account VALUES (2)")" "ERROR:  RP004" \
	"a lease shortened by token from another connection: A's write after the new deadline is refused (RP004)"
session_q sa "ROLLBACK" >/dev/null

# Two extends by token race: C's (to 60 s) runs in Redis first, its reply
# held back by the proxy; D's (to 300 ms) runs after it and is told to A
# first.  Redis drops the lease 300 ms later.  The naive owner's table kept
# the last told deadline (C's 60 s) and A's write landed under a lease
# Redis no longer held; A must believe the earliest deadline it was told,
# whatever order the tellings came in.
start_proxy "$RP_TMP/tb3.events" 10000
session_open sc
session_q sc "SET redis_primitives.port = $pport" >/dev/null
session_q sc "SET redis_primitives.command_timeout = 60000" >/dev/null
# C's connection and the by-token scripts warmed through the proxy first:
# once armed, it lets one more command through.
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-warm', 30000)")
session_q sc "SELECT rp_extend('tb-warm', '$tok', 30000) IS NOT NULL" >/dev/null
session_q sc "SELECT rp_release('tb-warm', '$tok')" >/dev/null
session_q sa "SELECT rp_release_all()" >/dev/null
session_q sa "BEGIN" >/dev/null
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-3', 30000)")
# Armed (its "armed" event seen) before the command goes: a command sent
# before the proxy took the signal would pass through it unheld.
kill -USR1 "$proxy"
wait_for 30 "grep -q '^armed' '$RP_TMP/tb3.events'"
printf '%s\n' "SELECT rp_extend('tb-3', '$tok', 60000) IS NOT NULL;" >&"$_fd_sc"
wait_for 30 "grep -q '^forwarded' '$RP_TMP/tb3.events'"
fwd=$(grep -c '^forwarded' "$RP_TMP/tb3.events")
d=$(q "SELECT rp_extend('tb-3', '$tok', 300) IS NOT NULL")
early=$(grep -c '^released' "$RP_TMP/tb3.events")
wait_for 30 "grep -q '^released' '$RP_TMP/tb3.events'"
c=$(session_q sc "SELECT 'told'")
is "$fwd $d $early $(echo $c)" "1 t 0 t told" \
	"(C's extend to 60 s ran in Redis, its reply held; D's to 300 ms ran and told A before C's reply came back)"
wait_for 30 '[ "$(q "SELECT (rp_lock_info('"'tb-3'"')).held")" = f ]'
is "$(session_q sa "INSERT INTO tb_account VALUES (3)")" "ERROR:  RP004" \
	"two extends by token told out of Redis' order: A believes the earlier deadline, its write is refused (RP004)"
session_q sa "ROLLBACK" >/dev/null
stop_proxy
session_close sc

# ---- a release or extend whose reply was lost ------------------------------
# The call fails (command_timeout) and may or may not have run in Redis.
# Whoever believed the lease stops believing it before the round trip: if
# the call ran, another holder may already have the name.  Naive (told only
# once Redis answered), A's write lands under a lease Redis no longer holds.
# arm EVENTS: the proxy lets one more command through (it runs in Redis),
# holds its reply, and drops everything after it.
arm() { kill -USR1 "$proxy"; wait_for 30 "grep -q '^armed' '$1'"; }
# through NAME: session NAME reaches Redis through the proxy, giving up on
# a reply after 500 ms; its scripts are warmed through it first (a NOSCRIPT
# would send an EVAL the armed proxy drops).
through() {
	session_q "$1" "SET redis_primitives.port = $pport" >/dev/null
	session_q "$1" "SET redis_primitives.command_timeout = 500" >/dev/null
	session_q "$1" "SELECT held FROM rp_lock_info('tb-dummy')" >/dev/null
}
direct() {
	session_q "$1" "RESET redis_primitives.port" >/dev/null
	session_q "$1" "RESET redis_primitives.command_timeout" >/dev/null
}
held() { q "SELECT (rp_lock_info('$1')).held"; }
session_open sc
# C releases A's lease by token; the release runs in Redis, its reply is lost.
start_proxy "$RP_TMP/tb5.events" 10000
through sc
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-warm', 30000)")
session_q sc "SELECT rp_release('tb-warm', '$tok')" >/dev/null
session_q sa "BEGIN" >/dev/null
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-5', 30000)")
arm "$RP_TMP/tb5.events"
out=$(session_q sc "SELECT rp_release('tb-5', '$tok')")
is "${out:0:6} $(grep -c '^forwarded' "$RP_TMP/tb5.events") $(held tb-5)" "ERROR: 1 f" \
	"(C's release by token ran in Redis, its reply lost: C's call failed)"
is "$(session_q sa "INSERT INTO tb_account VALUES (5)")" "ERROR:  RP004" \
	"a release by token whose reply was lost: A's write is refused (RP004), not landed under a lease Redis dropped"
session_q sa "ROLLBACK" >/dev/null
stop_proxy
# The same, the release lost before it reached Redis: A still holds the
# lease in Redis; it does not believe it, yet releases it at its end
# (rp_release_all here), not leaving it to its TTL.
start_proxy "$RP_TMP/tb6.events" 50
through sc
session_q sa "BEGIN" >/dev/null
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-6', 30000)")
arm "$RP_TMP/tb6.events"
session_q sc "SELECT held FROM rp_lock_info('tb-dummy')" >/dev/null
out=$(session_q sc "SELECT rp_release('tb-6', '$tok')")
is "${out:0:6} $(grep -c '^forwarded' "$RP_TMP/tb6.events") $(held tb-6)" "ERROR: 1 t" \
	"(C's release by token never reached Redis: C's call failed, Redis still holds A's lease)"
is "$(session_q sa "INSERT INTO tb_account VALUES (6)")" "ERROR:  RP004" \
	"a release by token of unknown outcome: A's write is refused (RP004)"
session_q sa "ROLLBACK" >/dev/null
session_q sa '\set VERBOSITY default' >/dev/null
session_q sa "INSERT INTO tb_account VALUES (6)" | tr '\n' ' ' |
	grep -Eq 'lease on "tb-6" was released for a write to table "tb_account".*DETAIL: +The lease with fence token [0-9]+ was released, or a release of it was asked for and its outcome is not known'
ok $? "... with an error that says so, not a deadline in 2000"
session_q sa '\set VERBOSITY sqlstate' >/dev/null
is "$(session_q sa "SELECT count(*) FROM rp_leases() WHERE name = 'tb-6'") $(session_q sa "SELECT rp_release_all()") $(held tb-6)" "0 1 f" \
	"... A no longer lists it in rp_leases(), and still releases it: rp_release_all() released 1, Redis holds none"
stop_proxy
# A's own release, its reply lost, caught by a savepoint: A does not go on
# writing under the lease it let go of.
start_proxy "$RP_TMP/tb7.events" 10000
through sa
session_q sa "BEGIN" >/dev/null
session_q sa "SELECT fence > 0 FROM rp_acquire('tb-7', 30000)" >/dev/null
session_q sa "SAVEPOINT s" >/dev/null
arm "$RP_TMP/tb7.events"
out=$(session_q sa "SELECT rp_release('tb-7')")
session_q sa "ROLLBACK TO SAVEPOINT s" >/dev/null
is "${out:0:6} $(held tb-7)" "ERROR: f" "(A's own release ran in Redis, its reply lost: the call failed)"
is "$(session_q sa "INSERT INTO tb_account VALUES (7)")" "ERROR:  RP004" \
	"A's own release whose reply was lost: its write after it is refused (RP004)"
session_q sa "ROLLBACK" >/dev/null
direct sa
stop_proxy
session_q sa "SELECT rp_release_all()" >/dev/null
# A's own extend to 300 ms, its reply lost, caught by a savepoint: it may
# have run, so A believes the shorter deadline from before the round trip.
# Naive (the deadline moved once Redis answered), A's write lands after
# Redis dropped the lease.
start_proxy "$RP_TMP/tb17.events" 10000
through sa
session_q sa "BEGIN" >/dev/null
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-17', 30000)")
session_q sa "SELECT rp_extend('tb-17', '$tok', 30000) IS NOT NULL" >/dev/null
session_q sa "SAVEPOINT s" >/dev/null
arm "$RP_TMP/tb17.events"
out=$(session_q sa "SELECT rp_extend('tb-17', '$tok', 300) IS NOT NULL")
session_q sa "ROLLBACK TO SAVEPOINT s" >/dev/null
direct sa
stop_proxy
wait_for 30 '[ "$(held tb-17)" = f ]'
is "${out:0:6} $(grep -c '^forwarded' "$RP_TMP/tb17.events") $(held tb-17)" "ERROR: 1 f" \
	"(A's own extend to 300 ms ran in Redis, its reply lost; the lease then expired)"
is "$(session_q sa "INSERT INTO tb_account VALUES (17)")" "ERROR:  RP004" \
	"A's own shortening extend whose reply was lost: its write after the new deadline is refused (RP004)"
session_q sa "ROLLBACK" >/dev/null
session_q sa "SELECT rp_release_all()" >/dev/null
# The same extend lost before it reached Redis: A believes the shorter
# deadline, yet Redis still holds the lease for its 30 s, and A releases it
# at its end.  Naive (the lease's own deadline lowered), A forgets it after
# 300 ms and leaves it in Redis until its TTL.
start_proxy "$RP_TMP/tb18.events" 50
through sa
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-18', 30000)")
session_q sa "SELECT rp_extend('tb-18', '$tok', 30000) IS NOT NULL" >/dev/null
arm "$RP_TMP/tb18.events"
session_q sa "SELECT held FROM rp_lock_info('tb-dummy')" >/dev/null
t0=$(clock)
out=$(session_q sa "SELECT rp_extend('tb-18', '$tok', 300) IS NOT NULL")
direct sa
stop_proxy
wait_past "$t0" 1
is "${out:0:6} $(grep -c '^forwarded' "$RP_TMP/tb18.events") $(held tb-18) $(session_q sa "INSERT INTO tb_account VALUES (18)")" \
	"ERROR: 1 t ERROR:  RP004" \
	"(A's own extend to 300 ms never reached Redis, which still holds the lease): A's write after 300 ms is refused (RP004)"
is "$(session_q sa "SELECT count(*) FROM rp_leases() WHERE name = 'tb-18'") $(session_q sa "SELECT rp_release_all()") $(held tb-18)" "0 1 f" \
	"... and A still releases the lease: rp_release_all() released 1, Redis holds none"
# C shortens A's lease to 300 ms by token; it runs, its reply is lost.
start_proxy "$RP_TMP/tb8.events" 10000
through sc
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-warm', 30000)")
session_q sc "SELECT rp_extend('tb-warm', '$tok', 30000) IS NOT NULL" >/dev/null
session_q sc "SELECT rp_release('tb-warm', '$tok')" >/dev/null
session_q sa "BEGIN" >/dev/null
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-8', 30000)")
arm "$RP_TMP/tb8.events"
out=$(session_q sc "SELECT rp_extend('tb-8', '$tok', 300) IS NOT NULL")
wait_for 30 '[ "$(held tb-8)" = f ]'
is "${out:0:6} $(held tb-8)" "ERROR: f" "(C's extend to 300 ms ran in Redis, its reply lost; the lease then expired)"
is "$(session_q sa "INSERT INTO tb_account VALUES (8)")" "ERROR:  RP004" \
	"an extend by token whose reply was lost: A believes the shorter deadline, its write after it is refused (RP004)"
session_q sa "ROLLBACK" >/dev/null
stop_proxy
# C's extend to 300 ms is told to A, then held on its way to Redis; A's own
# extend to 60 s runs first, then C's.  Answered, C tells A again; its reply
# lost, C's telling stays pending and A's own extend does not clear it.
# Naive (one telling, cleared by the owner's own extend), A's write lands.
for reply in answered lost; do
	if [ $reply = answered ]; then n=9 hold_ms=0 timeout=60000; else n=10 hold_ms=10000 timeout=500; fi
	start_proxy "$RP_TMP/tb$n.events" $hold_ms hold
	through sc
	session_q sc "SET redis_primitives.command_timeout = $timeout" >/dev/null
	session_q sa "BEGIN" >/dev/null
	tok=$(session_q sa "SELECT token FROM rp_acquire('tb-$n', 30000)")
	arm "$RP_TMP/tb$n.events"
	printf '%s\n' "SELECT rp_extend('tb-$n', '$tok', 300) IS NOT NULL;" >&"$_fd_sc"
	wait_for 30 "grep -q '^held-command' '$RP_TMP/tb$n.events'"
	a=$(session_q sa "SELECT rp_extend('tb-$n', '$tok', 60000) IS NOT NULL")
	kill -USR2 "$proxy"
	wait_for 30 "grep -q '^forwarded' '$RP_TMP/tb$n.events'"
	c=$(session_q sc "SELECT 'c'" | head -1)
	wait_for 30 '[ "$(held tb-$n)" = f ]'
	[ $reply = answered ] && want="t t f" || want="t ERROR: f"
	is "$a ${c:0:6} $(held tb-$n)" "$want" \
		"(C's extend to 300 ms, $reply, ran in Redis after A's own to 60 s; Redis dropped the lease)"
	is "$(session_q sa "INSERT INTO tb_account VALUES ($n)")" "ERROR:  RP004" \
		"C's extend $reply after A's own extend: A believes the shorter deadline, its write is refused (RP004)"
	session_q sa "ROLLBACK" >/dev/null
	stop_proxy
done
session_close sc
session_q sa "SELECT rp_release_all()" >/dev/null
# A release by token under another name finds nothing in Redis; it says
# nothing of A's lease of the right name with that token.  Naive (rows
# matched by token alone), A stops believing it and forgets it: left in
# Redis until its TTL.
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-11', 60000)")
r=$(q "SELECT rp_release('tb-other', '$tok')")
is "$r $(session_q sa "INSERT INTO tb_account VALUES (11) RETURNING id") $(session_q sa "SELECT rp_release_all()") $(held tb-11)" "f 11 1 f" \
	"a release by token under another name: A's lease of the right name is still believed (its write lands) and released"

# A call by token marks the lease of the key it acted on, on the server it
# acted on: not one under another key_prefix (answered "not held"), but one
# whose name and prefix make the same key ('{' in the prefix).  Naive
# (rows found by name and token), the first is forgotten and left in Redis,
# the second believed after Redis released it.
prefix=$(q "SHOW redis_primitives.key_prefix")
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-12', 60000)")
r=$(q "SET redis_primitives.key_prefix = 'other:'" "SELECT rp_release('tb-12', '$tok')")
is "$r $(session_q sa "INSERT INTO tb_account VALUES (12) RETURNING id") $(session_q sa "SELECT rp_release_all()") $(held tb-12)" "f 12 1 f" \
	"a release by token under another key_prefix: A's lease is still believed (its write lands) and released"
session_q sa "SET redis_primitives.key_prefix = '$prefix{x'" >/dev/null
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-13', 60000)")
r=$(q "SELECT rp_release('x{tb-13', '$tok')")
is "$r $(session_q sa "INSERT INTO tb_account VALUES (13)")" "t ERROR:  RP004" \
	"a release by token of the same key under another name and prefix: A's write is refused (RP004)"
session_q sa "RESET redis_primitives.key_prefix" >/dev/null
session_q sa "SELECT rp_release_all()" >/dev/null
# A release by token sent to another server (here another database of the
# same Redis) finds nothing: that answer does not say A's lease is gone.
# A stops believing it and still releases it.  Naive ("not held" taken as
# released), A forgets it and its own server keeps it until its TTL.
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-15', 60000)")
r=$(q "SET redis_primitives.database = 1" "SELECT rp_release('tb-15', '$tok')")
is "$r $(session_q sa "INSERT INTO tb_account VALUES (15)") $(session_q sa "SELECT count(*) FROM rp_leases() WHERE name = 'tb-15'") $(session_q sa "SELECT rp_release_all()") $(held tb-15)" \
	"f ERROR:  RP004 0 1 f" \
	"a release by token answered \"not held\" by another server: A stops believing its lease (RP004) and still releases it"
# An extend by token that never reached Redis (nothing listens on its port)
# is told, and never answered: A believes its deadline, whatever A's own
# extends say, but still releases the lease.  Naive (the told deadline
# taken as the lease's), A forgets it and Redis keeps it.
session_open sc
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-14', 30000)")
t0=$(clock)
session_q sc "SET redis_primitives.port = $(rp_free_port)" >/dev/null
c=$(session_q sc "SELECT rp_extend('tb-14', '$tok', 1000) IS NOT NULL")
session_close sc
a=$(session_q sa "SELECT rp_extend('tb-14', '$tok', 60000) IS NOT NULL")
wait_past "$t0" 1.5
is "${c:0:13} $a $(session_q sa "INSERT INTO tb_account VALUES (14)")" "ERROR:  08001 t ERROR:  RP004" \
	"(C's extend by token never reached Redis: A, told 1 s, refuses its write after it despite its own extend)"
is "$(session_q sa "SELECT count(*) FROM rp_leases() WHERE name = 'tb-14'") $(session_q sa "SELECT rp_release_all()") $(held tb-14)" "0 1 f" \
	"... and still releases the lease: rp_release_all() released 1, Redis holds none"

# rp_leases() shows the deadline A goes by: shortened to 20 s by token
# elsewhere, A's 60 s lease is listed with the 20 s one (the guard refuses
# A's writes after it).
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-16', 60000)")
q "SELECT rp_extend('tb-16', '$tok', 20000) IS NOT NULL" >/dev/null
is "$(session_q sa "SELECT expires_at < clock_timestamp() + interval '30 s' FROM rp_leases() WHERE name = 'tb-16'")" "t" \
	"rp_leases() shows the deadline told by an extend by token elsewhere, the one the guard goes by"
session_q sa "SELECT rp_release_all()" >/dev/null

# An extend by token elsewhere that Redis answered keeps the lease past its
# owner's own deadline (a heartbeat from another connection).  The owner
# believes no later than its own deadline (two racing extends may reach
# Redis in either order), but releases the lease at its end as long as
# Redis may hold it.  Naive (the duty ends at the owner's own deadline), A
# forgets the lease, and Redis keeps it until the extend's deadline.
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-19', 1000)")
t0=$(clock)
e=$(q "SELECT rp_extend('tb-19', '$tok', 60000) IS NOT NULL")
wait_past "$t0" 1.5
is "$e $(held tb-19) $(session_q sa "INSERT INTO tb_account VALUES (19)") $(session_q sa "SELECT count(*) FROM rp_leases() WHERE name = 'tb-19'")" \
	"t t ERROR:  RP004 0" \
	"(C extended A's 1 s lease to 60 s by token: past 1 s Redis holds it, A believes it no longer: RP004, not listed)"
is "$(session_q sa "SELECT rp_release_all()") $(held tb-19)" "1 f" \
	"... and A still releases it at its end: rp_release_all() released 1, Redis holds none"
# The same lease of a session that exits having said nothing since: its
# rows of the lease table are gone before its exit releases what it holds.
session_open sd
tok=$(session_q sd "SELECT token FROM rp_acquire('tb-21', 1000)")
t0=$(clock)
e=$(q "SELECT rp_extend('tb-21', '$tok', 60000) IS NOT NULL")
wait_past "$t0" 1.5
session_close sd
wait_for 30 '[ "$(held tb-21)" = f ]'
is "$e $(held tb-21)" "t f" \
	"... and at its exit, past its own deadline: released, not left in Redis for the extend's 60 s"
# The same lease in a session whose registry then grows past 64 leases
# (each such growth drops the leases past their deadline).
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-22', 1000)")
t0=$(clock)
e=$(q "SELECT rp_extend('tb-22', '$tok', 60000) IS NOT NULL")
wait_past "$t0" 1.5
n=$(session_q sa "SELECT count(rp_acquire('tb-22-' || g, 60000)) FROM generate_series(1, 70) g")
is "$e $n $(session_q sa "SELECT rp_release_all()") $(held tb-22)" "t 70 71 f" \
	"... and after its session took 70 more leases: rp_release_all() released all 71, Redis holds none"
# Re-entered after such an extend, the lease shows the owner's own deadline
# (the one its guard goes by), not the extend's.
session_q sa "BEGIN" >/dev/null
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-23', 20000)")
e=$(q "SELECT rp_extend('tb-23', '$tok', 60000) IS NOT NULL")
is "$e $(session_q sa "SELECT token = '$tok' AND expires_at < clock_timestamp() + interval '30 s' FROM rp_acquire('tb-23', 20000)")" "t t" \
	"re-entered after an extend by token elsewhere to 60 s, A's 20 s lease shows its own deadline"
is "$(session_q sa "SELECT bool_and(expires_at < clock_timestamp() + interval '30 s') FROM unnest(rp_acquire_all(ARRAY['tb-23'], 20000))")" "t" \
	"... and so does rp_acquire_all re-entering it"
session_q sa "ROLLBACK" >/dev/null
session_q sa "SELECT rp_release_all()" >/dev/null
# Released by token after such an extend and a write that read it: not
# believed again.  Naive (belief by the owner's own deadline, the release's
# mark not read), A re-enters the released lease and writes under it while
# B holds the name.
session_q sa "BEGIN" >/dev/null
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-24', 20000)")
e=$(q "SELECT rp_extend('tb-24', '$tok', 60000) IS NOT NULL")
w=$(session_q sa "INSERT INTO tb_account VALUES (24) RETURNING id")
r=$(q "SELECT rp_release('tb-24', '$tok')")
fb=$(session_q sb "SELECT fence FROM rp_acquire('tb-24', 60000)")
is "$e $w $r ${fb:+taken}" "t 24 t taken" \
	"(C extended A's lease by token, A wrote, C released it by token, B took the name)"
is "$(session_q sa "SELECT rp_acquire('tb-24', 20000) IS NULL")" "t" \
	"... A re-acquiring in its transaction gets NULL (B holds it), not its released lease"
is "$(session_q sa "UPDATE tb_account SET fence_token = fence_token WHERE id = 24")" "ERROR:  RP004" \
	"... and A's write after the release is refused (RP004)"
session_q sa "ROLLBACK" >/dev/null
session_q sb "SELECT rp_release_all()" >/dev/null
# Not answered at its end (Redis runs no writes), such a lease goes to the
# background worker like any other, which releases it once Redis takes
# writes again.  Naive (handed over by the owner's own deadline, past), it
# is left in Redis for the extend's term.  At COMMIT, then at exit.  The
# COMMIT waits for the release (release_at_commit = wait): a sent one is
# found unanswered only at the session's next call (release_at_commit.sh).
session_q sa "SET redis_primitives.release_at_commit = wait" >/dev/null
session_q sa "BEGIN" >/dev/null
tok=$(session_q sa "SELECT token FROM rp_acquire_xact('tb-25', 1000)")
session_q sa "SELECT fence > 0 FROM rp_acquire_xact('tb-26', 20000)" >/dev/null
t0=$(clock)
e=$(q "SELECT rp_extend('tb-25', '$tok', 60000) IS NOT NULL")
wait_past "$t0" 1.5
redis client pause 20000 write >/dev/null
out=$(session_q sa "COMMIT")
redis client unpause >/dev/null
wait_for 30 '[ "$(held tb-26) $(held tb-25)" = "f f" ]'
is "$e $(echo "$out" | grep -c '^WARNING:  08006') $(held tb-26) $(held tb-25)" "t 1 f f" \
	"(not released at COMMIT while Redis ran no writes): the background worker released it, not left for the extend's 60 s"
session_q sa "RESET redis_primitives.release_at_commit" >/dev/null
session_open sd
pid=$(session_q sd "SELECT pg_backend_pid()")
tok=$(session_q sd "SELECT token FROM rp_acquire('tb-27', 1000)")
session_q sd "SELECT fence > 0 FROM rp_acquire('tb-28', 20000)" >/dev/null
t0=$(clock)
e=$(q "SELECT rp_extend('tb-27', '$tok', 60000) IS NOT NULL")
wait_past "$t0" 1.5
redis client pause 20000 write >/dev/null
session_close sd
wait_for 30 '[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid")" = 0 ]'
redis client unpause >/dev/null
wait_for 30 '[ "$(held tb-28) $(held tb-27)" = "f f" ]'
is "$e $(held tb-28) $(held tb-27)" "t f f" \
	"(not released at exit while Redis ran no writes): the background worker released it, not left for the extend's 60 s"
# An extend that may have run (its reply lost) may have kept the lease in
# Redis too: the holder's own, and one by token elsewhere.  Belief stays at
# the owner's own deadline; the duty to release lasts until the extend's.
# Naive (the duty moved only by an answer), the holder forgets the lease
# and Redis keeps it for the extend's 60 s.
for who in own token; do
	if [ $who = own ]; then n=29 s=sa; else n=30 s=sc; session_open sc; fi
	start_proxy "$RP_TMP/tb$n.events" 10000
	through $s
	tok=$(session_q sa "SELECT token FROM rp_acquire('tb-$n', 1000)")
	session_q $s "SELECT rp_extend('tb-$n', '$tok', 1000) IS NOT NULL" >/dev/null
	t0=$(clock)
	arm "$RP_TMP/tb$n.events"
	out=$(session_q $s "SELECT rp_extend('tb-$n', '$tok', 60000) IS NOT NULL")
	direct $s
	stop_proxy
	[ $who = token ] && session_close sc
	wait_past "$t0" 1.5
	is "${out:0:6} $(grep -c '^forwarded' "$RP_TMP/tb$n.events") $(held tb-$n) $(session_q sa "SELECT count(*) FROM rp_leases() WHERE name = 'tb-$n'") $(session_q sa "SELECT rp_release_all()") $(held tb-$n)" \
		"ERROR: 1 t 0 1 f" \
		"an extend ($who) to 60 s whose reply was lost: past 1 s A believes the lease no longer, yet releases it (rp_release_all() released 1)"
done
# The holder's own extends whose outcome is unknown are remembered for the
# lease's life, as an extend by token elsewhere is while pending: one lost
# may still run after a later one.  First, to 300 ms (it ran, its reply
# lost) then to 10 s (it never reached Redis).  Naive (the last one asked
# for believed), A writes after Redis dropped the lease.
start_proxy "$RP_TMP/tb31.events" 10000
through sa
tok=$(session_q sa "SELECT token FROM rp_acquire('tb-31', 30000)")
session_q sa "SELECT rp_extend('tb-31', '$tok', 30000) IS NOT NULL" >/dev/null
arm "$RP_TMP/tb31.events"
o1=$(session_q sa "SELECT rp_extend('tb-31', '$tok', 300) IS NOT NULL")
o2=$(session_q sa "SELECT rp_extend('tb-31', '$tok', 10000) IS NOT NULL")
direct sa
stop_proxy
wait_for 30 '[ "$(held tb-31)" = f ]'
is "${o1:0:6} ${o2:0:6} $(grep -c '^forwarded' "$RP_TMP/tb31.events") $(held tb-31) $(session_q sa "INSERT INTO tb_account VALUES (31)")" \
	"ERROR: ERROR: 1 f ERROR:  RP004" \
	"A's own extends to 300 ms (ran, reply lost) then to 10 s (never sent): A believes the 300 ms, its write is refused (RP004)"
session_q sa "SELECT rp_release_all()" >/dev/null
# Then one held on its way to Redis until after A's next own extend, which
# is answered: to 300 ms held, A's own to 60 s, then the 300 ms one runs.
# Naive (an answered extend clears what came before), A writes after Redis
# dropped the lease.  And the other way round, to 60 s held and A's own to
# 1 s: A still releases the lease after its 1 s.
for way in shorter longer; do
	if [ $way = shorter ]; then n=32 lost=300 ttl=30000 own=60000; else n=33 lost=60000 ttl=3000 own=1000; fi
	start_proxy "$RP_TMP/tb$n.events" 10000 hold
	through sa
	tok=$(session_q sa "SELECT token FROM rp_acquire('tb-$n', $ttl)")
	session_q sa "SELECT rp_extend('tb-$n', '$tok', $ttl) IS NOT NULL" >/dev/null
	arm "$RP_TMP/tb$n.events"
	o1=$(session_q sa "SELECT rp_extend('tb-$n', '$tok', $lost) IS NOT NULL")
	held_cmd=$(grep -c '^held-command' "$RP_TMP/tb$n.events")
	direct sa
	t0=$(clock)
	a=$(session_q sa "SELECT rp_extend('tb-$n', '$tok', $own) IS NOT NULL")
	kill -USR2 "$proxy"
	wait_for 30 "grep -q '^forwarded' '$RP_TMP/tb$n.events'"
	stop_proxy
	if [ $way = shorter ]; then
		wait_for 30 '[ "$(held tb-32)" = f ]'
		is "${o1:0:6} $held_cmd $a $(held tb-32) $(session_q sa "INSERT INTO tb_account VALUES (32)")" "ERROR: 1 t f ERROR:  RP004" \
			"A's own extend to 300 ms held on its way until after A's own to 60 s: A believes the 300 ms, its write is refused (RP004)"
		session_q sa "SELECT rp_release_all()" >/dev/null
	else
		wait_past "$t0" 1.5
		is "${o1:0:6} $held_cmd $a $(held tb-33) $(session_q sa "SELECT count(*) FROM rp_leases() WHERE name = 'tb-33'") $(session_q sa "SELECT rp_release_all()") $(held tb-33)" \
			"ERROR: 1 t t 0 1 f" \
			"A's own extend to 60 s held on its way until after A's own to 1 s: past 1 s A believes it no longer, yet releases it"
	fi
done
# The same for a transaction's lease: released at COMMIT.
# Its own deadline is 5 s: the extend by token comes from a new
# connection, which took more than 1 s on a loaded machine (the extend
# found the lease gone: 'f f').
session_q sa "BEGIN" >/dev/null
tok=$(session_q sa "SELECT token FROM rp_acquire_xact('tb-20', 5000)")
t0=$(clock)
e=$(q "SELECT rp_extend('tb-20', '$tok', 60000) IS NOT NULL")
wait_past "$t0" 5.5
session_q sa "COMMIT" >/dev/null
is "$e $(held tb-20)" "t f" \
	"a transaction's lease extended by token elsewhere past its own deadline is released at COMMIT"

# A 1-permit semaphore: released by token elsewhere, taken by B; A asking
# again must not end with a second holder by its own records.
session_q sa "BEGIN" >/dev/null
tok=$(session_q sa "SELECT token FROM rp_semaphore_acquire('tb-sem', 1, 30000)")
q "SELECT rp_release('tb-sem', '$tok')" >/dev/null
session_q sb "SELECT fence > 0 FROM rp_semaphore_acquire('tb-sem', 1, 30000)" >/dev/null
is "$(session_q sa "SELECT rp_semaphore_acquire('tb-sem', 1, 30000) IS NULL")" "t" \
	"a permit released by token elsewhere: A asking again gets NULL (B holds the only permit)"
session_q sa "ROLLBACK" >/dev/null
session_q sb "SELECT rp_release_all()" >/dev/null
session_close sa; session_close sb
q "SELECT rp_release_all()" "DROP TABLE tb_account" >/dev/null

# ---- an aborted semaphore waiter leaves the queue ---------------------------
session_open sh; session_open sw
session_q sh "SELECT fence > 0 FROM rp_semaphore_acquire('wq-1', 1, 60000)" >/dev/null
# The timeout lands between two polls (released at the abort) or, on a busy
# machine, during a poll's round trip (the abort cannot wait on Redis then:
# the background worker releases the place).  PERSIST right after the abort
# takes the heartbeat's expiry out of the picture: only a release empties it.
out=$(session_q sw "SET statement_timeout = 500" ; session_q sw "SELECT rp_semaphore_acquire('wq-1', 1, 60000, 60000)"; \
	session_q sw "RESET statement_timeout"; session_q sw "SELECT rp_test.redis('PERSIST', rp_test.key('wq-1', 'semq')) IS NOT NULL")
is "$(echo $out)" "ERROR: 57014 t" "a waiter is ended by statement_timeout"
wait_for 30 '[ "$(q "SELECT rp_test.redis('"'ZCARD'"', rp_test.key('"'wq-1'"', '"'semq'"'))")" = 0 ]'
is "$(q "SELECT rp_test.redis('ZCARD', rp_test.key('wq-1', 'semq'))")" "0" \
	"a waiter ended by statement_timeout has its place released, not left to its heartbeat"
# Cancelled in the middle of a poll's round trip, for certain: the waiter
# reaches Redis through a proxy (test/t/delay_proxy.py) that forwards one
# more command (the poll runs in Redis, its place refreshed) and holds its
# reply back.  The abort does not wait on Redis there; the naive twin (1.1,
# and this project before) left the place to its heartbeat, which PERSIST
# turns into forever.
start_proxy "$RP_TMP/wq2.events" 60000
session_open sp
session_q sp "SET redis_primitives.port = $pport" >/dev/null
session_q sp "SET redis_primitives.command_timeout = 60000" >/dev/null
sp_pid=$(session_pid sp)
session_q sh "SELECT fence > 0 FROM rp_semaphore_acquire('wq-2', 1, 60000)" >/dev/null
printf '%s\n' "SELECT rp_semaphore_acquire('wq-2', 1, 60000, 60000);" >&"$_fd_sp"
wait_for 60 '[ "$(q "SELECT rp_test.redis('"'ZCARD'"', rp_test.key('"'wq-2'"', '"'semq'"'))")" = 1 ]'
kill -USR1 "$proxy"
wait_for 60 "grep -q '^forwarded' '$RP_TMP/wq2.events'"
q "SELECT pg_cancel_backend($sp_pid)" "SELECT rp_test.redis('PERSIST', rp_test.key('wq-2', 'semq'))" >/dev/null
is "$(session_q sp "SELECT 'after'")" "$(printf 'ERROR:  57014\nafter')" \
	"a waiter cancelled while its poll's reply is held back ends (57014)"
wait_for 30 '[ "$(q "SELECT rp_test.redis('"'ZCARD'"', rp_test.key('"'wq-2'"', '"'semq'"'))")" = 0 ]'
is "$(q "SELECT rp_test.redis('ZCARD', rp_test.key('wq-2', 'semq'))")" "0" \
	"... and its place leaves the queue (the background worker releases it), not left to its heartbeat"
stop_proxy
session_close sp
session_q sh "SELECT rp_release_all()" >/dev/null
session_close sh; session_close sw
finish
