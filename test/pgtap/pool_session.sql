-- Session leases behind a transaction pool.  A role that connects through
-- transaction pooling gets redis_primitives.session_leases = off
-- (docs/applications.md): every acquire whose lease or permit the database
-- session would hold must then fail (55000) before anything is sent to
-- Redis, with a hint naming the _xact form, because the pool hands the
-- backend, and with it the session's leases, to the next client.  The naive
-- twin is the setting as it stood in 1.1: it refused rp_acquire and
-- rp_acquire_all but let rp_semaphore_acquire take a session permit, which
-- the next transaction on that backend (another client's) still holds.
-- "Another transaction on the pooled backend" is a dblink connection here.
BEGIN;
SELECT plan(38);

-- How many of a name's keys (lock, permits, queue, heartbeats, fence) exist.
CREATE FUNCTION pg_temp.keys(name text) RETURNS text
LANGUAGE sql AS $$
  SELECT rp_test.redis('EXISTS', rp_test.key(name, 'lock'), rp_test.key(name, 'sem'),
                       rp_test.key(name, 'semq'), rp_test.key(name, 'semw'),
                       rp_test.key(name, 'fence'))
$$;
CREATE TEMP TABLE r (what text PRIMARY KEY, code text, msg text, detail text, hint text);

SET LOCAL redis_primitives.session_leases = off;

-- rp_semaphore_acquire: its permit belongs to the session, like rp_acquire's lease.
INSERT INTO r SELECT 'sem', * FROM rp_test.refusal($$SELECT rp_semaphore_acquire('pses-a', 2, 10000)$$);
SELECT is((SELECT code FROM r WHERE what = 'sem'), '55000',
          'session_leases = off: rp_semaphore_acquire is refused (55000)');
SELECT is((SELECT msg FROM r WHERE what = 'sem'), 'session permits are disabled for this session',
          '... with a message that names the permit');
SELECT ok((SELECT detail LIKE '%redis_primitives.session_leases is off%session permit of semaphore "pses-a"%'
           FROM r WHERE what = 'sem'), '... a detail naming the setting and the semaphore');
SELECT ok((SELECT hint LIKE 'Take the permit with rp_semaphore_acquire_xact inside a transaction%'
           FROM r WHERE what = 'sem'), '... and a hint naming rp_semaphore_acquire_xact');
SELECT is(pg_temp.keys('pses-a'), '0', 'nothing was sent to Redis: no key of the semaphore exists');
SELECT is((SELECT count(*) FROM rp_leases() WHERE name = 'pses-a'), 0::bigint,
          'and the session''s registry holds nothing of it');

-- A semaphore in use by another holder, one permit free: the refusal takes
-- no permit, no queue place, no fence, waiting or not.
SELECT rp_test.redis('ZADD', rp_test.key('pses-b', 'sem'), '99999999999999', 'sother1');
SELECT rp_test.redis('SET', rp_test.key('pses-b', 'fence'), '7');
INSERT INTO r SELECT 'sem-wait', * FROM rp_test.refusal($$SELECT rp_semaphore_acquire('pses-b', 2, 10000, 300)$$);
SELECT is((SELECT code FROM r WHERE what = 'sem-wait'), '55000',
          'rp_semaphore_acquire with wait_ms and a permit free is refused too');
SELECT is((SELECT in_use FROM rp_semaphore_info('pses-b')), 1, 'the permit count is unchanged: the other holder only');
SELECT is((SELECT last_fence FROM rp_semaphore_info('pses-b')), 7::bigint, 'no fence was issued');
SELECT is(rp_test.redis('EXISTS', rp_test.key('pses-b', 'semq'), rp_test.key('pses-b', 'semw')), '0',
          'no place in the queue was taken');
INSERT INTO r SELECT 'sem-null', * FROM rp_test.refusal($$SELECT rp_semaphore_acquire('pses-b', NULL, 10000)$$);
SELECT is((SELECT code FROM r WHERE what = 'sem-null'), '22004', 'bad input is still its own error (22004)');

-- The transaction-scoped form works with the setting off.
CREATE TEMP TABLE x AS SELECT * FROM rp_semaphore_acquire_xact('pses-a', 2, 10000);
SELECT ok((SELECT fence > 0 FROM x), 'rp_semaphore_acquire_xact takes a permit with the setting off');
SELECT is((SELECT in_use FROM rp_semaphore_info('pses-a')), 1, '... which Redis counts');

-- rp_acquire and rp_acquire_all: refused, each hint naming its own _xact form.
INSERT INTO r SELECT 'lock', * FROM rp_test.refusal($$SELECT rp_acquire('pses-l', 10000)$$);
SELECT is((SELECT code || ' ' || msg FROM r WHERE what = 'lock'), '55000 session leases are disabled for this session',
          'rp_acquire is refused (55000)');
SELECT ok((SELECT hint LIKE 'Take the lease with rp_acquire_xact %' FROM r WHERE what = 'lock'),
          '... with a hint naming rp_acquire_xact');
SELECT is(pg_temp.keys('pses-l'), '0', '... and nothing in Redis');
INSERT INTO r SELECT 'all', * FROM rp_test.refusal($$SELECT rp_acquire_all(ARRAY['pses-m', 'pses-n'], 10000)$$);
SELECT is((SELECT code || ' ' || msg FROM r WHERE what = 'all'), '55000 session leases are disabled for this session',
          'rp_acquire_all is refused (55000)');
SELECT ok((SELECT hint LIKE 'Take the leases with rp_acquire_all_xact %' FROM r WHERE what = 'all'),
          '... with a hint naming rp_acquire_all_xact, not rp_acquire_xact');
SELECT is(pg_temp.keys('pses-m') || pg_temp.keys('pses-n'), '00', '... and nothing in Redis');
SELECT is(array_length(rp_acquire_all_xact(ARRAY['pses-m', 'pses-n'], 10000), 1), 2,
          'rp_acquire_all_xact works with the setting off');
SELECT isnt(rp_acquire_xact('pses-l', 10000), NULL, 'and rp_acquire_xact');

-- Leadership is not a session lease: it belongs to node_id, and any
-- backend can renew or resign it (rp_campaign keeps no session registry).
SELECT isnt(rp_campaign('pses-e', 'node-1', 10000), NULL,
            'rp_campaign is not refused: leadership belongs to a node_id, not the session');

-- The pooled backend: the setting for the session, as ALTER ROLE sets it.
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT dblink_connect('pooled', format('dbname=%s host=%s port=%s user=%s',
       current_database(), current_setting('unix_socket_directories'),
       current_setting('port'), current_user));
SELECT dblink_exec('pooled', 'SET redis_primitives.session_leases = off');
INSERT INTO r SELECT 'pooled', * FROM rp_test.refusal(
  $$SELECT * FROM dblink('pooled', $q$SELECT token FROM rp_semaphore_acquire('pses-c', 1, 10000)$q$) AS t(token text)$$);
SELECT is((SELECT code FROM r WHERE what = 'pooled'), '55000', 'the pooled backend: rp_semaphore_acquire is refused');
SELECT is((SELECT count(*) FROM dblink('pooled', 'SELECT name FROM rp_leases()') AS t(name text)), 0::bigint,
          '... so the next transaction on that backend inherits no permit');
SELECT is((SELECT in_use FROM rp_semaphore_info('pses-c')), 0, '... and Redis holds none');
-- rp_semaphore_acquire_xact there: held for the transaction, gone at its end.
SELECT dblink_exec('pooled', 'BEGIN');
SELECT ok((SELECT fence > 0 FROM dblink('pooled', $q$SELECT fence FROM rp_semaphore_acquire_xact('pses-c', 1, 10000)$q$)
           AS t(fence bigint)), 'the pooled backend takes a permit with rp_semaphore_acquire_xact');
SELECT is((SELECT in_use FROM rp_semaphore_info('pses-c')), 1, '... held while its transaction runs');
SELECT dblink_exec('pooled', 'COMMIT');
SELECT is((SELECT in_use FROM rp_semaphore_info('pses-c')), 0, '... and released at its COMMIT');
SELECT is((SELECT count(*) FROM dblink('pooled', 'SELECT name FROM rp_leases()') AS t(name text)), 0::bigint,
          '... so the next transaction on that backend holds nothing');
SELECT is((SELECT r FROM dblink('pooled', $q$SELECT rp_resign('pses-e', 'node-1')$q$) AS t(r boolean)), true,
          'leadership taken by one backend is resigned from another: it was never the session''s');

-- The hazard the setting is for, on a backend without it: a session permit
-- taken by one transaction is still held by the next (another client's,
-- behind a transaction pool), with the permit counted in Redis.
SELECT dblink_exec('pooled', 'RESET redis_primitives.session_leases');
SELECT ok((SELECT token IS NOT NULL FROM dblink('pooled', $q$SELECT token FROM rp_semaphore_acquire('pses-d', 1, 10000)$q$)
           AS t(token text)), 'without the setting, rp_semaphore_acquire takes a session permit');
SELECT is((SELECT count(*) FROM dblink('pooled', $q$SELECT name FROM rp_leases() WHERE name = 'pses-d'$q$) AS t(name text)),
          1::bigint, '... which the backend''s next transaction still holds');
SELECT is((SELECT in_use FROM rp_semaphore_info('pses-d')), 1, '... and Redis counts it: the semaphore''s only permit');
SELECT is((SELECT n FROM dblink('pooled', 'SELECT rp_release_all()') AS t(n int)), 1, 'rp_release_all ends it');
SELECT dblink_disconnect('pooled');

-- Back on, in this session: the session forms work again.
RESET redis_primitives.session_leases;
SELECT ok((SELECT fence > 0 FROM rp_semaphore_acquire('pses-f', 1, 10000)), 'setting back on: rp_semaphore_acquire works');
SELECT ok((SELECT fence > 0 FROM rp_acquire('pses-g', 10000)), 'and rp_acquire');
SELECT is(rp_release('pses-f') AND rp_release('pses-g'), true, 'both are the session''s to release');
SELECT is((SELECT in_use FROM rp_semaphore_info('pses-f')), 0, 'and are released');

SELECT * FROM finish();
ROLLBACK;
