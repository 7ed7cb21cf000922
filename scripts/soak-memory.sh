#!/usr/bin/env bash
# scripts/soak-memory.sh -- `make soak-memory`: one backend, a million calls
# of a mix that grew its memory in 1.0 (a registry that was never swept),
# RSS and the backend's memory contexts read after every round.  Not part of `make test` (it takes
# minutes); run it when the lease registry or the connection layer changes.
#
# Each round of ROUND calls: 40% session leases left to expire (1 ms TTL,
# every name new), 20% normal traffic (acquire + release), 40% acquires that
# fail with Redis unreachable (the port is switched to a closed one for them).
# Ends with "flat" or "GREW" and exits 1 when RssAnon (the backend's private memory, see docs/resources.md) grew by more than SLACK_KB
# between the first and the last round.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
CALLS=${CALLS:-1000000}
ROUND=${ROUND:-100000}
SLACK_KB=${SLACK_KB:-2048}

rp_setup
rp_start_servers
psql -X -q -c "CREATE DATABASE rp_soak" >/dev/null
psql -X -q -d rp_soak -c "CREATE EXTENSION redis_primitives" >/dev/null
closed=$(rp_free_port)

mkfifo "$RP_TMP/soak.in"
psql -X -At -q -d rp_soak <"$RP_TMP/soak.in" >"$RP_TMP/soak.out" 2>&1 &
exec 3>"$RP_TMP/soak.in"
echo "SELECT pg_backend_pid();" >&3
for i in $(seq 100); do [ -s "$RP_TMP/soak.out" ] && break; sleep 0.1; done
pid=$(head -1 "$RP_TMP/soak.out")
rss() { awk '/^RssAnon/ {print $2}' "/proc/$pid/status"; }

expire=$(( ROUND * 4 / 10 )); normal=$(( ROUND * 2 / 10 )); fail=$(( ROUND - expire - normal ))
cat >&3 <<SQL
CREATE FUNCTION soak_round(r int) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  FOR i IN 1..$expire LOOP PERFORM rp_acquire('soak-' || r || '-' || i, 1); END LOOP;
  FOR i IN 1..$normal LOOP PERFORM rp_release(rp_acquire('soak-normal', 10000)); END LOOP;
  PERFORM set_config('redis_primitives.port', '$closed', false);
  FOR i IN 1..$fail LOOP
    BEGIN PERFORM rp_acquire('soak-fail-' || i, 60000); EXCEPTION WHEN OTHERS THEN NULL; END;
  END LOOP;
  PERFORM set_config('redis_primitives.port', '$REDIS_PORT', false);
END \$\$;
SQL
rounds=$(( CALLS / ROUND ))
first=0 last=0 start=$(date +%s)
printf '%-6s %-10s %-12s %-10s\n' round calls rssanon_kB contexts_kB
for r in $(seq "$rounds"); do
	echo "SELECT soak_round($r);" >&3
	echo "SELECT 'ctx:' || (sum(total_bytes) / 1024)::bigint FROM pg_backend_memory_contexts;" >&3
	until [ "$(grep -ac "^ctx:" "$RP_TMP/soak.out")" -ge "$r" ]; do sleep 0.5; done
	ctx=$(grep -a "^ctx:" "$RP_TMP/soak.out" | tail -1 | cut -d: -f2)
	kb=$(rss)
	[ "$r" -eq 1 ] && first=$kb
	last=$kb
	printf '%-6s %-10s %-12s %-10s\n' "$r" $(( r * ROUND )) "$kb" "$ctx"
done
exec 3>&-
echo "calls: $(( rounds * ROUND )) in $(( $(date +%s) - start )) s; RssAnon after round 1: $first kB, after round $rounds: $last kB"
if [ $(( last - first )) -le "$SLACK_KB" ]; then echo "flat"; else echo "GREW by $(( last - first )) kB"; exit 1; fi
