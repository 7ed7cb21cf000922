// worker.js -- a fenced worker: deposits into accounts, each under a lease,
// each deposit ONE round trip from the application.
//
// The table's lock-bound guard, rp_fence_guard('fence_token',
// 'lock=account-{id}', 'xact'), lets a row of account N be written only by a
// transaction holding a live lease on 'account-N' (else RP004) and sets
// fence_token from that lease itself: the writer passes no token, cannot
// forget one, and a write without a lease is refused.  So the lease, the
// write, the commit and the release can all go in one message:
//
//   deposit()              the fast form: one NAMED statement with parameters,
//                          WITH lease AS (SELECT ... FROM rp_acquire_xact($1, ...))
//                          UPDATE ... FROM lease -- zero rows: not acquired.
//                          Named, node-postgres prepares it once per pooled
//                          connection and PostgreSQL runs its cached plan; the
//                          same text unnamed is parsed and planned at every
//                          call, which bench/apps measured at 1.45x its time.
//   depositString()        one multi-statement string through pool.query:
//                          BEGIN; SELECT token, fence FROM rp_acquire_xact(...);
//                          UPDATE ...; COMMIT -- any number of statements, for
//                          a transaction that needs more than one, or a pool
//                          that cannot keep prepared statements (PgBouncer in
//                          transaction mode before 1.21, or without
//                          max_prepared_statements).  A string of several
//                          statements cannot carry $1 parameters: literals go
//                          through pg.escapeLiteral.
//
// What not to do: check out a client and send BEGIN, SELECT * FROM
// rp_acquire_xact(...), UPDATE and COMMIT as four queries.  It is correct,
// but it waits for four round trips where one does, and holds the lease (and
// a pooled connection) across all four (bench/apps measures the difference).
'use strict';
const pg = require('pg');

const pool = new pg.Pool({ max: 4, statement_timeout: 15000 });   // PG* from the environment

async function setup() {
  await pool.query(`CREATE TABLE IF NOT EXISTS example_account (
      id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0, fence_token bigint NOT NULL DEFAULT 0)`);
  await pool.query(`CREATE OR REPLACE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON example_account
      FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=account-{id}', 'xact')`);
  await pool.query('TRUNCATE example_account');
  // Even the first INSERT of a row needs its lease: the same one-string form.
  await pool.query(`BEGIN;
    SELECT rp_acquire_xact('account-' || i, 5000, 10000) FROM generate_series(1, 3) i;
    INSERT INTO example_account (id) SELECT generate_series(1, 3);
    COMMIT`);
}

// One round trip, one named statement: the lease (waiting up to waitMs), the
// guarded write, the commit that releases it.  Returns the fence the write
// carries, or null when the lease was not had (zero rows: nothing written).
const DEPOSIT = {
  name: 'deposit',
  text: `WITH lease AS (SELECT token, fence FROM rp_acquire_xact($1, 5000, $4))
     UPDATE example_account a SET balance = a.balance + $2
     FROM lease WHERE a.id = $3 AND lease.token IS NOT NULL
     RETURNING lease.fence, a.fence_token`,
};
async function deposit(id, amount, waitMs = 10000) {
  const { rows } = await pool.query(DEPOSIT, [`account-${id}`, amount, id, waitMs]);
  if (rows.length === 0) return null;
  return rows[0].fence_token === rows[0].fence ? rows[0].fence : 'mismatch';   // bigints: strings
}

// The same as one string of four statements.  Returns the fence, or null
// when the lease was not had: the guard then refused the UPDATE (RP004),
// which ends the string; pool.query hands back no connection whose
// transaction was left open by the failure (pg-pool discards a client whose
// query failed).
async function depositString(id, amount, waitMs = 10000) {
  if (!Number.isInteger(id) || !Number.isInteger(amount)) throw new TypeError('integers only');
  const name = pg.escapeLiteral(`account-${id}`);
  try {
    const r = await pool.query(`BEGIN;
      SELECT token, fence FROM rp_acquire_xact(${name}, 5000, ${waitMs});
      UPDATE example_account SET balance = balance + ${amount} WHERE id = ${id} RETURNING fence_token;
      COMMIT`);
    const [lease, written] = [r[1].rows[0], r[2].rows[0]];
    return written.fence_token === lease.fence ? lease.fence : 'mismatch';   // bigints: strings
  } catch (e) {
    if (e.code === 'RP004') return null;   // no lease: not acquired within waitMs (or it ran out)
    throw e;
  }
}

async function main() {
  await setup();
  let ok = 0, attempts = 0, fenceMatches = true;
  const worker = async (w) => {
    for (let i = 0; i < 12; i++) {
      attempts++;
      const id = 1 + ((w + i) % 3);
      const fence = await (w % 2 ? depositString(id, 1) : deposit(id, 1));
      if (fence === 'mismatch') fenceMatches = false;
      else if (fence !== null) ok++;
    }
  };
  await Promise.all(Array.from({ length: 8 }, (_, w) => worker(w)));
  const { rows } = await pool.query(
    'SELECT sum(balance)::int AS total, min(fence_token) > 0 AS fenced FROM example_account');
  console.log(`attempts ${attempts}`);
  console.log(`deposits ${ok}`);
  console.log(`balance_total ${rows[0].total}`);
  console.log(`rows_fenced ${rows[0].fenced}`);
  console.log(`fence_is_the_lease ${fenceMatches}`);
  // The pooled connections that ran deposit() keep it prepared (each of the
  // four ran some of the 96 deposits, but which ones is the pool's choice).
  const clients = await Promise.all(Array.from({ length: 4 }, () => pool.connect()));
  const kept = await Promise.all(clients.map((c) =>
    c.query("SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = 'deposit'")));
  clients.forEach((c) => c.release());
  console.log(`deposit_prepared_on ${kept.filter((r) => r.rows[0].n === 1).length}`);

  // Another holder has account 2: a deposit that will not wait is refused,
  // writes nothing, and the pool goes on working.
  const holder = await pool.connect();
  const { rows: [held] } = await holder.query("SELECT token FROM rp_acquire('account-2', 10000, 5000)");
  if (held.token === null) throw new Error('the holder did not get account-2');
  const before = (await pool.query('SELECT balance FROM example_account WHERE id = 2')).rows[0].balance;
  console.log(`busy_deposit ${await deposit(2, 1, 0)}`);
  console.log(`busy_deposit_string ${await depositString(2, 1, 0)}`);
  const after = (await pool.query('SELECT balance FROM example_account WHERE id = 2')).rows[0].balance;
  console.log(`busy_balance_unchanged ${before === after}`);
  await holder.query("SELECT rp_release('account-2')");
  holder.release();

  // A writer without a live lease (a paused worker waking up, a hand-typed fix) is refused.
  try {
    await pool.query('UPDATE example_account SET balance = 0 WHERE id = 1');
    console.log('stale_write accepted');
  } catch (e) {
    console.log(`stale_write ${e.code}`);
  }
  await pool.end();
}

main().catch((e) => { console.error(e); process.exit(1); });
