// leader.js -- a scheduled job that only the leader runs.
//
// Two instances of the application (A and B, each with its own pool) tick
// every 200 ms.  Each tick campaigns (rp_campaign renews the lease of a
// leader and elects a new one when it lapsed); only the instance that gets an
// epoch runs the job, and the job's write carries the epoch as its fence
// token, so a deposed leader that wakes up late is refused by the trigger.
// Halfway through, A stops (it resigns, as on a clean shutdown) and B takes
// over.  Until the leader-bound guard (rp_fence_guard('epoch',
// 'leader=nightly')) lands, the job passes the epoch itself.
'use strict';
const { Pool } = require('pg');

const ELECTION = 'example-nightly', LEASE_MS = 3000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const admin = new Pool({ max: 1 });
  await admin.query(`CREATE TABLE IF NOT EXISTS example_job (
      name text PRIMARY KEY, runs int NOT NULL DEFAULT 0, last_node text, fence_token bigint NOT NULL DEFAULT 0)`);
  await admin.query(`CREATE OR REPLACE TRIGGER fence BEFORE INSERT OR UPDATE ON example_job
      FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token')`);
  await admin.query(`DELETE FROM example_job`);
  await admin.query(`INSERT INTO example_job (name) VALUES ('nightly')`);

  const runs = { A: 0, B: 0 }, epochs = { A: [], B: [] };
  let bothRan = 0, running = { A: true, B: true };
  const instance = (node) => ({ node, pool: new Pool({ max: 2 }) });
  const nodes = [instance('A'), instance('B')];

  async function tick({ node, pool }) {
    if (!running[node]) return false;
    const { rows: [{ epoch }] } = await pool.query(
      'SELECT rp_campaign($1, $2, $3) AS epoch', [ELECTION, node, LEASE_MS]);
    if (epoch === null) return false;    // a follower: not our job
    await pool.query(
      `UPDATE example_job SET runs = runs + 1, last_node = $1, fence_token = $2 WHERE name = 'nightly'`,
      [node, epoch]);
    runs[node]++;
    epochs[node].push(BigInt(epoch));    // compare bigints as BigInt, never as strings
    return true;
  }

  // A campaigns first, so it leads the first half.
  await tick(nodes[0]);
  for (let t = 0; t < 8; t++) {
    if (t === 4) {
      running.A = false;
      await nodes[0].pool.query('SELECT rp_resign($1, $2)', [ELECTION, 'A']);
    }
    const ran = await Promise.all(nodes.map(tick));
    if (ran[0] && ran[1]) bothRan++;
    await sleep(150);
  }
  const lastA = epochs.A[epochs.A.length - 1], firstB = epochs.B[0];
  console.log(`runs_A ${runs.A}`);
  console.log(`runs_B ${runs.B}`);
  console.log(`both_ran ${bothRan}`);
  console.log(`epoch_advanced ${firstB !== undefined && lastA !== undefined && firstB > lastA}`);
  // A deposed leader's late write with its old epoch.
  try {
    await admin.query(`UPDATE example_job SET runs = runs + 1, fence_token = $1 WHERE name = 'nightly'`,
                      [String(lastA)]);
    console.log('deposed_write accepted');
  } catch (e) {
    console.log(`deposed_write ${e.code}`);
  }
  await admin.query('SELECT rp_resign($1, $2)', [ELECTION, 'B']);
  await Promise.all([admin.end(), ...nodes.map((n) => n.pool.end())]);
}

main().catch((e) => { console.error(e); process.exit(1); });
