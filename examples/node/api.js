// api.js -- an HTTP handler whose rate limit and work are ONE statement: the
// limiter (rp_ratelimit_consume) and the request's own query (here it records
// the call) go to PostgreSQL in one round trip, the query runs only when the
// limiter admitted the request, and a refusal answers 429 with Retry-After.
// The rate limiter holds no session state: pool.query, any backend.
//
// The shape: the limiter in FROM (called exactly once), the work gated on its
// answer.  Never the limiter in the select list of a query with a FROM, or in
// its WHERE: it is then called once per row -- not at all when no row
// matches (an unlimited probe), once per row scanned in WHERE.
//
// What not to do: a rate-limit call, then the request's query, as two round
// trips (the rate-limiter-flexible shape) -- or worse, three, through a
// separate Redis client: every admitted request pays the extra trip.
//
// rp_ratelimit (true/false, no headers) answers a hot refused key from the
// server's refusal cache without going to Redis at all; rp_ratelimit_consume
// always asks Redis, because its remaining and retry_after_ms are Redis'.
// Use rp_ratelimit when a refusal needs no Retry-After.
'use strict';
const http = require('http');
const { Pool } = require('pg');

const pool = new Pool({ max: 4, statement_timeout: 5000 });
const LIMIT = 5, WINDOW_MS = 60000;

// Named: node-postgres prepares it once per pooled connection, and
// PostgreSQL runs its cached plan instead of planning it at every request.
const HANDLE = { name: 'handle', text: `
  WITH rl AS (SELECT * FROM rp_ratelimit_consume($1, $2, $3)),
       work AS (INSERT INTO example_request (user_name) SELECT $4 FROM rl WHERE rl.allowed RETURNING id)
  SELECT rl.allowed, rl.remaining, rl.retry_after_ms, (SELECT id FROM work) AS request_id FROM rl` };

async function handle(req, res) {
  const user = new URL(req.url, 'http://x').searchParams.get('user') || 'anonymous';
  const { rows: [r] } = await pool.query(HANDLE, [`api:${user}`, LIMIT, WINDOW_MS, user]);
  // remaining, retry_after_ms, request_id: bigint, so strings in node-postgres
  res.setHeader('X-RateLimit-Remaining', r.remaining);
  if (!r.allowed) {
    res.setHeader('Retry-After', Math.max(1, Math.ceil(Number(r.retry_after_ms) / 1000)));
    res.writeHead(429).end('slow down\n');
    return;
  }
  res.writeHead(200).end(`request ${r.request_id}\n`);
}

function get(port, user) {
  return new Promise((resolve, reject) => {
    http.get({ port, path: `/?user=${user}` }, (r) => {
      r.resume();
      r.on('end', () => resolve({ status: r.statusCode, retryAfter: r.headers['retry-after'] }));
    }).on('error', reject);
  });
}

async function main() {
  await pool.query('CREATE TABLE IF NOT EXISTS example_request (id bigserial PRIMARY KEY, user_name text NOT NULL)');
  await pool.query("DELETE FROM example_request WHERE user_name IN ('alice', 'bob')");
  await pool.query('SELECT rp_ratelimit_reset($1), rp_ratelimit_reset($2)', ['api:alice', 'api:bob']);
  const server = http.createServer((req, res) =>
    handle(req, res).catch((e) => { console.error(e); res.writeHead(500).end(); }));
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const port = server.address().port;
  const alice = [];
  for (let i = 0; i < 8; i++) alice.push(await get(port, 'alice'));
  const bob = [await get(port, 'bob'), await get(port, 'bob')];
  console.log(`alice ${alice.map((r) => r.status).join(' ')}`);
  console.log(`retry_after ${alice[7].retryAfter}`);
  console.log(`bob ${bob.map((r) => r.status).join(' ')}`);
  // The work ran for the admitted requests only.
  const { rows } = await pool.query(
    "SELECT count(*) FILTER (WHERE user_name = 'alice')::int AS a, count(*) FILTER (WHERE user_name = 'bob')::int AS b FROM example_request");
  console.log(`work_done alice=${rows[0].a} bob=${rows[0].b}`);
  server.close();
  await pool.end();
}

main().catch((e) => { console.error(e); process.exit(1); });
