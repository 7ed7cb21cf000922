#!/usr/bin/python3
# test/scenarios/pool_exclusion.py -- W workers share a pool of connections,
# as an application's requests share pg.Pool's or PgBouncer's backends, and
# each runs C critical sections on one lock name:
#     acquire (one call)  ->  3 ms inside  ->  rp_release(name, token)
# Every call takes whichever connection is free (pool.query), so consecutive
# calls of one worker land on different backends, and a backend serves many
# workers in turn.  The driver counts the entries made while another worker
# was inside, and of those, the ones handed the very token the other worker
# held.
#
# The one thing to know: the pool is N psycopg connections handed out first
# come, first served (--pool N), or, with --per-worker, one client
# connection per worker (to PgBouncer, which multiplexes them over its own
# server connections).  No server-side prepared statements: PgBouncer's
# transaction mode would run them on a backend that never prepared them.
# Debian's python3 with python3-psycopg (psycopg 3).
#
# usage: pool_exclusion.py --dsn DSN [--pool N | --per-worker] [-w 16] [-c 15]
#                          [--naive] NAME
#   --naive   acquire with session-wide re-entry built in SQL: a live lease
#             this backend's registry lists for the name is handed back (what
#             1.1's rp_acquire did), else rp_acquire.
# Output, one line: "entries E overlaps O same_token S errors X".
import argparse
import collections
import sys
import threading
import time

import psycopg

ap = argparse.ArgumentParser()
ap.add_argument("--dsn", required=True)
ap.add_argument("--pool", type=int, default=8)
ap.add_argument("--per-worker", action="store_true")
ap.add_argument("-w", "--workers", type=int, default=16)
ap.add_argument("-c", "--cycles", type=int, default=15)
ap.add_argument("--naive", action="store_true")
ap.add_argument("name")
args = ap.parse_args()

# A free lease is handed out quickly; a held one is waited for briefly and
# asked for again, so that a waiting acquire never holds every connection
# of the pool while the holder's release queues behind it.
ACQUIRE = "SELECT token FROM rp_acquire(%(n)s, 2000, 50)"
NAIVE = ("SELECT coalesce((SELECT token FROM rp_leases() WHERE name = %(n)s "
         "AND expires_at > clock_timestamp() LIMIT 1), "
         "(SELECT token FROM rp_acquire(%(n)s, 2000, 50)))")
RELEASE = "SELECT rp_release(%(n)s, %(t)s)"

class FairPool:
    """Connections handed out first come, first served, as pg.Pool does: a
    returned connection goes straight to the longest waiter, so a worker
    that loops on a refused acquire cannot barge ahead of a release."""

    def __init__(self, conns):
        self.free = list(conns)
        self.waiters = collections.deque()
        self.mu = threading.Lock()

    def get(self):
        with self.mu:
            if self.free and not self.waiters:
                return self.free.pop()
            w = [threading.Event(), None]
            self.waiters.append(w)
        w[0].wait()
        return w[1]

    def put(self, c):
        with self.mu:
            if self.waiters:
                w = self.waiters.popleft()
                w[1] = c
                w[0].set()
            else:
                self.free.append(c)


pool = FairPool([] if args.per_worker else
                [psycopg.connect(args.dsn, autocommit=True, prepare_threshold=None) for _ in range(args.pool)])

mu = threading.Lock()
inside = []                     # tokens of the workers inside now
stats = {"entries": 0, "overlaps": 0, "same_token": 0, "errors": 0}


def call(conn, sql, params):
    own = conn is not None
    c = conn if own else pool.get()
    try:
        return c.execute(sql, params).fetchone()[0]
    finally:
        if not own:
            pool.put(c)


def worker(i):
    try:
        conn = psycopg.connect(args.dsn, autocommit=True, prepare_threshold=None) if args.per_worker else None
    except psycopg.Error as e:
        with mu:
            stats["errors"] += 1
        print("# connect:", str(e).strip().splitlines()[0], file=sys.stderr)
        return
    p = {"n": args.name}
    done = 0
    deadline = time.monotonic() + 600
    errors = 0
    while done < args.cycles and time.monotonic() < deadline and errors < 20:
        try:
            tok = call(conn, NAIVE if args.naive else ACQUIRE, p)
        except psycopg.Error as e:
            with mu:
                stats["errors"] += 1
            print("# acquire:", str(e).strip().splitlines()[0], file=sys.stderr)
            errors += 1
            time.sleep(0.01)
            continue
        if tok is None:
            continue
        with mu:
            stats["entries"] += 1
            if inside:
                stats["overlaps"] += 1
                if tok in inside:
                    stats["same_token"] += 1
            inside.append(tok)
        time.sleep(0.003)
        with mu:
            inside.remove(tok)
        try:
            call(conn, RELEASE, {"n": args.name, "t": tok})
        except psycopg.Error as e:
            with mu:
                stats["errors"] += 1
            print("# release:", str(e).strip().splitlines()[0], file=sys.stderr)
        done += 1
    if conn is not None:
        conn.close()


threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.workers)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("entries %(entries)d overlaps %(overlaps)d same_token %(same_token)d errors %(errors)d" % stats)
