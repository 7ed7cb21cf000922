#!/usr/bin/python3
"""api.py -- an HTTP handler whose rate limit and work are ONE statement:
rp_ratelimit_consume and the request's own query (here it records the call)
in one round trip, the query run only when the request was admitted; a
refusal answers 429 with Retry-After.  retry_after_ms is an int in psycopg (a
string in node-postgres).

The shape: the limiter in FROM (called exactly once), the work gated on its
answer.  Never the limiter in the select list of a query with a FROM, or in
its WHERE: it is then called once per row -- not at all when no row matches.
What not to do: the rate-limit call, then the request's query, as two round
trips.  rp_ratelimit (a boolean, no headers) answers a hot refused key from
the server's refusal cache without going to Redis; rp_ratelimit_consume
always asks Redis."""
import http.server
import math
import threading
import urllib.error
import urllib.parse
import urllib.request

import psycopg
from psycopg.rows import namedtuple_row

LIMIT, WINDOW_MS = 5, 60000
# One connection shared by the handler threads (a pool would do as well: the
# rate limiter keeps no session state).
_conn = None
_conn_lock = threading.Lock()


HANDLE = """
    WITH rl AS (SELECT * FROM rp_ratelimit_consume(%s, %s, %s)),
         work AS (INSERT INTO example_request_py (user_name) SELECT %s FROM rl WHERE rl.allowed RETURNING id)
    SELECT rl.allowed, rl.remaining, rl.retry_after_ms, (SELECT id FROM work) AS request_id FROM rl"""


def handle(user):
    global _conn
    with _conn_lock:
        if _conn is None or _conn.closed:
            _conn = psycopg.connect(autocommit=True, row_factory=namedtuple_row,
                                    options="-c statement_timeout=5000")
        # prepare=True: planned once per connection, not at every request.
        return _conn.execute(HANDLE, (f"api:{user}", LIMIT, WINDOW_MS, user), prepare=True).fetchone()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        user = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query).get("user", ["anonymous"])[0]
        rl = handle(user)
        if rl.allowed:
            self.send_response(200)
        else:
            self.send_response(429)
            self.send_header("Retry-After", str(max(1, math.ceil(rl.retry_after_ms / 1000))))
        self.send_header("X-RateLimit-Remaining", str(rl.remaining))
        self.end_headers()
        self.wfile.write(f"request {rl.request_id}\n".encode() if rl.allowed else b"slow down\n")

    def log_message(self, *args):
        pass


def get(port, user):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/?user={user}") as r:
            return r.status, None
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Retry-After")


def main():
    with psycopg.connect(autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS example_request_py (id bigserial PRIMARY KEY, user_name text NOT NULL)")
        conn.execute("DELETE FROM example_request_py WHERE user_name IN ('carol', 'dave')")
        conn.execute("SELECT rp_ratelimit_reset('api:carol'), rp_ratelimit_reset('api:dave')")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    carol = [get(port, "carol") for _ in range(8)]
    dave = [get(port, "dave") for _ in range(2)]
    print("carol", " ".join(str(s) for s, _ in carol))
    print("retry_after", carol[7][1])
    print("dave", " ".join(str(s) for s, _ in dave))
    with psycopg.connect(autocommit=True) as conn:   # the work ran for the admitted requests only
        c, d = conn.execute("""SELECT count(*) FILTER (WHERE user_name = 'carol'),
            count(*) FILTER (WHERE user_name = 'dave') FROM example_request_py""").fetchone()
        print(f"work_done carol={c} dave={d}")
    server.shutdown()
    if _conn is not None:
        _conn.close()


if __name__ == "__main__":
    main()
