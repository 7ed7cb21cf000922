#!/usr/bin/env bash
# contrib/prometheus/queries.yaml, scraped by the real Debian
# prometheus-postgres-exporter: after known traffic, /metrics carries the
# rp_* series with exactly the values that traffic must produce.
source "$(dirname "$0")/tap.bash"
source "$(dirname "$0")/../../scripts/lib.sh"
plan 12

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
eport=$(rp_free_port)
DATA_SOURCE_NAME="host=$PGHOST port=$PGPORT user=postgres dbname=$RP_DB sslmode=disable" \
	prometheus-postgres-exporter --extend.query-path="$ROOT/contrib/prometheus/queries.yaml" \
	--web.listen-address="127.0.0.1:$eport" --disable-default-metrics --disable-settings-metrics \
	>"$RP_TMP/exporter.log" 2>&1 &
exporter=$!
trap 'kill $exporter 2>/dev/null' EXIT
wait_for 60 'curl -sf "http://127.0.0.1:$eport/metrics" >/dev/null' || diag "the exporter did not answer in 60 s"
scrape() { curl -sf "http://127.0.0.1:$eport/metrics" >"$RP_TMP/metrics"; }
metric() {  # name{labels} -> value (labels as printed, without server=)
	sed -E 's/,?server="[^"]*"//; s/\{\}//' "$RP_TMP/metrics" |
		awk -v m="$1" '$1 == m { print $2 }'
}

# Known traffic, from a reset: 5 acquires of which 2 collide, 1 bad input,
# 4 rate-limit calls against a limit of 3 (gcra), a lease held by another
# session, and one lease past its deadline.
q "SELECT rp_ratelimit_reset('prom-rl')" "SELECT rp_stats_reset()" >/dev/null
q "SELECT rp_acquire('prom-' || i, 60000) FROM generate_series(1, 3) i" \
	"SELECT rp_release_all()" >/dev/null
psql -X -q -d "$RP_DB" -c "SET application_name = 'prom-holder'" -c "SELECT rp_acquire('prom-held', 60000)" \
	-c "SELECT rp_acquire('prom-short', 100)" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
holder=$!
wait_for 30 '[ "$(q "SELECT count(*) FROM rp_locks WHERE name LIKE '"'prom-%'"'")" = 2 ]'
q "SELECT rp_acquire('prom-held', 1000)" "SELECT rp_acquire('prom-held', 1000)" >/dev/null
q_state "SELECT rp_acquire('', 1000)" >/dev/null
q "SELECT rp_ratelimit('prom-rl', 3, 60000, 1, 'gcra') FROM generate_series(1, 4)" >/dev/null
sleep 0.2
scrape
ok $? "the exporter serves /metrics"
is "$(metric 'rp_stats_calls{primitive="acquire"}')" "8" "rp_stats_calls{primitive=acquire} = 3 + 2 (held) + 2 (collide) + 1 (bad input)"
is "$(metric 'rp_stats_ok{primitive="acquire"}')" "5" "rp_stats_ok{primitive=acquire} = 5"
is "$(metric 'rp_stats_refused{primitive="acquire"}')" "2" "rp_stats_refused{primitive=acquire} = 2"
is "$(metric 'rp_stats_errors_count{class="other",primitive="acquire"}')" "1" \
	"rp_stats_errors_count{class=other,primitive=acquire} = 1"
is "$(metric 'rp_stats_errors_count{class="08",primitive="acquire"}')" "0" "and no class 08 error"
is "$(metric 'rp_stats_calls{primitive="ratelimit_gcra"}') $(metric 'rp_stats_refused{primitive="ratelimit_gcra"}')" "4 1" \
	"ratelimit_gcra: 4 calls, 1 refused"
is "$(metric 'rp_stats_calls{primitive="release_all"}')" "1" "release_all: 1 call"
is "$(metric rp_locks_held) $(metric rp_locks_expired) $(metric rp_locks_backends)" "2 1 1" \
	"rp_locks_held 2, rp_locks_expired 1 (past its deadline), held by 1 backend"
is "$(metric rp_stats_info_locks_capacity) $(metric rp_stats_info_locks_not_shown)" "1024 0" \
	"rp_stats_info: capacity at its default, nothing left out"
awk '$1 ~ /^rp_stats_seconds\{primitive="acquire"/ { exit !($2 > 0) }' "$RP_TMP/metrics"
ok $? "rp_stats_seconds{primitive=acquire} > 0"
kill "$holder" 2>/dev/null
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'prom-holder'" >/dev/null
wait_for 30 '[ "$(q "SELECT count(*) FROM rp_locks WHERE name LIKE '"'prom-%'"'")" = 0 ]'
scrape
is "$(metric rp_locks_held)" "0" "once the holder is gone, rp_locks_held is 0"
finish
