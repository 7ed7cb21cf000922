// bench/apps/bench.js -- what a Node application pays for the whole request,
// with the extension in its fast forms and with the libraries it would
// otherwise pick (node-redlock, rate-limiter-flexible over ioredis).
//
// Groups; within a group every mode runs in every round, the order rotated
// by one each round, at each client count; each client works on its own
// account and key, so nothing queues on a lock.  Every statement with
// parameters is named, on both sides: node-postgres prepares it once per
// pooled connection, and PostgreSQL then runs its cached plan (the two
// *_unnamed modes show what planning at every call costs):
//
//   lock     the lock cycle alone
//     redlock_cycle    redlock.acquire + lock.release: two Redis round trips
//     rp_cycle         SELECT token FROM rp_acquire(...), then
//                      SELECT rp_release(name, token) through pool.query: two
//                      PostgreSQL round trips, each making one backend->Redis
//   section  the whole fenced critical section
//     redlock_section  redlock.acquire; INCR a fence counter (redlock has no
//                      fencing token); UPDATE ... WHERE fence_token <= $t;
//                      release: four round trips (three Redis, one PostgreSQL)
//     rp_one_trip      ONE multi-statement simple query through pool.query:
//                      BEGIN; SELECT token FROM rp_acquire_xact(...); UPDATE;
//                      COMMIT, on a table with the lock-bound guard
//                      rp_fence_guard('fence_token', 'lock=account-{id}',
//                      'xact'), which sets fence_token from the lease
//     rp_one_stmt      ONE named statement with parameters: WITH lease AS
//                      (SELECT * FROM rp_acquire_xact($1, ...)) UPDATE ...
//                      FROM lease
//     rp_one_trip_send, rp_one_stmt_send  the same two with
//                      redis_primitives.release_at_commit = send: COMMIT
//                      sends the release and does not wait for Redis
//     rp_one_stmt_unnamed  rp_one_stmt unnamed: parsed and planned at every
//                      call, as pool.query(text, values) does
//     rp_four_trips    the slow way: a checked-out client, BEGIN; SELECT *
//                      FROM rp_acquire_xact; UPDATE; COMMIT as four round trips
//     update_only      the bare UPDATE on a table without a trigger: the floor
//   admit    rate limit, admitted key, and the request's own query (a
//            primary-key read)
//     rlf_admit        RateLimiterRedis.consume, then the query
//     rp_admit         one round trip: rp_ratelimit in FROM, the query in a
//                      LATERAL gated on it (OFFSET 0: not run when refused)
//     rp_admit_gcra    the same with gcra, the cheapest script (TIME, GET, SET)
//     rp_admit_unnamed the same statement unnamed
//     query_only       the query alone: the floor
//   refuse   the same for a hot key that is refused every time
//     rlf_refuse       RateLimiterRedis.consume rejects (one Redis round trip)
//     rlf_refuse_memory  the same limiter with inMemoryBlockOnConsumed: the
//                      refusal is answered in the Node process
//     rp_refuse        the rp_admit statement: answered from the server's
//                      refusal cache (no Redis round trip), the query not run
//   floor    pg_select1 (SELECT 1 through pool.query), redis_ping (ioredis
//            PING): one round trip to each, no work
//
// Then the correctness run of leases that expire mid-work (8 clients, one
// account, 200 ms leases across a read, 0-400 ms of work and a write; the
// lock-bound guard stops believing a lease redis_primitives.lease_margin,
// 100 ms, before its TTL):
//     redlock  acquire; t = INCR; SELECT balance; work;
//              UPDATE SET balance = read + 1, fence_token = t WHERE fence_token <= t; release
//     rp       BEGIN; rp_acquire_xact(..., verify_at_commit => true);
//              SELECT balance; work; UPDATE (the guard); COMMIT
//   lost increments = writes the client saw succeed - the balance's growth;
//   stale writes    = writes that succeeded though a newer lease had been
//                     granted (to another client) before they were issued.
//
// Prints JSON lines (one per mode, clients and round; cache counters; the
// expiry runs); run.sh turns them into the report.  Knobs: ROUNDS (9),
// SECONDS_PER_RUN (1), CLIENTS ("1 8"), EXPIRY_SECONDS (4), BENCH_GROUPS (all;
// not GROUPS, which bash keeps for itself and never passes on).
'use strict';
const pg = require('pg');
const Redis = require('ioredis');
const Redlock = require('redlock').default;
const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible');

const ROUNDS = Number(process.env.ROUNDS || 9);
const SECONDS = Number(process.env.SECONDS_PER_RUN || 1);
const CLIENTS = (process.env.CLIENTS || '1 8').split(' ').map(Number);
const EXPIRY_SECONDS = Number(process.env.EXPIRY_SECONDS || 4);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => Number(process.hrtime.bigint()) / 1e6;   // ms

const redis = new Redis({ port: Number(process.env.REDIS_PORT), host: '127.0.0.1', enableAutoPipelining: false });
const pool = new pg.Pool({ max: Math.max(...CLIENTS) });
// The same, its sessions releasing at COMMIT without waiting for Redis.
const poolSend = new pg.Pool({ max: Math.max(...CLIENTS),
  options: '-c redis_primitives.release_at_commit=send' });
const redlock = new Redlock([redis], { retryCount: 0 });
const HOUR = 3600;
const rlfAdmit = new RateLimiterRedis({ storeClient: redis, keyPrefix: 'rlf-admit', points: 1e9, duration: 60 });
const rlfHot = new RateLimiterRedis({ storeClient: redis, keyPrefix: 'rlf-hot', points: 1, duration: HOUR });
const rlfHotMemory = new RateLimiterRedis({ storeClient: redis, keyPrefix: 'rlf-hot-mem', points: 1, duration: HOUR,
                                            inMemoryBlockOnConsumed: 1 });

// The request's own query, the same on both sides of the rate limit groups.
const QUERY = 'SELECT balance FROM bench_account WHERE id = $1';
// The folded form: the limiter called once (in FROM), the query gated on it.
const FOLDED = (limit, windowMs, algorithm = 'sliding_window') =>
  `SELECT rl.allowed, q.balance
     FROM rp_ratelimit($1, ${limit}, ${windowMs}, 1, '${algorithm}') AS rl(allowed)
     LEFT JOIN LATERAL (SELECT balance FROM bench_account WHERE id = $2 AND rl.allowed OFFSET 0) q ON true`;
const FOLDED_ADMIT = FOLDED(1000000000, 60000);
// The same with the cheapest algorithm's script (TIME, GET, SET): whether
// the algorithm, rather than the round trip, is what the request pays for.
const FOLDED_ADMIT_GCRA = FOLDED(1000000000, 60000, 'gcra');
const FOLDED_HOT = FOLDED(1, HOUR * 1000);

async function setup() {
  await pool.query(`DROP TABLE IF EXISTS bench_account, bench_account_rp`);
  await pool.query(`CREATE TABLE bench_account (id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0,
                    fence_token bigint NOT NULL DEFAULT 0)`);
  await pool.query(`INSERT INTO bench_account (id) SELECT generate_series(0, 101)`);
  await pool.query(`CREATE TABLE bench_account_rp (LIKE bench_account INCLUDING ALL)`);
  // The first INSERT of each row needs its lease too (lock-bound guard).
  await pool.query(`BEGIN;
    SELECT rp_acquire_xact('account-' || i, 10000, 10000) FROM generate_series(0, 101) i;
    CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON bench_account_rp
      FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=account-{id}', 'xact');
    INSERT INTO bench_account_rp (id) SELECT generate_series(0, 101);
    COMMIT`);
  // The hot keys: admitted once here, refused from then on.
  for (const c of Array.from({ length: Math.max(...CLIENTS) }, (_, i) => i)) {
    await rlfHot.consume(`hot-${c}`);
    await rlfHotMemory.consume(`hot-${c}`);
    await pool.query('SELECT rp_ratelimit_reset($1)', [`hot-${c}`]);
    const { rows: [r] } = await pool.query(FOLDED_HOT, [`hot-${c}`, c]);
    if (!r.allowed) throw new Error('hot key refused at its first call');
  }
}

// The folded statement for an admitted key: admitted, and the query ran.
async function admitted(query, c) {
  const { rows: [r] } = await pool.query(query, [`user-${c}`, c]);
  if (!r.allowed || r.balance === null) throw new Error('refused');
}

async function refusedBy(limiter, key) {
  try {
    await limiter.consume(key);
  } catch (e) {
    if (e instanceof RateLimiterRes) return;   // refused: what this mode measures
    throw e;
  }
  throw new Error(`${key} admitted`);
}

// The fenced section as one string, and as one statement, through p.
async function oneTrip(p, c) {
  // c is a number: nothing to escape (examples/node/worker.js shows
  // pg.escapeLiteral for a name from outside).
  const r = await p.query(`BEGIN;
    SELECT token FROM rp_acquire_xact('account-${c}', 5000);
    UPDATE bench_account_rp SET balance = balance + 1 WHERE id = ${c};
    COMMIT`);
  if (r[2].rowCount !== 1) throw new Error('not written');
}
// A named statement: prepared on each pooled connection, parsed and planned
// once.  Every mode sends these; the *_unnamed modes send the text alone,
// planned at every call.
const named = (name, text) => ({ name, text });
const SECTION = `WITH lease AS (SELECT token FROM rp_acquire_xact($1, 5000))
     UPDATE bench_account_rp a SET balance = a.balance + 1
     FROM lease WHERE a.id = $2 AND lease.token IS NOT NULL`;
const Q_SECTION = named('rp_section', SECTION);
async function oneStmt(p, c, unnamed) {
  const { rowCount } = await p.query(unnamed ? SECTION : Q_SECTION, [`account-${c}`, c]);
  if (rowCount !== 1) throw new Error('not acquired');
}
const Q_QUERY = named('query', QUERY);
const Q_ADMIT = named('rp_admit', FOLDED_ADMIT);
const Q_ADMIT_GCRA = named('rp_admit_gcra', FOLDED_ADMIT_GCRA);
const Q_HOT = named('rp_hot', FOLDED_HOT);
const Q_ACQUIRE = named('rp_acquire', 'SELECT token FROM rp_acquire($1, 5000)');
const Q_RELEASE = named('rp_release', 'SELECT rp_release($1, $2) AS ok');
const Q_ACQUIRE_XACT = named('rp_acquire_xact', 'SELECT token FROM rp_acquire_xact($1, 5000)');
const Q_UPDATE_RP = named('rp_update', 'UPDATE bench_account_rp SET balance = balance + 1 WHERE id = $1');
const Q_UPDATE = named('update', 'UPDATE bench_account SET balance = balance + 1 WHERE id = $1');
const Q_UPDATE_FENCED = named('update_fenced',
  'UPDATE bench_account SET balance = balance + 1, fence_token = $2 WHERE id = $1 AND fence_token <= $2');

const modes = {
  // lock: the cycle alone
  async redlock_cycle(c) {
    const lock = await redlock.acquire([`locks:account-${c}`], 5000);
    await lock.release();
  },
  async rp_cycle(c) {
    const name = `cycle-${c}`;
    const { rows: [l] } = await pool.query(Q_ACQUIRE, [name]);
    if (l.token === null) throw new Error('not acquired');
    const { rows: [r] } = await pool.query(Q_RELEASE, [name, l.token]);
    if (!r.ok) throw new Error('not released');
  },
  // section: the whole fenced critical section
  async redlock_section(c) {
    const lock = await redlock.acquire([`locks:account-${c}`], 5000);
    try {
      const t = await redis.incr(`fence:account-${c}`);
      const r = await pool.query(Q_UPDATE_FENCED, [c, t]);
      if (r.rowCount !== 1) throw new Error('fenced out');
    } finally {
      await lock.release();
    }
  },
  async rp_one_trip(c) { await oneTrip(pool, c); },
  async rp_one_stmt(c) { await oneStmt(pool, c); },
  async rp_one_stmt_unnamed(c) { await oneStmt(pool, c, true); },
  async rp_one_trip_send(c) { await oneTrip(poolSend, c); },
  async rp_one_stmt_send(c) { await oneStmt(poolSend, c); },
  async rp_four_trips(c) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const { rows: [l] } = await client.query(Q_ACQUIRE_XACT, [`account-${c}`]);
      if (l.token === null) throw new Error('not acquired');
      await client.query(Q_UPDATE_RP, [c]);
      await client.query('COMMIT');
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  },
  async update_only(c) {
    await pool.query(Q_UPDATE, [c]);
  },
  // admit: rate limit an admitted key, then the request's query
  async rlf_admit(c) {
    await rlfAdmit.consume(`user-${c}`);
    await pool.query(Q_QUERY, [c]);
  },
  async rp_admit(c) { await admitted(Q_ADMIT, c); },
  async rp_admit_gcra(c) { await admitted(Q_ADMIT_GCRA, c); },
  async rp_admit_unnamed(c) { await admitted(FOLDED_ADMIT, c); },
  async query_only(c) { await pool.query(Q_QUERY, [c]); },
  // refuse: a hot key, refused every time
  async rlf_refuse(c) { await refusedBy(rlfHot, `hot-${c}`); },
  async rlf_refuse_memory(c) { await refusedBy(rlfHotMemory, `hot-${c}`); },
  async rp_refuse(c) {
    const { rows: [r] } = await pool.query(Q_HOT, [`hot-${c}`, c]);
    if (r.allowed || r.balance !== null) throw new Error('admitted');
  },
  // floor: one round trip, no work
  async pg_select1() { await pool.query('SELECT 1'); },
  async redis_ping() { await redis.ping(); },
};

const GROUPS = {
  lock: ['redlock_cycle', 'rp_cycle'],
  section: ['redlock_section', 'rp_one_trip', 'rp_one_stmt', 'rp_one_trip_send',
    'rp_one_stmt_send', 'rp_one_stmt_unnamed', 'rp_four_trips', 'update_only'],
  admit: ['rlf_admit', 'rp_admit', 'rp_admit_gcra', 'rp_admit_unnamed', 'query_only'],
  refuse: ['rlf_refuse', 'rlf_refuse_memory', 'rp_refuse'],
  floor: ['pg_select1', 'redis_ping'],
};
const chosen = (process.env.BENCH_GROUPS || Object.keys(GROUPS).join(' ')).split(' ');

async function measure(mode, clients, seconds) {
  const lat = [];
  const end = now() + seconds * 1000;
  let errors = 0, firstError;
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    while (now() < end) {
      const t0 = now();
      try { await modes[mode](c); lat.push(now() - t0); } catch (e) { errors++; firstError = firstError || e.message; }
    }
  }));
  return { lat, errors, firstError };
}

const pct = (a, p) => a[Math.min(a.length - 1, Math.floor(p * a.length))];

async function expiryRun(side) {
  const TTL = 200, ACCOUNT = 100 + (side === 'redlock' ? 0 : 1);
  const table = side === 'redlock' ? 'bench_account' : 'bench_account_rp';
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
        const work = Math.random() * 400;
        if (side === 'redlock') {
          let lock;
          try { lock = await rlk.acquire([`locks:account-${ACCOUNT}`], TTL); } catch (e) { notAcquired++; continue; }
          const t = await redis.incr(`fence:account-${ACCOUNT}`);
          grants.push({ fence: t, at: now() });
          const bal = Number((await client.query('SELECT balance FROM bench_account WHERE id = $1', [ACCOUNT])).rows[0].balance);
          await sleep(work);
          const issued = now();
          const r = await client.query(
            'UPDATE bench_account SET balance = $2, fence_token = $3 WHERE id = $1 AND fence_token <= $3',
            [ACCOUNT, bal + 1, t]);
          if (r.rowCount === 1) { acked++; writes.push({ fence: t, issued }); } else refused++;
          await lock.release().catch(() => {});   // throws when the lease had expired
        } else {
          try {
            await client.query('BEGIN');
            const { rows: [l] } = await client.query(
              'SELECT token, fence FROM rp_acquire_xact($1, $2, 2000, 0, true)', [`account-${ACCOUNT}`, TTL]);
            if (l.token === null) { notAcquired++; await client.query('ROLLBACK'); continue; }
            grants.push({ fence: Number(l.fence), at: now() });
            const bal = Number((await client.query('SELECT balance FROM bench_account_rp WHERE id = $1', [ACCOUNT])).rows[0].balance);
            await sleep(work);
            const issued = now();
            await client.query('UPDATE bench_account_rp SET balance = $2 WHERE id = $1', [ACCOUNT, bal + 1]);
            await client.query('COMMIT');
            acked++; writes.push({ fence: Number(l.fence), issued });
          } catch (e) {
            refused++;                      // RP004 (guard: lease gone) or RP002 (lost before commit)
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

async function cacheHits() {
  return Number((await pool.query('SELECT hits FROM rp_ratelimit_cache_info()')).rows[0].hits);
}

async function main() {
  await setup();
  const groups = chosen.filter((g) => GROUPS[g]);
  // warm-up: connections, script caches, plans
  for (const g of groups) for (const m of GROUPS[g]) await measure(m, Math.max(...CLIENTS), 0.3);
  const hits0 = await cacheHits();
  let refuseCalls = 0;
  for (let round = 0; round < ROUNDS; round++) {
    for (const clients of CLIENTS) {
      for (const group of groups) {
        const ms = GROUPS[group];
        const order = ms.map((_, i) => ms[(i + round) % ms.length]);   // rotated by one each round
        for (const [pos, mode] of order.entries()) {
          const { lat, errors, firstError } = await measure(mode, clients, SECONDS);
          if (mode === 'rp_refuse') refuseCalls += lat.length + errors;
          const s = [...lat].sort((a, b) => a - b);
          console.log(JSON.stringify({ kind: 'round', group, round, pos, mode, clients,
            ops_s: +(lat.length / SECONDS).toFixed(1), p50: +(pct(s, 0.5) || 0).toFixed(3),
            p99: +(pct(s, 0.99) || 0).toFixed(3), errors, firstError }));
        }
      }
    }
  }
  if (groups.includes('refuse')) {
    console.log(JSON.stringify({ kind: 'cache', rp_refuse_calls: refuseCalls, cache_hits: (await cacheHits()) - hits0 }));
  }
  if (EXPIRY_SECONDS > 0) {
    for (const side of ['redlock', 'rp', 'redlock', 'rp']) {
      console.log(JSON.stringify({ kind: 'expiry', ...(await expiryRun(side)) }));
    }
  }
  await pool.end();
  await poolSend.end();
  redis.disconnect();
  // This process's own CPU time, so that run.sh can tell what other
  // processes used of the machine meanwhile.
  const cpu = process.cpuUsage();
  console.log(JSON.stringify({ kind: 'cpu', user_us: cpu.user, system_us: cpu.system }));
}

main().catch((e) => { console.error(e); process.exit(1); });
