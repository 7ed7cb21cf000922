#!/usr/bin/python3
"""traps.py -- the traps a psycopg application meets, each shown failing the
naive way and working the documented way (docs/applications.md).  Prints one
"name value" line per observation."""
import time

import psycopg
from psycopg.types.composite import CompositeInfo, register_composite


def out(k, v):
    print(k, str(v).lower() if isinstance(v, bool) else v)


def main():
    a = psycopg.connect(autocommit=True)
    b = psycopg.connect(autocommit=True)

    # 1. A release on another connection (what a pool hands out) by name
    # releases nothing; by token it works.
    (token,) = a.execute("SELECT token FROM rp_acquire('ptrap1', 10000)").fetchone()
    out("release_by_name_on_other_connection", b.execute("SELECT rp_release('ptrap1')").fetchone()[0])
    out("still_held", b.execute("SELECT held FROM rp_lock_info('ptrap1')").fetchone()[0])
    out("release_by_token_on_other_connection",
        b.execute("SELECT rp_release('ptrap1', %s)", (token,)).fetchone()[0])

    # 2. The lease as one value is a string unless the composite is registered.
    (lease,) = a.execute("SELECT rp_acquire('ptrap2', 10000)").fetchone()
    out("composite_type", type(lease).__name__)
    register_composite(CompositeInfo.fetch(a, "rp_lease"), a)
    (lease,) = a.execute("SELECT rp_acquire('ptrap2b', 10000)").fetchone()
    out("composite_registered_fence_type", type(lease.fence).__name__)
    out("composite_release_registered", a.execute("SELECT rp_release(%s)", (lease,)).fetchone()[0])
    a.execute("SELECT rp_release_all()")

    # 3. "Not acquired" is one row of NULLs, not zero rows.
    a.execute("SELECT rp_acquire('ptrap3', 10000)")
    rows = b.execute("SELECT * FROM rp_acquire('ptrap3', 10000)").fetchall()
    out("not_acquired_rows", len(rows))
    out("not_acquired_token_none", rows[0][1] is None)
    out("not_acquired_filtered_rows",
        len(b.execute("SELECT * FROM rp_acquire('ptrap3', 10000) WHERE token IS NOT NULL").fetchall()))
    a.execute("SELECT rp_release_all()")

    # 4. statement_timeout ends a waiting acquire on the server; nothing is
    # taken.  a holds the lock until the wait has ended, and the wait would
    # give up by itself only after 20 s: the timeout is what ends it.
    a.execute("SELECT rp_acquire('ptrap4', 60000)")
    b.execute("SET statement_timeout = 300")
    try:
        b.execute("SELECT * FROM rp_acquire('ptrap4', 60000, 20000)")
        out("statement_timeout_code", "none")
    except psycopg.Error as e:
        out("statement_timeout_code", e.sqlstate)
    out("statement_timeout_ended_while_held", a.execute("SELECT held FROM rp_lock_info('ptrap4')").fetchone()[0])
    a.execute("SELECT rp_release('ptrap4')")
    time.sleep(1.0)   # a wait going on behind our back would take it now
    out("statement_timeout_lock_taken", a.execute("SELECT held FROM rp_lock_info('ptrap4')").fetchone()[0])
    a.close()
    b.close()


if __name__ == "__main__":
    main()
