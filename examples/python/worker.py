#!/usr/bin/python3
"""worker.py -- a fenced worker: deposits into accounts, each under a lease.

Each deposit is one transaction on one connection: rp_acquire_xact, then the
guarded UPDATE; the lease ends with the transaction.  The table's lock-bound
guard, rp_fence_guard('fence_token', 'lock=account-{id}'), lets a row of
account N be written only by a session holding a live lease on 'account-N'
(else RP004) and sets fence_token from that lease: the writer passes no token.  Connection settings come from the
PG* environment variables; psycopg 3 is Debian's python3-psycopg.
"""
import threading

import psycopg
from psycopg.rows import namedtuple_row


def setup(conn):
    conn.execute("""CREATE TABLE IF NOT EXISTS example_account_py (
        id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0, fence_token bigint NOT NULL DEFAULT 0)""")
    conn.execute("""CREATE OR REPLACE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON example_account_py
        FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=account-{id}')""")
    conn.execute("TRUNCATE example_account_py")
    with conn.transaction():           # even the first INSERT of a row needs its lease
        conn.execute("SELECT rp_acquire_xact('account-' || i, 5000, 10000) FROM generate_series(1, 3) i")
        conn.execute("INSERT INTO example_account_py (id) SELECT generate_series(1, 3)")


def deposit(conn, account_id, amount):
    with conn.transaction():
        # SELECT * FROM, not SELECT (rp_acquire_xact(...)).*: one call, not one per column.
        lease = conn.execute("SELECT * FROM rp_acquire_xact(%s, %s, %s)",
                             (f"account-{account_id}", 5000, 10000)).fetchone()
        if lease.token is None:        # "not acquired" is a row of NULLs, not zero rows
            return False
        # the guard sets fence_token from the lease
        conn.execute("UPDATE example_account_py SET balance = balance + %s WHERE id = %s",
                     (amount, account_id))
    return True                          # the commit released the lease


def main():
    with psycopg.connect(autocommit=True) as conn:
        setup(conn)
    done = []

    def worker(w):
        with psycopg.connect(autocommit=True, row_factory=namedtuple_row) as conn:
            done.extend(deposit(conn, 1 + (w + i) % 3, 1) for i in range(12))

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with psycopg.connect(autocommit=True) as conn:
        total, fenced = conn.execute(
            "SELECT sum(balance)::int, min(fence_token) > 0 FROM example_account_py").fetchone()
        print("attempts", len(done))
        print("deposits", sum(done))
        print("balance_total", total)
        print("rows_fenced", str(fenced).lower())
        try:
            conn.execute("UPDATE example_account_py SET balance = 0 WHERE id = 1")   # no lease held
            print("stale_write accepted")
        except psycopg.Error as e:
            print("stale_write", e.sqlstate)


if __name__ == "__main__":
    main()
