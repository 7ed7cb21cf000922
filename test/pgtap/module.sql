-- The library as each PostgreSQL major shows it.  On 17 and later every
-- kind of wait has a name of its own (pg_wait_events, wait_event_type
-- Extension), registered by the postmaster when the library is preloaded,
-- so a monitor sees them before any backend waited.  On an older major the
-- check is skipped: there the waits are the one event Extension, which the
-- scenarios check (test/scenarios/tap.bash, wait_event).
BEGIN;
SELECT plan(1);

SELECT CASE WHEN current_setting('server_version_num')::int >= 170000 THEN
  set_eq(
    $$SELECT name FROM pg_wait_events WHERE type = 'Extension' AND name LIKE 'RedisPrimitives%'$$,
    ARRAY['RedisPrimitivesConnect', 'RedisPrimitivesReply', 'RedisPrimitivesLeaseWait',
          'RedisPrimitivesClusterRetry', 'RedisPrimitivesNotifier', 'RedisPrimitivesElector'],
    'pg_wait_events lists every wait of the extension by name, type Extension, registered at server start')
  ELSE skip('wait events named by an extension are PostgreSQL 17''s', 1) END;

SELECT * FROM finish();
ROLLBACK;
