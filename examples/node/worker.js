// worker.js -- a fenced worker: deposits into accounts, each under a lease.
//
// Two ways to write it, both pool-safe:
//   deposit()         a checked-out client for the whole transaction:
//                     BEGIN; rp_acquire_xact; UPDATE; COMMIT (the lease ends
//                     with the transaction, on the backend that took it)
//   depositOneShot()  one statement through pool.query: the lease and the
//                     guarded UPDATE in one round trip and one transaction
// The table's lock-bound guard, rp_fence_guard('fence_token',
// 'lock=account-{id}'), lets a row of account N be written only by a session
// holding a live lease on 'account-N' (else RP004) and sets fence_token from
// that lease itself: the writer passes no token and cannot forget one.
'use strict';
const { Pool } = require('pg');

const pool = new Pool({ max: 4 });   // PGHOST, PGPORT, PGUSER, PGDATABASE from the environment

async function setup() {
  await pool.query(`CREATE TABLE IF NOT EXISTS example_account (
      id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0, fence_token bigint NOT NULL DEFAULT 0)`);
  await pool.query(`CREATE OR REPLACE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON example_account
      FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=account-{id}')`);
  await pool.query('TRUNCATE example_account');
  // Even the first INSERT of a row needs its lease: one transaction, one client.
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query("SELECT rp_acquire_xact('account-' || i, 5000, 10000) FROM generate_series(1, 3) i");
    await client.query('INSERT INTO example_account (id) SELECT generate_series(1, 3)');
    await client.query('COMMIT');
  } finally {
    client.release();
  }
}

async function deposit(id, amount) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    // SELECT * FROM, not SELECT (rp_acquire_xact(...)).*: one call, not one per column.
    const { rows: [lease] } = await client.query(
      'SELECT * FROM rp_acquire_xact($1, $2, $3)', [`account-${id}`, 5000, 10000]);
    if (lease.token === null) {          // "not acquired" is a row of NULLs, not zero rows
      await client.query('ROLLBACK');
      return false;
    }
    await client.query(                  // the guard sets fence_token from the lease
      'UPDATE example_account SET balance = balance + $1 WHERE id = $2', [amount, id]);
    await client.query('COMMIT');        // releases the lease
    return true;
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}

async function depositOneShot(id, amount) {
  const { rows } = await pool.query(
    `WITH lease AS (SELECT * FROM rp_acquire_xact($1, 5000, 10000))
     UPDATE example_account a SET balance = a.balance + $2
     FROM lease WHERE a.id = $3 AND lease.token IS NOT NULL
     RETURNING lease.fence`, [`account-${id}`, amount, id]);
  return rows.length === 1;              // here zero rows does mean "not acquired"
}

async function main() {
  await setup();
  let ok = 0, attempts = 0;
  const worker = async (w) => {
    for (let i = 0; i < 12; i++) {
      attempts++;
      const id = 1 + ((w + i) % 3);
      if (await (w % 2 ? deposit(id, 1) : depositOneShot(id, 1))) ok++;
    }
  };
  await Promise.all(Array.from({ length: 8 }, (_, w) => worker(w)));
  const { rows } = await pool.query(
    'SELECT sum(balance)::int AS total, min(fence_token) > 0 AS fenced FROM example_account');
  console.log(`attempts ${attempts}`);
  console.log(`deposits ${ok}`);
  console.log(`balance_total ${rows[0].total}`);
  console.log(`rows_fenced ${rows[0].fenced}`);
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
