#!/usr/bin/env bash
# fence_names.sh -- one row, one lock name, whatever the writing session's
# settings.
#
# A lock-bound guard (rp_fence_guard('fence_token', 'lock=nI-{k}')) binds a
# row to the lease of the name rendered from the row.  Part 1 is the race
# this prevents, as two real sessions: one with TimeZone UTC, one in Tokyo,
# each rendering "the row's lock" the way the application sees the row.
#
# Part 2, randomized: a table per built-in type a template accepts (and a
# domain, an enum and a composite of such types), random rows of each
# (setseed), and sessions with random values of every setting the text of
# a value depends on (TimeZone, DateStyle, IntervalStyle, bytea_output,
# extra_float_digits, lc_monetary).  In each session, for every row: the
# name the guard asks a lease for (its RP004 message), rp_lock_name(table,
# row), and the naive twin, format('nI-%s', k): the row rendered as the guard
# rendered it before (the column type's output function under the
# session's settings).  One name per row, the same from both, is the
# contract; the naive twin finds several.  The seed is printed; RP_SEED=N
# replays a run.
source "$(dirname "$0")/tap.bash"
plan 12

SEED=${RP_SEED:-$(( (RANDOM << 15 | RANDOM) % 2147483647 ))}
diag "seed $SEED (RP_SEED=$SEED replays this run)"
RANDOM=$SEED
ROWS=8 SESSIONS=10

# ---- Part 1: two sessions, two time zones, one row ----------------------
q "SET client_min_messages = warning" "DROP TABLE IF EXISTS job" \
  "CREATE TABLE job (ts timestamptz PRIMARY KEY, runs int NOT NULL DEFAULT 0, fence_token bigint)" \
  "CREATE TRIGGER job_fence BEFORE INSERT OR UPDATE OR DELETE ON job
     FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=job-{ts}')" \
  "SET session_replication_role = replica" "INSERT INTO job VALUES ('2024-01-01 00:00:00+00', 0, 0)" >/dev/null
session_open utc; session_open tokyo
session_q utc "SET TimeZone = 'UTC'" >/dev/null; session_q tokyo "SET TimeZone = 'Asia/Tokyo'" >/dev/null
# The naive twin: each session takes the lock named by its own text of ts.
a=$(session_q utc "SELECT name || ' ' || fence FROM job, rp_acquire('job-' || ts, 30000)")
b=$(session_q tokyo "SELECT name || ' ' || fence FROM job, rp_acquire('job-' || ts, 30000)")
is "$a / $b" "job-2024-01-01 00:00:00+00 1 / job-2024-01-01 09:00:00+09 1" \
	"naive: each session holds \"the row's lock\" as it renders the row: two names, fence 1 each, both live"
is "$(session_q utc "UPDATE job SET runs = runs + 1")" "" "the UTC session's UPDATE is accepted"
is "$(session_q tokyo "UPDATE job SET runs = runs + 1")" "ERROR:  RP004" \
	"the Tokyo session's UPDATE under its own name is refused: the row's name is the UTC one"
session_q tokyo "SELECT rp_release_all()" >/dev/null
is "$(session_q tokyo "SELECT coalesce(rp_acquire(rp_lock_name('job', j), 1000)::text, 'not acquired') FROM job j")" "not acquired" \
	"rp_acquire(rp_lock_name('job', row)) in the Tokyo session: the lock the UTC session holds"
session_q utc "SELECT rp_release_all()" >/dev/null
session_close utc; session_close tokyo

# ---- Part 2: random rows of every type, random settings ------------------
# type|expression of a random value (random() is seeded).  rnd_text(n): n
# random characters, quotes, braces, backslashes and non-ASCII included.
TYPES=$(cat <<'EOF'
int2|(floor(random() * 65535) - 32767)::int2
int4|(floor(random() * 4e9) - 2e9)::int4
int8|(floor(random() * 1e18) - 5e17)::int8
numeric|round((random() * 1e6 - 5e5)::numeric, floor(random() * 8)::int)
float4|CASE WHEN random() < 0.1 THEN 'NaN' WHEN random() < 0.1 THEN '-0' ELSE ((random() - 0.5) * 10 ^ (random() * 60 - 30))::float4 END
float8|CASE WHEN random() < 0.1 THEN '-Infinity' ELSE ((random() - 0.5) * 10 ^ (random() * 600 - 300))::float8 END
money|round((random() * 2e6 - 1e6)::numeric, 2)::money
bool|random() < 0.5
text|rnd_text(12)
varchar(16)|rnd_text(10)::varchar(16)
bpchar(12)|rnd_text(5)::bpchar(12)
name|rnd_text(20)::name
"char"|chr(65 + floor(random() * 26)::int)::"char"
bytea|decode(md5(random()::text) || CASE WHEN random() < 0.5 THEN '5c27' ELSE '' END, 'hex')
date|CASE WHEN random() < 0.1 THEN 'infinity'::date ELSE date '0044-03-15 BC' + floor(random() * 800000)::int END
time|time '00:00' + random() * interval '24 hours'
timetz|format('%s%s%s:%s', time '00:00' + random() * interval '24 hours', (ARRAY['+', '-'])[1 + floor(random() * 2)::int], lpad(floor(random() * 14)::int::text, 2, '0'), (ARRAY['00', '30', '45'])[1 + floor(random() * 3)::int])::timetz
timestamp|timestamp '1850-01-01' + random() * interval '250 years'
timestamptz|timestamptz '1850-01-01 00:00+00' + random() * interval '250 years'
interval|make_interval(floor(random() * 20 - 10)::int, floor(random() * 24 - 12)::int, 0, floor(random() * 60 - 30)::int, floor(random() * 48 - 24)::int, floor(random() * 120 - 60)::int, round((random() * 120 - 60)::numeric, 6)::float8)
uuid|md5(random()::text)::uuid
inet|CASE WHEN random() < 0.3 THEN format('%s::%s/%s', to_hex(floor(random() * 65535)::int), to_hex(floor(random() * 65535)::int), 64 + floor(random() * 64)::int)::inet ELSE format('%s.%s.%s.%s/%s', floor(random() * 256)::int, floor(random() * 256)::int, floor(random() * 256)::int, floor(random() * 256)::int, 8 + floor(random() * 25)::int)::inet END
cidr|network(format('%s.%s.%s.%s/%s', floor(random() * 256)::int, floor(random() * 256)::int, floor(random() * 256)::int, floor(random() * 256)::int, 8 + floor(random() * 25)::int)::inet)::cidr
macaddr|substr(md5(random()::text), 1, 12)::macaddr
macaddr8|substr(md5(random()::text), 1, 16)::macaddr8
bit(12)|floor(random() * 4096)::int::bit(12)
varbit|substr(floor(random() * 1048576)::int::bit(20)::text, 1, 1 + floor(random() * 20)::int)::varbit
json|json_build_object('a', random(), 'b', rnd_text(4))
jsonb|jsonb_build_object('a', random() * 1e10, 'b', rnd_text(4), 'c', ARRAY[random(), random()])
xml|xmlelement(name a, xmlattributes(rnd_text(3) AS b), rnd_text(6))
point|point(random() * 1e3, random() * 1e-3)
lseg|lseg(point(random(), random() * 1e9), point(random() * 1e-9, random()))
line|line(point(random(), random()), point(1 + random(), 2 + random()))
box|box(point(random() * 100, random()), point(random(), random() * 100))
path|format('[(%s,%s),(%s,%s),(%s,%s)]', random(), random(), random(), random(), random(), random())::path
polygon|format('((%s,%s),(%s,%s),(%s,%s))', random(), random(), random(), random(), random(), random())::polygon
circle|circle(point(random(), random() * 1e5), random() * 10)
tsvector|to_tsvector('simple', 'alpha ' || md5(random()::text) || ' omega')
tsquery|format('%s & !%s', substr(md5(random()::text), 1, 6), substr(md5(random()::text), 1, 5))::tsquery
jsonpath|format('$.a[%s] ? (@ > %s)', floor(random() * 5)::int, random())::jsonpath
pg_lsn|format('%s/%s', to_hex(floor(random() * 1e6)::int), to_hex(floor(random() * 1e9)::int))::pg_lsn
oid|floor(random() * 4e9)::bigint::oid
tid|format('(%s,%s)', floor(random() * 1e5)::int, floor(random() * 100)::int)::tid
xid8|floor(random() * 1e12)::bigint::text::xid8
pg_snapshot|format('%s:%s:', 1000 + floor(random() * 100)::int, 2000 + floor(random() * 100)::int)::pg_snapshot
int4range|int4range(floor(random() * 100)::int, 100 + floor(random() * 100)::int)
int8range|int8range(floor(random() * 1e12)::int8, 1e12::int8 + floor(random() * 1e12)::int8, '[]')
numrange|numrange(round(random()::numeric, 3), round(1 + random()::numeric, 5))
daterange|daterange(date '2000-01-01' + floor(random() * 9000)::int, date '2030-01-01' + floor(random() * 9000)::int)
tsrange|tsrange(timestamp '2000-01-01' + random() * interval '20 years', timestamp '2030-01-01' + random() * interval '20 years')
tstzrange|tstzrange(timestamptz '1900-01-01 00:00+00' + random() * interval '100 years', timestamptz '2030-01-01 00:00+00' + random() * interval '20 years')
int4multirange|int4multirange(int4range(0, floor(random() * 100)::int), int4range(200, 200 + floor(random() * 100)::int))
datemultirange|datemultirange(daterange(date '2000-01-01', date '2000-01-01' + floor(random() * 900)::int), daterange(date '2010-01-01', NULL))
tstzmultirange|tstzmultirange(tstzrange(timestamptz '1900-01-01 00:00+00' + random() * interval '100 years', NULL))
float8[]|ARRAY[random() * 1e5, random() * 1e-5, 'NaN', (random() - 0.5) * 1e300]::float8[]
timestamptz[]|ARRAY[timestamptz '1900-01-01 00:00+00' + random() * interval '150 years', timestamptz '1970-01-01 00:00+00' + random() * interval '60 years']
interval[]|ARRAY[random() * interval '1000 days', - random() * interval '100 hours']
bytea[]|ARRAY[decode(md5(random()::text), 'hex'), '\x5c22'::bytea]
date[]|ARRAY[date '2000-01-01' + floor(random() * 9000)::int, NULL]
text[]|ARRAY[rnd_text(5), rnd_text(3), NULL]
money[]|ARRAY[round((random() * 2e6)::numeric, 2)::money]
fn_tsd|(timestamptz '1950-01-01 00:00+00' + random() * interval '90 years')::fn_tsd
fn_color|(ARRAY['red', 'green', 'blue'])[1 + floor(random() * 3)::int]::fn_color
fn_pair|ROW(timestamptz '1950-01-01 00:00+00' + random() * interval '90 years', random() * 1e20, decode(md5(random()::text), 'hex'), random() * interval '9 days')::fn_pair
EOF
)
# xml is there only where PostgreSQL was built with libxml (Debian's is; a
# build from source configured without --with-libxml refuses every XML
# value with 0A000): then no row can hold one, and the type is left out.
if [ "$(q_state "SELECT xmlelement(name a)")" != OK ]; then
	TYPES=$(grep -v '^xml|' <<<"$TYPES")
	diag "xml left out: this PostgreSQL was built without libxml"
fi
ntypes=$(grep -c . <<<"$TYPES")

setup="SET client_min_messages = warning;
DROP TABLE IF EXISTS fn_rows, fn_seen;
CREATE DOMAIN fn_tsd AS timestamptz;
CREATE TYPE fn_color AS ENUM ('red', 'green', 'blue');
CREATE TYPE fn_pair AS (t timestamptz, f float8, b bytea, i interval);
CREATE FUNCTION rnd_text(n int) RETURNS text LANGUAGE sql VOLATILE AS \$\$
  SELECT string_agg(substr(c, 1 + floor(random() * length(c))::int, 1), '')
  FROM (SELECT E'ab Z9{}\"''\\\\,()-é€' AS c) AS chars, generate_series(1, n) \$\$;
CREATE TABLE fn_rows (tbl regclass, typ text, id int);
CREATE TABLE fn_seen (session int, tbl regclass, id int, demanded text, named text, naive text);
SELECT setseed($SEED / 2147483647.0);
SET session_replication_role = replica;"
i=0
while IFS='|' read -r typ expr; do
	i=$((i + 1))
	setup+="
CREATE TABLE n$i (id int PRIMARY KEY, k $typ, fence_token bigint);
CREATE TRIGGER n${i}_fence BEFORE INSERT OR UPDATE OR DELETE ON n$i
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=n$i-{k}');
INSERT INTO n$i SELECT g, $expr, 0 FROM generate_series(1, $ROWS) g;
INSERT INTO fn_rows SELECT 'n$i', '$(sed "s/'/''/g" <<<"$typ")', id FROM n$i;"
done <<<"$TYPES"
setup+="
-- The guard's name (its RP004 message), rp_lock_name's, and the naive
-- twin's, for one row.
CREATE FUNCTION fn_demanded(tbl regclass, rid int) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE msg text;
BEGIN
  EXECUTE format('UPDATE %s SET fence_token = fence_token WHERE id = \$1', tbl) USING rid;
  RETURN 'passed without a lease';
EXCEPTION
  WHEN SQLSTATE 'RP004' THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
    RETURN substring(msg FROM '^no lease on \"(.*)\" for a write to table \"[^\"]*\"\$');
  WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END \$\$;
CREATE FUNCTION fn_named(tbl regclass, rid int) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE r text;
BEGIN
  EXECUTE format('SELECT rp_lock_name(%L::regclass, t) FROM %s t WHERE id = \$1', tbl, tbl) INTO r USING rid;
  RETURN r;
EXCEPTION WHEN OTHERS THEN
  RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END \$\$;
CREATE FUNCTION fn_naive(tbl regclass, rid int) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE r text;
BEGIN
  EXECUTE format('SELECT format(''%s-%%s'', k) FROM %s WHERE id = \$1', tbl, tbl) INTO r USING rid;
  RETURN r;
END \$\$;"
out=$(q "$setup" 2>&1)
is "$(q "SELECT count(*) || ' rows of ' || count(DISTINCT tbl) || ' types' FROM fn_rows")" \
	"$((ntypes * ROWS)) rows of $ntypes types" "random rows of every type, each table guarded 'lock=nI-{k}'" "$out"

# The sessions: the first with the settings a name is rendered under, then
# random ones.
mapfile -t zones < <(q "SELECT name FROM pg_timezone_names ORDER BY name")
mapfile -t monetary < <( { printf '%s\n' C POSIX; locale -a 2>/dev/null; } | sort -u)
pick() { local a=("$@"); echo "${a[RANDOM % ${#a[@]}]}"; }
t0=$(now_ms)
for ((s = 0; s <= SESSIONS; s++)); do
	if [ "$s" -eq 0 ]; then
		set=(UTC "ISO, MDY" postgres hex 1 C)
	else
		set=("$(pick "${zones[@]}")" "$(pick ISO SQL Postgres German), $(pick MDY DMY YMD)"
			"$(pick postgres postgres_verbose sql_standard iso_8601)" "$(pick hex escape)"
			"$((RANDOM % 19 - 15))" "$(pick "${monetary[@]}")")
	fi
	diag "session $s: TimeZone=${set[0]} DateStyle=${set[1]} IntervalStyle=${set[2]} bytea_output=${set[3]} extra_float_digits=${set[4]} lc_monetary=${set[5]}"
	q "SET TimeZone = '${set[0]}'" "SET DateStyle = '${set[1]}'" "SET IntervalStyle = '${set[2]}'" \
	  "SET bytea_output = '${set[3]}'" "SET extra_float_digits = ${set[4]}" "SET lc_monetary = '${set[5]}'" \
	  "INSERT INTO fn_seen SELECT $s, tbl, id, fn_demanded(tbl, id), fn_named(tbl, id), fn_naive(tbl, id) FROM fn_rows" >/dev/null
done
diag "$((SESSIONS + 1)) sessions x $((ntypes * ROWS)) rows in $(( $(now_ms) - t0 )) ms"
is "$(q "SELECT count(*) FROM fn_seen")" "$(( (SESSIONS + 1) * ntypes * ROWS ))" "every session saw every row"

# by_row: per row, the number of distinct names each way.
by_row="SELECT r.typ, s.tbl, s.id, count(DISTINCT s.demanded) AS nd, count(DISTINCT s.named) AS nn,
          count(DISTINCT s.naive) AS nv, bool_and(s.named IS NOT DISTINCT FROM s.demanded) AS agree,
          string_agg(DISTINCT s.demanded, ' | ') AS demanded, string_agg(DISTINCT s.naive, ' | ') AS naive
        FROM fn_seen s JOIN fn_rows r USING (tbl, id) GROUP BY 1, 2, 3"
bad=$(q "SELECT count(*) FROM fn_seen WHERE demanded IS NULL OR demanded LIKE 'ERROR%' OR demanded LIKE 'passed%'")
is "$bad" 0 "every write without a lease is refused with RP004 naming a lock" \
	"$(q "SELECT tbl || ' ' || id || ': ' || coalesce(demanded, '(null)') FROM fn_seen WHERE demanded IS NULL OR demanded LIKE 'ERROR%' OR demanded LIKE 'passed%' LIMIT 3")"
is "$(q "SELECT count(*) FROM ($by_row) b WHERE nd > 1")" 0 \
	"the guard asks for one name per row in every session ($((SESSIONS + 1)) sessions)" \
	"$(q "SELECT typ || ': ' || demanded FROM ($by_row) b WHERE nd > 1 ORDER BY typ LIMIT 5")"
is "$(q "SELECT string_agg(DISTINCT typ, ', ') FROM ($by_row) b WHERE nd > 1")" "" \
	"no type gives a row two names"
is "$(q "SELECT count(*) FROM ($by_row) b WHERE NOT agree")" 0 \
	"rp_lock_name(table, row) returns the guard's name, in every session" \
	"$(q "SELECT s.session || ' ' || s.tbl || ' ' || s.id || ': ' || coalesce(s.named, '(null)') || ' vs ' || coalesce(s.demanded, '(null)') FROM fn_seen s WHERE s.named IS DISTINCT FROM s.demanded LIMIT 3")"
is "$(q "SELECT count(*) FROM fn_seen WHERE session = 0 AND demanded IS DISTINCT FROM naive")" 0 \
	"the name is the row's text under TimeZone UTC, DateStyle ISO, IntervalStyle postgres, bytea_output hex, extra_float_digits 1, lc_monetary C" \
	"$(q "SELECT tbl || ': ' || coalesce(demanded, '(null)') || ' vs ' || naive FROM fn_seen WHERE session = 0 AND demanded IS DISTINCT FROM naive LIMIT 3")"
several=$(q "SELECT count(*) FROM ($by_row) b WHERE nv > 1")
cmp_ok "$several" -gt 0 "naive: the session's own text gives some rows several names ($several rows)"
diag "naive twin, types with rows of several names: $(q "SELECT string_agg(DISTINCT typ, ', ') FROM ($by_row) b WHERE nv > 1")"
diag "for example: $(q "SELECT naive FROM ($by_row) b WHERE nv > 1 AND typ = 'timestamptz' LIMIT 1")"

q "DROP TABLE job, fn_rows, fn_seen" >/dev/null
finish
