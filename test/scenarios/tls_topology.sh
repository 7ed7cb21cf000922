#!/usr/bin/env bash
# tls_topology.sh -- Sentinel and Cluster over TLS (issue 12), every server
# TLS-only (plain port 0).  The failures this guards against:
#
#  A. sentinels that require AUTH: 1.0 could not ask them at all (NOAUTH, the
#     naive twin here); with sentinel_password the master is found over TLS,
#     a wrong password is refused without being shown, and a failover is
#     followed by the same session;
#  B. a Cluster over TLS (tls-cluster yes): the slot map names TLS ports,
#     calls reach all three masters over TLS, and a slot range moved under
#     load (MOVED/ASK to TLS ports) fails no call.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
source "$(dirname "$0")/tls_certs.bash"
plan 20

tls_make_certs "$RP_TMP/tlst"
C=$RP_TMP/tlst
CLI=(redis-cli --tls --cacert "$C/ca.crt")
TLS="SET redis_primitives.tls = 'verify-full'; SET redis_primitives.tls_ca_file = '$C/ca.crt'; SET redis_primitives.connect_timeout = 3000; SET redis_primitives.command_timeout = 3000;"

taken=" $REDIS_PORT $PGPORT "
port() {  # [cluster]
	local p
	p=$(rp_free_port "$@"); while [[ "$taken" == *" $p "* ]]; do p=$(rp_free_port "$@"); done
	taken+="$p "; echo "$p"
}
PM=$(port); PR=$(port); PS=$(port)
CP=("$(port cluster)" "$(port cluster)" "$(port cluster)")
cleanup() {
	for p in "$PM" "$PR" "$PS" "${CP[@]}"; do rp_stop_redis "$p"; done
	psql -X -q -d "$RP_DB" -c "DROP TABLE IF EXISTS tlsclu_log; DROP PROCEDURE IF EXISTS tlsclu_load" >/dev/null 2>&1
	return 0
}
trap cleanup EXIT
wait_for() {  # seconds condition...
	local n=$(( $1 * 10 )) i; shift
	for i in $(seq "$n"); do eval "$*" && return 0; sleep 0.1; done
	return 1
}
tls_redis() {  # port [args...]
	local p=$1; shift
	redis-server --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --dir "$RP_TMP" \
		--pidfile "$RP_TMP/redis-$p.pid" --logfile "$RP_TMP/redis-$p.log" \
		$(tls_redis_args "$C" server) --tls-port "$p" --tls-auth-clients no --tls-replication yes "$@"
}

# ---- A. Sentinel with AUTH, over TLS -------------------------------------------
tls_redis "$PM"
tls_redis "$PR" --replicaof 127.0.0.1 "$PM"
cat >"$RP_TMP/sentinel-$PS.conf" <<CONF
port 0
tls-port $PS
bind 127.0.0.1
daemonize yes
pidfile $RP_TMP/redis-$PS.pid
logfile $RP_TMP/redis-$PS.log
dir $RP_TMP
tls-cert-file $C/server.crt
tls-key-file $C/server.key
tls-ca-cert-file $C/ca.crt
tls-auth-clients no
tls-replication yes
requirepass sentinel-Secret-77
sentinel monitor rpm 127.0.0.1 $PM 1
sentinel down-after-milliseconds rpm 1000
sentinel failover-timeout rpm 3000
CONF
redis-sentinel "$RP_TMP/sentinel-$PS.conf"
SCLI=("${CLI[@]}" -p "$PS" -a sentinel-Secret-77 --no-auth-warning)
wait_for 20 '[ "$("${CLI[@]}" -p "$PR" info replication | tr -d "\r" | grep -c master_link_status:up)" = 1 ] && "${SCLI[@]}" sentinel replicas rpm | grep -q "^$PR$"'
ok $? "TLS-only master, replica and a sentinel requiring AUTH are up"

SENT="SET redis_primitives.sentinels = '127.0.0.1:$PS'; SET redis_primitives.sentinel_master = 'rpm';"
st() {  # settings sql -> SQLSTATE or OK; message in $RP_TMP/tlst-last
	local msg
	msg=$(psql -X -At -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -d "$RP_DB" -c "$1" -c "$2" 2>&1 >/dev/null)
	echo "$msg" >"$RP_TMP/tlst-last"
	if [ -z "$msg" ]; then echo OK; else echo "$msg" | sed -n 's/^.*ERROR:  *\([0-9A-Z]\{5\}\):.*$/\1/p' | head -1; fi
}
WORK="SELECT (rp_acquire('tls-sent', 10000)).fence IS NOT NULL AND rp_release('tls-sent')"
is "$(st "$TLS $SENT" "$WORK")" "08001" "naive twin (1.0): no sentinel_password, the sentinel refuses to name the master"
grep -q 'NOAUTH' "$RP_TMP/tlst-last"; ok $? "... the sentinel's NOAUTH is in the detail"
is "$(st "$TLS $SENT SET redis_primitives.sentinel_password = 'wrong-Pass-42';" "$WORK")" "08001" "a wrong sentinel_password is refused"
grep -q 'refused AUTH' "$RP_TMP/tlst-last" && ! grep -q 'wrong-Pass-42' "$RP_TMP/tlst-last"; ok $? "... saying AUTH was refused, without the password"
is "$(st "$TLS $SENT SET redis_primitives.sentinel_password = 'sentinel-Secret-77';" "$WORK")" "OK" \
	"with sentinel_password the master is found and used, all over TLS"
echo sentinel-Secret-77 >"$RP_TMP/sentpw"; chmod 600 "$RP_TMP/sentpw"; [ "$(id -u)" -eq 0 ] && chown postgres: "$RP_TMP/sentpw"
is "$(st "$TLS $SENT SET redis_primitives.sentinel_password_file = '$RP_TMP/sentpw';" "$WORK")" "OK" "sentinel_password_file works too"
is "$(psql -X -At -q -d "$RP_DB" -c "CREATE ROLE tls_plain LOGIN" -c "SET ROLE tls_plain" -c "SHOW redis_primitives.sentinel_password" 2>&1 | grep -c 'permission denied\|must be superuser')" "1" \
	"a plain user cannot SHOW sentinel_password"
psql -X -q -d "$RP_DB" -c "DROP ROLE tls_plain" >/dev/null 2>&1
is "$(q_state "ALTER ROLE postgres SET redis_primitives.sentinel_password = 'x'")" "42501" \
	"sentinel_password cannot be stored in a world-readable role setting"
# A reload logs every changed setting with its value; the twin (a setting
# that is not secret) shows the log check can see one.
# Only this reload's lines count: other scenarios share the server log.
logfrom=$(( $(wc -l <"$RP_TMP/pg.log") + 1 ))
q "ALTER SYSTEM SET redis_primitives.sentinel_password = 'log-Secret-31'" "ALTER SYSTEM SET redis_primitives.sentinel_username = 'log-User-9'" "SELECT pg_reload_conf()" >/dev/null
wait_for 10 'grep -q "log-User-9" "$RP_TMP/pg.log"'
is "$(grep -c 'log-Secret-31' "$RP_TMP/pg.log")/$(tail -n +"$logfrom" "$RP_TMP/pg.log" | grep -c 'parameter "redis_primitives.sentinel_password" changed$')" "0/1" \
	"a reload logs that sentinel_password changed, never its value (sentinel_username's value is logged: the twin)"
q "ALTER SYSTEM RESET redis_primitives.sentinel_password" "ALTER SYSTEM RESET redis_primitives.sentinel_username" "SELECT pg_reload_conf()" >/dev/null

# Failover: the same session follows the sentinel to the promoted replica.
session_open s
session_q s "$TLS $SENT SET redis_primitives.sentinel_password = 'sentinel-Secret-77'" >/dev/null
before=$(session_q s "SELECT (rp_acquire('tls-fo', 60000)).fence")
"${SCLI[@]}" sentinel failover rpm >/dev/null
wait_for 20 '[ "$("${SCLI[@]}" sentinel get-master-addr-by-name rpm | sed -n 2p)" = "$PR" ]'
ok $? "sentinel failover: the replica is promoted"
# Until the old master is demoted, a call may still land there and be lost
# with it (asynchronous replication: docs/failures.md); wait for the demotion.
wait_for 20 '"${CLI[@]}" -p "$PM" role | head -1 | grep -q slave'
after=
for i in $(seq 40); do
	after=$(session_q s "SELECT (rp_acquire('tls-fo2', 60000)).fence")
	[ "$after" = 1 ] && break; sleep 0.25
done
is "$before/$after" "1/1" "the same session's calls reach the new master over TLS"
is "$("${CLI[@]}" -p "$PR" exists 'rp:{tls-fo2}:lock')" "1" "... the lease is on the promoted server"
session_close s
for p in "$PS" "$PM" "$PR"; do rp_stop_redis "$p"; done

# ---- B. a 3-master Cluster over TLS ------------------------------------------------
for p in "${CP[@]}"; do
	tls_redis "$p" --tls-cluster yes --cluster-enabled yes --cluster-config-file "nodes-$p.conf" --cluster-node-timeout 2000
done
for p in "${CP[@]}"; do wait_for 10 rp_port_taken "$p"; done
"${CLI[@]}" --cluster create "${CP[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >"$RP_TMP/tlsclu.out" 2>&1
cluster_ok() { local p; for p in "${CP[@]}"; do "${CLI[@]}" -p "$p" cluster info | grep -q cluster_state:ok || return 1; done; }
wait_for 90 cluster_ok; ok $? "three TLS-only masters form a cluster (tls-cluster yes)"
ports=$("${CLI[@]}" -p "${CP[0]}" cluster slots | grep -A1 '^127.0.0.1$' | grep -E '^[0-9]+$' | sort -u | paste -sd' ')
is "$ports" "$(printf '%s\n' "${CP[@]}" | sort | paste -sd' ')" "CLUSTER SLOTS names the TLS ports"
export PGOPTIONS="-c redis_primitives.cluster=on -c redis_primitives.port=${CP[0]} -c redis_primitives.tls=verify-full -c redis_primitives.tls_ca_file=$C/ca.crt"
is "$(q "SELECT count(*) FROM generate_series(1, 60) n WHERE (rp_acquire('tspread-' || n, 60000)).fence = 1")" "60" \
	"60 leases taken through the cluster over TLS"
counts=()
for p in "${CP[@]}"; do counts+=("$("${CLI[@]}" -p "$p" dbsize)"); done
cmp_ok "$(printf '%s\n' "${counts[@]}" | sort -n | head -1)" -ge 10 "every master holds a share ($(echo "${counts[*]}"))"

# A slot range moves under load: MOVED and ASK point at TLS ports.
names=$(q "SELECT string_agg(quote_literal(n), ',') FROM (SELECT n FROM (SELECT 'tmig-' || i AS n FROM generate_series(1, 5000) i) s
           WHERE rp_key_slot('rp:{' || n || '}:lock') < 200 ORDER BY n LIMIT 4) t")
for n in $(q "SELECT unnest(ARRAY[$names])"); do
	for i in $(seq 1 500); do echo "SET rp:{$n}:filler:$i x"; done
done | "${CLI[@]}" -p "${CP[0]}" >/dev/null
q "CREATE TABLE tlsclu_log (at timestamptz NOT NULL, name text, ok bool NOT NULL, state text, fence bigint)"
q "CREATE PROCEDURE tlsclu_load(secs float8, names text[]) LANGUAGE plpgsql AS \$\$
DECLARE l rp_lease; n text; stop timestamptz := clock_timestamp() + secs * interval '1 second';
BEGIN
  WHILE clock_timestamp() < stop LOOP
    FOREACH n IN ARRAY names LOOP
      BEGIN
        l := rp_acquire(n, 5000);
        PERFORM rp_release(l);
        INSERT INTO tlsclu_log VALUES (clock_timestamp(), n, true, NULL, l.fence);
      EXCEPTION WHEN OTHERS THEN
        INSERT INTO tlsclu_log VALUES (clock_timestamp(), n, false, SQLSTATE || ' ' || SQLERRM, NULL);
        BEGIN PERFORM rp_release_all(); EXCEPTION WHEN OTHERS THEN NULL; END;
      END;
      COMMIT;
    END LOOP;
  END LOOP;
END \$\$"
psql -X -q -d "$RP_DB" -c "CALL tlsclu_load(6, ARRAY[$names])" >"$RP_TMP/tlsclu-load.out" 2>&1 &
loader=$!
wait_for 20 '[ "$(q "SELECT count(*) FROM tlsclu_log WHERE ok")" -ge 20 ]'
from=$("${CLI[@]}" -p "${CP[0]}" cluster myid); to=$("${CLI[@]}" -p "${CP[1]}" cluster myid)
"${CLI[@]}" --cluster reshard "127.0.0.1:${CP[0]}" --cluster-from "$from" --cluster-to "$to" \
	--cluster-slots 200 --cluster-pipeline 10 --cluster-yes >"$RP_TMP/tlsreshard.out" 2>&1
ok $? "200 slots resharded over TLS while calls run"
wait $loader
diag "during the move: $(q "SELECT count(*) FILTER (WHERE ok) || ' calls ok, ' || count(*) FILTER (WHERE NOT ok) || ' failed' FROM tlsclu_log")"
is "$(q "SELECT count(*) FROM tlsclu_log WHERE NOT ok")" "0" "no call failed $(q "SELECT coalesce(' (' || min(state) || ')', '') FROM tlsclu_log WHERE NOT ok")"
n1=$(q "SELECT (array[$names])[1]")
is "$(q "SELECT (rp_acquire('$n1', 1000)).fence")" "$(q "SELECT max(fence) + 1 FROM tlsclu_log WHERE name = '$n1'")" \
	"a new session reaches the slot's new owner over TLS and continues the counter"
finish
