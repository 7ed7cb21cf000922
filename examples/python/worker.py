#!/usr/bin/python3
"""worker.py -- a fenced worker: deposits into accounts, each under a lease,
each deposit ONE round trip from the application.

The table's lock-bound guard, rp_fence_guard('fence_token',
'lock=py-account-{id}', 'xact'), lets a row of account N be written only by a
transaction holding a live lease on 'py-account-N' (else RP004) and sets
fence_token from that lease: the writer passes no token, and a write without
a lease is refused.  So lease, write, commit and release go in one message:

  deposit()                one multi-statement string, no parameters (psycopg
                           sends it as one simple query): BEGIN; SELECT token,
                           fence FROM rp_acquire_xact(...); UPDATE ...; COMMIT.
                           Literals through psycopg.sql.Literal.
  deposit_one_statement()  one statement with parameters: WITH lease AS
                           (rp_acquire_xact(%s, ...)) UPDATE ... FROM lease;
                           zero rows: not acquired.

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


def deposit(conn, account_id, amount, wait_ms=10000):
    """One round trip.  The fence the write carries, or None when the lease
    was not had (the guard refused the UPDATE: RP004)."""
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


def deposit_one_statement(conn, account_id, amount):
    row = conn.execute("""WITH lease AS (SELECT token, fence FROM rp_acquire_xact(%s, 5000, 10000))
        UPDATE example_account_py a SET balance = a.balance + %s
        FROM lease WHERE a.id = %s AND lease.token IS NOT NULL
        RETURNING lease.fence, a.fence_token""", (f"py-account-{account_id}", amount, account_id)).fetchone()
    if row is None:                      # zero rows: not acquired
        return None
    return row[0] if row[0] == row[1] else "mismatch"


def main():
    with psycopg.connect(autocommit=True) as conn:
        setup(conn)
    fences = []

    def worker(w):
        with psycopg.connect(autocommit=True, options="-c statement_timeout=15000") as conn:
            for i in range(12):
                fn = deposit if w % 2 else deposit_one_statement
                fences.append(fn(conn, 1 + (w + i) % 3, 1))

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

        # Another holder has account 2: a deposit that will not wait is
        # refused, writes nothing, and the connection goes on working.
        with psycopg.connect(autocommit=True) as holder:
            (held,) = holder.execute("SELECT token FROM rp_acquire('py-account-2', 10000, 5000)").fetchone()
            if held is None:
                raise RuntimeError("the holder did not get py-account-2")
            before = conn.execute("SELECT balance FROM example_account_py WHERE id = 2").fetchone()[0]
            print("busy_deposit", deposit(conn, 2, 1, wait_ms=0))
            after = conn.execute("SELECT balance FROM example_account_py WHERE id = 2").fetchone()[0]
            print("busy_balance_unchanged", str(before == after).lower())

        try:
            conn.execute("UPDATE example_account_py SET balance = 0 WHERE id = 1")   # no lease held
            print("stale_write accepted")
        except psycopg.Error as e:
            print("stale_write", e.sqlstate)


if __name__ == "__main__":
    main()
