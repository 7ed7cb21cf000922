#!/usr/bin/python3
"""test/soak/driver.py -- the soak's clients, nemesis and samplers
(docs/testing.md, "The soak").

Run by soak/run.sh, which starts the servers and exports SOAK_SECONDS,
SOAK_SEED, SOAK_OUT, PGHOST, PGPORT, PG2PORT, REDIS_PORT, RP_TMP, SOAK_PGBIN.
Threads: workers doing the real usage patterns of the extension on two
PostgreSQL servers, one nemesis injecting faults at random, samplers of
leadership beliefs, Redis' clock and backends' memory.  At the end it stops
the workers (their sessions end and release), waits a grace period, and
dumps the final tables and every lease key left in Redis.

The one thing to know: this file only RECORDS.  It never decides whether
anything went wrong (soak/check.py does, importing nothing from here), so
every worker writes what it asked and what it got: one JSON line when an
operation is invoked and one when it completes (ev "ok", "fail" with the
SQLSTATE, or "unknown" when the connection broke and the outcome cannot be
known), with times from one monotonic clock (t, microseconds) and the
machine's real-time clock (rt, microseconds since the epoch; Redis' TIME
reads the same kernel clock, which the checker verifies from the "rtime"
samples).  Randomness comes from SOAK_SEED: each thread has its own
generator seeded from it, the nemesis too, so a seed replays the same
choices (not the same interleaving: the scheduler is not seeded).
"""
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

import psycopg

SECONDS = float(os.environ.get("SOAK_SECONDS", "90"))
SEED = int(os.environ.get("SOAK_SEED", "1"))
OUT = os.environ["SOAK_OUT"]
PGHOST = os.environ["PGHOST"]
PORTS = {"pg1": int(os.environ["PGPORT"]), "pg2": int(os.environ["PG2PORT"])}
PGDIRS = {"pg1": "pg", "pg2": "pg2"}
REDIS_PORT = int(os.environ["REDIS_PORT"])
RP_TMP = os.environ["RP_TMP"]
PGBIN = os.environ["SOAK_PGBIN"]
FAULTS = os.environ.get("SOAK_FAULTS", "")
GRACE = float(os.environ.get("SOAK_GRACE", "8"))
SENTINELS = [x for x in os.environ.get("SOAK_SENTINELS", "").split(",") if x]
NODES = [int(x) for x in os.environ.get("SOAK_REDIS_NODES", "").split() if x] if SENTINELS else []
ROWS = 4

stop = threading.Event()
pids_lock = threading.Lock()
worker_pids = {}          # pid -> (server, worker name): for the RSS sampler


def clock():
    return time.monotonic_ns() // 1000, time.time_ns() // 1000


# The session leases LockRMW workers hold now: (server, name, token) ->
# fence.  The nemesis releases one of them by token from a connection of
# its own (the job-queue pattern), which the holder's backend must see.
LIVE_LEASES = {}
LIVE_MU = threading.Lock()


class History:
    """One JSON-lines file per thread: no lock, no interleaved lines."""

    def __init__(self, name):
        self.f = open(os.path.join(OUT, "history-%s.jsonl" % name), "a", buffering=1)
        self.name = name
        self.n = 0

    def event(self, ev, **kw):
        t, rt = clock()
        kw.update(ev=ev, t=t, rt=rt, th=self.name)
        self.f.write(json.dumps(kw, default=str) + "\n")
        return t, rt

    def invoke(self, kind, **kw):
        self.n += 1
        op = "%s:%d" % (self.name, self.n)
        self.event("inv", op=op, kind=kind, **kw)
        return op


def sqlstate_of(e):
    return getattr(e, "sqlstate", None) or (getattr(getattr(e, "diag", None), "sqlstate", None))


def outcome_unknown(state):
    """A connection to PostgreSQL lost mid-call: it may or may not have
    committed.  (08001/08006 raised by the extension about Redis arrive as
    an ERROR on a live session: the transaction is rolled back, a definite
    failure for the database; what Redis did is not known, and the checker
    never counts such a call as admitted or granted.)"""
    return state is None or state in ("57P01", "57P02", "57P03")


class Worker(threading.Thread):
    server = "pg1"

    def __init__(self, name, server=None):
        super().__init__(name=name, daemon=True)
        self.wname = name
        if server:
            self.server = server
        self.rnd = random.Random("%d/%s" % (SEED, name))
        self.h = History(name)
        self.c = None

    # ---- connection --------------------------------------------------------
    def conn(self):
        if self.c is not None and not self.c.closed and not self.c.broken:
            return self.c
        self.close()
        c = psycopg.connect(host=PGHOST, port=PORTS[self.server], user="postgres", dbname="soak",
                            autocommit=True, connect_timeout=5,
                            application_name="soak-w-" + self.wname)
        c.execute("SET statement_timeout = '15s'")
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        self.h.event("connect", srv=self.server, pid=pid)
        with pids_lock:
            worker_pids[pid] = (self.server, self.wname)
        self.c = c
        return c

    def close(self):
        if self.c is not None:
            try:
                pid = self.c.info.backend_pid
                with pids_lock:
                    worker_pids.pop(pid, None)
            except Exception:
                pass
            try:
                self.c.close()
            except Exception:
                pass
        self.c = None

    def op(self, kind, fn, **args):
        """Invoke fn(conn) as one recorded operation; returns (ok, result)."""
        op = self.h.invoke(kind, srv=self.server, **args)
        try:
            c = self.conn()
        except psycopg.Error as e:
            self.h.event("fail", op=op, state="08001", unsent=True, msg=str(e)[:200])
            self.sleep(0.2)
            return False, None, op
        try:
            res = fn(c, op)
        except psycopg.Error as e:
            st = sqlstate_of(e)
            broken = c.broken or c.closed
            if outcome_unknown(st) or broken:
                self.h.event("unknown", op=op, state=st, msg=str(e)[:200])
                self.close()
            else:
                self.h.event("fail", op=op, state=st, msg=str(e)[:200])
                try:
                    c.rollback()
                except psycopg.Error:
                    self.close()
            return False, st, op
        self.h.event("ok", op=op, res=res)
        return True, res, op

    def sleep(self, s):
        stop.wait(s)

    def run(self):
        try:
            while not stop.is_set():
                self.step()
        except Exception as e:              # a driver bug: record it, the checker fails the run
            self.h.event("driver_error", msg=repr(e))
            raise
        finally:
            self.close()
            self.h.event("stopped")


def lease_row(row):
    if row is None or row[0] is None:
        return None
    return {"fence": row[0], "token": row[1], "exp": row[2]}


LEASE_COLS = "l.fence, l.token, (extract(epoch FROM l.expires_at) * 1000000)::bigint"


class LockRMW(Worker):
    """Lock-bound guard: session lease, read, work (sometimes past the TTL),
    write value = read + delta in a later transaction; the guard stamps the
    fence and refuses (RP004) once the lease's local deadline passed."""
    table, prefix, naive = "t_lock", "L", False

    def step(self):
        i = self.rnd.randint(1, ROWS)
        name = "%s-%d" % (self.prefix, i)
        ttl = self.rnd.choice([400, 700, 1000, 1500])
        wait = self.rnd.choice([0, 500, 2000])
        floor_sql = "0" if self.naive else "rp_fence_floor('%s')" % self.table
        ok, lease, _ = self.op("acquire", lambda c, op: lease_row(c.execute(
            "SELECT %s FROM rp_acquire(%%s, %%s, %%s, %s) l" % (LEASE_COLS, floor_sql),
            (name, ttl, wait)).fetchone()), name=name, ttl=ttl, wait=wait, scope="session")
        if not ok or lease is None:
            self.sleep(0.05)
            return
        live = (self.server, name, lease["token"])
        if not self.naive:
            with LIVE_MU:
                LIVE_LEASES[live] = lease["fence"]
        ok, v, _ = self.op("read", lambda c, op: c.execute(
            "SELECT value FROM %s WHERE id = %%s" % self.table, (i,)).fetchone()[0],
            tbl=self.table, id=i)
        if ok:
            self.sleep(self.rnd.uniform(0, ttl * 1.3 / 1000))
            d = self.rnd.randint(1, 9)
            if self.naive:
                sql = "UPDATE %s SET value = %%s, read_value = %%s, op_id = %%s, fence_token = %d WHERE id = %%s" % (
                    self.table, lease["fence"])
            else:
                sql = "UPDATE %s SET value = %%s, read_value = %%s, op_id = %%s WHERE id = %%s" % self.table
            self.op("rmw_write", lambda c, op: c.execute(sql, (v + d, v, op, i)).rowcount,
                    tbl=self.table, id=i, name=name, fence=lease["fence"], token=lease["token"], read=v, delta=d)
        self.op("release", lambda c, op: c.execute("SELECT rp_release(%s)", (name,)).fetchone()[0],
                name=name, fence=lease["fence"])
        with LIVE_MU:
            LIVE_LEASES.pop(live, None)


class NaiveRMW(LockRMW):
    """The naive twin: the same leases and work, a table with no guard, the
    worker writes the fence itself and trusts its lease."""
    table, prefix, naive = "t_naive", "N", True


class TokenXact(Worker):
    """Token, 'skip' and strict guards: one transaction takes an xact lease
    (verify_at_commit at random), adds delta and the fence, sometimes works
    past the TTL before COMMIT.  On t_strict it sometimes forgets the column
    (RP004 expected)."""
    TABLES = {"t_token": "TK", "t_skip": "SK", "t_strict": "ST"}

    def step(self):
        tbl = self.rnd.choice(sorted(self.TABLES))
        i = self.rnd.randint(1, ROWS)
        name = "%s-%d" % (self.TABLES[tbl], i)
        ttl = self.rnd.choice([300, 600, 1000])
        wait = self.rnd.choice([0, 300, 1500])
        verify = self.rnd.random() < 0.5
        nap = self.rnd.uniform(0, ttl * 1.4 / 1000)
        d = self.rnd.randint(1, 9)
        nocol = tbl == "t_strict" and self.rnd.random() < 0.15

        def fn(c, op):
            c.execute("BEGIN")
            lease = lease_row(c.execute(
                "SELECT %s FROM rp_acquire_xact(%%s, %%s, %%s, rp_fence_floor(%%s), %%s) l" % LEASE_COLS,
                (name, ttl, wait, tbl, verify)).fetchone())
            if lease is None:
                c.execute("ROLLBACK")
                return {"lease": None}
            if nocol:
                n = c.execute("UPDATE %s SET value = value + %%s, op_id = %%s WHERE id = %%s" % tbl,
                              (d, op, i)).rowcount
            else:
                n = c.execute("UPDATE %s SET value = value + %%s, fence_token = %%s, op_id = %%s WHERE id = %%s" % tbl,
                              (d, lease["fence"], op, i)).rowcount
            time.sleep(nap)
            c.execute("COMMIT")
            return {"lease": lease, "rows": n}
        self.op("nocol_write" if nocol else "xact_write", fn, tbl=tbl, id=i, name=name, ttl=ttl,
                wait=wait, verify=verify, delta=d, scope="xact")
        self.sleep(self.rnd.uniform(0, 0.05))


class FencedWrite(Worker):
    """rp_fenced_write under a session lease, after some work."""

    def step(self):
        i = self.rnd.randint(1, ROWS)
        name = "F-%d" % i
        ttl = self.rnd.choice([400, 800, 1500])
        ok, lease, _ = self.op("acquire", lambda c, op: lease_row(c.execute(
            "SELECT %s FROM rp_acquire(%%s, %%s, 1000, rp_fence_floor('rp_fenced_store')) l" % LEASE_COLS,
            (name, ttl)).fetchone()), name=name, ttl=ttl, wait=1000, scope="session")
        if not ok or lease is None:
            self.sleep(0.05)
            return
        self.sleep(self.rnd.uniform(0, ttl * 1.3 / 1000))
        self.op("fenced_write", lambda c, op: c.execute(
            "SELECT rp_fenced_write(%s, jsonb_build_object('op', %s::text), %s)", (name, op, lease["fence"])).fetchone()[0],
            tbl="rp_fenced_store", id=name, name=name, fence=lease["fence"], token=lease["token"])
        self.op("release", lambda c, op: c.execute("SELECT rp_release(%s)", (name,)).fetchone()[0],
                name=name, fence=lease["fence"])


class LeaderWrite(Worker):
    """Leader-bound guard: adds to t_leader whenever this server believes it
    leads; the guard stamps the epoch (RETURNING shows which)."""

    def step(self):
        i = self.rnd.randint(1, ROWS)
        d = self.rnd.randint(1, 9)
        self.op("leader_write", lambda c, op: c.execute(
            "UPDATE t_leader SET value = value + %s, op_id = %s WHERE id = %s RETURNING fence_token",
            (d, op, i)).fetchone()[0], tbl="t_leader", id=i, delta=d)
        self.sleep(self.rnd.uniform(0.02, 0.2))


class RateLimit(Worker):
    """All three algorithms, mixed costs, two keys each, a 1 s window."""
    LIMIT, WINDOW = 10, 1000

    def step(self):
        algo = self.rnd.choice(["sliding_log", "sliding_window", "gcra"])
        key = "rl-%s-%d" % (algo, self.rnd.randint(1, 2))
        cost = self.rnd.choice([1, 1, 1, 2, 3])
        self.op("ratelimit", lambda c, op: c.execute(
            "SELECT allowed FROM rp_ratelimit_consume(%s, %s, %s, %s, %s)",
            (key, self.LIMIT, self.WINDOW, cost, algo)).fetchone()[0],
            key=key, algo=algo, cost=cost, limit=self.LIMIT, window=self.WINDOW)
        self.sleep(self.rnd.uniform(0.005, 0.06))


class Semaphore(Worker):
    """Three permits of 'SEM-1', held for a while, released by lease."""
    PERMITS = 3

    def step(self):
        ttl = self.rnd.choice([500, 1000, 2000])
        xact = self.rnd.random() < 0.3
        hold = self.rnd.uniform(0, ttl * 1.2 / 1000)
        if xact:
            def fn(c, op):
                c.execute("BEGIN")
                lease = lease_row(c.execute("SELECT %s FROM rp_semaphore_acquire_xact('SEM-1', %%s, %%s, 1000) l" % LEASE_COLS,
                                            (self.PERMITS, ttl)).fetchone())
                if lease is not None:
                    self.h.event("sem_held", name="SEM-1", fence=lease["fence"])
                    time.sleep(hold)
                    self.h.event("sem_commit", name="SEM-1", fence=lease["fence"])
                c.execute("COMMIT")
                return {"lease": lease}
            self.op("sem_xact", fn, name="SEM-1", permits=self.PERMITS, ttl=ttl, scope="xact")
            return
        ok, lease, _ = self.op("sem_acquire", lambda c, op: lease_row(c.execute(
            "SELECT %s FROM rp_semaphore_acquire('SEM-1', %%s, %%s, 1000) l" % LEASE_COLS,
            (self.PERMITS, ttl)).fetchone()), name="SEM-1", permits=self.PERMITS, ttl=ttl, scope="session")
        if not ok or lease is None:
            self.sleep(0.05)
            return
        self.sleep(hold)
        self.op("release", lambda c, op: c.execute(
            "SELECT rp_release(ROW('SEM-1', %s, %s, to_timestamp(%s / 1e6))::rp_lease)",
            (lease["token"], lease["fence"], lease["exp"])).fetchone()[0], name="SEM-1", fence=lease["fence"])


class LongLease(Worker):
    """Session leases with a 60 s TTL, held a few seconds: one whose holder
    dies (terminate, cancel at the wrong time) must still end within seconds,
    and after the run none may be left."""

    def step(self):
        name = "X-%s-%d" % (self.wname, self.rnd.randint(1, 1000000))
        ok, lease, _ = self.op("acquire", lambda c, op: lease_row(c.execute(
            "SELECT %s FROM rp_acquire(%%s, 60000) l" % LEASE_COLS, (name,)).fetchone()),
            name=name, ttl=60000, wait=0, scope="session")
        if ok and lease is not None:
            self.sleep(self.rnd.uniform(0.2, 3))
            # What a connection pool does: extend and release by token from
            # another connection (the holder's session stays open).
            pool = self.rnd.random() < 0.4
            if pool and self.rnd.random() < 0.5:
                self.pooled(lambda: self.op("extend_token", lambda c, op: c.execute(
                    "SELECT (rp_extend(%s, %s, 60000)).fence", (name, lease["token"])).fetchone()[0],
                    name=name, fence=lease["fence"], pool=True))
            if pool:
                self.pooled(lambda: self.op("release", lambda c, op: c.execute(
                    "SELECT rp_release(%s, %s)", (name, lease["token"])).fetchone()[0],
                    name=name, fence=lease["fence"], pool=True))
            else:
                self.op("release", lambda c, op: c.execute("SELECT rp_release(%s)", (name,)).fetchone()[0],
                        name=name, fence=lease["fence"])
        self.sleep(self.rnd.uniform(0, 0.3))

    def pooled(self, fn):
        """Run fn with the second ('pool') connection as the current one."""
        own, self.c = self.c, getattr(self, "c2", None)
        try:
            return fn()
        finally:
            self.c2, self.c = self.c, own

    def run(self):
        try:
            super().run()
        finally:
            self.pooled(self.close)


# ---- samplers -------------------------------------------------------------

class Sampler(threading.Thread):
    def __init__(self, name, every):
        super().__init__(name=name, daemon=True)
        self.h = History(name)
        self.every = every
        self.c = None

    def run(self):
        while not stop.is_set():
            try:
                self.sample()
            except Exception as e:
                self.h.event("sample_error", msg=str(e)[:200])
                if self.c is not None:
                    try:
                        self.c.close()
                    except Exception:
                        pass
                    self.c = None
                stop.wait(0.2)
                continue
            stop.wait(self.every)


class LeaderSampler(Sampler):
    """rp_is_leader('soak-leader') on one server, bracketed by the clock."""

    def __init__(self, server):
        super().__init__("leader-" + server, 0.03)
        self.server = server

    def sample(self):
        if self.c is None or self.c.closed or self.c.broken:
            self.c = psycopg.connect(host=PGHOST, port=PORTS[self.server], user="postgres", dbname="soak",
                                     autocommit=True, connect_timeout=3, application_name="soak-s-leader")
        t0, rt0 = clock()
        r = self.c.execute(
            "SELECT rp_is_leader('soak-leader'), e.node_id, e.epoch,"
            " (extract(epoch FROM e.valid_until) * 1000000)::bigint"
            " FROM rp_elections() e WHERE e.name = 'soak-leader'").fetchone()
        t1, rt1 = clock()
        self.h.f.write(json.dumps({"ev": "leader", "srv": self.server, "t0": t0, "rt0": rt0, "t1": t1,
                                   "rt1": rt1, "leader": r[0], "node": r[1], "epoch": r[2],
                                   "valid_until": r[3]}) + "\n")


def master_port():
    """REDIS_PORT, or with Sentinel the port of the master the sentinels name."""
    for sn in SENTINELS:
        host, port = sn.rsplit(":", 1)
        try:
            r = redis_cmd("SENTINEL", "get-master-addr-by-name", "soakm", timeout=1, port=int(port))
            if r:
                return int(r[1])
        except (OSError, RuntimeError):
            continue
    return REDIS_PORT


def redis_cmd(*args, timeout=5.0, port=None):
    """A minimal RESP client: one command, one reply (for TIME, SCAN...)."""
    s = socket.create_connection(("127.0.0.1", port or master_port()), timeout=timeout)
    try:
        msg = "*%d\r\n" % len(args) + "".join("$%d\r\n%s\r\n" % (len(str(a).encode()), a) for a in args)
        s.sendall(msg.encode())
        f = s.makefile("rb")
        return resp_read(f)
    finally:
        s.close()


def resp_read(f):
    line = f.readline()
    if not line:
        raise ConnectionError("redis closed the connection")
    kind, rest = line[:1], line[1:-2].decode()
    if kind == b"+":
        return rest
    if kind == b"-":
        raise RuntimeError(rest)
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode(errors="replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [resp_read(f) for _ in range(n)]
    raise RuntimeError("bad RESP reply %r" % line)


class RedisTimeSampler(Sampler):
    """Redis' TIME bracketed by the real-time clock: the checker verifies the
    bracket, which is what lets it place rate-limit admissions on Redis'
    clock from the history's rt stamps."""

    def __init__(self):
        super().__init__("rtime", 0.5)

    def sample(self):
        port = master_port()
        t0, rt0 = clock()
        r = redis_cmd("TIME", timeout=2, port=port)
        t1, rt1 = clock()
        # With Sentinel, every node that calls itself master: two of them
        # means the old master is not demoted yet and still takes writes.
        masters = []
        for node in NODES:
            try:
                if redis_cmd("ROLE", timeout=0.5, port=node)[0] == "master":
                    masters.append(node)
            except (OSError, RuntimeError, TypeError, IndexError):
                pass
        # "master": with Sentinel, the checker sees each failover here
        self.h.f.write(json.dumps({"ev": "rtime", "t0": t0, "t1": t1, "rt0": rt0, "rt1": rt1, "master": port,
                                   "masters": masters, "redis_us": int(r[0]) * 1000000 + int(r[1])}) + "\n")


class RssSampler(Sampler):
    """RssAnon of every worker backend, every few seconds."""

    def __init__(self):
        super().__init__("rss", 3)

    def sample(self):
        with pids_lock:
            pids = dict(worker_pids)
        t, rt = clock()
        for pid, (srv, w) in pids.items():
            try:
                with open("/proc/%d/status" % pid) as f:
                    kb = next(int(l.split()[1]) for l in f if l.startswith("RssAnon:"))
            except (OSError, StopIteration):
                continue
            self.h.f.write(json.dumps({"ev": "rss", "t": t, "pid": pid, "srv": srv, "w": w, "kb": kb}) + "\n")


# ---- the nemesis ----------------------------------------------------------

class Nemesis(threading.Thread):
    """One fault at a time, chosen at random (seeded), a few seconds apart.
    Redis' persistence changes at each kill -9: each life of the server is
    'aof' (appendfsync always) or 'none' at random, and a kill loses the
    data unless both the killed life and the next one are 'aof'."""
    ALL = ["redis_stop", "redis_kill", "client_pause", "script_flush", "debug_sleep",
           "maxmemory", "pg_terminate", "pg_cancel", "pg_restart", "key_prefix", "release_token"]

    def __init__(self):
        super().__init__(name="nemesis", daemon=True)
        self.rnd = random.Random("%d/nemesis" % SEED)
        self.h = History("nemesis")
        self.faults = [f for f in FAULTS.split(",") if f] or self.ALL
        self.life = {}                  # port -> "aof" | "none" (rp_start_redis: none)
        self.prefix = "rp:"
        if SENTINELS and not FAULTS:
            self.faults = self.faults + ["sentinel_failover"]

    def redis_pid(self, port):
        with open(os.path.join(RP_TMP, "redis-%d.pid" % port)) as f:
            return int(f.read().strip())

    def su(self, conn_srv, sql):
        c = psycopg.connect(host=PGHOST, port=PORTS[conn_srv], user="postgres", dbname="soak",
                            autocommit=True, connect_timeout=5, application_name="soak-nemesis")
        try:
            cur = c.execute(sql)
            return cur.fetchall() if cur.description else None
        finally:
            c.close()

    def start_redis(self, mode, port):
        aof_dir = os.path.join(RP_TMP, "soak-aof-%d" % port)
        args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--maxmemory-policy", "noeviction", "--enable-debug-command", "local",
                "--daemonize", "yes", "--dir", RP_TMP, "--pidfile", os.path.join(RP_TMP, "redis-%d.pid" % port),
                "--logfile", os.path.join(RP_TMP, "redis-%d.log" % port), "--dbfilename", "dump-%d.rdb" % port]
        if mode == "aof":
            args += ["--appendonly", "yes", "--appendfsync", "always", "--appenddirname", "soak-aof-%d" % port]
        else:
            args += ["--appendonly", "no"]
            subprocess.run(["rm", "-rf", aof_dir])
        subprocess.run(args, check=True)
        for _ in range(200):
            try:
                if redis_cmd("PING", timeout=1, port=port) == "PONG":
                    return
            except (OSError, RuntimeError):
                pass
            time.sleep(0.05)
        raise RuntimeError("redis did not restart")

    def run(self):
        while not stop.wait(self.rnd.uniform(1.5, 4)):
            f = self.rnd.choice(self.faults)
            op = self.h.invoke("fault", fault=f)
            try:
                detail = getattr(self, "f_" + f)() or {}
                self.h.event("ok", op=op, res=detail)
            except Exception as e:
                self.h.event("fail", op=op, msg=repr(e)[:300])
        self.h.event("stopped")

    def f_release_token(self):
        """rp_release(name, token) of a lease a LockRMW worker holds, from
        the nemesis' own connection to that worker's server: the holder's
        backend must stop writing under it at once (check.py:
        no_write_under_released_lease)."""
        with LIVE_MU:
            held = sorted(LIVE_LEASES.items())
        if not held:
            return {"none": True}
        (srv, name, token), fence = self.rnd.choice(held)
        r = self.su(srv, "SELECT rp_release('%s', '%s')" % (name.replace("'", "''"), token.replace("'", "''")))
        return {"srv": srv, "name": name, "token": token, "fence": fence, "released": bool(r and r[0][0])}

    def f_redis_stop(self):
        s = self.rnd.uniform(0.3, 3)
        port = master_port()
        pid = self.redis_pid(port)
        os.kill(pid, 19)
        time.sleep(s)
        os.kill(pid, 18)
        return {"seconds": s, "port": port}

    def f_redis_kill(self):
        port = master_port()
        pid = self.redis_pid(port)
        killed = self.life.get(port, "none")
        os.kill(pid, 9)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)
        time.sleep(self.rnd.uniform(0, 1))
        life = self.life[port] = self.rnd.choice(["aof", "none"])
        # With Sentinel the replica may have missed the last writes, or
        # resync from an emptied master: a kill may always lose data there.
        lost = bool(SENTINELS) or not (killed == "aof" and life == "aof")
        self.start_redis(life, port)
        return {"killed_life": killed, "new_life": life, "lost": lost, "port": port}

    def f_sentinel_failover(self):
        old = master_port()
        for sn in SENTINELS:
            try:
                redis_cmd("SENTINEL", "FAILOVER", "soakm", port=int(sn.rsplit(":", 1)[1]))
                break
            except (OSError, RuntimeError):
                continue
        for _ in range(300):
            if master_port() != old:
                break
            time.sleep(0.05)
        # Replication is asynchronous: the new master may lack the last writes.
        return {"from": old, "to": master_port(), "lost": True}

    def f_client_pause(self):
        ms = self.rnd.randint(300, 2500)
        mode = self.rnd.choice(["ALL", "WRITE"])
        redis_cmd("CLIENT", "PAUSE", ms, mode)
        time.sleep(ms / 1000)
        return {"ms": ms, "mode": mode}

    def f_script_flush(self):
        redis_cmd("SCRIPT", "FLUSH")

    def f_debug_sleep(self):
        s = round(self.rnd.uniform(0.3, 2.5), 2)
        redis_cmd("DEBUG", "SLEEP", s, timeout=10)
        return {"seconds": s}

    def f_maxmemory(self):
        port = master_port()
        used = int([l for l in redis_cmd("INFO", "memory", port=port).splitlines()
                    if l.startswith("used_memory:")][0].split(":")[1])
        s = self.rnd.uniform(0.5, 3)
        redis_cmd("CONFIG", "SET", "maxmemory", used + 32 * 1024, port=port)
        try:
            time.sleep(s)
        finally:
            redis_cmd("CONFIG", "SET", "maxmemory", 0, port=port)
        return {"seconds": s, "port": port}

    def pick_worker(self, kill):
        srv = self.rnd.choice(["pg1", "pg2"]) if kill == "cancel" else self.rnd.choice(["pg1", "pg1", "pg2"])
        # The mem* workers are spared, so that some backends live long
        # enough for the checker to see whether their memory stays flat.
        rows = self.su(srv, "SELECT pid, application_name FROM pg_stat_activity"
                            " WHERE application_name LIKE 'soak-w-%' AND application_name NOT LIKE 'soak-w-mem%'"
                            " ORDER BY pid")
        if not rows:
            return srv, None, None
        pid, app = self.rnd.choice(rows)
        return srv, pid, app

    def f_pg_terminate(self):
        srv, pid, app = self.pick_worker("terminate")
        if pid:
            self.su(srv, "SELECT pg_terminate_backend(%d)" % pid)
        return {"srv": srv, "pid": pid, "worker": app}

    def f_pg_cancel(self):
        srv, pid, app = self.pick_worker("cancel")
        if pid:
            self.su(srv, "SELECT pg_cancel_backend(%d)" % pid)
        return {"srv": srv, "pid": pid, "worker": app}

    def f_pg_restart(self):
        # Mostly the second server: every restart of the first ends all its
        # backends, and the memory check needs some that live long.
        srv = self.rnd.choice(["pg1", "pg2", "pg2", "pg2"])
        d = os.path.join(RP_TMP, PGDIRS[srv])
        cmd = [os.path.join(PGBIN, "pg_ctl"), "-D", d, "-m", "immediate", "-w", "-t", "60",
               "-l", d + ".log", "restart"]
        if os.getuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return {"srv": srv}

    def f_key_prefix(self):
        self.prefix = "rq:" if self.prefix == "rp:" else "rp:"
        for srv in ("pg1", "pg2"):
            self.su(srv, "ALTER SYSTEM SET redis_primitives.key_prefix = '%s'" % self.prefix)
        for srv in ("pg1", "pg2"):
            self.su(srv, "SELECT pg_reload_conf()")
        return {"prefix": self.prefix}


# ---- the end of the run ---------------------------------------------------

def dump_final(h):
    """The final tables of both servers and every key Redis still holds."""
    final = {"tables": {}, "audit": [], "redis": [], "rp_locks": {}}
    for srv in ("pg1", "pg2"):
        for attempt in range(60):
            try:
                c = psycopg.connect(host=PGHOST, port=PORTS[srv], user="postgres", dbname="soak",
                                    autocommit=True, connect_timeout=5)
                break
            except psycopg.Error:
                time.sleep(1)
        else:
            raise RuntimeError("cannot reach %s for the final dump" % srv)
        tables = [r[0] for r in c.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 't\\_%' ORDER BY 1")]
        for t in tables:
            final["tables"]["%s.%s" % (srv, t)] = [
                {"id": str(r[0]), "value": r[1], "token": r[2], "op_id": r[3]}
                for r in c.execute("SELECT id, value, fence_token, op_id FROM %s ORDER BY id" % t)]
        if srv == "pg1":
            final["tables"]["pg1.rp_fenced_store"] = [
                {"id": r[0], "value": None, "token": r[1], "op_id": r[2]}
                for r in c.execute("SELECT resource, fence, value->>'op' FROM rp_fenced_store ORDER BY 1")]
        for r in c.execute("SELECT seq, tbl, id, token, old_value, new_value, read_value, op_id, pid,"
                           " (extract(epoch FROM at) * 1000000)::bigint FROM soak_audit ORDER BY seq"):
            final["audit"].append({"srv": srv, "seq": r[0], "tbl": r[1], "id": r[2], "token": r[3], "old": r[4],
                                   "new": r[5], "read": r[6], "op": r[7], "pid": r[8], "at": r[9]})
        final["rp_locks"][srv] = [list(r) for r in c.execute("SELECT pid, name, fence, scope FROM rp_locks")]
        c.close()
    cursor = "0"
    while True:
        cursor, keys = redis_cmd("SCAN", cursor, "COUNT", 1000)
        for k in keys:
            typ = redis_cmd("TYPE", k)
            final["redis"].append({"key": k, "type": typ, "pttl": redis_cmd("PTTL", k),
                                   "value": redis_cmd("GET", k) if typ == "string" else None})
        if cursor == "0":
            break
    t, rt = clock()
    final["t"], final["rt"] = t, rt
    with open(os.path.join(OUT, "final.json"), "w") as f:
        json.dump(final, f)


def main():
    random.seed(SEED)
    h = History("main")
    kinds = ([LockRMW("lock%d" % i) for i in range(4)] +
             [NaiveRMW("naive%d" % i) for i in range(2)] +
             [TokenXact("token%d" % i) for i in range(3)] +
             [FencedWrite("fenced%d" % i) for i in range(2)] +
             [LeaderWrite("leader1-%d" % i, "pg1") for i in range(2)] +
             [LeaderWrite("leader2-%d" % i, "pg2") for i in range(2)] +
             [RateLimit("rl%d" % i) for i in range(2)] + [RateLimit("rl2-0", "pg2")] +
             [Semaphore("sem%d" % i) for i in range(2)] +
             [LongLease("long%d" % i) for i in range(2)] +
             [LockRMW("mem0"), TokenXact("mem1")])
    samplers = [LeaderSampler("pg1"), LeaderSampler("pg2"), RedisTimeSampler(), RssSampler()]
    nemesis = Nemesis()
    h.event("start", seed=SEED, seconds=SECONDS, workers=len(kinds), faults=nemesis.faults,
            rows=ROWS, pid=os.getpid())
    for th in samplers + kinds:
        th.start()
    # Let the electors settle before the first fault.
    time.sleep(min(3, SECONDS / 10))
    nemesis.start()
    stop.wait(SECONDS)
    h.event("stopping")
    stop.set()
    nemesis.join(60)
    # Leave the servers as they were: no pause, no memory limit, no prefix.
    for th in kinds:
        th.join(60)
    for th in samplers:
        th.join(10)
    alive = [th.name for th in kinds + samplers + [nemesis] if th.is_alive()]
    h.event("workers_done", alive=alive)
    # Every worker session has ended: what they held is released at exit (or
    # by the background worker if Redis was not answering then).
    time.sleep(GRACE)
    # One more sample of who is master: a failover the samplers did not see
    # (Sentinel promoting the replica of a master stopped in the last
    # seconds) loses the releases made at the sessions' end, and the checker
    # only knows of a failover by two samples naming different masters.  No
    # sample in 10 tries is a driver error, which fails history_complete: a
    # run whose last master is unknown cannot be judged.
    final_rtime = RedisTimeSampler()
    for attempt in range(10):
        try:
            final_rtime.sample()
            break
        except Exception as e:
            final_rtime.h.event("sample_error", msg=str(e)[:200])
            time.sleep(1)
    else:
        final_rtime.h.event("driver_error", msg="no final sample of the master in 10 tries")
    dump_final(h)
    h.event("end")
    return 1 if alive else 0


if __name__ == "__main__":
    sys.exit(main())
