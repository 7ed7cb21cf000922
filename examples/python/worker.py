#!/usr/bin/python3
"""worker.py -- a fenced worker: deposits into accounts, each under a lease.

Each deposit is one transaction on one connection: rp_acquire_xact, then the
guarded UPDATE; the lease ends with the transaction.  The table's trigger
refuses a write whose fence token is older than the row's (RP001).  Until the
lock-bound guard (rp_fence_guard('fence_token', 'lock=account-{id}')) lands,
the writer passes lease.fence itself.  Connection settings come from the
PG* environment variables; psycopg 3 is Debian's python3-psycopg.
"""
import threading

import psycopg
from psycopg.rows import namedtuple_row


def setup(conn):
    conn.execute("""CREATE TABLE IF NOT EXISTS example_account_py (
        id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0, fence_token bigint NOT NULL DEFAULT 0)""")
    conn.execute("""CREATE OR REPLACE TRIGGER fence BEFORE INSERT OR UPDATE ON example_account_py
        FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token')""")
    conn.execute("TRUNCATE example_account_py")
    conn.execute("INSERT INTO example_account_py (id) SELECT generate_series(1, 3)")


def deposit(conn, account_id, amount):
    with conn.transaction():
        # SELECT * FROM, not SELECT (rp_acquire_xact(...)).*: one call, not one per column.
        lease = conn.execute("SELECT * FROM rp_acquire_xact(%s, %s, %s)",
                             (f"account-{account_id}", 5000, 10000)).fetchone()
        if lease.token is None:        # "not acquired" is a row of NULLs, not zero rows
            return False
        conn.execute("UPDATE example_account_py SET balance = balance + %s, fence_token = %s WHERE id = %s",
                     (amount, lease.fence, account_id))   # lease.fence is a Python int
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
            conn.execute("UPDATE example_account_py SET balance = 0, fence_token = 1 WHERE id = 1")
            print("stale_write accepted")
        except psycopg.Error as e:
            print("stale_write", e.sqlstate)


if __name__ == "__main__":
    main()
