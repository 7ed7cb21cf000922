#!/usr/bin/env bash
# scripts/demo.sh -- `make demo`: the fencing story (a lease expires
# mid-work, its holder's late write is refused), told in SQL against a
# throwaway PostgreSQL and Redis.
#
# Two workers charge account 42 under a lock.  Worker A takes a 200 ms lease
# and its work takes 350 ms; at 220 ms its lease has expired and worker B
# takes the lock.  B writes first; A's late write carries an older fencing
# token, and the trigger on the table refuses it.  Then the same sequence
# against a table without the trigger, where A silently wins.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
rp_setup >/dev/null
rp_start_servers
psql -X -q -c "CREATE EXTENSION redis_primitives" >/dev/null

t0=$(date +%s%3N)
say() { printf '[%5d ms] %s\n' $(( $(date +%s%3N) - t0 )) "$*"; }
sql() { psql -X -At -q -v ON_ERROR_STOP=1 "$@" 2>&1; }

cat <<'TXT'
== redis_primitives demo: a lease that expires mid-work ===================

  CREATE TABLE account (id int PRIMARY KEY, balance int, fence_token bigint);
  CREATE TRIGGER account_fence BEFORE INSERT OR UPDATE ON account
    FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token');

TXT
sql -c "CREATE TABLE account (id int PRIMARY KEY, balance int, fence_token bigint)" \
    -c "CREATE TRIGGER account_fence BEFORE INSERT OR UPDATE ON account
          FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token')" \
    -c "INSERT INTO account VALUES (42, 100, 0)" \
    -c "CREATE TABLE account_unfenced (id int PRIMARY KEY, balance int, fence_token bigint)" \
    -c "INSERT INTO account_unfenced VALUES (42, 100, 0)"

story() {  # table
	local table=$1 a
	t0=$(date +%s%3N)
	say "account 42 holds balance $(sql -c "SELECT balance FROM $table WHERE id = 42")"
	# Worker A: one session throughout, a 200 ms lease, 350 ms of work.
	psql -X -At -q -v t0="$t0" -v tbl="$table" 2>&1 <<'SQL' | sed -u -e 's/^psql:<stdin>:[0-9]*: //' -e 's/^\(ERROR\|DETAIL\|HINT\)/             \1/' &
\set ms '(extract(epoch FROM clock_timestamp()) * 1000)::bigint - :t0'
SELECT fence AS fa FROM rp_acquire('account-42', 200) \gset
SELECT format('[%5s ms] worker A: rp_acquire(''account-42'', 200) -> fence token %s; starts 350 ms of work', :ms, :fa);
SELECT pg_sleep(0.35) \g /dev/null
SELECT format('[%5s ms] worker A: work done, writes balance 90 with its token %s', :ms, :fa);
UPDATE :"tbl" SET balance = 90, fence_token = :fa WHERE id = 42 RETURNING format('[%5s ms] worker A: UPDATE 1 -- the stale write went through', :ms);
SELECT format('[%5s ms] worker A: rp_release(its lease) -> %s: the key is B''s now, nothing deleted', :ms, rp_release('account-42'));
SQL
	a=$!
	# Worker B: another session, arrives at 220 ms, holds its lease while it writes.
	sleep 0.22
	psql -X -At -q -v t0="$t0" -v tbl="$table" 2>&1 <<'SQL'
\set ms '(extract(epoch FROM clock_timestamp()) * 1000)::bigint - :t0'
SELECT fence AS fb FROM rp_acquire('account-42', 10000) \gset
SELECT format('[%5s ms] worker B: A''s lease has expired; rp_acquire(''account-42'', 10000) -> fence token %s', :ms, :fb);
UPDATE :"tbl" SET balance = 50, fence_token = :fb WHERE id = 42;
SELECT format('[%5s ms] worker B: writes balance 50 with its token %s; keeps the lease while A finishes', :ms, :fb);
SELECT pg_sleep(0.25) \g /dev/null
SELECT format('[%5s ms] worker B: rp_release(its lease) -> %s', :ms, rp_release('account-42'));
SQL
	wait $a
	say "account 42 now: balance $(sql -c "SELECT balance FROM $table WHERE id = 42") (B wrote 50)"
}

echo "-- 1. With the trigger: the database itself refuses the stale write"
story account
echo
echo "-- 2. The same two workers against a table without the trigger"
story account_unfenced
echo
cat <<'TXT'
With the trigger the stale holder's write was refused (SQLSTATE RP001) and
B's value survived; without it, A silently overwrote B.  The lock could not
prevent the overlap -- a process cannot be told its lease ran out -- but the
resource can refuse the older token.  See docs/lock.md for what this does
and does not guarantee.

-- 3. The other two primitives, in one line each
TXT
printf "   rp_ratelimit('user:7', 3, 60000) five times -> %s\n" \
	"$(sql -c "SELECT string_agg(rp_ratelimit('user:7', 3, 60000)::text, ' ') FROM generate_series(1, 5)")"
printf "   rp_campaign('nightly', 'node-a', 5000) -> epoch %s; then for node-b -> %s\n" \
	"$(sql -c "SELECT rp_campaign('nightly', 'node-a', 5000)")" \
	"$(sql -c "SELECT coalesce(rp_campaign('nightly', 'node-b', 5000)::text, 'NULL (node-a leads)')")"
echo
echo "The servers were throwaway: stopped and removed now."
