-- test/setup.sql: helpers for the pgTAP suites, installed by scripts/test.sh
-- into the test database only.  rp_test.redis(args...) runs redis-cli against
-- the test Redis and returns its raw output: the tests use it to do the naive
-- thing (a plain DEL, INCR + EXPIRE, deleting the fence counter) beside the
-- primitive, so every failure test can show the naive version failing.
CREATE SCHEMA rp_test;

CREATE FUNCTION rp_test.redis(VARIADIC args text[]) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  cmd text := 'redis-cli --raw -p ' || current_setting('rp_test.redis_port');
  a text;
  result text;
BEGIN
  FOREACH a IN ARRAY args LOOP
    cmd := cmd || ' ''' || replace(a, '''', '''\''''') || '''';
  END LOOP;
  CREATE TEMP TABLE IF NOT EXISTS rp_test_out (line text);
  TRUNCATE rp_test_out;
  EXECUTE format('COPY rp_test_out FROM PROGRAM %L WITH (FORMAT text, DELIMITER %L)',
                 cmd || ' 2>&1', E'\x01');
  SELECT string_agg(line, E'\n') INTO result FROM rp_test_out;
  RETURN result;
END
$$;

-- The key of a lock name, as the extension builds it.
CREATE FUNCTION rp_test.key(name text, suffix text) RETURNS text
LANGUAGE sql AS $$
  SELECT current_setting('redis_primitives.key_prefix') || '{' || name || '}:' || suffix
$$;

-- How many keys matching pattern (after the key prefix) have no TTL.
CREATE FUNCTION rp_test.keys_without_ttl(pattern text) RETURNS bigint
LANGUAGE sql AS $$
  SELECT count(*) FROM regexp_split_to_table(
    rp_test.redis('--scan', '--pattern', current_setting('redis_primitives.key_prefix') || pattern), E'\n') k
  WHERE k <> '' AND rp_test.redis('PTTL', k) = '-1'
$$;

-- An error's SQLSTATE, message, detail and hint; all NULL when q succeeded.
CREATE FUNCTION rp_test.refusal(q text, OUT code text, OUT msg text, OUT detail text, OUT hint text)
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                          detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
END
$$;
