// bench/apps/bench.js -- the comparison an application developer makes.
//
// 1. The whole critical section: take the lock, read-modify-write one row,
//    release.
//      redlock   node-redlock (ioredis) lock; INCR a fence counter in Redis
//                (redlock has none); UPDATE ... WHERE fence_token <= $t; unlock:
//                four round trips (three to Redis, one to PostgreSQL)
//      rp        one statement through pool.query: rp_acquire_xact and the
//                guarded UPDATE in one transaction, released at its commit:
//                one round trip to PostgreSQL (and one from it to Redis,
//                plus the release at commit)
//    Each client works on its own account: the lock is never contended, so
//    this measures what the critical section costs, not queueing.
// 2. Rate limiting: rate-limiter-flexible's RateLimiterRedis.consume against
//    SELECT rp_ratelimit(key, ...) from node-postgres (algorithm
//    sliding_window: O(1), like its fixed-window counter).
// 3. Leases that expire mid-work: 8 clients increment ONE account, each
//    holding a 50 ms lease across a read, 0-100 ms of work and a write.
//      redlock   lock; t = INCR; SELECT balance; work;
//                UPDATE SET balance = read + 1, fence_token = t WHERE fence_token <= t; unlock
//      rp        BEGIN; rp_acquire_xact(..., verify_at_commit => true); SELECT balance;
//                work; UPDATE SET balance = read + 1, fence_token = fence (the guard);
//                COMMIT
//    lost increments = writes the client saw succeed - the balance's growth;
//    stale writes    = writes that succeeded though a newer lease had been
//                      granted (to another client) before they were issued.
// Sides alternate within each round (the order flips every round); every
// number is from this one run.  Prints JSON lines; run.sh makes the table.
'use strict';
const { Pool } = require('pg');
const Redis = require('ioredis');
const Redlock = require('redlock');
const { RateLimiterRedis } = require('rate-limiter-flexible');

const ROUNDS = Number(process.env.ROUNDS || 3);
const SECONDS = Number(process.env.SECONDS_PER_RUN || 2);
const CLIENTS = (process.env.CLIENTS || '1 8').split(' ').map(Number);
const EXPIRY_SECONDS = Number(process.env.EXPIRY_SECONDS || 4);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => Number(process.hrtime.bigint()) / 1e6;   // ms

const redis = new Redis({ port: Number(process.env.REDIS_PORT), host: '127.0.0.1', enableAutoPipelining: false });
const pool = new Pool({ max: 8 });
const redlock = new Redlock([redis], { retryCount: 0 });
const rlf = new RateLimiterRedis({ storeClient: redis, keyPrefix: 'rlf', points: 1e9, duration: 60 });

async function setup() {
  await pool.query(`DROP TABLE IF EXISTS bench_account`);
  await pool.query(`CREATE TABLE bench_account (id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0,
                    fence_token bigint NOT NULL DEFAULT 0)`);
  await pool.query(`INSERT INTO bench_account (id) SELECT generate_series(0, 99)`);
  await pool.query(`CREATE TABLE IF NOT EXISTS bench_account_rp (LIKE bench_account INCLUDING ALL)`);
  await pool.query(`TRUNCATE bench_account_rp`);
  await pool.query(`INSERT INTO bench_account_rp (id) SELECT generate_series(0, 99)`);
  await pool.query(`CREATE OR REPLACE TRIGGER fence BEFORE INSERT OR UPDATE ON bench_account_rp
                    FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token')`);
}

const sides = {
  // critical section
  async redlock(c) {
    const lock = await redlock.lock(`locks:account-${c}`, 5000);
    const t = await redis.incr(`fence:account-${c}`);
    await pool.query('UPDATE bench_account SET balance = balance + 1, fence_token = $2 WHERE id = $1 AND fence_token <= $2', [c, t]);
    await lock.unlock();
  },
  async rp(c) {
    const { rowCount } = await pool.query(
      `WITH lease AS (SELECT * FROM rp_acquire_xact($1, 5000))
       UPDATE bench_account_rp a SET balance = a.balance + 1, fence_token = lease.fence
       FROM lease WHERE a.id = $2 AND lease.token IS NOT NULL`, [`account-${c}`, c]);
    if (rowCount !== 1) throw new Error('not acquired');
  },
  // where the time goes (1 client): the parts of each side alone
  async pg_select1() { await pool.query('SELECT 1'); },
  async pg_update(c) {
    await pool.query('UPDATE bench_account SET balance = balance + 1, fence_token = fence_token WHERE id = $1', [c]);
  },
  async pg_update_guarded(c) {
    await pool.query('UPDATE bench_account_rp SET balance = balance + 1, fence_token = fence_token WHERE id = $1', [c]);
  },
  async rp_acquire_release(c) {   // acquire at the statement, release at its commit
    await pool.query('SELECT * FROM rp_acquire_xact($1, 5000)', [`account-${c}`]);
  },
  async redis_ping() { await redis.ping(); },
  async redlock_only(c) { const l = await redlock.lock(`locks:account-${c}`, 5000); await l.unlock(); },
  // rate limiting
  async rlf(c) { await rlf.consume(`user-${c}`); },
  async rp_ratelimit(c) {
    await pool.query(`SELECT rp_ratelimit($1, 1000000000, 60000, 1, 'sliding_window')`, [`user-${c}`]);
  },
};

async function measure(side, clients) {
  const lat = [];
  const end = now() + SECONDS * 1000;
  let errors = 0;
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    while (now() < end) {
      const t0 = now();
      try { await sides[side](c); lat.push(now() - t0); } catch (e) { errors++; }
    }
  }));
  return { lat, errors };
}

const pct = (a, p) => a[Math.min(a.length - 1, Math.floor(p * a.length))];

async function expiryRun(side) {
  const TTL = 50, ACCOUNT = 100 + (side === 'redlock' ? 0 : 1);
  const table = side === 'redlock' ? 'bench_account' : 'bench_account_rp';
  await pool.query(`INSERT INTO ${table} (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET balance = 0`, [ACCOUNT]);
  const start = Number((await pool.query(`SELECT balance FROM ${table} WHERE id = $1`, [ACCOUNT])).rows[0].balance);
  let acked = 0, refused = 0, attempts = 0, notAcquired = 0;
  const grants = [], writes = [];   // {fence, at}; {fence, issued} of acknowledged writes
  const end = now() + EXPIRY_SECONDS * 1000;
  const rlk = new Redlock([redis], { retryCount: 200, retryDelay: 10, retryJitter: 5 });
  await Promise.all(Array.from({ length: 8 }, async () => {
    const client = await pool.connect();
    try {
      while (now() < end) {
        attempts++;
        const work = Math.random() * 100;
        if (side === 'redlock') {
          let lock;
          try { lock = await rlk.lock(`locks:account-${ACCOUNT}`, TTL); } catch (e) { notAcquired++; continue; }
          const t = await redis.incr(`fence:account-${ACCOUNT}`);
          grants.push({ fence: t, at: now() });
          const bal = Number((await client.query('SELECT balance FROM bench_account WHERE id = $1', [ACCOUNT])).rows[0].balance);
          await sleep(work);
          const issued = now();
          const r = await client.query(
            'UPDATE bench_account SET balance = $2, fence_token = $3 WHERE id = $1 AND fence_token <= $3',
            [ACCOUNT, bal + 1, t]);
          if (r.rowCount === 1) { acked++; writes.push({ fence: t, issued }); } else refused++;
          await lock.unlock().catch(() => {});
        } else {
          try {
            await client.query('BEGIN');
            const { rows: [l] } = await client.query(
              'SELECT * FROM rp_acquire_xact($1, $2, 2000, 0, true)', [`account-${ACCOUNT}`, TTL]);
            if (l.token === null) { notAcquired++; await client.query('ROLLBACK'); continue; }
            grants.push({ fence: Number(l.fence), at: now() });
            const bal = Number((await client.query('SELECT balance FROM bench_account_rp WHERE id = $1', [ACCOUNT])).rows[0].balance);
            await sleep(work);
            const issued = now();
            await client.query('UPDATE bench_account_rp SET balance = $2, fence_token = $3 WHERE id = $1',
                               [ACCOUNT, bal + 1, l.fence]);
            await client.query('COMMIT');
            acked++; writes.push({ fence: Number(l.fence), issued });
          } catch (e) {
            refused++;                      // RP001 (guard) or RP002 (lease lost before commit)
            await client.query('ROLLBACK').catch(() => {});
          }
        }
      }
    } finally { client.release(); }
  }));
  // Stale: acknowledged although a newer lease had been granted before the
  // write was even issued (the writer's lease had expired and was taken over).
  const stale = writes.filter((w) => grants.some((g) => g.fence > w.fence && g.at < w.issued)).length;
  const final = Number((await pool.query(`SELECT balance FROM ${table} WHERE id = $1`, [ACCOUNT])).rows[0].balance);
  return { side, attempts, acked, refused, notAcquired, grew: final - start, lost: acked - (final - start), stale };
}

async function main() {
  await setup();
  // warm-up: connections, script caches
  for (const s of Object.keys(sides)) await measure(s, 8);
  const pairs = [['redlock', 'rp'], ['rlf', 'rp_ratelimit']];
  const acc = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const clients of CLIENTS) {
      for (const pair of pairs) {
        const order = round % 2 ? [...pair].reverse() : pair;
        for (const side of order) {
          const { lat, errors } = await measure(side, clients);
          const k = `${side}|${clients}`;
          (acc[k] = acc[k] || { lat: [], ops: 0, secs: 0, errors: 0 });
          acc[k].lat.push(...lat); acc[k].ops += lat.length; acc[k].secs += SECONDS; acc[k].errors += errors;
          const s = [...lat].sort((a, b) => a - b);
          console.log(JSON.stringify({ kind: 'round', round, side, clients, ops_s: +(lat.length / SECONDS).toFixed(0),
            p50: +pct(s, 0.5).toFixed(3), p99: +pct(s, 0.99).toFixed(3), errors }));
        }
      }
    }
    for (const side of ['pg_select1', 'pg_update', 'pg_update_guarded', 'rp_acquire_release', 'redis_ping', 'redlock_only']) {
      const { lat } = await measure(side, 1);
      const k = `${side}|1`;
      (acc[k] = acc[k] || { lat: [], ops: 0, secs: 0, errors: 0 });
      acc[k].lat.push(...lat); acc[k].ops += lat.length; acc[k].secs += SECONDS;
    }
  }
  for (const [k, v] of Object.entries(acc)) {
    const [side, clients] = k.split('|');
    const s = v.lat.sort((a, b) => a - b);
    console.log(JSON.stringify({ kind: 'total', side, clients: Number(clients), ops_s: +(v.ops / v.secs).toFixed(0),
      p50: +pct(s, 0.5).toFixed(3), p99: +pct(s, 0.99).toFixed(3), errors: v.errors }));
  }
  for (const side of ['redlock', 'rp', 'redlock', 'rp']) {
    console.log(JSON.stringify({ kind: 'expiry', ...(await expiryRun(side)) }));
  }
  await pool.end();
  redis.disconnect();
}

main().catch((e) => { console.error(e); process.exit(1); });
