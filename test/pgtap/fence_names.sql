-- A row's lock name is the same for every session, and a guard's coverage
-- is checked everywhere it can be lost.
--
-- A lock-bound guard (rp_fence_guard('fence_token', 'lock=job-{ts}')) binds
-- each row to the lease of the name it renders from the row.  The checks
-- below ask the guard which name it wants (the name in its RP004 "no lease
-- on" message) for one row under different session settings: one row must
-- have one name.  The naive twin is the rendering with the session's own
-- output settings ('job-' || ts), which gives one name per setting.
-- test/scenarios/fence_names.sh does the same for random rows of every
-- built-in type under random settings.
--
-- New functions are called through pg_temp.try, so that on a build without
-- them the checks fail one by one instead of aborting the file.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(54);

-- try(sql): the first column of the first row of sql as text, or
-- 'ERROR <sqlstate>: <message>'.
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE q INTO r;
  RETURN r;
EXCEPTION WHEN OTHERS THEN
  RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;
-- rows(sql): every row of sql (one text column), one per line, in order.
CREATE FUNCTION pg_temp.rows(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE format('SELECT coalesce(string_agg(x, E''\n''), '''') FROM (%s) AS t(x)', q) INTO r;
  RETURN r;
EXCEPTION WHEN OTHERS THEN
  RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;
-- demanded(sql): the lock name the guard asks a lease for when sql runs
-- without one; the write is rolled back.
CREATE FUNCTION pg_temp.demanded(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE msg text;
BEGIN
  EXECUTE q;
  RAISE EXCEPTION 'passed' USING ERRCODE = 'P0001';
EXCEPTION
  WHEN SQLSTATE 'RP004' THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
    RETURN substring(msg FROM '^no lease on "(.*)" for a write to table "[^"]*"$');
  WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;
-- set_all('TimeZone=Asia/Tokyo;DateStyle=SQL, DMY'): set each, for the
-- transaction.
CREATE FUNCTION pg_temp.set_all(settings text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE s text;
BEGIN
  FOREACH s IN ARRAY string_to_array(settings, ';') LOOP
    PERFORM set_config(split_part(s, '=', 1), split_part(s, '=', 2), true);
  END LOOP;
END $$;
-- under(settings, sql): pg_temp.demanded(sql) with the settings set for
-- the call only.
CREATE FUNCTION pg_temp.under(settings text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  PERFORM pg_temp.set_all(settings);
  r := pg_temp.demanded(q);
  RESET ALL;
  RETURN r;
END $$;
-- naive(settings, sql): pg_temp.try(sql) with the settings set for the call.
CREATE FUNCTION pg_temp.naive(settings text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  PERFORM pg_temp.set_all(settings);
  r := pg_temp.try(q);
  RESET ALL;
  RETURN r;
END $$;
-- names(q, settings[]): the distinct names q gets under each settings.
CREATE FUNCTION pg_temp.names(q text, variants text[]) RETURNS text LANGUAGE sql AS $$
  SELECT string_agg(DISTINCT pg_temp.under(v, q), ' | ') FROM unnest(variants) AS v
$$;

-- ---------------------------------------------------------------------------
-- 1. The name does not depend on the writing session's settings.
-- ---------------------------------------------------------------------------
CREATE TABLE job (ts timestamptz PRIMARY KEY, runs int NOT NULL DEFAULT 0, fence_token bigint);
CREATE TRIGGER job_fence BEFORE INSERT OR UPDATE OR DELETE ON job
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=job-{ts}');
SET LOCAL session_replication_role = replica;
INSERT INTO job VALUES ('2024-01-01 00:00:00+00', 0, 0);
SET LOCAL session_replication_role = origin;

-- The naive twin: the session's own text of the value.
SELECT is((SELECT count(DISTINCT pg_temp.naive(v, $$SELECT 'job-' || ts FROM job$$))
           FROM unnest(ARRAY['TimeZone=UTC', 'TimeZone=Asia/Tokyo', 'TimeZone=America/St_Johns']) AS v),
          3::bigint, 'naive: the session''s own text of one timestamptz gives three names under three time zones');
SELECT is(pg_temp.names('UPDATE job SET runs = runs + 1',
                        ARRAY['TimeZone=UTC', 'TimeZone=Asia/Tokyo', 'TimeZone=America/St_Johns',
                              'TimeZone=Asia/Tokyo;DateStyle=SQL, DMY', 'DateStyle=German',
                              'DateStyle=Postgres, MDY;TimeZone=America/New_York']),
          'job-2024-01-01 00:00:00+00',
          'timestamptz: one name under every TimeZone and DateStyle, in UTC and ISO form');
SELECT is(pg_temp.under('TimeZone=Asia/Tokyo', 'DELETE FROM job'), 'job-2024-01-01 00:00:00+00',
          'a DELETE in a Tokyo session asks for the same name');

CREATE TABLE d (k date PRIMARY KEY, fence_token bigint);
CREATE TRIGGER d_fence BEFORE INSERT OR UPDATE OR DELETE ON d
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=d-{k}');
SELECT is(pg_temp.names($$INSERT INTO d VALUES ('2024-03-04')$$,
                        ARRAY['DateStyle=ISO, MDY', 'DateStyle=SQL, DMY', 'DateStyle=German', 'DateStyle=Postgres, YMD']),
          'd-2024-03-04', 'date: one name under four DateStyles');

CREATE TABLE iv (k interval PRIMARY KEY, fence_token bigint);
CREATE TRIGGER iv_fence BEFORE INSERT OR UPDATE OR DELETE ON iv
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=iv-{k}');
SELECT is(pg_temp.names($$INSERT INTO iv VALUES ('1 day 02:03:04')$$,
                        ARRAY['IntervalStyle=postgres', 'IntervalStyle=postgres_verbose',
                              'IntervalStyle=sql_standard', 'IntervalStyle=iso_8601']),
          'iv-1 day 02:03:04', 'interval: one name under four IntervalStyles');

CREATE TABLE b (k bytea PRIMARY KEY, fence_token bigint);
CREATE TRIGGER b_fence BEFORE INSERT OR UPDATE OR DELETE ON b
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=b-{k}');
SELECT is(pg_temp.names($$INSERT INTO b VALUES ('\x0102ff')$$,
                        ARRAY['bytea_output=hex', 'bytea_output=escape']),
          'b-\x0102ff', 'bytea: one name under both bytea_outputs');

CREATE TABLE f (k float8 PRIMARY KEY, fence_token bigint);
CREATE TRIGGER f_fence BEFORE INSERT OR UPDATE OR DELETE ON f
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=f-{k}');
SELECT is(pg_temp.names($$INSERT INTO f VALUES (0.1::float8 + 0.2::float8)$$,
                        ARRAY['extra_float_digits=1', 'extra_float_digits=0', 'extra_float_digits=-3', 'extra_float_digits=3']),
          'f-0.30000000000000004', 'float8: one name under every extra_float_digits, the shortest exact form');

CREATE TABLE r (k tstzrange, a timestamptz[], fence_token bigint);
CREATE TRIGGER r_fence BEFORE INSERT OR UPDATE OR DELETE ON r
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=r-{k}-{a}');
SELECT is(pg_temp.names($$INSERT INTO r VALUES ('[2024-01-01 00:00+00, 2024-01-02 00:00+00)', '{2024-01-01 00:00+00}')$$,
                        ARRAY['TimeZone=UTC', 'TimeZone=Asia/Tokyo;DateStyle=SQL, DMY']),
          'r-["2024-01-01 00:00:00+00","2024-01-02 00:00:00+00")-{"2024-01-01 00:00:00+00"}',
          'a range and an array of timestamptz: one name, their elements in the same form');

-- rp_lock_name gives applications that name without rendering it themselves.
SET LOCAL TimeZone = 'Asia/Tokyo';
SELECT is(pg_temp.try($$SELECT rp_lock_name('job', j) FROM job j$$), 'job-2024-01-01 00:00:00+00',
          'rp_lock_name(table, row) in a Tokyo session: the name the guard asks for');
SELECT is(pg_temp.try($$SELECT rp_lock_name('job', '{"ts": "2024-01-01 09:00:00+09"}'::jsonb)$$),
          'job-2024-01-01 00:00:00+00', 'rp_lock_name(table, jsonb): the name of a row given by its values');
SELECT is(pg_temp.try($$SELECT rp_lock_name('job', ROW('2024-01-01 09:00+09', 0, NULL)::job)$$),
          'job-2024-01-01 00:00:00+00', 'rp_lock_name(table, ROW(...)::table): a row that is not stored');
SELECT is(pg_temp.try($$SELECT rp_lock_name('job', '{"runs": 1}'::jsonb)$$)::varchar(11), 'ERROR 22004',
          'rp_lock_name: a template column missing from the values: 22004, as the guard refuses a NULL');
SELECT is(pg_temp.try($$SELECT rp_lock_name('job', ROW('2024-01-01', NULL)::d)$$)::varchar(11), 'ERROR 42703',
          'rp_lock_name: a row without the template''s column: 42703');
CREATE TABLE job_text (ts text);
SELECT is(pg_temp.try($$SELECT rp_lock_name('job', ROW('2024-01-01')::job_text)$$)::varchar(11), 'ERROR 42804',
          'rp_lock_name: a row whose column has another type: 42804');
SELECT is(pg_temp.try($$SELECT rp_lock_name('job', '2024-01-01'::text)$$)::varchar(11), 'ERROR 42804',
          'rp_lock_name: neither a row nor jsonb: 42804');
CREATE TABLE plain (id int);
SELECT is(pg_temp.try($$SELECT rp_lock_name('plain', '{"id": 1}'::jsonb)$$)::varchar(11), 'ERROR 22023',
          'rp_lock_name: a table without a lock-bound guard: 22023');
-- The name works: a lease on it lets the Tokyo session write, and a UTC one.
SELECT lives_ok($$SELECT rp_acquire(rp_lock_name('job', j), 10000) FROM job j$$,
                'rp_acquire(rp_lock_name(''job'', j)) in a Tokyo session');
SELECT lives_ok($$UPDATE job SET runs = runs + 1$$, 'that session writes the row');
SET LOCAL TimeZone = 'UTC';
SELECT lives_ok($$UPDATE job SET runs = runs + 1$$, 'and so it does with TimeZone UTC');
RESET TimeZone;
SELECT rp_release_all();

-- ---------------------------------------------------------------------------
-- Types whose text is not a value's own: refused when the trigger is created.
-- ---------------------------------------------------------------------------
CREATE TABLE rc (k regclass, l regclass[], fence_token bigint);
SELECT throws_ok($$CREATE TRIGGER rc_fence BEFORE INSERT OR UPDATE OR DELETE ON rc
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=rc-{k}')$$, '39P01', NULL,
  'CREATE TRIGGER refuses a template on a regclass column (its text follows search_path)');
SELECT throws_ok($$CREATE TRIGGER rc_fence2 BEFORE INSERT OR UPDATE OR DELETE ON rc
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=rc-{l}')$$, '39P01', NULL,
  'and on an array of regclass');
DROP TRIGGER IF EXISTS rc_fence ON rc;
DROP TRIGGER IF EXISTS rc_fence2 ON rc;
SET LOCAL check_function_bodies = off;
CREATE TRIGGER rc_fence BEFORE INSERT OR UPDATE OR DELETE ON rc
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=rc-{k}');
RESET check_function_bodies;
SELECT is(pg_temp.rows($$SELECT problem FROM rp_fence_check('rc')$$),
  'lock name template "rc-{k}" names column "k" of type regclass, whose text depends on search_path or on the catalog',
  'rp_fence_check reports it (created with check_function_bodies off, as pg_dump restores)');
SELECT throws_ok($$INSERT INTO rc VALUES ('rc', NULL, 0)$$, '39P01', NULL, 'and the guard refuses to run');
-- A CREATE TRIGGER written inside CREATE SCHEMA runs under that statement's
-- tag, not CREATE TRIGGER's: refused all the same, qualified or not.
SELECT throws_ok($$CREATE SCHEMA rcs CREATE TABLE t (k regclass, fence_token bigint)
  CREATE TRIGGER t_fence BEFORE INSERT OR UPDATE OR DELETE ON t
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=rcs-{k}')$$, '39P01', NULL,
  'CREATE SCHEMA ... CREATE TRIGGER refuses a template on a regclass column');
SELECT is((SELECT count(*) FROM pg_namespace WHERE nspname = 'rcs'), 0::bigint, 'and the schema is not created');
SELECT throws_ok($$CREATE SCHEMA rcs2 AUTHORIZATION CURRENT_ROLE CREATE TABLE t (k regclass, fence_token bigint)
  CREATE TRIGGER t_fence BEFORE INSERT OR UPDATE OR DELETE ON rcs2.t
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=rcs-{k}')$$, '39P01', NULL,
  'so does one naming the table with its schema');
-- The check runs as the user whose statement it is: one who may not use
-- the extension's schema must still create schemas and triggers of its own.
CREATE ROLE rp_no_ext_schema;
DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO rp_no_ext_schema', current_database()); END $$;
REVOKE USAGE ON SCHEMA public FROM PUBLIC;
CREATE FUNCTION pg_temp.as_role(r text, q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('SET LOCAL ROLE %I', r);
  BEGIN
    EXECUTE q;
  EXCEPTION WHEN OTHERS THEN
    RESET ROLE;
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
  END;
  RESET ROLE;
  RETURN 'ok';
END $$;
SELECT is(pg_temp.as_role('rp_no_ext_schema', 'CREATE SCHEMA own_s CREATE TABLE t (id int)'), 'ok',
  'a role without USAGE on the extension''s schema creates a schema');
CREATE SCHEMA own_t AUTHORIZATION rp_no_ext_schema;
SELECT is(pg_temp.as_role('rp_no_ext_schema', $q$
  CREATE TABLE own_t.t (id int);
  CREATE FUNCTION own_t.tf() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
  CREATE TRIGGER own_t BEFORE INSERT ON own_t.t FOR EACH ROW EXECUTE FUNCTION own_t.tf()$q$), 'ok',
  'and a trigger of its own');
-- Nor do rp_lock_name and rp_fence_floor need it, reached through a view
-- in another schema.
CREATE SCHEMA vis;
CREATE TABLE vis.lnv (id int, fence_token bigint);
CREATE TRIGGER zz_fence BEFORE INSERT OR UPDATE OR DELETE ON vis.lnv
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=lnv-{id}');
CREATE VIEW vis.names AS SELECT rp_lock_name('vis.lnv', '{"id": 7}'::jsonb) AS name;
CREATE VIEW vis.floors AS SELECT rp_fence_floor('vis.lnv') AS floor;
GRANT USAGE ON SCHEMA vis TO rp_no_ext_schema;
GRANT SELECT ON vis.names, vis.floors, vis.lnv TO rp_no_ext_schema;
GRANT EXECUTE ON FUNCTION rp_lock_name(regclass, anyelement, text), rp_fence_floor(regclass) TO rp_no_ext_schema;
SELECT is(pg_temp.as_role('rp_no_ext_schema', 'SELECT * FROM vis.names'), 'ok',
  'rp_lock_name through a view, by a role without USAGE on the extension''s schema');
SELECT is(pg_temp.as_role('rp_no_ext_schema', 'SELECT * FROM vis.floors'), 'ok',
  'rp_fence_floor too');
GRANT USAGE ON SCHEMA public TO PUBLIC;

-- ---------------------------------------------------------------------------
-- 2. A template on a generated column.
-- ---------------------------------------------------------------------------
CREATE TABLE gen (id int PRIMARY KEY, k int GENERATED ALWAYS AS (id * 10) STORED, fence_token bigint);
SELECT throws_ok($$CREATE TRIGGER gen_fence BEFORE INSERT OR UPDATE OR DELETE ON gen
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=gen-{k}')$$, '39P01', NULL,
  'CREATE TRIGGER refuses a template on a generated column');
SELECT throws_ok($$CREATE TRIGGER gen_fence2 BEFORE INSERT OR UPDATE OR DELETE ON gen
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('k', 'lock=gen-{id}')$$, '39P01', NULL,
  'and a generated token column');
DROP TRIGGER IF EXISTS gen_fence ON gen;
DROP TRIGGER IF EXISTS gen_fence2 ON gen;
SET LOCAL check_function_bodies = off;
CREATE TRIGGER gen_fence BEFORE INSERT OR UPDATE OR DELETE ON gen
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=gen-{k}');
RESET check_function_bodies;
SELECT is(pg_temp.rows($$SELECT problem FROM rp_fence_check('gen')$$),
  'lock name template "gen-{k}" names column "k", a generated column: it is computed after BEFORE triggers, so the guard would see NULL on INSERT and the old value on UPDATE',
  'rp_fence_check reports the generated template column');
SET LOCAL session_replication_role = replica;
INSERT INTO gen (id) VALUES (1);
SET LOCAL session_replication_role = origin;
SELECT lives_ok($$SELECT rp_acquire('gen-10', 10000)$$, 'a lease on the row''s current name gen-10');
-- The hole: the guard saw the old k (10) and wanted no lease on gen-20.
SELECT throws_ok($$UPDATE gen SET id = 2$$, '39P01', NULL,
  'a renaming UPDATE holding only the old name''s lease is refused (the guard refuses to run)');
SELECT rp_release_all();

-- ---------------------------------------------------------------------------
-- 3. Partitions and inheritance children.
-- ---------------------------------------------------------------------------
CREATE TABLE pj (id int, region text, fence_token bigint) PARTITION BY LIST (region);
CREATE TABLE pj_eu PARTITION OF pj FOR VALUES IN ('eu');
CREATE TABLE pj_us PARTITION OF pj FOR VALUES IN ('us');
CREATE TABLE pj_as PARTITION OF pj FOR VALUES IN ('as', 'oc') PARTITION BY LIST (region);
CREATE TABLE pj_oc PARTITION OF pj_as FOR VALUES IN ('oc');
CREATE TRIGGER pj_fence BEFORE INSERT OR UPDATE OR DELETE ON pj
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=pj-{id}');
SELECT is(pg_temp.rows($$SELECT relation::text || ' ' || problem FROM rp_fence_check('pj')$$), '',
  'rp_fence_check(partitioned table): nothing to report while every partition carries the guard');
ALTER TABLE pj_eu DISABLE TRIGGER pj_fence;
ALTER TABLE pj_oc ENABLE REPLICA TRIGGER pj_fence;
-- The hole: writes through the parent pass with no lease and no token.
SELECT lives_ok($$INSERT INTO pj VALUES (1, 'eu'), (2, 'oc')$$,
  'naive: INSERTs through the parent into those partitions pass without a lease');
SELECT is((SELECT count(*) FROM pj WHERE fence_token IS NULL), 2::bigint, 'naive: and leave no token');
SELECT is(pg_temp.rows($$SELECT relation::text || ' ' || trigger_name || ': ' || problem FROM rp_fence_check('pj') ORDER BY 1$$),
  E'pj_eu pj_fence: is disabled\npj_oc pj_fence: fires only when session_replication_role is replica',
  'rp_fence_check(parent) reports each partition whose guard is off, sub-partitions included');
SELECT is(pg_temp.rows($$SELECT relation::text || ' ' || problem FROM rp_fence_check('pj_as')$$),
  'pj_oc fires only when session_replication_role is replica', 'rp_fence_check(sub-partitioned table) too');
ALTER TABLE pj_eu ENABLE TRIGGER pj_fence;
ALTER TABLE pj_oc ENABLE TRIGGER pj_fence;
SELECT is(pg_temp.rows($$SELECT relation::text FROM rp_fence_check('pj')$$), '', 'enabled again: nothing to report');

CREATE TABLE ih (id int, fence_token bigint);
CREATE TRIGGER ih_fence BEFORE INSERT OR UPDATE OR DELETE ON ih
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=ih-{id}');
CREATE TABLE ih_child (note text) INHERITS (ih);
CREATE TABLE ih_other (note text) INHERITS (ih);
CREATE TRIGGER ih_fence BEFORE INSERT OR UPDATE OR DELETE ON ih_other
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=other-{id}');
SET LOCAL session_replication_role = replica;
INSERT INTO ih_child VALUES (1, 5, 'x');
SET LOCAL session_replication_role = origin;
SELECT lives_ok($$UPDATE ih SET fence_token = 1 WHERE id = 1$$,
  'the hole: an UPDATE through the parent of a child''s row passes without a lease (the child has no guard)');
SELECT is(pg_temp.rows($$SELECT relation::text || ' ' || coalesce(trigger_name, '-') || ': ' || problem FROM rp_fence_check('ih') ORDER BY 1$$),
  E'ih_child ih_fence: has no copy of guard "ih_fence" of "ih": its rows are not guarded as the parent''s are\n'
  || E'ih_other ih_fence: has no copy of guard "ih_fence" of "ih": its rows are not guarded as the parent''s are',
  'rp_fence_check(parent) reports the child without the guard and the child with another template');

-- ---------------------------------------------------------------------------
-- 4. rp_fence_check of a relation that does not exist.
-- ---------------------------------------------------------------------------
SELECT throws_ok($$SELECT * FROM rp_fence_check(0)$$, '42P01', NULL, 'rp_fence_check(0): 42P01');
SELECT throws_ok($$SELECT * FROM rp_fence_check(NULL)$$, '22004', NULL, 'rp_fence_check(NULL): 22004, as before');
SELECT is(pg_temp.try($$SELECT rp_lock_name(0, '{}'::jsonb)$$)::varchar(11), 'ERROR 42P01', 'rp_lock_name(0, ...): 42P01');
-- rp_fence_floor of a table dropped since its OID was read (or of 0) said
-- the table had no guard, 22023, as if it existed.
SELECT throws_ok($$SELECT rp_fence_floor(0)$$, '42P01', 'relation with OID 0 does not exist', 'rp_fence_floor(0): 42P01, as rp_fence_check and rp_lock_name');

-- ---------------------------------------------------------------------------
-- 5. A row of another table: the name of the row as INSERT stores it.
-- ---------------------------------------------------------------------------
-- INSERT applies a column's typmod (numeric(10,2), char(5), varchar(3),
-- timestamp(0), the elements of numeric(10,2)[]) before the guard renders
-- the row: 1.5 is stored, and named, 1.50.  A row of another table with a
-- plain numeric column holds 1.5; rp_lock_name must name the row it would
-- store, as the jsonb form does (each value read with the column's typmod),
-- or the lease it names is not the one the guard asks for.  A value INSERT
-- refuses is refused with INSERT's error.
-- round_trip(tbl): for the row of <tbl>_src, rp_lock_name(tbl, row), the
-- name of its value as jsonb, and what INSERT INTO tbl of that row does
-- holding a lease on the first name: 'name | name | written' when the
-- three agree.
CREATE FUNCTION pg_temp.round_trip(tbl text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE by_row text; by_jsonb text; wrote text;
BEGIN
  by_row := pg_temp.try(format('SELECT rp_lock_name(%L, s) FROM %I s', tbl, tbl || '_src'));
  by_jsonb := pg_temp.try(format('SELECT rp_lock_name(%L, jsonb_build_object(''k'', s.k::text)) FROM %I s',
                                 tbl, tbl || '_src'));
  IF by_row NOT LIKE 'ERROR %' THEN
    PERFORM rp_acquire(by_row, 10000);
  END IF;
  wrote := pg_temp.try(format('INSERT INTO %I (k) SELECT k FROM %I RETURNING ''written''', tbl, tbl || '_src'));
  PERFORM rp_release_all();
  RETURN by_row || ' | ' || by_jsonb || ' | ' || wrote;
END $$;
CREATE DOMAIN price AS numeric(10,2) CHECK (VALUE > 0);
CREATE TABLE nm (k numeric(10,2), fence_token bigint);
CREATE TABLE nm_src (k numeric);
INSERT INTO nm_src VALUES (1.5);
CREATE TABLE nmo (k numeric(10,2), fence_token bigint);
CREATE TABLE nmo_src (k numeric);
INSERT INTO nmo_src VALUES (123456789.5);
CREATE TABLE ch (k char(5), fence_token bigint);
CREATE TABLE ch_src (k char(3));
INSERT INTO ch_src VALUES ('ab');
CREATE TABLE vc (k varchar(3), fence_token bigint);
CREATE TABLE vc_src (k varchar);
INSERT INTO vc_src VALUES ('abcd');
CREATE TABLE ts0 (k timestamp(0), fence_token bigint);
CREATE TABLE ts0_src (k timestamp);
INSERT INTO ts0_src VALUES ('2024-01-01 00:00:00.6');
CREATE TABLE na (k numeric(10,2)[], fence_token bigint);
CREATE TABLE na_src (k numeric[]);
INSERT INTO na_src VALUES ('{1.5,2.255}');
CREATE TABLE dm (k price, fence_token bigint);
CREATE TABLE dm_src (k price);
INSERT INTO dm_src VALUES (1.5);
DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['nm', 'nmo', 'ch', 'vc', 'ts0', 'na', 'dm'] LOOP
    EXECUTE format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE OR DELETE ON %I FOR EACH ROW '
                   'EXECUTE FUNCTION rp_fence_guard(''fence_token'', %L)', t || '_fence', t, 'lock=' || t || '-{k}');
  END LOOP;
END $$;

SELECT is(pg_temp.round_trip('nm'), 'nm-1.50 | nm-1.50 | written',
          'numeric(10,2) from a numeric 1.5: rp_lock_name names the row 1.50 as INSERT stores it, and the write is accepted');
SELECT is(pg_temp.round_trip('nmo'),
          'ERROR 22003: numeric field overflow | ERROR 22003: numeric field overflow | ERROR 22003: numeric field overflow',
          'numeric(10,2) from 123456789.5: 22003, as INSERT refuses it');
SELECT is(pg_temp.round_trip('ch'), 'ch-ab    | ch-ab    | written',
          'char(5) from a char(3): the name has char(5)''s padding');
SELECT is(pg_temp.round_trip('vc'),
          'ERROR 22001: value too long for type character varying(3) | '
          'ERROR 22001: value too long for type character varying(3) | '
          'ERROR 22001: value too long for type character varying(3)',
          'varchar(3) from a varchar ''abcd'': 22001, as INSERT refuses it, not the name of a row that cannot be stored');
SELECT is(pg_temp.round_trip('ts0'), 'ts0-2024-01-01 00:00:01 | ts0-2024-01-01 00:00:01 | written',
          'timestamp(0) from 00:00:00.6: the name has the rounded second');
SELECT is(pg_temp.round_trip('na'), 'na-{1.50,2.26} | na-{1.50,2.26} | written',
          'numeric(10,2)[] from a numeric[]: each element coerced');
SELECT is(pg_temp.round_trip('dm'), 'dm-1.50 | dm-1.50 | written',
          'a domain over numeric(10,2): its values carry the typmod already');

SELECT * FROM finish();
ROLLBACK;
