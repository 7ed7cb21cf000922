#!/usr/bin/env bash
# Security, as a plain user: settings are superuser-only, the password is
# invisible and cannot be stored where everyone can read it, nothing is
# callable until granted, the functions withstand a hostile search_path at
# call time, and the fence trigger reveals nothing the writer cannot read.
source "$(dirname "$0")/tap.bash"
plan 40

q "DROP ROLE IF EXISTS rp_plain; CREATE ROLE rp_plain LOGIN" >/dev/null 2>&1
q "DROP ROLE IF EXISTS rp_plain" "CREATE ROLE rp_plain LOGIN" >/dev/null
plain() { PGUSER=rp_plain q_state "$@"; }
plain_out() { PGUSER=rp_plain psql -X -At -q -d "$RP_DB" "${@/#/-c}" 2>&1; }

# 1. Every redis_primitives.* setting is superuser-only to set.
settings=$(q "SELECT name FROM pg_settings WHERE name LIKE 'redis\_primitives.%' ORDER BY 1")
total=0 refused=0
for s in $settings; do
	total=$((total + 1))
	# 55P02: a server-start or reload-only setting, which nobody can SET.
	case "$(plain "SET $s = DEFAULT")" in 42501|55P02) refused=$((refused + 1)) ;; esac
done
cmp_ok "$total" -ge 10 "found the extension's settings ($total)"
is "$refused" "$total" "a plain user cannot SET any of them (42501, or 55P02 for server-start and reload-only ones)"

# 2. The password is invisible to non-superusers.
q "ALTER SYSTEM SET redis_primitives.password = 'Top-Secret-42'" "SELECT pg_reload_conf()" >/dev/null
# A reload reaches new sessions once the postmaster has read the file: wait
# until one sees it (a fixed pause can be too short on a loaded machine).
wait_for 30 "[ \"\$(q \"SHOW redis_primitives.password\")\" = 'Top-Secret-42' ]"
is "$(plain "SHOW redis_primitives.password")" "42501" "SHOW redis_primitives.password: 42501 for a plain user"
is "$(plain_out "SELECT count(*) FROM pg_settings WHERE name LIKE 'redis_primitives.password%'")" "0" "pg_settings hides the password settings"
out=$(plain_out "SHOW ALL" | grep -c "Top-Secret-42")
is "$out" "0" "SHOW ALL does not contain it"
is "$(plain "SELECT * FROM pg_file_settings")" "42501" "pg_file_settings is not readable"
is "$(q "SHOW redis_primitives.password")" "Top-Secret-42" "a superuser can read it"
q "ALTER SYSTEM RESET redis_primitives.password" "SELECT pg_reload_conf()" >/dev/null
# The Sentinels' password is the same kind of secret.
q "ALTER SYSTEM SET redis_primitives.sentinel_password = 'Sentinel-Secret-43'" "SELECT pg_reload_conf()" >/dev/null
wait_for 30 "[ \"\$(q \"SHOW redis_primitives.sentinel_password\")\" = 'Sentinel-Secret-43' ]"
is "$(q "SHOW redis_primitives.sentinel_password")" "Sentinel-Secret-43" "the superuser sees the sentinel password (so the next check reads a set value)"
is "$(plain "SHOW redis_primitives.sentinel_password")" "42501" "SHOW redis_primitives.sentinel_password: 42501 for a plain user"
q "ALTER SYSTEM RESET redis_primitives.sentinel_password" "SELECT pg_reload_conf()" >/dev/null
# Members of pg_read_all_settings (pg_monitor: monitoring agents) pass
# GUC_SUPERUSER_ONLY: they must see a mask, never either secret.  The
# sentinel password had no mask and was shown to them in clear.
q "SET client_min_messages = warning" "DROP ROLE IF EXISTS rp_monitor" "CREATE ROLE rp_monitor LOGIN IN ROLE pg_read_all_settings" >/dev/null
q "ALTER SYSTEM SET redis_primitives.password = 'Top-Secret-44'" \
  "ALTER SYSTEM SET redis_primitives.sentinel_password = 'Sentinel-Secret-45'" "SELECT pg_reload_conf()" >/dev/null
wait_for 30 "[ \"\$(q \"SHOW redis_primitives.password\")\" = 'Top-Secret-44' ] && [ \"\$(q \"SHOW redis_primitives.sentinel_password\")\" = 'Sentinel-Secret-45' ]"
mon() { PGUSER=rp_monitor psql -X -At -q -d "$RP_DB" -c "$1" 2>&1; }
is "$(mon "SHOW redis_primitives.password")" "********" "a pg_read_all_settings member sees the password masked"
is "$(mon "SELECT current_setting('redis_primitives.sentinel_password')")" "********" \
	"and the sentinel password masked (current_setting)"
is "$(mon "SHOW redis_primitives.sentinel_password")" "********" "and the sentinel password masked (SHOW)"
q "ALTER SYSTEM RESET redis_primitives.password" "ALTER SYSTEM RESET redis_primitives.sentinel_password" \
  "SELECT pg_reload_conf()" "DROP ROLE rp_monitor" >/dev/null
# (the calls below connect to a Redis without a password: the reset must be in force)
wait_for 30 "[ \"\$(q \"SHOW redis_primitives.password\")\" = '' ] && [ \"\$(q \"SHOW redis_primitives.sentinel_password\")\" = '' ]"

# 3. It cannot be stored in world-readable catalogs.
is "$(q_state "ALTER ROLE rp_plain SET redis_primitives.password = 'x'")" "42501" "ALTER ROLE ... SET password is refused"
is "$(q_state "ALTER DATABASE $RP_DB SET redis_primitives.password = 'x'")" "42501" "ALTER DATABASE ... SET password is refused"
is "$(q_state "ALTER ROLE rp_plain SET redis_primitives.sentinel_password = 'x'")" "42501" "ALTER ROLE ... SET sentinel_password is refused"
is "$(q_state "CREATE FUNCTION f_pw() RETURNS int LANGUAGE sql SET redis_primitives.password = 'x' AS 'SELECT 1'")" "42501" "CREATE FUNCTION ... SET password is refused"

# 4. Nothing is callable until granted; the trigger function is.
is "$(plain "SELECT rp_acquire('sec', 1000)")" "42501" "a plain user cannot call rp_acquire before a GRANT"
is "$(plain "SELECT * FROM rp_fenced_store")" "42501" "nor read the fenced store"
q "GRANT EXECUTE ON FUNCTION rp_acquire(text, bigint, bigint, bigint), rp_release(text) TO rp_plain" >/dev/null
is "$(plain_out "SELECT (rp_acquire('sec', 1000)).fence IS NOT NULL")" "t" "after GRANT EXECUTE it can"
# What PUBLIC may use is what the docs say it may use: the table under
# "granted to `PUBLIC`" in docs/security.md, and the README's sentence.
public=$(q "SELECT string_agg(x, ' ' ORDER BY x) FROM (
    SELECT p.oid::regprocedure::text AS x FROM pg_proc p
    WHERE p.oid IN (SELECT objid FROM pg_depend WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'redis_primitives')
                      AND classid = 'pg_proc'::regclass AND deptype = 'e')
      AND (p.proacl IS NULL OR EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0))
    UNION ALL
    SELECT c.oid::regclass::text FROM pg_class c
    WHERE c.oid IN (SELECT objid FROM pg_depend WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'redis_primitives')
                      AND classid = 'pg_class'::regclass AND deptype = 'e')
      AND EXISTS (SELECT FROM aclexplode(c.relacl) a WHERE a.grantee = 0)) AS granted")
docs=$(dirname "$0")/../../docs/security.md readme=$(dirname "$0")/../../README.md
documented=$(awk '/^\| granted to `PUBLIC`/ { on = 1; next } on && !/^\|/ { on = 0 } on' "$docs" |
	grep -o '`rp_[a-z_]*\(()\)\?`' | tr -d '`' | LC_ALL=C sort -u | xargs)
is "$documented" "$(tr ' ' '\n' <<<"$public" | LC_ALL=C sort -u | xargs)" \
	"docs/security.md lists every object granted to PUBLIC, and only those"
is "$(awk -v RS= '/`PUBLIC`/' "$readme" | grep -o '`rp_[a-z_]*\(()\)\?`' | tr -d '`()' | LC_ALL=C sort -u | xargs)" \
	"$(tr -d '()' <<<"$public" | tr ' ' '\n' | LC_ALL=C sort -u | xargs)" "and so does the README"
# A table owner creating a guard: the template check at CREATE TRIGGER runs
# for a plain user too.
q "SET client_min_messages = warning" "DROP SCHEMA IF EXISTS plain CASCADE" "CREATE SCHEMA plain AUTHORIZATION rp_plain" >/dev/null
plain "CREATE TABLE plain.g (id int PRIMARY KEY, k int GENERATED ALWAYS AS (id + 1) STORED, fence_token bigint)" >/dev/null
is "$(plain "CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON plain.g FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=g-{k}')")" \
	"39P01" "a plain user's guard templated on a generated column is refused at CREATE TRIGGER"
is "$(plain "CREATE TRIGGER g2 BEFORE INSERT OR UPDATE OR DELETE ON plain.g FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=g-{id}')")" \
	"OK" "and one templated on an ordinary column is created"
q "DROP SCHEMA plain CASCADE" >/dev/null

# 5. The trigger reveals the stored token only to a writer who may read it.
q "SET client_min_messages = warning" "DROP TABLE IF EXISTS sec_acct" "CREATE TABLE sec_acct (id int PRIMARY KEY, balance int, fence_token bigint)" \
  "CREATE TRIGGER g BEFORE INSERT OR UPDATE ON sec_acct FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token')" \
  "INSERT INTO sec_acct VALUES (1, 10, 987654)" \
  "GRANT UPDATE (balance, fence_token) ON sec_acct TO rp_plain" "GRANT SELECT (id) ON sec_acct TO rp_plain" >/dev/null
out=$(plain_out "UPDATE sec_acct SET balance = 0, fence_token = 5 WHERE id = 1")
echo "$out" | grep -q "stale fence token"; ok $? "a stale write by the plain user is refused"
echo "$out" | grep -q 987654; ok $(( ! $? )) "without SELECT on the column, the stored token is not revealed"
out=$(psql -X -At -q -d "$RP_DB" -c "UPDATE sec_acct SET balance = 0, fence_token = 5 WHERE id = 1" 2>&1)
echo "$out" | grep -q 987654; ok $? "with SELECT on it (the owner), the detail gives both tokens"
# Nor with SELECT on it when row-level security hides the row (an UPDATE
# without WHERE applies no SELECT policy).
q "GRANT SELECT (fence_token) ON sec_acct TO rp_plain" "ALTER TABLE sec_acct ENABLE ROW LEVEL SECURITY" \
  "CREATE POLICY sees_none ON sec_acct FOR SELECT USING (false)" \
  "CREATE POLICY writes_any ON sec_acct FOR UPDATE USING (true)" >/dev/null
out=$(plain_out "UPDATE sec_acct SET balance = 0, fence_token = 5")
is "$(echo "$out" | grep -c 'stale fence token')|$(echo "$out" | grep -c 987654)" "1|0" \
	"a row its SELECT policy hides (row-level security): the stored token is not revealed"
q "ALTER TABLE sec_acct DISABLE ROW LEVEL SECURITY" >/dev/null
# A lock-bound guard's name is made of the row's values: a writer refused
# for want of a lease is not shown values of columns it may not SELECT.
q "SET client_min_messages = warning" "DROP TABLE IF EXISTS sec_bound" \
  "CREATE TABLE sec_bound (id int PRIMARY KEY, owner text, balance int, fence_token bigint)" \
  "CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON sec_bound FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=sb-{owner}')" \
  "SET session_replication_role = replica" "INSERT INTO sec_bound VALUES (1, 'alice-hidden-77', 10, 1)" \
  "RESET session_replication_role" "GRANT UPDATE (balance), DELETE ON sec_bound TO rp_plain" >/dev/null
out=$(plain_out "UPDATE sec_bound SET balance = 0" "DELETE FROM sec_bound")
is "$(echo "$out" | grep -c '^ERROR:.*no lease')|$(echo "$out" | grep -c alice-hidden-77)" "2|0" \
	"without SELECT on the template's columns, UPDATE and DELETE are refused without the row's lock name"
out=$(psql -X -At -q -d "$RP_DB" -c "UPDATE sec_bound SET balance = 0" 2>&1)
echo "$out" | grep -q '"sb-alice-hidden-77"'; ok $? "the owner, who may SELECT them, is told the name"
q "GRANT SELECT (owner) ON sec_bound TO rp_plain" >/dev/null
echo "$(plain_out "DELETE FROM sec_bound")" | grep -q '"sb-alice-hidden-77"'; ok $? "and so is a writer granted SELECT on the column"
# The hint of a writer not told the name names the table so that it can be
# followed as written: schema-qualified, and quoted as a literal.
q "SET client_min_messages = warning" "DROP SCHEMA IF EXISTS sec_ns CASCADE" "CREATE SCHEMA sec_ns" \
  "CREATE TABLE sec_ns.\"it's bound\" (id int, owner text, balance int, fence_token bigint)" \
  "CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON sec_ns.\"it's bound\" FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=sn-{owner}')" \
  "SET session_replication_role = replica" "INSERT INTO sec_ns.\"it's bound\" VALUES (1, 'carol', 10, 1)" \
  "RESET session_replication_role" "GRANT USAGE ON SCHEMA sec_ns TO rp_plain" "GRANT UPDATE (balance) ON sec_ns.\"it's bound\" TO rp_plain" >/dev/null
out=$(plain_out "UPDATE sec_ns.\"it's bound\" SET balance = 0" | sed -n 's/^HINT:  //p')
is "$out" "Take it first: rp_acquire(rp_lock_name('sec_ns.\"it''s bound\"', <the row>), ttl_ms)." \
	"the hint names the table schema-qualified, as a literal the writer can paste"
q "SET client_min_messages = warning" "DROP SCHEMA sec_ns CASCADE" >/dev/null
# ... unless row-level security hides the row from it: an UPDATE or DELETE
# without WHERE applies no SELECT policy, and PostgreSQL's own messages show
# no row values at all under row-level security (ExecBuildSlotValueDescription).
q "ALTER TABLE sec_bound ENABLE ROW LEVEL SECURITY" \
  "CREATE POLICY sees_own ON sec_bound FOR SELECT USING (owner = current_user)" \
  "CREATE POLICY writes_any ON sec_bound FOR UPDATE USING (true)" \
  "CREATE POLICY deletes_any ON sec_bound FOR DELETE USING (true)" >/dev/null
out=$(plain_out "SELECT count(*) FROM sec_bound" "UPDATE sec_bound SET balance = 0" "DELETE FROM sec_bound")
is "$(echo "$out" | head -1)|$(echo "$out" | grep -c '^ERROR:.*no lease')|$(echo "$out" | grep -c alice-hidden-77)" "0|2|0" \
	"a row its SELECT policy hides (row-level security): UPDATE and DELETE are refused without the row's lock name"
q "ALTER TABLE sec_bound DISABLE ROW LEVEL SECURITY" >/dev/null
# A partition's or an inheritance child's row written through the parent
# the writer may SELECT: the trigger fires on the child, which has no grants
# of its own (none are needed), and the writer may read the row through the
# parent, so it is told the name -- as PostgreSQL's own messages judge a
# partition's row by the privileges on the table the statement names.
q "SET client_min_messages = warning" "DROP TABLE IF EXISTS sec_part, sec_inh CASCADE" \
  "CREATE TABLE sec_part (id int, owner text, balance int, fence_token bigint) PARTITION BY LIST (id)" \
  "CREATE TABLE sec_part_1 PARTITION OF sec_part FOR VALUES IN (1)" \
  "CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON sec_part FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=sp-{owner}')" \
  "CREATE TABLE sec_inh (id int, owner text, balance int, fence_token bigint)" \
  "CREATE TABLE sec_inh_c (extra int) INHERITS (sec_inh)" \
  "CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON sec_inh_c FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=si-{owner}')" \
  "SET session_replication_role = replica" "INSERT INTO sec_part VALUES (1, 'bob-part-88', 10, 1)" \
  "INSERT INTO sec_inh_c VALUES (1, 'bob-inh-89', 10, 1, 0)" \
  "RESET session_replication_role" "GRANT SELECT, UPDATE ON sec_part, sec_inh TO rp_plain" >/dev/null
out=$(plain_out "SELECT owner FROM sec_part" "UPDATE sec_part SET balance = 0")
is "$(echo "$out" | grep -c bob-part-88)|$(echo "$out" | grep -c '"sp-bob-part-88"')" "3|1" \
	"a partition's row written through the parent the writer may SELECT: it is told the row's lock name"
out=$(plain_out "SELECT owner FROM sec_inh" "UPDATE sec_inh SET balance = 0")
is "$(echo "$out" | grep -c bob-inh-89)|$(echo "$out" | grep -c '"si-bob-inh-89"')" "3|1" \
	"an inheritance child's row written through the parent the writer may SELECT: so is it"
q "REVOKE SELECT ON sec_part FROM rp_plain" "GRANT SELECT (id, balance) ON sec_part TO rp_plain" >/dev/null
out=$(plain_out "UPDATE sec_part SET balance = 0")
is "$(echo "$out" | grep -c '^ERROR:.*no lease')|$(echo "$out" | grep -c bob-part-88)" "1|0" \
	"but not a writer who may SELECT neither the partition's nor the parent's template column"
q "DROP TABLE sec_part, sec_inh CASCADE" >/dev/null

# 6. A hostile search_path at call time.
q "SET client_min_messages = warning" "DROP DATABASE IF EXISTS rp_hostile" >/dev/null; q "CREATE DATABASE rp_hostile" >/dev/null
RP_DB=rp_hostile q "CREATE SCHEMA evil" \
  "CREATE FUNCTION evil.texteq_evil(text, text) RETURNS bool LANGUAGE plpgsql AS \$\$BEGIN RAISE EXCEPTION 'hijacked'; END\$\$" \
  "CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.texteq_evil)" \
  "CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql AS \$\$BEGIN RAISE EXCEPTION 'hijacked'; END\$\$" \
  "CREATE FUNCTION evil.coalesce(bool, bool) RETURNS bool LANGUAGE plpgsql AS \$\$BEGIN RAISE EXCEPTION 'hijacked'; END\$\$" >/dev/null
# (PostgreSQL itself sets search_path to the extension's schema while running
# the install script, so CREATE EXTENSION is not where a hostile path bites:
# the call is.)
RP_DB=rp_hostile q "CREATE EXTENSION redis_primitives" "CREATE TABLE public.guarded (id int PRIMARY KEY, tok bigint)" \
  "CREATE TRIGGER g BEFORE INSERT OR UPDATE ON public.guarded FOR EACH ROW EXECUTE FUNCTION public.rp_fence_guard('tok')" \
  "INSERT INTO public.guarded VALUES (1, 7)" >/dev/null
out=$(RP_DB=rp_hostile q "SET search_path = evil, public, pg_catalog" \
  "SELECT public.rp_fenced_write('r', '1', 1)" "SELECT (public.rp_fenced_read('r')).fence" \
  "SELECT public.rp_fence_floor('public.guarded')" 2>&1)
is "$(echo $out)" "t 1 7" "rp_fenced_write, rp_fenced_read and rp_fence_floor work when called under a hostile search_path"
# The naive twin: the same read as a user would write it, unqualified and
# without SET search_path, is hijacked by the same path.
out=$(RP_DB=rp_hostile q "CREATE FUNCTION public.naive_read(r text) RETURNS bigint LANGUAGE plpgsql AS
  \$\$BEGIN RETURN (SELECT s.fence FROM public.rp_fenced_store s WHERE s.resource = r); END\$\$" \
  "SET search_path = evil, public, pg_catalog" "SELECT public.naive_read('r')" 2>&1)
echo "$out" | grep -q hijacked; ok $? "naive: the same read without SET search_path and qualified operators runs the hostile operator"
# The clause is the promise (docs/security.md), not only the qualified
# names above (which make a copy without it pass the calls too): every
# PL/pgSQL and SQL function of the extension carries it, and no function is
# SECURITY DEFINER.
out=$(RP_DB=rp_hostile q "SELECT count(*) FILTER (WHERE l.lanname IN ('plpgsql', 'sql')) || '|'
    || coalesce(string_agg(p.proname, ',' ORDER BY p.proname) FILTER (WHERE l.lanname IN ('plpgsql', 'sql')
         AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)), '') || '|'
    || count(*) FILTER (WHERE p.prosecdef)
  FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid JOIN pg_language l ON l.oid = p.prolang
  WHERE d.classid = 'pg_proc'::regclass AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'redis_primitives')")
cmp_ok "${out%%|*}" -ge 3 "found the extension's PL/pgSQL and SQL functions (${out%%|*})"
is "${out#*|}" "|0" "each sets search_path = pg_catalog, pg_temp (missing in: '$(echo "$out" | cut -d'|' -f2)'), and none is SECURITY DEFINER"
q "DROP DATABASE rp_hostile" >/dev/null

# 7. The password reached no log line.
grep -q "Top-Secret-42" "$RP_TMP"/pg*.log "$RP_TMP"/*/log/* 2>/dev/null; ok $(( ! $? )) "the password appears in no server log"
q "DROP TABLE sec_acct, sec_bound" "DROP OWNED BY rp_plain" "DROP ROLE rp_plain" >/dev/null
finish
