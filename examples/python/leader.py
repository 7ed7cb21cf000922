#!/usr/bin/python3
"""leader.py -- a scheduled job that only the leader runs.

Two instances (A and B, each with its own connection) tick every 150 ms.
Each tick campaigns; only the instance that gets an epoch runs the job, and
the job's write carries the epoch as its fence token, so a deposed leader
that wakes up late is refused by the trigger.  Halfway through, A stops (it
resigns, as on a clean shutdown) and B takes over.  Until the leader-bound
guard (rp_fence_guard('epoch', 'leader=nightly')) lands, the job passes the
epoch itself."""
import time

import psycopg

ELECTION, LEASE_MS = "example-nightly-py", 3000


def main():
    admin = psycopg.connect(autocommit=True)
    admin.execute("""CREATE TABLE IF NOT EXISTS example_job_py (
        name text PRIMARY KEY, runs int NOT NULL DEFAULT 0, last_node text, fence_token bigint NOT NULL DEFAULT 0)""")
    admin.execute("""CREATE OR REPLACE TRIGGER fence BEFORE INSERT OR UPDATE ON example_job_py
        FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token')""")
    admin.execute("DELETE FROM example_job_py")
    admin.execute("INSERT INTO example_job_py (name) VALUES ('nightly')")
    nodes = {n: psycopg.connect(autocommit=True) for n in ("A", "B")}
    running = {"A": True, "B": True}
    runs = {"A": 0, "B": 0}
    epochs = {"A": [], "B": []}
    both_ran = 0

    def tick(node):
        if not running[node]:
            return False
        conn = nodes[node]
        (epoch,) = conn.execute("SELECT rp_campaign(%s, %s, %s)", (ELECTION, node, LEASE_MS)).fetchone()
        if epoch is None:              # a follower: not our job
            return False
        conn.execute("UPDATE example_job_py SET runs = runs + 1, last_node = %s, fence_token = %s "
                     "WHERE name = 'nightly'", (node, epoch))
        runs[node] += 1
        epochs[node].append(epoch)
        return True

    tick("A")                          # A campaigns first, so it leads the first half
    for t in range(8):
        if t == 4:
            running["A"] = False
            nodes["A"].execute("SELECT rp_resign(%s, %s)", (ELECTION, "A"))
        ran = [tick("A"), tick("B")]
        both_ran += all(ran)
        time.sleep(0.15)
    print("runs_A", runs["A"])
    print("runs_B", runs["B"])
    print("both_ran", both_ran)
    print("epoch_advanced", str(bool(epochs["A"] and epochs["B"] and epochs["B"][0] > epochs["A"][-1])).lower())
    try:
        admin.execute("UPDATE example_job_py SET runs = runs + 1, fence_token = %s WHERE name = 'nightly'",
                      (epochs["A"][-1],))
        print("deposed_write accepted")
    except psycopg.Error as e:
        print("deposed_write", e.sqlstate)
    nodes["B"].execute("SELECT rp_resign(%s, %s)", (ELECTION, "B"))
    for c in (admin, *nodes.values()):
        c.close()


if __name__ == "__main__":
    main()
