-- Leases through a connection pool: the acquire runs on one backend and the
-- release or extend on whichever backend the pool hands out next.  "Another
-- backend" is a dblink connection here.  The naive twin is rp_release(name),
-- which only knows the leases of its own session.
BEGIN;
SELECT plan(31);

CREATE EXTENSION IF NOT EXISTS dblink;
SELECT dblink_connect('other', format('dbname=%s host=%s port=%s user=%s',
       current_database(), current_setting('unix_socket_directories'),
       current_setting('port'), current_user));

CREATE TEMP TABLE taken AS
SELECT * FROM dblink('other', $$SELECT name, token, fence, expires_at FROM rp_acquire('pool-a', 10000)$$)
  AS t(name text, token text, fence bigint, expires_at timestamptz);
SELECT ok((SELECT fence FROM taken) IS NOT NULL, 'another backend takes pool-a');

-- The naive twin: release by name on a backend that did not acquire.
SELECT is(rp_release('pool-a'), false, 'rp_release(name) on another backend releases nothing');
SELECT is((rp_lock_info('pool-a')).held, true, '... and the lock stays held until its TTL');

-- By token, from any backend.
-- One hex digit changed (a token that already starts with 'f' gets 'e'):
-- a fixed 'f' would equal the real token once in sixteen runs.
SELECT is(rp_release('pool-a', (SELECT CASE WHEN left(token, 1) = 'f' THEN 'e' ELSE 'f' END
                                       || substr(token, 2) FROM taken)), false,
          'a wrong token releases nothing');
SELECT is(rp_release('pool-a', 'short'), false, 'a token of the wrong shape releases nothing');
SELECT is((rp_lock_info('pool-a')).held, true, 'pool-a is still held');
SELECT is(rp_release('pool-a', (SELECT token FROM taken)), true,
          'rp_release(name, token) releases it from this backend');
SELECT is((rp_lock_info('pool-a')).held, false, 'pool-a is free');
SELECT is(rp_release('pool-a', (SELECT token FROM taken)), false, 'a second release is false');
SELECT is((SELECT count(*) FROM dblink('other', 'SELECT name FROM rp_leases()') AS t(name text)),
          0::bigint, 'the acquiring backend no longer lists it (told through rp_locks, no round trip)');
SELECT is((SELECT r FROM dblink('other', $$SELECT rp_release('pool-a')$$) AS t(r boolean)),
          false, '... and its own rp_release(name) then answers false');

-- Extend by token from another backend: same fence, new deadline.
TRUNCATE taken;
INSERT INTO taken
SELECT * FROM dblink('other', $$SELECT name, token, fence, expires_at FROM rp_acquire('pool-b', 1000)$$)
  AS t(name text, token text, fence bigint, expires_at timestamptz);
CREATE TEMP TABLE ext AS SELECT * FROM rp_extend('pool-b', (SELECT token FROM taken), 60000);
SELECT is((SELECT fence FROM ext), (SELECT fence FROM taken), 'rp_extend(name, token, ttl) keeps the fence');
SELECT is((SELECT token FROM ext), (SELECT token FROM taken), '... and the token');
SELECT ok((rp_lock_info('pool-b')).ttl_ms > 30000, 'Redis now holds it for the new TTL');
SELECT ok((SELECT expires_at FROM ext) > clock_timestamp() + interval '50 s', 'expires_at is ttl_ms from now');
SELECT is(rp_extend('pool-b', (SELECT CASE WHEN left(token, 1) = 'f' THEN 'e' ELSE 'f' END
                                       || substr(token, 2) FROM taken), 60000), NULL,
          'a wrong token extends nothing: NULL');
SELECT is(rp_release('pool-b', (SELECT token FROM taken)), true, 'and the right token releases it');
SELECT is(rp_extend('pool-b', (SELECT token FROM taken), 60000), NULL, 'a released lease cannot be extended');
SELECT dblink_disconnect('other');

-- This session's registry stays consistent with what it does by token.
CREATE TEMP TABLE mine AS SELECT * FROM rp_acquire('pool-c', 1000);
SELECT ok((SELECT expires_at FROM rp_extend('pool-c', (SELECT token FROM mine), 60000))
          = (SELECT expires_at FROM rp_leases() WHERE name = 'pool-c'),
          'extend by token moves the deadline rp_leases() shows');
-- A wrong token is compared with the session's own lease too: the registry
-- must not stand in for the caller's token (mutant 63).
SELECT is(rp_extend('pool-c', (SELECT CASE WHEN left(token, 1) = 'f' THEN 'e' ELSE 'f' END
                                       || substr(token, 2) FROM mine), 60000), NULL,
          'a wrong token does not extend the lease this session holds');
SELECT is(rp_release('pool-c', (SELECT CASE WHEN left(token, 1) = 'f' THEN 'e' ELSE 'f' END
                                        || substr(token, 2) FROM mine)), false,
          'a wrong token does not release the lease this session holds');
SELECT is((rp_lock_info('pool-c')).held, true, '... Redis still holds it');
SELECT is((SELECT count(*) FROM rp_leases() WHERE name = 'pool-c'), 1::bigint,
          '... and the registry still lists it');
SELECT is(rp_release('pool-c', (SELECT token FROM mine)), true, 'release by token of our own lease');
SELECT is((SELECT count(*) FROM rp_leases() WHERE name = 'pool-c'), 0::bigint,
          '... forgets it in the registry');

-- Same argument rules as the rest.
SELECT throws_ok($$SELECT rp_release(NULL::text, 'x')$$, '22004', NULL, 'NULL name: 22004');
SELECT throws_ok($$SELECT rp_release('x', NULL::text)$$, '22004', NULL, 'NULL token: 22004');
SELECT throws_ok($$SELECT rp_release('', 'x')$$, '22023', NULL, 'empty name: 22023');
SELECT throws_ok($$SELECT rp_extend('x', '', 1000)$$, '22023', NULL, 'empty token: 22023');
SELECT throws_ok($$SELECT rp_extend('x', 'y', 0)$$, '22023', NULL, 'ttl 0: 22023');
SELECT throws_ok($$SELECT rp_extend('x', 'y', NULL)$$, '22004', NULL, 'NULL ttl: 22004');

SELECT * FROM finish();
ROLLBACK;
