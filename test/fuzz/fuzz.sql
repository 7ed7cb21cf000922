-- test/fuzz/fuzz.sql -- the bad-input generator used by
-- test/scenarios/fuzz_bad_input.sh.
--
-- Installs schema rp_fuzz into the current database:
--   rp_fuzz.vals      a pool of extreme and malformed argument expressions
--                     per type (NULL, 0, -1, INT64 limits, empty and 1 MB+
--                     strings, { } : \n, multi-byte, odd algorithm names,
--                     rp_lease records with NULL or forged fields)
--   rp_fuzz.bounds    the documented range of each argument, by name: the
--                     oracle for "this input is bad, so it must be an error"
--   rp_fuzz.log       one row per call: function, arguments, SQLSTATE or
--                     result, milliseconds
--   rp_fuzz.run(fn)   calls fn (a regprocedure of the extension) with
--                     (a) every pool value in every position, the other
--                     arguments sane, (b) fewer arguments where defaults
--                     exist, (c) all NULLs, (d) n random combinations;
--                     each call in its own subtransaction
--   rp_fuzz.run_trigger(n)  the same for rp_fence_guard, which can only be
--                     called by the trigger manager: tables with the trigger
--                     declared right and wrong, written with extreme tokens
--
-- Nothing here knows the list of functions: the scenario reads it from
-- pg_depend, so a new function is fuzzed as soon as it exists.  An argument
-- type with no pool gets NULL and a sane default only (see rp_fuzz.pool).
CREATE SCHEMA rp_fuzz;

CREATE TABLE rp_fuzz.vals (typ regtype NOT NULL, expr text NOT NULL);
CREATE TABLE rp_fuzz.bounds (argname text PRIMARY KEY, lo numeric, hi numeric,
                             nonempty bool NOT NULL DEFAULT false);
CREATE TABLE rp_fuzz.sane (argname text PRIMARY KEY, expr text NOT NULL);
CREATE TABLE rp_fuzz.log (
  id bigserial, fn regprocedure, mode text, pos int, args text,
  sqlstate text, message text, result_null bool, ms double precision,
  expect text);
-- The real lease forged records are made from (taken by rp_fuzz.run).
CREATE TABLE rp_fuzz.real (lease rp_lease);

INSERT INTO rp_fuzz.vals (typ, expr)
SELECT 'int8'::regtype, e FROM unnest(ARRAY[
  'NULL', '0', '-1', '1', '2', '7', '1000', '60000', '2147483647', '2147483648',
  '-2147483648', '4294967296', '100000', '100001', '1000000000000',
  '1000000000001', '2251799813685248', '2251799813685249', '9007199254740993',
  '4611686018427387904', '9223372036854775806', '9223372036854775807',
  '-9223372036854775807', '(-9223372036854775807 - 1)']) e
UNION ALL
SELECT 'text'::regtype, e FROM unnest(ARRAY[
  'NULL', '''''', ''' ''', '''a''', '''{''', '''}''', '''{}''', '''}{''',
  '''{{x}}''', ''':''', '''a:b''', '''x}:fence''', '''}:lock''', 'E''\n''',
  'E''a\nb\r\n''', 'E''\t''', 'E''\\''', '''''''''', '''"''',
  '''%s%n%x%p%d''', '''é''', '''日本語''', '''🔒🔑''', 'E''e\u0301''',
  'chr(1)', 'chr(1114111)', 'repeat(''x'', 1048577)',
  'repeat(''é'', 524289)', 'repeat(''{}:'', 400000)', 'repeat(''🔒'', 300000)',
  '''sliding_log''', '''sliding_window''', '''gcra''', '''GCRA''',
  '''gcra ''', ''' sliding_log''', '''token_bucket''', '''sliding_log;''',
  'repeat(''a'', 32)', '''0123456789abcdef0123456789abcdef''', '''nil''',
  '''false''', '''-1''', '''9223372036854775807''',
  '''redis.call(''''FLUSHALL'''')''', '''*''', '''?''', '''[a-z]''',
  '''rp:''', '''KEYS[1]''', 'repeat(''a'', 127)', 'repeat(''a'', 128)']) e
UNION ALL
SELECT 'bool'::regtype, e FROM unnest(ARRAY['NULL', 'true', 'false']) e
UNION ALL
-- a table with a lock-bound guard, one without, one that does not exist
SELECT 'regclass'::regtype, e FROM unnest(ARRAY[
  'NULL', '''rp_fuzz.lt''', '''pg_catalog.pg_class''', '0']) e
UNION ALL
SELECT 'jsonb'::regtype, e FROM unnest(ARRAY[
  'NULL', '''null''', '''{}''', '''[]''', '''""''', '''0''', '''-0''',
  '''1e1000''', '''"é日本🔒"''', '''{"a":{"b":[1,2,{"c":null}]}}''',
  'jsonb_build_object(''k'', repeat(''x'', 1048577))',
  '(repeat(''['', 2000) || repeat('']'', 2000))::jsonb']) e
UNION ALL
SELECT 'int4'::regtype, e FROM unnest(ARRAY['NULL', '0', '-1', '1', '2147483647', '(-2147483647 - 1)']) e
UNION ALL
SELECT 'float8'::regtype, e FROM unnest(ARRAY['NULL', '0', '-1', '''NaN''', '''Infinity''', '''-Infinity''', '1e308']) e
UNION ALL
SELECT 'timestamptz'::regtype, e FROM unnest(ARRAY['NULL', 'now()', '''infinity''', '''-infinity''']) e
UNION ALL
SELECT 'rp_lease'::regtype, e FROM unnest(ARRAY[
  'NULL',
  'ROW(NULL, NULL, NULL, NULL)',
  'ROW(''fz'', NULL, 1, now())',
  'ROW(NULL, repeat(''0'', 32), 1, now())',
  'ROW(''fz'', repeat(''0'', 32), NULL, NULL)',
  'ROW('''', repeat(''0'', 32), 1, now())',
  'ROW(''fz'', '''', 1, now())',
  'ROW(''fz'', ''short'', 1, now())',
  'ROW(''fz'', repeat(''0'', 33), 1, now())',
  'ROW(''fz'', repeat(''é'', 16), -1, ''-infinity'')',
  'ROW(repeat(''x'', 1048577), repeat(''0'', 32), 9223372036854775807, ''infinity'')',
  'ROW(''{'', ''}'', 0, now())',
  'ROW(E''\n'', repeat(''f'', 32), (-9223372036854775807 - 1), now())',
  -- the real lease, and forgeries of it
  '(SELECT lease FROM rp_fuzz.real)',
  '(SELECT ROW((lease).name, (lease).token, NULL, (lease).expires_at)::rp_lease FROM rp_fuzz.real)',
  '(SELECT ROW((lease).name, (lease).token, -1, NULL)::rp_lease FROM rp_fuzz.real)',
  '(SELECT ROW((lease).name, (lease).token, 9223372036854775807, ''-infinity'')::rp_lease FROM rp_fuzz.real)',
  '(SELECT ROW((lease).name || ''x'', (lease).token, (lease).fence, (lease).expires_at)::rp_lease FROM rp_fuzz.real)',
  '(SELECT ROW((lease).name, upper((lease).token), (lease).fence, (lease).expires_at)::rp_lease FROM rp_fuzz.real)',
  '(SELECT ROW(NULL, (lease).token, (lease).fence, (lease).expires_at)::rp_lease FROM rp_fuzz.real)',
  '(SELECT ROW((lease).name, NULL, (lease).fence, (lease).expires_at)::rp_lease FROM rp_fuzz.real)']) e;

-- The documented ranges (docs/ and the C checks).  nonempty: '' is 22023.
INSERT INTO rp_fuzz.bounds VALUES
  ('ttl_ms', 1, 1000000000000, false),
  ('wait_ms', 0, 1000000000000, false),
  ('floor', 0, 9223372036854775806, false),
  ('lease_ms', 1, 1000000000000, false),
  ('max_requests', 1, 2251799813685248, false),
  ('window_ms', 1, 1000000000000, false),
  ('cost', 1, 9223372036854775807, false),
  ('name', NULL, NULL, true),
  ('key', NULL, NULL, true),
  ('node_id', NULL, NULL, true);

-- Sane values: with these, every call succeeds; a failure in mode 'one'
-- is caused by the one argument replaced.
INSERT INTO rp_fuzz.sane VALUES
  ('name', '''fz-name'''), ('key', '''fz-key'''), ('node_id', '''fz-node'''),
  ('ttl_ms', '60000'), ('wait_ms', '0'), ('floor', '0'),
  ('verify_at_commit', 'false'), ('lease', '(SELECT lease FROM rp_fuzz.real)'),
  ('max_requests', '10'), ('window_ms', '1000'), ('cost', '1'),
  ('algorithm', '''gcra'''), ('lease_ms', '60000'), ('resource', '''fz-res'''),
  ('value', '''{"a":1}'''), ('fence', '1'),
  ('permits', '2'), ('mode', '''shadow'''),
  ('fenced_table', '''rp_fuzz.lt'''), ('row_value', '''{"k": "x"}''');

-- rp_lock_name's table: a lock-bound guard named as the sane trigger_name.
CREATE TABLE rp_fuzz.lt (k text, fence_token bigint);
CREATE TRIGGER fz BEFORE INSERT OR UPDATE OR DELETE ON rp_fuzz.lt
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=fz-{k}');

-- The type a polymorphic argument is called with: rp_lock_name's
-- anyelement row_value is fuzzed as its jsonb form.
CREATE FUNCTION rp_fuzz.concrete(t oid) RETURNS regtype LANGUAGE sql AS $$
  SELECT CASE WHEN t = 'anyelement'::regtype THEN 'jsonb'::regtype ELSE t::regtype END
$$;

-- Pool of a type; a type with no pool gets NULL only.
CREATE FUNCTION rp_fuzz.pool(t regtype) RETURNS text[] LANGUAGE sql AS $$
  SELECT coalesce(array_agg(expr), ARRAY['NULL']) FROM rp_fuzz.vals WHERE typ = t
$$;

CREATE FUNCTION rp_fuzz.sane_for(argname text, t regtype) RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(
    (SELECT expr FROM rp_fuzz.sane s WHERE s.argname = sane_for.argname),
    CASE t WHEN 'text'::regtype THEN '''fz''' WHEN 'int8'::regtype THEN '1'
           WHEN 'int4'::regtype THEN '1' WHEN 'bool'::regtype THEN 'false'
           WHEN 'jsonb'::regtype THEN '''{}''' WHEN 'float8'::regtype THEN '1'
           WHEN 'timestamptz'::regtype THEN 'now()'
           WHEN 'rp_lease'::regtype THEN '(SELECT lease FROM rp_fuzz.real)'
           ELSE 'NULL' END)
$$;

-- What a call with this one bad argument must raise: 22004 for NULL, 22023
-- for out of range or empty; NULL when the value is acceptable.  A lease
-- record is bad when its name or token is NULL (22004) or its name empty
-- (22023), and for rp_extend when its fence is NULL (22004): rp_acquire never
-- returns such a record.  A forged token is not bad input: it is "not held".
CREATE FUNCTION rp_fuzz.expect_for(fn regprocedure, argname text, t regtype, expr text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  b rp_fuzz.bounds;
  v numeric;
  s text;
  l rp_lease;
BEGIN
  -- Documented exceptions: a fenced value may be NULL (jsonb null is a
  -- value); rp_fenced_read is a plain SQL lookup (no row for NULL).
  IF fn::text LIKE 'rp_fenced_read(%' OR (fn::text LIKE 'rp_fenced_write(%' AND argname = 'value') THEN
    RETURN NULL;
  END IF;
  -- rp_lock_name's trigger_name: NULL is its default (the table's one guard).
  IF fn::text LIKE 'rp_lock_name(%' AND argname = 'trigger_name' THEN
    RETURN NULL;
  END IF;
  IF expr = 'NULL' THEN RETURN '22004'; END IF;
  IF t = 'rp_lease'::regtype THEN
    EXECUTE 'SELECT (x).* FROM (SELECT (' || expr || ')::rp_lease AS x) s' INTO l;
    IF l.name IS NULL OR l.token IS NULL THEN RETURN '22004'; END IF;
    IF l.name = '' THEN RETURN '22023'; END IF;
    IF l.fence IS NULL AND fn::text LIKE 'rp_extend(%' THEN RETURN '22004'; END IF;
    RETURN NULL;
  END IF;
  SELECT * INTO b FROM rp_fuzz.bounds WHERE bounds.argname = expect_for.argname;
  IF NOT FOUND THEN RETURN NULL; END IF;
  IF t = 'int8'::regtype THEN
    EXECUTE 'SELECT (' || expr || ')::numeric' INTO v;
    IF v < b.lo OR v > b.hi THEN RETURN '22023'; END IF;
  ELSIF t = 'text'::regtype AND b.nonempty THEN
    EXECUTE 'SELECT (' || expr || ')::text' INTO s;
    IF s = '' THEN RETURN '22023'; END IF;
  END IF;
  RETURN NULL;
END
$$;

-- One call: run it in a subtransaction, log SQLSTATE or whether the result
-- was NULL, and how long it took.
CREATE FUNCTION rp_fuzz.call(fn regprocedure, mode text, pos int, args text[], expect text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  p pg_proc;
  sql text;
  res text;
  t0 timestamptz := clock_timestamp();
  st text;
  msg text;
  det text;
  argl text := '';
BEGIN
  SELECT * INTO p FROM pg_proc WHERE oid = fn;
  FOR i IN 1 .. coalesce(array_length(args, 1), 0) LOOP
    argl := argl || CASE WHEN i > 1 THEN ', ' ELSE '' END
            || '(' || args[i] || ')::' || format_type(rp_fuzz.concrete(p.proargtypes[i - 1]), NULL);
  END LOOP;
  sql := format('SELECT (%I.%I(%s))::text', p.pronamespace::regnamespace, p.proname, argl);
  BEGIN
    EXECUTE sql INTO res;
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
    msg := msg || coalesce(' / ' || nullif(det, ''), '');
  END;
  INSERT INTO rp_fuzz.log (fn, mode, pos, args, sqlstate, message, result_null, ms, expect)
  VALUES (fn, mode, pos, left(argl, 300), st, left(msg, 300),
          CASE WHEN st IS NULL THEN res IS NULL END,
          extract(epoch FROM clock_timestamp() - t0) * 1000, expect);
END
$$;

CREATE FUNCTION rp_fuzz.run(fn regprocedure, nrandom int, seed float8) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  p pg_proc;
  n int;
  names text[];
  types regtype[];
  sane text[];
  args text[];
  v text;
  exp text;
  before bigint;
BEGIN
  SELECT count(*) INTO before FROM rp_fuzz.log;
  SELECT * INTO p FROM pg_proc WHERE oid = fn;
  n := p.pronargs;
  FOR i IN 1 .. n LOOP
    types[i] := rp_fuzz.concrete(p.proargtypes[i - 1]);
    names[i] := coalesce(p.proargnames[i], '$' || i);
    sane[i] := rp_fuzz.sane_for(names[i], types[i]);
  END LOOP;
  -- A real lease under a name of this function, for the forged records.
  TRUNCATE rp_fuzz.real;
  INSERT INTO rp_fuzz.real SELECT rp_acquire('fz-real-' || p.proname, 600000);
  PERFORM setseed(seed);

  -- (a) one argument at a time
  FOR i IN 1 .. n LOOP
    FOREACH v IN ARRAY rp_fuzz.pool(types[i]) LOOP
      args := sane;
      args[i] := v;
      exp := rp_fuzz.expect_for(fn, names[i], types[i], v);
      PERFORM rp_fuzz.call(fn, 'one', i, args, exp);
    END LOOP;
  END LOOP;
  -- (b) trailing defaults omitted
  FOR k IN 1 .. p.pronargdefaults LOOP
    PERFORM rp_fuzz.call(fn, 'defaults', NULL, sane[1 : n - k], NULL);
  END LOOP;
  -- (c) all NULL
  IF n > 0 THEN
    PERFORM rp_fuzz.call(fn, 'nulls', NULL, array_fill('NULL'::text, ARRAY[n]),
                         CASE WHEN fn::text LIKE 'rp_fenced_read(%' THEN NULL ELSE '22004' END);
  END IF;
  -- (d) random combinations; the same seed gives the same calls
  FOR r IN 1 .. CASE WHEN n > 0 THEN nrandom ELSE least(nrandom, 50) END LOOP
    exp := NULL;
    FOR i IN 1 .. n LOOP
      args[i] := (SELECT x FROM unnest(rp_fuzz.pool(types[i])) x ORDER BY random() LIMIT 1);
      IF rp_fuzz.expect_for(fn, names[i], types[i], args[i]) IS NOT NULL THEN
        exp := 'error';    -- some argument is bad: any proper error, not a result
      END IF;
    END LOOP;
    PERFORM rp_fuzz.call(fn, 'random', NULL, args[1 : n], exp);
  END LOOP;
  PERFORM rp_release_all();
  RETURN (SELECT count(*) FROM rp_fuzz.log) - before;
END
$$;

-- rp_fence_guard: tables with the trigger declared in every way, right and
-- wrong, written with extreme tokens.  Logged under fn rp_fence_guard().
CREATE TABLE rp_fuzz.t8 (id int PRIMARY KEY, tok int8, v text);
CREATE TABLE rp_fuzz.t2 (id int PRIMARY KEY, tok int2, v text);
CREATE TABLE rp_fuzz.tt (id int PRIMARY KEY, tok text, v text);
CREATE TABLE rp_fuzz.tw (id int PRIMARY KEY, tok int8, v text);
CREATE TRIGGER g BEFORE INSERT OR UPDATE ON rp_fuzz.t8 FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('tok');
CREATE TRIGGER g BEFORE INSERT OR UPDATE ON rp_fuzz.t2 FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('tok', 'skip');
CREATE TRIGGER g BEFORE INSERT OR UPDATE ON rp_fuzz.tt FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('tok');
-- wrong declarations, one trigger each on tw, enabled one at a time
CREATE TABLE rp_fuzz.trig_defs (label text, ddl text);
INSERT INTO rp_fuzz.trig_defs VALUES
  ('after', 'AFTER INSERT OR UPDATE ON rp_fuzz.tw FOR EACH ROW EXECUTE FUNCTION rp_fence_guard(''tok'')'),
  ('statement', 'BEFORE INSERT OR UPDATE ON rp_fuzz.tw FOR EACH STATEMENT EXECUTE FUNCTION rp_fence_guard(''tok'')'),
  ('delete', 'BEFORE DELETE ON rp_fuzz.tw FOR EACH ROW EXECUTE FUNCTION rp_fence_guard(''tok'')'),
  ('noargs', 'BEFORE INSERT OR UPDATE ON rp_fuzz.tw FOR EACH ROW EXECUTE FUNCTION rp_fence_guard()'),
  ('3args', 'BEFORE INSERT OR UPDATE ON rp_fuzz.tw FOR EACH ROW EXECUTE FUNCTION rp_fence_guard(''tok'', ''skip'', ''x'')'),
  ('badmode', 'BEFORE INSERT OR UPDATE ON rp_fuzz.tw FOR EACH ROW EXECUTE FUNCTION rp_fence_guard(''tok'', ''SKIP'')'),
  ('nocol', 'BEFORE INSERT OR UPDATE ON rp_fuzz.tw FOR EACH ROW EXECUTE FUNCTION rp_fence_guard(''nope'')'),
  ('syscol', 'BEFORE INSERT OR UPDATE ON rp_fuzz.tw FOR EACH ROW EXECUTE FUNCTION rp_fence_guard(''ctid'')'),
  ('emptycol', 'BEFORE INSERT OR UPDATE ON rp_fuzz.tw FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('''')'),
  ('longcol', 'BEFORE INSERT OR UPDATE ON rp_fuzz.tw FOR EACH ROW EXECUTE FUNCTION rp_fence_guard(' || quote_literal(repeat('x', 10000)) || ')'),
  ('textcol', 'BEFORE INSERT OR UPDATE ON rp_fuzz.tw FOR EACH ROW EXECUTE FUNCTION rp_fence_guard(''v'')');

CREATE FUNCTION rp_fuzz.dml(label text, sql text, expect text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz := clock_timestamp();
  st text;
  msg text;
  det text;
BEGIN
  BEGIN
    EXECUTE sql;
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
    msg := msg || coalesce(' / ' || nullif(det, ''), '');
  END;
  INSERT INTO rp_fuzz.log (fn, mode, pos, args, sqlstate, message, result_null, ms, expect)
  VALUES ('rp_fence_guard()'::regprocedure, label, NULL, left(sql, 300), st, left(msg, 300),
          NULL, extract(epoch FROM clock_timestamp() - t0) * 1000, expect);
END
$$;

CREATE FUNCTION rp_fuzz.run_trigger(nrandom int, seed float8) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  before bigint;
  d record;
  toks text[] := ARRAY['NULL', '0', '-1', '1', '32767', '-32768', '32768', '2147483648',
                       '9223372036854775807', '(-9223372036854775807 - 1)'];
  tok text;
  tbl text;
BEGIN
  SELECT count(*) INTO before FROM rp_fuzz.log;
  PERFORM setseed(seed);
  -- declared right: every token as INSERT, then UPDATE over every stored one
  INSERT INTO rp_fuzz.t8 VALUES (1, 0, 'v');
  INSERT INTO rp_fuzz.t2 VALUES (1, 0, 'v');
  FOREACH tbl IN ARRAY ARRAY['rp_fuzz.t8', 'rp_fuzz.t2', 'rp_fuzz.tt'] LOOP
    FOREACH tok IN ARRAY toks LOOP
      -- tt's token column is text: the trigger refuses it (42804) first
      PERFORM rp_fuzz.dml('trigger-insert',
        format('INSERT INTO %s VALUES (1, %s, ''v'') ON CONFLICT (id) DO UPDATE SET tok = EXCLUDED.tok', tbl, tok),
        CASE WHEN tbl = 'rp_fuzz.tt' THEN '42804' WHEN tok = 'NULL' THEN '22004' END);
      PERFORM rp_fuzz.dml('trigger-update',
        format('UPDATE %s SET tok = %s, v = repeat(''é'', 1000) WHERE id = 1', tbl, tok),
        CASE WHEN tbl = 'rp_fuzz.tt' THEN NULL WHEN tok = 'NULL' THEN '22004' END);
    END LOOP;
  END LOOP;
  FOR r IN 1 .. nrandom LOOP
    tbl := (ARRAY['rp_fuzz.t8', 'rp_fuzz.t2', 'rp_fuzz.tt'])[1 + floor(random() * 3)::int];
    tok := toks[1 + floor(random() * array_length(toks, 1))::int];
    PERFORM rp_fuzz.dml('trigger-random',
      format('UPDATE %s SET tok = %s WHERE id = 1', tbl, tok), NULL);
  END LOOP;
  -- declared wrong: each definition in turn
  FOR d IN SELECT * FROM rp_fuzz.trig_defs LOOP
    INSERT INTO rp_fuzz.tw VALUES (1, 5, 'a') ON CONFLICT DO NOTHING;
    EXECUTE 'CREATE TRIGGER g ' || d.ddl;
    PERFORM rp_fuzz.dml('trigger-' || d.label, 'INSERT INTO rp_fuzz.tw VALUES (2, 1, ''b'')', NULL);
    PERFORM rp_fuzz.dml('trigger-' || d.label, 'UPDATE rp_fuzz.tw SET tok = 1 WHERE id = 1', NULL);
    PERFORM rp_fuzz.dml('trigger-' || d.label, 'DELETE FROM rp_fuzz.tw WHERE id = 2', NULL);
    EXECUTE 'DROP TRIGGER g ON rp_fuzz.tw';
    DELETE FROM rp_fuzz.tw;
  END LOOP;
  RETURN (SELECT count(*) FROM rp_fuzz.log) - before;
END
$$;
