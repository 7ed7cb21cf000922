#!/usr/bin/python3
"""api.py -- an HTTP handler that enforces rp_ratelimit_consume and answers
429 with Retry-After.  One SQL call per request; retry_after_ms is an int in
psycopg (a string in node-postgres)."""
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


def consume(key):
    global _conn
    with _conn_lock:
        if _conn is None or _conn.closed:
            _conn = psycopg.connect(autocommit=True, row_factory=namedtuple_row)
        return _conn.execute("SELECT * FROM rp_ratelimit_consume(%s, %s, %s)",
                             (key, LIMIT, WINDOW_MS)).fetchone()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        user = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query).get("user", ["anonymous"])[0]
        rl = consume(f"api:{user}")
        if rl.allowed:
            self.send_response(200)
        else:
            self.send_response(429)
            self.send_header("Retry-After", str(max(1, math.ceil(rl.retry_after_ms / 1000))))
        self.send_header("X-RateLimit-Remaining", str(rl.remaining))
        self.end_headers()
        self.wfile.write(b"hello\n" if rl.allowed else b"slow down\n")

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
        conn.execute("SELECT rp_ratelimit_reset('api:carol'), rp_ratelimit_reset('api:dave')")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    carol = [get(port, "carol") for _ in range(8)]
    dave = [get(port, "dave") for _ in range(2)]
    print("carol", " ".join(str(s) for s, _ in carol))
    print("retry_after", carol[7][1])
    print("dave", " ".join(str(s) for s, _ in dave))
    server.shutdown()
    if _conn is not None:
        _conn.close()


if __name__ == "__main__":
    main()
