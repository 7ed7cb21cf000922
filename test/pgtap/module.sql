-- The library as each PostgreSQL major shows it.  On 18 its magic block
-- names it and its version (pg_get_loaded_modules()).  On 17 and later
-- every kind of wait has a name of its own (pg_wait_events,
-- wait_event_type Extension), registered by the postmaster when the
-- library is preloaded, so a monitor sees them before any backend waited.
-- On an older major a check is skipped: there PostgreSQL has no such
-- thing (the waits are the one event Extension, which the scenarios check:
-- test/scenarios/tap.bash, wait_event).
BEGIN;
SELECT plan(2);

SELECT CASE WHEN current_setting('server_version_num')::int >= 180000 THEN
  results_eq(
    $$SELECT module_name, version FROM pg_get_loaded_modules()
      WHERE file_name = 'redis_primitives.so'$$,
    $$SELECT 'redis_primitives'::text, default_version::text
      FROM pg_available_extensions WHERE name = 'redis_primitives'$$,
    'pg_get_loaded_modules() names the library redis_primitives, at the version redis_primitives.control installs')
  ELSE skip('pg_get_loaded_modules() is PostgreSQL 18''s', 1) END;

SELECT CASE WHEN current_setting('server_version_num')::int >= 170000 THEN
  set_eq(
    $$SELECT name FROM pg_wait_events WHERE type = 'Extension' AND name LIKE 'RedisPrimitives%'$$,
    ARRAY['RedisPrimitivesConnect', 'RedisPrimitivesReply', 'RedisPrimitivesLeaseWait',
          'RedisPrimitivesClusterRetry', 'RedisPrimitivesNotifier', 'RedisPrimitivesElector'],
    'pg_wait_events lists every wait of the extension by name, type Extension, registered at server start')
  ELSE skip('wait events named by an extension are PostgreSQL 17''s', 1) END;

SELECT * FROM finish();
ROLLBACK;
