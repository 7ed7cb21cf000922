#!/usr/bin/python3
"""worker.py -- a fenced worker: deposits into accounts, each under a lease,
each deposit ONE round trip from the application.

The table's lock-bound guard, rp_fence_guard('fence_token',
'lock=py-account-{id}', 'xact'), lets a row of account N be written only by a
transaction holding a live lease on 'py-account-N' (else RP004) and sets
fence_token from that lease: the writer passes no token, and a write without
a lease is refused.  So lease, write, commit and release go in one message:

  deposit()                the fast form: one statement with parameters,
                           prepared: WITH lease AS (rp_acquire_xact(%s, ...))
                           UPDATE ... FROM lease; zero rows: not acquired.
                           psycopg prepares a statement by itself once it has
                           run prepare_threshold (5) times on a connection;
                           prepare=True does it from the first run.  Prepared, PostgreSQL runs its cached
                           plan instead of planning it at every call.
  deposit_string()         one multi-statement string, no parameters (psycopg
                           sends it as one simple query): BEGIN; SELECT token,
                           fence FROM rp_acquire_xact(...); UPDATE ...; COMMIT,
                           for a transaction that needs more than one statement
                           or a pool that cannot keep prepared statements.
                           Literals through psycopg.sql.Literal.

What not to do: `with conn.transaction():` around SELECT * FROM
rp_acquire_xact(...) and the UPDATE as separate execute() calls -- correct,
but four round trips (BEGIN, acquire, UPDATE, COMMIT) where one does, the
lease held across all of them (bench/apps measures the difference).

Connection settings come from the PG* environment variables; psycopg 3 is
Debian's python3-psycopg.
"""
import threading

import psycopg
from psycopg import sql

DEPOSIT = sql.SQL("""BEGIN;
    SELECT token, fence FROM rp_acquire_xact({name}, 5000, {wait});
    UPDATE example_account_py SET balance = balance + {amount} WHERE id = {id} RETURNING fence_token;
    COMMIT""")


def setup(conn):
    conn.execute("""CREATE TABLE IF NOT EXISTS example_account_py (
        id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0, fence_token bigint NOT NULL DEFAULT 0)""")
    conn.execute("""CREATE OR REPLACE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON example_account_py
        FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=py-account-{id}', 'xact')""")
    conn.execute("TRUNCATE example_account_py")
    conn.execute("""BEGIN;
        SELECT rp_acquire_xact('py-account-' || i, 5000, 10000) FROM generate_series(1, 3) i;
        INSERT INTO example_account_py (id) SELECT generate_series(1, 3);
        COMMIT""")


DEPOSIT_ONE = """WITH lease AS (SELECT token, fence FROM rp_acquire_xact(%s, 5000, %s))
    UPDATE example_account_py a SET balance = a.balance + %s
    FROM lease WHERE a.id = %s AND lease.token IS NOT NULL
    RETURNING lease.fence, a.fence_token"""


def deposit(conn, account_id, amount, wait_ms=10000):
    """One round trip, one prepared statement.  The fence the write carries,
    or None when the lease was not had (zero rows: nothing written)."""
    row = conn.execute(DEPOSIT_ONE, (f"py-account-{account_id}", int(wait_ms), amount, account_id),
                       prepare=True).fetchone()
    if row is None:
        return None
    return row[0] if row[0] == row[1] else "mismatch"


def deposit_string(conn, account_id, amount, wait_ms=10000):
    """The same as one string of four statements.  The fence, or None when
    the lease was not had (the guard refused the UPDATE: RP004)."""
    q = DEPOSIT.format(name=sql.Literal(f"py-account-{account_id}"), wait=sql.Literal(int(wait_ms)),
                       amount=sql.Literal(int(amount)), id=sql.Literal(int(account_id)))
    try:
        cur = conn.execute(q)            # positioned on BEGIN's result
    except psycopg.Error as e:
        # A failure inside the string leaves its transaction open and aborted
        # on this connection: end it before anything else uses it.
        conn.execute("ROLLBACK")
        if e.sqlstate == "RP004":        # no lease: not acquired within wait_ms
            return None
        raise
    cur.nextset()
    lease = cur.fetchone()               # (token, fence)
    cur.nextset()
    written = cur.fetchone()             # (fence_token,)
    return lease[1] if written[0] == lease[1] else "mismatch"


def main():
    with psycopg.connect(autocommit=True) as conn:
        setup(conn)
    fences = []
    prepared = []

    def worker(w):
        with psycopg.connect(autocommit=True, options="-c statement_timeout=15000") as conn:
            for i in range(12):
                fn = deposit_string if w % 2 else deposit
                fences.append(fn(conn, 1 + (w + i) % 3, 1))
                if i == 0 and fn is deposit:   # prepared at its first run, not after prepare_threshold
                    prepared.append(conn.execute("SELECT count(*) FROM pg_prepared_statements "
                                                 "WHERE statement LIKE 'WITH lease AS%'").fetchone()[0])

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with psycopg.connect(autocommit=True) as conn:
        total, fenced = conn.execute(
            "SELECT sum(balance)::int, min(fence_token) > 0 FROM example_account_py").fetchone()
        print("attempts", len(fences))
        print("deposits", sum(1 for f in fences if isinstance(f, int)))
        print("balance_total", total)
        print("rows_fenced", str(fenced).lower())
        print("fence_is_the_lease", str("mismatch" not in fences).lower())
        print("deposit_prepared_at_first_run", sum(1 for n in prepared if n == 1))

        # Another holder has account 2: a deposit that will not wait is
        # refused, writes nothing, and the connection goes on working.
        with psycopg.connect(autocommit=True) as holder:
            (held,) = holder.execute("SELECT token FROM rp_acquire('py-account-2', 10000, 5000)").fetchone()
            if held is None:
                raise RuntimeError("the holder did not get py-account-2")
            before = conn.execute("SELECT balance FROM example_account_py WHERE id = 2").fetchone()[0]
            print("busy_deposit", deposit(conn, 2, 1, wait_ms=0))
            print("busy_deposit_string", deposit_string(conn, 2, 1, wait_ms=0))
            after = conn.execute("SELECT balance FROM example_account_py WHERE id = 2").fetchone()[0]
            print("busy_balance_unchanged", str(before == after).lower())

        try:
            conn.execute("UPDATE example_account_py SET balance = 0 WHERE id = 1")   # no lease held
            print("stale_write accepted")
        except psycopg.Error as e:
            print("stale_write", e.sqlstate)


if __name__ == "__main__":
    main()
