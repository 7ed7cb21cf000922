#!/usr/bin/env bash
# dump_restore.sh -- pg_dump and restore (plain and custom format) keep the
# fenced store and guarded user tables: every row and every token survives,
# and the guards refuse a stale writer after the restore.
#
# The naive twin is 1.0, whose rp_fenced_store was not marked with
# pg_extension_config_dump: its dump has the table but none of its rows, so
# after a restore a writer holding an old token is accepted again.  A 1.0
# database updated to 1.1 or later dumps its rows.
source "$(dirname "$0")/tap.bash"
CUR=$(sed -n "s/^default_version = '\\(.*\\)'$/\\1/p" "$(dirname "$0")/../../redis_primitives.control")

SRC=rp_dump_src PLAIN=rp_dump_plain CUSTOM=rp_dump_custom OLD=rp_dump_old OLDR=rp_dump_old_restored UPDR=rp_dump_upd_restored
DBS="$SRC $PLAIN $CUSTOM $OLD $OLDR $UPDR"
cleanup() { for d in $DBS; do dropdb --if-exists "$d" 2>/dev/null; done; }
cleanup
trap cleanup EXIT
plan 17

dq() { local db=$1; shift; RP_DB=$db q "$@"; }
dq_state() { local db=$1; shift; RP_DB=$db q_state "$@"; }
# Everything a restore must bring back, as one line per row.
contents() {
	dq "$1" "SELECT 'store ' || resource || ' ' || coalesce(value::text, 'null') || ' ' || fence
	         FROM rp_fenced_store ORDER BY resource" \
	        "SELECT 'account ' || id || ' ' || balance || ' ' || fence_token FROM account ORDER BY id" \
	        "SELECT 'trigger ' || pg_get_triggerdef(oid) FROM pg_trigger
	         WHERE tgrelid IN ('account'::regclass, 'rp_fenced_store'::regclass) ORDER BY tgname"
}
fill() {  # db: the store and a guarded user table, with tokens
	dq "$1" "SELECT rp_fenced_write('job', '{\"a\": 1}', 5), rp_fenced_write('other', '[2]', 9),
	                rp_fenced_write('empty', NULL, 3)" \
		"CREATE TABLE account (id int PRIMARY KEY, balance int, fence_token bigint)" \
		"CREATE TRIGGER account_fence BEFORE INSERT OR UPDATE ON account
		   FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token')" \
		"INSERT INTO account SELECT i, 100 * i, 10 + i FROM generate_series(1, 50) i" >/dev/null
}
# The guards after a restore: a stale token is refused by the store and by
# the user table's trigger, a newer one is accepted.
guards() {  # db -> "store-stale store-newer table-stale table-newer"
	echo "$(dq "$1" "SELECT rp_fenced_write('job', '{\"stale\": true}', 4)")" \
	     "$(dq "$1" "SELECT rp_fenced_write('job', '{\"a\": 2}', 6)")" \
	     "$(dq_state "$1" "UPDATE account SET balance = 0, fence_token = 10 WHERE id = 1")" \
	     "$(dq_state "$1" "UPDATE account SET balance = 7, fence_token = 12 WHERE id = 1")"
}

for d in $DBS; do createdb "$d"; done
dq $SRC "CREATE EXTENSION redis_primitives" >/dev/null
fill $SRC
before=$(contents $SRC)
is "$(echo "$before" | grep -c '^store ')|$(echo "$before" | grep -c '^account ')" "3|50" "the source holds 3 store rows and 50 guarded rows"

dump=$RP_TMP/rp_dump
pg_dump -Fp -f "$dump.sql" $SRC
ok $? "pg_dump, plain format"
psql -X -q -v ON_ERROR_STOP=1 -d $PLAIN -f "$dump.sql" >/dev/null
ok $? "restore with psql"
is "$(contents $PLAIN)" "$before" "plain: every store row, fence, guarded row and trigger is back"
is "$(guards $PLAIN)" "f t RP001 OK" "plain: the store and the table's guard refuse a stale token and accept a newer one"

pg_dump -Fc -f "$dump.custom" $SRC
ok $? "pg_dump, custom format"
pg_restore --exit-on-error -d $CUSTOM "$dump.custom"
ok $? "restore with pg_restore"
is "$(contents $CUSTOM)" "$before" "custom: every store row, fence, guarded row and trigger is back"
is "$(guards $CUSTOM)" "f t RP001 OK" "custom: the store and the table's guard refuse a stale token and accept a newer one"
is "$(dq $CUSTOM "SELECT extversion FROM pg_extension WHERE extname = 'redis_primitives'")" "$CUR" "the restore created the extension at the current version ($CUR)"

# ---- the naive twin: 1.0 ------------------------------------------------
dq $OLD "CREATE EXTENSION redis_primitives VERSION '1.0'" >/dev/null
fill $OLD
is "$(dq $OLD "SELECT count(*) FROM rp_fenced_store")" "3" "1.0: the source store holds 3 rows"
pg_dump -Fc -f "$dump.old" $OLD && pg_restore --exit-on-error -d $OLDR "$dump.old"
ok $? "1.0: dump and restore succeed"
is "$(dq $OLDR "SELECT count(*) FROM rp_fenced_store")|$(dq $OLDR "SELECT count(*) FROM account")" "0|50" \
	"1.0: the store comes back empty (its rows were not dumped) while user tables keep theirs"
is "$(dq $OLDR "SELECT rp_fenced_write('job', '{\"stale\": true}', 4)")" "t" \
	"1.0: so after the restore a stale writer's token is accepted again"

# ---- 1.0 updated to the current version -----------------------------------
dq $OLD "ALTER EXTENSION redis_primitives UPDATE" >/dev/null
old_before=$(contents $OLD)
pg_dump -Fc -f "$dump.upd" $OLD && pg_restore --exit-on-error -d $UPDR "$dump.upd"
ok $? "1.0 updated to $CUR: dump and restore succeed"
is "$(contents $UPDR)" "$old_before" "1.0 updated to $CUR: every store row comes back"
is "$(guards $UPDR)" "f t RP001 OK" "1.0 updated to $CUR: the guards work after the restore"

finish
