#!/usr/bin/env bash
# Leases that are never stranded, misdirected or leaked (docs/lock.md, "What
# it guarantees").  Each block reproduces one way 1.0 lost track of a lease
# Redis had granted, shows what the naive client would be left with, and
# checks that the lease now ends with the call, the transaction or the
# backend.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 47
held() { q "SELECT (rp_lock_info('$1')).held"; }
pttl() { redis pttl "$(key "$1" lock)"; }
wait_free() {  # name seconds : 0 when the lock is free within that time
	local i
	for i in $(seq $(( $2 * 20 ))); do [ "$(held "$1")" = f ] && return 0; sleep 0.05; done
	return 1
}

# ---- 1. cancel or lost connection during the fence_replicas WAIT ---------
# No replica is attached, so WAIT 1 blocks until fence_replicas_timeout:
# statement_timeout cancels the call while the lease is already granted.
# The WAIT lasts 30 s, not 1 s: a backend kept off the CPU past its end
# would find the WAIT's answer beside the cancel.
session_open s
out=$(session_q s "SET redis_primitives.fence_replicas = 1; SET redis_primitives.fence_replicas_timeout = 30000; SET statement_timeout = 300; SELECT rp_acquire('wr1', 600000)")
is "$out" "ERROR:  57014" "statement_timeout during the WAIT cancels rp_acquire (57014)"
is "$(held wr1)" "f" "and the lease it was granted is released at the abort, not left for 600 s"
# Naive twin: SET NX PX then WAIT from a client that gives up keeps the key.
redis set naive:wr1 tok nx px 600000 >/dev/null
timeout 0.3 redis-cli -p "$REDIS_PORT" wait 1 1000 >/dev/null 2>&1
cmp_ok "$(redis pttl naive:wr1)" -gt 500000 "naive twin: a client cancelled in WAIT leaves its key for the whole TTL"
# The connection is killed once Redis shows the call blocked in its WAIT
# (CLIENT LIST: cmd=wait, flag b), which lasts until then (60 s at most):
# a kill after a fixed delay could come before the call was sent (at load,
# 'RP003': the idle connection was killed, and the WAIT ran out).
session_q s "SET statement_timeout = 0; SET redis_primitives.fence_replicas_timeout = 60000; SET redis_primitives.command_timeout = 90000" >/dev/null
( session_q s "SELECT rp_acquire('wr2', 600000)" >"$RP_TMP/wr2.out" ) & caller=$!
in_wait() { redis client list | grep -q ' flags=[^ ]*b.* cmd=wait'; }
seen=; wait_for 30 in_wait || seen="the WAIT was never seen: "
redis client kill type normal >/dev/null
wait $caller
is "$seen$(cat "$RP_TMP/wr2.out")" "ERROR:  08006" "a lost connection during the WAIT fails the call with 08006"
is "$(held wr2)" "f" "and the lease is released (reconnecting at the abort), not stranded"
session_close s

# ---- 2. pg_terminate_backend during an acquire Redis has not answered ----
# The backend is connected to Redis before Redis sleeps 5 s, so the acquire
# is sent and waits (a backend still connecting would send nothing, and the
# check below would pass with no lease at all: mutants 56 and 57 survived
# that).  It is terminated there.  Its exit release cannot reach Redis in
# time either; the lease Redis grants on waking must still end within
# seconds.  (Redis, on waking, also runs the exit release the backend left
# in its socket, so this block cannot tell the worker's release from the
# backend's: orphan_worker.sh has the case only the worker can release.)
# Redis is stopped (SIGSTOP) until the backend has exited, however long a
# loaded machine takes: a DEBUG SLEEP of 5 s could end before the
# terminate (a 4 s stall there: the acquire was answered, 'idle').
session_open t
session_q t "SET redis_primitives.command_timeout = '60s'" >/dev/null
session_q t "SELECT (rp_lock_info('term1')).held" >/dev/null
terminate_mid_call "$REDIS_PORT" t "SELECT rp_acquire('term1', 600000);" '%rp_acquire(%'
is "$waited" "active $(wait_event Reply)" "the acquire waits on the sleeping Redis when its backend is terminated"
session_close t
# Waited for 120 s: far longer than a busy machine delays the release, far
# less than the 600 s TTL a stranded lease lives.
wait_free term1 120; ok $? "a backend terminated inside rp_acquire: its lease is released once Redis answers, not left for its 600 s TTL ($(( $(now_ms) - t )) ms)"
is "$(redis get "$(key term1 fence)")" "1" "that lease was real: Redis ran the acquire on waking (fence 1)"
redis set naive:term1 tok nx px 600000 >/dev/null
cmp_ok "$(redis pttl naive:term1)" -gt 500000 "naive twin: a SET NX PX whose client died keeps its key for the whole TTL"

# ---- 3. key_prefix changed mid-session ----------------------------------
session_open s
session_q s "SELECT (rp_acquire('kp1', 30000)).fence IS NOT NULL; CREATE TEMP TABLE kl AS SELECT * FROM rp_acquire('kp2', 30000)" >/dev/null
session_q s "SET redis_primitives.key_prefix = 'other:'" >/dev/null
is "$(session_q s "SELECT rp_release('kp1')")" "t" "SET key_prefix: rp_release(name) still releases the lease taken under the old prefix"
is "$(held kp1)" "f" "and the key under the old prefix is gone"
is "$(session_q s "SELECT (rp_extend(ROW(name, token, fence, expires_at)::rp_lease, 60000)).fence = fence FROM kl")" "t" "rp_extend still extends the lease under its own key"
cmp_ok "$(pttl kp2)" -gt 30000 "the old-prefix key got the new TTL"
is "$(redis exists 'other:{kp2}:lock')" "0" "nothing was written under the new prefix"
session_q s "RESET redis_primitives.key_prefix; SELECT rp_release_all()" >/dev/null
out=$(session_q s "BEGIN; SELECT rp_acquire_xact('kp3', 30000, 0, 0, true) IS NOT NULL; SET LOCAL redis_primitives.key_prefix = 'x:'; COMMIT")
is "$(echo $out)" "t" "SET LOCAL key_prefix: verify_at_commit checks the lease's own key (no false RP002)"
is "$(held kp3)" "f" "and the xact lease is released under its own key at COMMIT"
session_close s
# The same name acquired again under a new prefix: a second lease under its
# own key, and the first one, still live in Redis, stays the session's (each
# released under its own key by rp_release(name), one per call, the newest
# first; by rp_release_all; by backend exit).
session_open s
out=$(session_q s "SELECT (rp_acquire('kp4', 60000)).fence IS NOT NULL; SET redis_primitives.key_prefix = 'zz:'; SELECT (rp_acquire('kp4', 60000)).fence IS NOT NULL; SELECT count(*) FROM rp_leases() WHERE name = 'kp4'")
is "$(echo $out)" "t t 2" "SET key_prefix, then the same name again: a second lease under the new key; rp_leases lists both"
out=$(session_q s "SELECT rp_release('kp4'); SELECT rp_release('kp4')")
is "$(echo $out)|$(redis exists 'rp:{kp4}:lock')$(redis exists 'zz:{kp4}:lock')" "t t|00" "rp_release(name) twice releases both, each under its own key"
session_q s "SELECT (rp_acquire('kp5', 60000)).fence IS NOT NULL; RESET redis_primitives.key_prefix; SELECT (rp_acquire('kp5', 60000)).fence IS NOT NULL" >/dev/null
is "$(redis exists 'rp:{kp5}:lock')$(redis exists 'zz:{kp5}:lock')" "11" "(kp5 held under both prefixes)"
session_close s
# 30 s: far longer than an exit's release takes, half the 60 s TTL.
wait_for 30 "[ \"\$(redis exists 'rp:{kp5}:lock')\$(redis exists 'zz:{kp5}:lock')\" = 00 ]"
ok $? "backend exit releases both, neither left for its TTL"
# A lease under another key_prefix is of another resource for the
# lock-bound guard: its fence comes from another counter.  S holds gp-1
# under pa: (fence 51), then writes under pb:, where T holds gp-1 and wrote
# with fence 1: refused (RP004), not let through by the pa: lease's 51.  And
# S holding gq-1 under pd: (fence 1) and pc: (fence 101), writing under pc:
# over a row stamped 50: accepted by the pc: lease, not refused (RP001) by
# the pd: one.
q "CREATE TABLE gp_t (id int PRIMARY KEY, v int, fence_token bigint)" \
  "CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON gp_t FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=gp-{id}')" \
  "CREATE TABLE gq_t (id int PRIMARY KEY, v int, fence_token bigint)" \
  "INSERT INTO gq_t VALUES (1, 0, 50)" \
  "CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON gq_t FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=gq-{id}')" >/dev/null
redis set 'pa:{gp-1}:fence' 50 >/dev/null
redis set 'pc:{gq-1}:fence' 100 >/dev/null
session_open s; session_open t
session_q s "SET redis_primitives.key_prefix = 'pa:'; SELECT (rp_acquire('gp-1', 60000)).fence; SET redis_primitives.key_prefix = 'pb:'" >/dev/null
session_q t "SET redis_primitives.key_prefix = 'pb:'; SELECT (rp_acquire('gp-1', 30000)).fence; INSERT INTO gp_t VALUES (1, 200)" >/dev/null
out=$(session_q s "UPDATE gp_t SET v = 50 WHERE id = 1"; q "SELECT v || ' ' || fence_token FROM gp_t")
is "$(echo $out)" "ERROR: RP004 200 1" \
	"a lease of the name under another key_prefix does not let a write through the lock-bound guard (RP004)"
session_q s "SET redis_primitives.key_prefix = 'pd:'; SELECT (rp_acquire('gq-1', 60000)).fence; SET redis_primitives.key_prefix = 'pc:'; SELECT (rp_acquire('gq-1', 30000)).fence" >/dev/null
out=$(session_q s "UPDATE gq_t SET v = 1 WHERE id = 1"; q "SELECT v || ' ' || fence_token FROM gq_t")
is "$(echo $out)" "1 101" \
	"of two leases of the name under two prefixes the guard uses the current prefix's (fence 101), not the other's (1)"
session_q s "RESET redis_primitives.key_prefix; SELECT rp_release_all()" >/dev/null
session_q t "SELECT rp_release_all()" >/dev/null
session_close s; session_close t
# The same through ALTER SYSTEM and a reload.
session_open s
session_q s "SELECT (rp_acquire('kp6', 60000)).fence IS NOT NULL" >/dev/null
q "ALTER SYSTEM SET redis_primitives.key_prefix = 'zy:'" "SELECT pg_reload_conf()" >/dev/null
wait_for 30 '[ "$(session_q s "SHOW redis_primitives.key_prefix")" = zy: ]'
out=$(session_q s "SELECT (rp_acquire('kp6', 60000)).fence IS NOT NULL; SELECT rp_release_all()")
is "$(echo $out)|$(redis exists 'rp:{kp6}:lock')$(redis exists 'zy:{kp6}:lock')" "t 2|00" "after a reload of key_prefix, the same name again: rp_release_all releases both leases"
q "ALTER SYSTEM RESET redis_primitives.key_prefix" "SELECT pg_reload_conf()" >/dev/null
wait_for 30 '[ "$(session_q s "SHOW redis_primitives.key_prefix")" = rp: ]'
session_close s
# The background elector resigns under the old prefix when it changes.
q "ALTER SYSTEM SET redis_primitives.elections = 'kpe'" "ALTER SYSTEM SET redis_primitives.election_renew = 300" "SELECT pg_reload_conf()" >/dev/null
wait_for 30 '[ "$(q "SELECT rp_is_leader('"'kpe'"')")" = t ]'
is "$(redis exists 'rp:{kpe}:leader')" "1" "the elector leads 'kpe' under rp:"
q "ALTER SYSTEM SET redis_primitives.key_prefix = 'kpnew:'" "SELECT pg_reload_conf()" >/dev/null
wait_for 30 '[ "$(redis exists "kpnew:{kpe}:leader")" = 1 ]'
is "$(redis exists 'rp:{kpe}:leader')" "0" "after a reload of key_prefix it resigned under the old prefix"
q "ALTER SYSTEM RESET redis_primitives.elections" "ALTER SYSTEM RESET redis_primitives.election_renew" \
  "ALTER SYSTEM RESET redis_primitives.key_prefix" "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
# A server-wide key_prefix too long for the shared memory the elector
# publishes it in (255 bytes): a backend cannot key elections as the
# elector does, so the SQL election functions refuse (22023) rather than
# key them by the session's prefix, where a database with a prefix of its
# own won an election the elector led.  Locks work under it.
long=$(printf 'L%.0s' $(seq 300)):
q "ALTER SYSTEM SET redis_primitives.key_prefix = '$long'" "SELECT pg_reload_conf()" >/dev/null
camp() { q_state "SET redis_primitives.key_prefix = 'db2:'" "SELECT rp_campaign('lpe', 'x', 1000)"; }
wait_for 30 '[ "$(camp)" = 22023 ]'
is "$(camp) $(q "SELECT (rp_acquire_xact('lpl', 1000)).fence") $(redis exists "$long{lpl}:fence")" "22023 1 1" \
	"a server-wide key_prefix of 301 bytes: rp_campaign refuses (22023), a lock is taken under the prefix"
q "ALTER SYSTEM RESET redis_primitives.key_prefix" "SELECT pg_reload_conf()" >/dev/null
wait_for 30 '[ "$(camp)" = OK ]'

# ---- 4. verify_at_commit stops writes made through postgres_fdw ---------
q "CREATE EXTENSION IF NOT EXISTS postgres_fdw" \
  "DROP SERVER IF EXISTS rp_loop CASCADE" \
  "CREATE SERVER rp_loop FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$PGHOST', port '$PGPORT', dbname '$RP_DB')" \
  "CREATE USER MAPPING FOR CURRENT_USER SERVER rp_loop" \
  "DROP TABLE IF EXISTS fdw_remote, fdw_local" \
  "CREATE TABLE fdw_remote (id int, v text)" "INSERT INTO fdw_remote VALUES (1, 'old')" \
  "CREATE TABLE fdw_local (id int, v text)" "INSERT INTO fdw_local VALUES (1, 'old')" \
  "CREATE FOREIGN TABLE fdw_ft (id int, v text) SERVER rp_loop OPTIONS (table_name 'fdw_remote')" >/dev/null
fdw_try() {  # verify : the SQLSTATE of the COMMIT, then both rows
	q "UPDATE fdw_remote SET v = 'old'" "UPDATE fdw_local SET v = 'old'" >/dev/null
	q_state "BEGIN" "SELECT rp_acquire_xact('fdw1', 200, verify_at_commit => $1)" "UPDATE fdw_ft SET v = 'new'" \
	        "UPDATE fdw_local SET v = 'new'" "SELECT pg_sleep(0.4)" "COMMIT"
	q "SELECT v FROM fdw_remote" "SELECT v FROM fdw_local"
}
out=$(fdw_try false)
is "$(echo $out)" "OK new new" "naive twin: without verify_at_commit both writes commit after the lease was lost"
out=$(fdw_try true)
is "$(echo $out)" "RP002 old old" "with verify_at_commit: RP002, and neither the local nor the remote write committed"
# The same for a write through a lock-bound guard, checked again at commit
# (RP004).  Its check is registered at the session's first guarded write,
# here before postgres_fdw registers its own at the first remote one: the
# remote transaction must not commit first.
q "CREATE TABLE fdw_guarded (id int PRIMARY KEY, v text, fence_token bigint)" \
  "CREATE TRIGGER zz_fence BEFORE INSERT OR UPDATE OR DELETE ON fdw_guarded
   FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=fdwg-{id}')" \
  "SET session_replication_role = replica; INSERT INTO fdw_guarded VALUES (1, 'old', 0)" \
  "UPDATE fdw_remote SET v = 'old'" >/dev/null
out=$(q_state "BEGIN" "SELECT rp_acquire_xact('fdwg-1', 200)" "UPDATE fdw_guarded SET v = 'new'" \
      "UPDATE fdw_ft SET v = 'new'" "SELECT pg_sleep(0.4)" "COMMIT"; q "SELECT v FROM fdw_remote" "SELECT v FROM fdw_guarded")
is "$(echo $out)" "RP004 old old" "a guarded write, then a remote one, past the lease: RP004, and neither committed"

# ---- 5. re-acquiring a name keeps the commit-time check of the lost lease -
q "CREATE TABLE IF NOT EXISTS rv_ledger (entry text)" "TRUNCATE rv_ledger" >/dev/null
out=$(q_state "BEGIN" "SELECT rp_acquire_xact('vr1', 100, verify_at_commit => true)" "INSERT INTO rv_ledger VALUES ('lost')" \
      "SELECT pg_sleep(0.3)" "SELECT rp_acquire_xact('vr1', 10000)" "COMMIT")
is "$out" "RP002" "re-acquiring a name whose verified lease expired: COMMIT still fails with RP002"
is "$(q "SELECT count(*) FROM rv_ledger")" "0" "and the write made under the lost lease is rolled back"

# ---- 6. extend, renew, release and resign under maxmemory + noeviction ---
q "SELECT (rp_acquire('oom1', 30000)).fence IS NOT NULL" >/dev/null
session_open s
session_q s "CREATE TEMP TABLE ol AS SELECT * FROM rp_acquire('oom2', 30000); SELECT rp_campaign('oome', 'n1', 30000)" >/dev/null
redis config set maxmemory 1 >/dev/null
is "$(redis set oomprobe x 2>&1 | cut -d' ' -f1)" "OOM" "Redis is full: a plain SET is refused with OOM"
is "$(session_q s "SELECT rp_extend(ROW(name, token, fence, expires_at)::rp_lease, 60000) IS NOT NULL FROM ol")" "t" "rp_extend works under maxmemory"
is "$(session_q s "SELECT rp_campaign('oome', 'n1', 30000) IS NOT NULL")" "t" "a renewing rp_campaign works under maxmemory"
is "$(session_q s "SELECT (rp_lock_info('oom2')).held")" "t" "rp_lock_info (no-writes) works under maxmemory"
is "$(session_q s "SELECT rp_release('oom2')")" "t" "rp_release works under maxmemory"
is "$(session_q s "SELECT rp_resign('oome', 'n1')")" "t" "rp_resign works under maxmemory"
is "$(q_state "SELECT rp_acquire('oom3', 30000)")" "53200" "a new acquire needs memory and is refused (53200)"
redis config set maxmemory 0 >/dev/null
session_close s

# ---- 7. the registry is bounded -----------------------------------------
session_open s
mem() { session_q s "SELECT sum(total_bytes) FROM pg_backend_memory_contexts"; }
session_q s "DO \$\$ BEGIN FOR i IN 1..500 LOOP PERFORM rp_acquire('m0-' || i, 1); END LOOP; END \$\$" >/dev/null
sleep 0.1; m0=$(mem)
session_q s "DO \$\$ BEGIN FOR i IN 1..5000 LOOP PERFORM rp_acquire('m1-' || i, 1); END LOOP; END \$\$" >/dev/null
sleep 0.1; m1=$(mem)
cmp_ok "$(( m1 - m0 ))" -lt 262144 "5000 expired session leases: backend memory grew by $(( m1 - m0 )) bytes"
is "$(session_q s "SELECT count(*) FROM rp_leases()")" "0" "rp_leases() does not list expired leases"
session_q s "SET redis_primitives.port = $(rp_free_port); SET redis_primitives.connect_timeout = 50" >/dev/null
session_q s "DO \$\$ BEGIN FOR i IN 1..20 LOOP BEGIN PERFORM rp_acquire(repeat('n', 200000) || i, 60000); EXCEPTION WHEN OTHERS THEN NULL; END; END LOOP; END \$\$" >/dev/null
m2=$(mem)
session_q s "DO \$\$ BEGIN FOR i IN 1..200 LOOP BEGIN PERFORM rp_acquire(repeat('n', 200000) || i, 60000); EXCEPTION WHEN OTHERS THEN NULL; END; END LOOP; END \$\$" >/dev/null
m3=$(mem)
cmp_ok "$(( m3 - m2 ))" -lt 1048576 "200 failed acquires of 200 kB names with Redis down: memory grew by $(( m3 - m2 )) bytes"
session_close s

# ---- 8. monitoring roles never see the password -------------------------
q "DROP ROLE IF EXISTS rp_mon" "CREATE ROLE rp_mon LOGIN IN ROLE pg_monitor" >/dev/null
q "ALTER SYSTEM SET redis_primitives.password = 'Mon-Secret-7'" "SELECT pg_reload_conf()" >/dev/null
# Once a new session has it (else the checks below would pass on a server
# that has no password yet).
wait_for 30 '[ "$(q "SHOW redis_primitives.password")" = Mon-Secret-7 ]'
mon() { PGUSER=rp_mon psql -X -At -q -d "$RP_DB" -c "$1" 2>&1; }
is "$(mon "SHOW redis_primitives.password" | grep -c Mon-Secret-7)" "0" "pg_monitor: SHOW does not reveal the password"
is "$(mon "SELECT current_setting('redis_primitives.password')" | grep -c Mon-Secret-7)" "0" "pg_monitor: current_setting() does not reveal it"
is "$(mon "SELECT setting FROM pg_settings WHERE name = 'redis_primitives.password'" | grep -c Mon-Secret-7)" "0" "pg_monitor: pg_settings does not reveal it"
q "ALTER SYSTEM RESET redis_primitives.password" "SELECT pg_reload_conf()" "DROP ROLE rp_mon" >/dev/null

# ---- 9. the small ones ---------------------------------------------------
out=$(q "CREATE TEMP TABLE fl AS SELECT * FROM rp_acquire('ext1', 30000)" \
        "SELECT (rp_extend(ROW(name, token, 999999, expires_at)::rp_lease, 30000)).fence = fl.fence FROM fl" "SELECT rp_release('ext1')")
is "$(echo $out)" "t t" "rp_extend returns the registry's fence, not a forged one"
session_open s
# Re-entry is per transaction (1.2): within the one that took it.
session_q s "BEGIN" >/dev/null
session_q s "SELECT (rp_acquire('self1', 30000)).fence" >/dev/null
# 1.0 waited on itself until wait_ms ran out (10 s here), then returned
# NULL (how soon it returns: test/timing/leases_never_stranded.sh).
session_timed s "SELECT a.token = b.token FROM rp_acquire('self1', 30000, 10000) a, rp_leases() b WHERE b.name = 'self1'"
session_q s "COMMIT" >/dev/null
is "$TIMED_OUT" "t" "rp_acquire of a name the transaction holds returns that same lease (${TIMED_MS:-?} ms)"
out=$(session_q s "SELECT (rp_acquire('col1', 30000)).*" | cut -d'|' -f2,3)
is "$out" "$(session_q s "SELECT token || '|' || fence FROM rp_leases() WHERE name = 'col1'")" "SELECT (rp_acquire(...)).* yields one whole lease"
session_q s "SELECT rp_release_all()" >/dev/null
session_close s
finish
