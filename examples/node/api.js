// api.js -- an HTTP handler that enforces rp_ratelimit_consume and answers
// 429 with Retry-After.  One SQL call per request through pool.query: the
// rate limiter holds no session state, so any pooled backend will do.
'use strict';
const http = require('http');
const { Pool } = require('pg');

const pool = new Pool({ max: 4 });
const LIMIT = 5, WINDOW_MS = 60000;

async function handle(req, res) {
  const user = new URL(req.url, 'http://x').searchParams.get('user') || 'anonymous';
  const { rows: [rl] } = await pool.query(
    'SELECT * FROM rp_ratelimit_consume($1, $2, $3)', [`api:${user}`, LIMIT, WINDOW_MS]);
  // remaining, retry_after_ms: bigint, so strings in node-postgres
  res.setHeader('X-RateLimit-Remaining', rl.remaining);
  if (!rl.allowed) {
    res.setHeader('Retry-After', Math.max(1, Math.ceil(Number(rl.retry_after_ms) / 1000)));
    res.writeHead(429).end('slow down\n');
    return;
  }
  res.writeHead(200).end('hello\n');
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
  server.close();
  await pool.end();
}

main().catch((e) => { console.error(e); process.exit(1); });
