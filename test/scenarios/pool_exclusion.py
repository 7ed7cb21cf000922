#!/usr/bin/python3
# test/scenarios/pool_exclusion.py -- W workers share a pool of connections,
# as an application's requests share pg.Pool's or PgBouncer's backends, and
# each runs C critical sections on one lock name (or, with --permits K, on
# one semaphore of K permits):
#     acquire (one call)  ->  3 ms inside  ->  rp_release(name, token)
# Every call takes whichever connection is free (pool.query), so consecutive
# calls of one worker land on different backends, and a backend serves many
# workers in turn.  Each worker records its entry (once the acquire
# returned) and its exit (before the release is sent).  From those
# intervals the driver counts the entries that made more than K workers
# inside (K = 1 for a lock), and, from the tokens, the entries handed the
# very token a worker inside held.
#
# The one thing to know: the pool is N psycopg connections handed out first
# come, first served (--pool N), or, with --per-worker, one client
# connection per worker (to PgBouncer, which multiplexes them over its own
# server connections).  No server-side prepared statements: PgBouncer's
# transaction mode would run them on a backend that never prepared them.
# Debian's python3 with python3-psycopg (psycopg 3).
#
# usage: pool_exclusion.py --dsn DSN [--pool N | --per-worker] [-w 16] [-c 15]
#                          [--permits K] [--naive] NAME
#   --permits K  rp_semaphore_acquire(NAME, K, ...) instead of rp_acquire.
#   --naive   acquire with session-wide re-entry built in SQL: a live lease
#             (permit) this backend's registry lists for the name is handed
#             back (what 1.1's rp_acquire and rp_semaphore_acquire did), else
#             a new one is asked for.
# Output, one line: "entries E overlaps O same_token S errors X max_inside M"
# (overlaps: entries that made more than K inside; M: the most inside at once).
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
ap.add_argument("--permits", type=int, default=None)
ap.add_argument("--naive", action="store_true")
ap.add_argument("name")
args = ap.parse_args()

# A free lease is handed out quickly; a held one is waited for briefly and
# asked for again, so that a waiting acquire never holds every connection
# of the pool while the holder's release queues behind it.
# A permit waits in the semaphore's queue for those 50 ms; its TTL is longer
# than a lock's: its holder must not lose it to a slow scheduler (that would
# count as an overlap), and a released permit is gone at once anyway.
if args.permits is None:
    LIMIT = 1
    ACQUIRE = "SELECT token FROM rp_acquire(%(n)s, 2000, 50)"
    KIND = "token NOT LIKE 's%%'"
else:
    LIMIT = args.permits
    ACQUIRE = "SELECT token FROM rp_semaphore_acquire(%(n)s, %(k)s, 10000, 50)"
    KIND = "token LIKE 's%%'"
NAIVE = ("SELECT coalesce((SELECT token FROM rp_leases() WHERE name = %(n)s "
         "AND " + KIND + " AND expires_at > clock_timestamp() LIMIT 1), "
         "(" + ACQUIRE + "))")
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
intervals = []                  # (entry, exit) of every critical section
stats = {"entries": 0, "overlaps": 0, "same_token": 0, "errors": 0, "max_inside": 0}


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
    p = {"n": args.name, "k": args.permits}
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
            t_in = time.monotonic()
            stats["entries"] += 1
            if tok in inside:
                stats["same_token"] += 1
            inside.append(tok)
        time.sleep(0.003)
        with mu:
            inside.remove(tok)
            intervals.append((t_in, time.monotonic()))
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
# How many were inside at each entry, itself included: the intervals that
# began before it (or with it) and had not ended yet.
for (t_in, _) in intervals:
    n = sum(1 for (a, b) in intervals if a <= t_in < b)
    stats["max_inside"] = max(stats["max_inside"], n)
    if n > LIMIT:
        stats["overlaps"] += 1
print("entries %(entries)d overlaps %(overlaps)d same_token %(same_token)d errors %(errors)d "
      "max_inside %(max_inside)d" % stats)
