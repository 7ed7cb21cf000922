#!/usr/bin/python3
# test/scenarios/race.py -- N separate PostgreSQL connections run the same
# SQL at the same instant, round after round, from one client process.
#
# The one thing to know: the race is between backends, not threads.  Every
# caller is a connection (a backend) of its own; each round they all block
# on pg_advisory_lock_shared(K) while this process holds pg_advisory_lock(K)
# on a connection of its own, and once pg_locks shows all N waiting it
# unlocks and they run at once -- the barrier of tap.bash, without a psql
# process per caller and per poll.  The connections are kept from round to
# round.  Debian's python3 with python3-psycopg (psycopg 3).
#
# usage: race.py -n CALLERS [-r ROUNDS] [-k LOCK] [-v NAME=VALUE]...
#                [-e NAME=V1,V2,...] [--after SQL] STEP...
#   STEP       SQL each caller runs in turn once released; the first column
#              of its first row is printed.  A STEP starting with '?' is a
#              guard: unless it returns true the caller skips the rest.
#              %(NAME)s is replaced by a literal: the -v values, -e's value
#              for this round, i (the caller, 1..N) and round (1..R).
#   -e         one value per round (the number of rounds is then their count)
#   --after    SQL each caller runs once every caller has run its steps
# Output, one line each: "ROUND CALLER VALUE" for a step's value (NULL as
# NULL), "ROUND CALLER ERROR SQLSTATE message" for a failed step (the
# caller's round ends there), "ROUND CALLER DONE" when its steps are done.
# Values print as psql prints them (t/f, NULL for a null).
import argparse
import os
import sys
import threading
import time

import psycopg

ap = argparse.ArgumentParser()
ap.add_argument("-n", type=int, required=True)
ap.add_argument("-r", type=int, default=1)
ap.add_argument("-k", type=int, default=424242)
ap.add_argument("-d", default=os.environ.get("RP_DB", "rp_test"))
ap.add_argument("-v", action="append", default=[])
ap.add_argument("-e", action="append", default=[])
ap.add_argument("--after")
ap.add_argument("--timeout", type=float, default=60.0)
ap.add_argument("steps", nargs="+")
a = ap.parse_args()


def value(v):
    return int(v) if v.lstrip("-").isdigit() else v


fixed = dict(kv.split("=", 1) for kv in a.v)
fixed = {k: value(v) for k, v in fixed.items()}
each = {}
for kv in a.e:
    k, vs = kv.split("=", 1)
    each[k] = [value(v) for v in vs.split(",")]
rounds = len(next(iter(each.values()))) if each else a.r


def connect():
    # ClientCursor: parameters become literals in the text, as psql -v does
    c = psycopg.connect(dbname=a.d, autocommit=True, application_name="race",
                        cursor_factory=psycopg.ClientCursor)
    c.execute("SET statement_timeout = %s" % int(a.timeout * 2000))
    return c


out_lock = threading.Lock()
lines = []


def text(v):
    # as psql prints it
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "t" if v else "f"
    return str(v)


def say(*parts):
    with out_lock:
        lines.append(" ".join(str(p) for p in parts))


ctl = connect()
conns = [None] * a.n


def open_one(i):
    conns[i] = connect()


openers = [threading.Thread(target=open_one, args=(i,)) for i in range(a.n)]
for t in openers:
    t.start()
for t in openers:
    t.join()

for r in range(1, rounds + 1):
    key = a.k + r
    params = dict(fixed, round=r)
    for k, vs in each.items():
        params[k] = vs[r - 1]
    after = threading.Barrier(a.n)

    def caller(i):
        c = conns[i - 1]
        p = dict(params, i=i)
        try:
            c.execute("SELECT pg_advisory_lock_shared(%s)" % key)
            for s in a.steps:
                guard = s.startswith("?")
                row = c.execute(s[1:] if guard else s, p).fetchone() if "%(" in s \
                    else c.execute(s[1:] if guard else s).fetchone()
                if guard:
                    if not (row and row[0] is True):
                        break
                elif row is not None:
                    say(r, i, text(row[0]))
            say(r, i, "DONE")
        except psycopg.Error as e:
            say(r, i, "ERROR", e.sqlstate, str(e).splitlines()[0])
        finally:
            try:
                c.execute("SELECT pg_advisory_unlock_shared(%s)" % key)
            except psycopg.Error:
                pass
        try:
            after.wait(a.timeout)
            if a.after:
                c.execute(a.after, p)
        except (threading.BrokenBarrierError, psycopg.Error) as e:
            say(r, i, "ERROR", getattr(e, "sqlstate", None), "after:", e)

    ctl.execute("SELECT pg_advisory_lock(%s)" % key)
    threads = [threading.Thread(target=caller, args=(i,)) for i in range(1, a.n + 1)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + a.timeout
    while True:
        waiting = ctl.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                              " AND objid = %s AND NOT granted" % key).fetchone()[0]
        if waiting >= a.n or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if waiting < a.n:
        say("#", "round", r, "only", waiting, "of", a.n, "callers reached the barrier")
    ctl.execute("SELECT pg_advisory_unlock(%s)" % key)   # everyone runs now
    for t in threads:
        t.join()

for c in conns:
    c.close()
ctl.close()
sys.stdout.write("".join(l + "\n" for l in lines))
