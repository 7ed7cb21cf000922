// traps.js -- the traps a node-postgres application meets, each shown
// failing the naive way and working the documented way
// (docs/applications.md).  Prints one "name value" line per observation.
'use strict';
const pg = require('pg');
const { Pool, Client } = pg;

const out = (k, v) => console.log(`${k} ${v}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function held(pool, name) {
  return (await pool.query('SELECT held FROM rp_lock_info($1)', [name])).rows[0].held;
}

async function main() {
  const pool = new Pool({ max: 8 });

  // 1. Session leases through pool.query: acquire and release each go to
  // whichever backend is idle.  16 workers on a pool of 8.
  async function cycles(release) {
    let lost = 0;
    await Promise.all(Array.from({ length: 16 }, async (_, w) => {
      for (let i = 0; i < 5; i++) {
        const name = `trap1-${release}-${w}-${i}`;
        const { rows: [l] } = await pool.query('SELECT * FROM rp_acquire($1, 3000)', [name]);
        const r = release === 'name'
          ? await pool.query('SELECT rp_release($1) AS ok', [name])
          : await pool.query('SELECT rp_release($1, $2) AS ok', [name, l.token]);
        if (!r.rows[0].ok) lost++;
      }
    }));
    return lost;
  }
  pool.on('error', () => {});
  const notices = [];
  pool.on('connect', (c) => c.on('notice', (n) => notices.push(n.message)));
  out('pool_release_by_name_failed', await cycles('name'));     // of 80
  out('pool_release_warnings', notices.filter((m) => m.startsWith('this session holds no lease')).length > 0);
  out('pool_release_by_token_failed', await cycles('token'));   // of 80

  // Two clients, deterministically different backends.
  const c1 = await pool.connect(), c2 = await pool.connect();
  const { rows: [l1] } = await c1.query('SELECT * FROM rp_acquire($1, 10000)', ['trap1']);
  out('release_by_name_on_other_backend', (await c2.query('SELECT rp_release($1) AS ok', ['trap1'])).rows[0].ok);
  out('still_held', await held(c2, 'trap1'));
  out('release_by_token_on_other_backend', (await c2.query('SELECT rp_release($1, $2) AS ok', ['trap1', l1.token])).rows[0].ok);

  // 2. The lease as one value is an unparsed string (a composite type);
  // handed back as $1 it resolves to rp_release(text): false.
  const { rows: [{ lease }] } = await c1.query('SELECT rp_acquire($1, 10000) AS lease', ['trap2']);
  out('composite_typeof', typeof lease);
  out('composite_release_untyped', (await c1.query('SELECT rp_release($1) AS ok', [lease])).rows[0].ok);
  out('composite_release_cast', (await c1.query('SELECT rp_release($1::rp_lease) AS ok', [lease])).rows[0].ok);

  // 3. bigints arrive as strings: '9' < '10' is false.
  const f9 = (await c1.query('SELECT * FROM rp_acquire($1, 10000, 0, 8)', ['trap3'])).rows[0];
  await c1.query('SELECT rp_release($1, $2)', ['trap3', f9.token]);
  const f10 = (await c1.query('SELECT * FROM rp_acquire($1, 10000)', ['trap3'])).rows[0];
  await c1.query('SELECT rp_release($1, $2)', ['trap3', f10.token]);
  out('fence_typeof', typeof f9.fence);
  out('fence_string_compare', `${f9.fence}<${f10.fence}=${f9.fence < f10.fence}`);
  out('fence_bigint_compare', `${f9.fence}<${f10.fence}=${BigInt(f9.fence) < BigInt(f10.fence)}`);

  // 4. "Not acquired" is one row of NULLs, not zero rows.
  await c1.query('SELECT * FROM rp_acquire($1, 10000)', ['trap4']);
  const busy = await c2.query('SELECT * FROM rp_acquire($1, 10000)', ['trap4']);
  out('not_acquired_rows', busy.rows.length);
  out('not_acquired_token_null', busy.rows[0].token === null);
  const filtered = await c2.query('SELECT * FROM rp_acquire($1, 10000) WHERE token IS NOT NULL', ['trap4']);
  out('not_acquired_filtered_rows', filtered.rows.length);
  await c1.query('SELECT rp_release_all()');

  // 5. SELECT (rp_acquire(...)).* calls the function once per column.
  await c1.query("SET track_functions = 'all'");
  const countSql = "SELECT coalesce(sum(calls), 0)::int AS n FROM pg_stat_xact_user_functions WHERE funcname = 'rp_acquire'";
  const calls = async (sql, name) => {
    await c1.query('BEGIN');
    const before = (await c1.query(countSql)).rows[0].n;
    await c1.query(sql, [name]);
    const after = (await c1.query(countSql)).rows[0].n;
    await c1.query('COMMIT');
    await c1.query('SELECT rp_release_all()');
    return after - before;
  };
  out('calls_star_expansion', await calls('SELECT (rp_acquire($1, 10000)).*', 'trap5a'));
  out('calls_select_from', await calls('SELECT * FROM rp_acquire($1, 10000)', 'trap5b'));

  // 2b. Select the lease's columns instead: token a string, fence a bigint
  // (a string, see 3), expires_at a Date.
  const { rows: [cols] } = await c1.query('SELECT token, fence, expires_at FROM rp_acquire($1, 10000)', ['trap2c']);
  out('columns_types', `${typeof cols.token} ${typeof cols.fence} ${cols.expires_at instanceof Date ? 'Date' : typeof cols.expires_at}`);
  await c1.query('SELECT rp_release($1, $2)', ['trap2c', cols.token]);

  // 3b. int8 as BigInt, for one client (pg.types.setTypeParser(20, BigInt)
  // does the same for the whole process): fences compare right and pass back
  // as parameters; JSON.stringify refuses a BigInt.  parseInt instead would
  // silently round int8 above 2^53.
  const typed = (parse) => new Client({ types: { getTypeParser: (oid, fmt) =>
    (oid === 20 ? parse : pg.types.getTypeParser(oid, fmt)) } });
  const cb = typed(BigInt);
  await cb.connect();
  const b9 = (await cb.query('SELECT token, fence FROM rp_acquire($1, 10000, 0, 98)', ['trap3b'])).rows[0];
  await cb.query('SELECT rp_release($1, $2)', ['trap3b', b9.token]);
  const b10 = (await cb.query('SELECT token, fence FROM rp_acquire($1, 10000, 0, $2)', ['trap3b', b9.fence])).rows[0];
  await cb.query('SELECT rp_release($1, $2)', ['trap3b', b10.token]);
  out('fence_bigint_parser', `${typeof b9.fence} ${b9.fence}<${b10.fence}=${b9.fence < b10.fence}`);
  let json;
  try { json = JSON.stringify(b9); } catch (e) { json = e.constructor.name; }
  out('fence_bigint_json', json);
  await cb.end();
  const cp = typed(parseInt);
  await cp.connect();
  out('int8_parseint_exact', String((await cp.query('SELECT 9007199254740993::int8 AS n')).rows[0].n) === '9007199254740993');
  await cp.end();

  // 5b. SELECT (rp_ratelimit_consume(...)).* consumes once per column.
  const units = async (sql, key) => {
    await c1.query('SELECT rp_ratelimit_reset($1)', [key]);
    await c1.query(sql, [key]);
    return 100 - Number((await c1.query('SELECT remaining FROM rp_ratelimit_peek($1, 100, 60000)', [key])).rows[0].remaining);
  };
  out('ratelimit_star_units', await units('SELECT (rp_ratelimit_consume($1, 100, 60000)).*', 'trap5c'));
  out('ratelimit_from_units', await units('SELECT * FROM rp_ratelimit_consume($1, 100, 60000)', 'trap5d'));

  // 5c. The limiter beside a query with a FROM runs once per row: no row, no
  // limit; in WHERE, once per row scanned.  In FROM it runs once.
  await c1.query('CREATE TEMP TABLE trap_item AS SELECT g AS id FROM generate_series(1, 10) g');
  out('ratelimit_select_list_no_rows_units',
      await units('SELECT rp_ratelimit($1, 100, 60000) AS ok, id FROM trap_item WHERE id = 99', 'trap5e'));
  out('ratelimit_where_units', await units('SELECT id FROM trap_item WHERE rp_ratelimit($1, 100, 60000)', 'trap5f'));
  out('ratelimit_in_from_units', await units(
    `SELECT rl.allowed, q.id FROM rp_ratelimit($1, 100, 60000) AS rl(allowed)
     LEFT JOIN LATERAL (SELECT id FROM trap_item WHERE rl.allowed OFFSET 0) q ON true`, 'trap5g'));

  // 5d. A multi-statement string that fails after its BEGIN leaves the
  // transaction open and aborted on that connection: the next query on it
  // fails (25P02) until a ROLLBACK.  pool.query discards such a client.
  await c1.query('DROP TABLE IF EXISTS trap_fenced');
  await c1.query('CREATE TABLE trap_fenced (id int PRIMARY KEY, fence_token bigint NOT NULL DEFAULT 0)');
  await c1.query(`CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON trap_fenced
                  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=trap5h', 'xact')`);
  const noLease = "BEGIN; SELECT token FROM rp_acquire_xact('trap5h', 5000); INSERT INTO trap_fenced VALUES (1); COMMIT";
  await c2.query("SELECT token FROM rp_acquire('trap5h', 10000)");   // held elsewhere: the guard refuses
  let code;
  try { await c1.query(noLease); } catch (e) { code = e.code; }
  let next;
  try { await c1.query('SELECT 1'); next = 'ok'; } catch (e) { next = e.code; }
  out('multi_statement_failed_then', `${code} ${next}`);
  await c1.query('ROLLBACK');
  out('multi_statement_after_rollback', (await c1.query('SELECT 1 AS one')).rows[0].one === 1);
  // The same string without BEGIN and COMMIT is one implicit transaction:
  // the failure rolls it back and leaves the connection clean.
  try { await c1.query(noLease.replace('BEGIN; ', '').replace('; COMMIT', '')); } catch (e) { code = e.code; }
  try { await c1.query('SELECT 1'); next = 'ok'; } catch (e) { next = e.code; }
  out('multi_statement_implicit_failed_then', `${code} ${next}`);
  await c2.query('SELECT rp_release_all()');
  c1.release(); c2.release();

  // 6. A client-side timeout does not stop a waiting rp_acquire.  A holder
  // keeps 'trap6' until it lets go; the waiter is willing to wait a minute.
  const holder = await pool.connect();
  const hf = (await holder.query('SELECT fence FROM rp_acquire($1, 60000)', ['trap6'])).rows[0].fence;
  const waiter = new Client({ query_timeout: 300 });
  waiter.on('error', () => {});
  await waiter.connect();
  const wpid = (await waiter.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  let err;
  try { await waiter.query('SELECT * FROM rp_acquire($1, 60000, 60000)', ['trap6']); } catch (e) { err = e; }
  // Only the client's timer could end the wait while the holder held on.
  out('query_timeout_rejected_while_held', await held(holder, 'trap6'));
  out('query_timeout_error', err ? err.message : 'none');
  // The holder lets go; does the abandoned wait take the lock?
  await holder.query('SELECT rp_release($1)', ['trap6']);
  const newer = async () => (await holder.query(
    'SELECT coalesce(fence > $2, false) AS taken FROM rp_lock_info($1)', ['trap6', hf])).rows[0].taken;
  for (let i = 0; i < 300 && !(await newer()); i++) await sleep(100);
  const owner = await holder.query(
    'SELECT (SELECT count(*) FROM pg_stat_activity WHERE pid = $1)::int AS alive', [wpid]);
  out('query_timeout_lock_taken_anyway', await newer());
  out('query_timeout_waiter_backend_alive', owner.rows[0].alive === 1);
  await waiter.end();
  for (let i = 0; i < 300 && await held(holder, 'trap6'); i++) await sleep(100);
  out('released_when_connection_closed', !(await held(holder, 'trap6')));

  // statement_timeout: the server ends the wait and nothing is taken.  The
  // holder holds on until the wait has ended, and the wait would give up by
  // itself only after 20 s: the timeout is the one thing that can end it.
  out('statement_timeout_holder', (await holder.query('SELECT fence FROM rp_acquire($1, 60000)', ['trap6b'])).rows[0].fence !== null);
  const waiter2 = new Client({ statement_timeout: 300 });
  await waiter2.connect();
  err = undefined;
  try { await waiter2.query('SELECT * FROM rp_acquire($1, 60000, 20000)', ['trap6b']); } catch (e) { err = e; }
  out('statement_timeout_code', err ? err.code : 'none');
  out('statement_timeout_ended_while_held', await held(holder, 'trap6b'));
  await holder.query('SELECT rp_release($1)', ['trap6b']);
  await sleep(1000);   // a wait going on behind the client's back would take it now
  out('statement_timeout_lock_taken', await held(holder, 'trap6b'));
  out('statement_timeout_session_leases', (await waiter2.query('SELECT count(*)::int AS n FROM rp_leases()')).rows[0].n);
  await waiter2.end();
  holder.release();
  await pool.end();
}

main().catch((e) => { console.error(e); process.exit(1); });
