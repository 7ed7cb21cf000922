# test/t/003_sentinel.pl -- Redis Sentinel: a master, one replica and three
# sentinels on local ports.  The failures this tells the story of:
#
#  A. the master dies under load: the sentinels promote the replica, and the
#     same PostgreSQL session's calls resume against the new master by
#     themselves (within the failover time: test/timing/sentinel_failover_time.pl);
#  B. replication is asynchronous, so a failover can lose the last fence
#     counter increments: without a floor the counter goes backwards and
#     re-issues a token a fenced table already accepted from another lease;
#     with the database-side floor (rp_fence_floor) the next token is above
#     every token the table holds.  fence_replicas (WAIT) refuses to hand out
#     a token no replica has;
#  C. a master demoted under a connected session: READONLY drops the
#     connection, the next call asks the sentinels again, and ROLE refuses
#     a server that is not a master; the same when the READONLY answers a
#     release sent at COMMIT (release_at_commit = send), read by the next
#     call before its own command.
#
# The replica is made to lag deterministically: it is given a wrong
# masterauth and its link is cut, so it stays a healthy, promotable replica
# that simply misses the increments made while it is cut off.
use strict;
use warnings;

use Test::More;
use Time::HiRes qw(usleep);

use RedisPrimitives::Test::Redis;
use RedisPrimitives::Test::Node;

my $R = 'RedisPrimitives::Test::Redis';
my $pm = $R->new(name => 'master');
my $pr = $R->new(name => 'replica', args => [ '--replicaof', '127.0.0.1', $pm->port ]);
my @sent = map { $R->new(sentinel => { master => $pm, quorum => 2 }) } 1 .. 3;
my $sentinels = join(',', map { '127.0.0.1:' . $_->port } @sent);

my $node = rp_node('sentinel', "redis_primitives.sentinels = '$sentinels'\n"
	  . "redis_primitives.sentinel_master = 'rpm'\n");

sub ms_of { return sql($node, "SELECT (extract(epoch FROM $_[0]) * 1000)::bigint"); }

# Every sentinel names the master, sees the replica healthy, and knows the
# two other sentinels.
ok(wait_until(sub { $pr->link_up && !grep { !$_->sees($pm, $pr, 2) } @sent }),
	'master, replica and three sentinels are up and know each other');

# ---- discovery -------------------------------------------------------------
is(sql($node, 'SELECT redis_version IS NOT NULL FROM rp_ping()'), 't', 'rp_ping through the sentinels');
sql($node, "SELECT rp_acquire('sent-where', 60000)");
is($pm->cli('GET', 'rp:{sent-where}:fence'), '1', 'the lease was taken on the master the sentinels named');
{
	local $ENV{PGOPTIONS} = "-c redis_primitives.sentinels=127.0.0.1:1,$sentinels";
	is(sql($node, "SELECT last_fence FROM rp_lock_info('sent-where')"), '1', 'a dead sentinel first in the list is skipped');
	$ENV{PGOPTIONS} = '-c redis_primitives.sentinels=127.0.0.1:1,127.0.0.1:2';
	is(sqlstate($node, "SELECT rp_lock_info('x')"), '08001', 'no sentinel reachable: 08001');
	$ENV{PGOPTIONS} = '-c redis_primitives.sentinel_master=nosuch';
	is(sqlstate($node, "SELECT rp_lock_info('x')"), '08001', 'a master name the sentinels do not know: 08001');
}

# ---- A. the master dies under load -------------------------------------------
# The fenced tables: sent_acct takes A's tokens, sent_nofloor and sent_floor
# B's, without and with the floor.
for my $t ('acct', 'nofloor', 'floor')
{
	sql($node, qq{
CREATE TABLE sent_$t (id int PRIMARY KEY, fence bigint NOT NULL, writes int NOT NULL);
CREATE INDEX ON sent_$t (fence);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE ON sent_$t FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence');
INSERT INTO sent_$t VALUES (1, 0, 0);
});
}

# A call every 20 ms: a lease on the floor of the fenced table, whose token
# the table then takes.  The calls go on until the new master has served
# ten (a row in sent_log_stop ends them): calls for a fixed 16 s ended
# before a failover that a busy machine made slow, and "resume" had no call
# left to resume.  Every wait here is on what the sentinels and the log
# show, for 180 s at most: a Sentinel failover under load retries (a
# promotion not seen within failover-timeout is abandoned, and tried again
# after twice that).
my $loader = lease_load($node, 'sent_log', 600, ['sent-acct'], q{PERFORM pg_sleep(0.02);
        l := rp_acquire(n, 2000, 0, rp_fence_floor('sent_acct'));
        IF l IS NOT NULL THEN
          UPDATE sent_acct SET fence = l.fence, writes = writes + 1 WHERE id = 1;
          PERFORM rp_release(l);
        END IF;});
wait_until(sub { sql($node, 'SELECT count(*) FROM sent_log WHERE ok AND fence IS NOT NULL') >= 20 }, 180);
my $kill_at = now_ms();
$pm->stop;
ok(wait_until(sub { $sent[0]->master_port eq $pr->port }, 180), 'the sentinels promote the replica');
my $promoted_at = now_ms();
# The pause: from the last call served before the first failure to the first
# call served after it.
my $first_fail = "(SELECT min(at) FROM sent_log WHERE NOT ok AND at > to_timestamp($kill_at / 1000.0))";
wait_until(sub { sql($node, "SELECT count(*) FROM sent_log WHERE ok AND fence IS NOT NULL AND at > $first_fail") >= 10 }, 180);
sql($node, 'INSERT INTO sent_log_stop DEFAULT VALUES');
psql_finish($loader);
my $first_ok = ms_of("(SELECT min(at) FROM sent_log WHERE ok AND at > $first_fail)");
my $last_ok = ms_of("(SELECT max(at) FROM sent_log WHERE ok AND at < $first_fail)");
ok($first_ok ne '', "the same session's calls resume against the new master by themselves");
my $pause = ($first_ok || 0) - ($last_ok || 0);
diag("failover A: last call served by the old master to first by the new one: $pause ms"
	  . ' (kill to promotion seen by a sentinel: ' . ($promoted_at - $kill_at) . ' ms)');
cmp_ok(sql($node, "SELECT count(*) FROM sent_log WHERE ok AND fence IS NOT NULL AND at > to_timestamp($kill_at / 1000.0)"),
	'>=', 10, 'leases are taken and fenced writes made on the new master');
is(sql($node, "SELECT count(*) FROM sent_log WHERE NOT ok AND left(state, 5) NOT IN ('08001', '08006')"), '0',
	'calls during the failover fail only as unreachable or lost ('
	  . sql($node, "SELECT string_agg(DISTINCT left(state, 5), ',') FROM sent_log WHERE NOT ok") . ')');
is( sql($node, q{SELECT count(*) FROM (SELECT fence, max(fence) OVER (ORDER BY at ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev
         FROM sent_log WHERE fence IS NOT NULL) s WHERE fence <= prev}), '0',
	'every accepted token is above every token accepted before it, across the failover');
diag('load: ' . sql($node, "SELECT count(*) FILTER (WHERE ok) || ' calls ok, ' || count(*) FILTER (WHERE NOT ok) || ' failed, tokens ' || min(fence) || '..' || max(fence) FROM sent_log"));

# ---- B. a failover that loses counter increments ----------------------------
# The old master comes back as a replica of the new one.
$pm = $R->new(name => 'master', port => $pm->port, args => [ '--replicaof', '127.0.0.1', $pr->port ]);
ok(wait_until(sub { $pm->link_up && !grep { !$_->sees($pr, $pm, 2) } @sent }, 180),
	'the old master is back as a replica, and the sentinels see it');

# WAIT is given 30 s (the default is 500 ms): a replica descheduled for half
# a second on a loaded machine is still in sync, and the acquire must wait
# for its acknowledgement, not fail (the RP003 below is the failure).
is( sql($node, "SET redis_primitives.fence_replicas = 1; SET redis_primitives.command_timeout = 60000; "
		  . "SET redis_primitives.fence_replicas_timeout = 30000; SELECT (rp_acquire('sent-wait', 60000)).fence IS NOT NULL"), 't',
	'fence_replicas = 1 with the replica in sync: the acquire returns after WAIT');

# Sentinels do not start another failover of the same master within twice
# failover-timeout (6 s) of the last one; the cut-off replica must still be
# fresh enough to be chosen when they do (10 x down-after).  A fixed wait:
# the sentinels' own rule, not a condition to poll.
my $left = $promoted_at + 7000 - now_ms();
usleep($left * 1000) if $left > 0;

# Cut the replica off: it keeps its data and stays promotable, but misses
# every increment from now on.  Sentinels skip a replica whose link has been
# down for more than 10 x down-after when its master fails, so what follows
# up to the kill runs in one session opened before the cut (starting a psql
# per statement takes seconds on a loaded machine), and down-after is 5 s
# from here on: at load 50 the cut to the kill took 13 s, past the 10 s
# that 1 s gave, and the sentinels refused the replica (no-good-slave).
$_->cli('SENTINEL', 'SET', 'rpm', 'down-after-milliseconds', '5000') for @sent;
my $b = session($node);
$pm->cli('CONFIG', 'SET', 'masterauth', 'wrong-Pw');
$pm->cli('CLIENT', 'KILL', 'TYPE', 'master');
ok(wait_until(sub { !$pm->link_up }), 'the replica is cut off from the master');

is( sq($b, "SET redis_primitives.fence_replicas = 1; SET redis_primitives.fence_replicas_timeout = 200; "
		  . "SELECT rp_acquire('sent-nowait', 60000)"),
	'ERROR:  RP003', 'fence_replicas = 1 with no replica acknowledging: the acquire fails with RP003');
sq($b, 'RESET redis_primitives.fence_replicas; RESET redis_primitives.fence_replicas_timeout');
is(sq($b, "SELECT held FROM rp_lock_info('sent-nowait')"), 'f', 'and the lease it took was released');

# Five leases on each lock, each writing its token to its fenced table
# (the UPDATE's guard sees the token, then RETURNING releases the lease).
for my $t ('nofloor', 'floor')
{
	my $fl = $t eq 'floor' ? "rp_fence_floor('sent_floor')" : '0';
	sq($b, qq{UPDATE sent_$t SET fence = l.fence, writes = writes + 1 FROM rp_acquire('sent-$t', 60000, 0, $fl) l
	     WHERE id = 1 RETURNING rp_release(l)}) for 1 .. 5;
}
is(sq($b, "SELECT (SELECT fence || '/' || writes FROM sent_nofloor) || ' ' || (SELECT fence || '/' || writes FROM sent_floor)"),
	'5/5 5/5', 'both tables accepted tokens 1..5 (five different leases each)');
is($pm->cli('GET', 'rp:{sent-nofloor}:fence') . '|' . $pm->cli('GET', 'rp:{sent-floor}:fence'), '|',
	'the cut-off replica has none of those increments');
$b->quit;

$kill_at = now_ms();
$pr->stop;
ok( wait_until(sub { $sent[0]->master_port eq $pm->port }, 180)
	  && $node->poll_query_until('postgres', "SELECT NOT held FROM rp_lock_info('x')"),
	'the lagging replica is promoted, and calls work against it');
diag('failover B: kill to first call served: ' . (now_ms() - $kill_at) . ' ms');

# Without the floor: the counter went backwards.
my $nf = sql($node, "SELECT (rp_acquire('sent-nofloor', 60000)).fence");
ok($nf =~ /^\d+$/ && $nf <= 5, "without the floor, the next token ($nf) is not above the 5 the table already accepted");
# and the guard accepts a re-issued token from a different lease: the
# property fencing rests on is broken.
my $f = '';
for (1 .. 5)
{
	$f = sql($node, q{SELECT l.fence FROM rp_acquire('sent-nofloor', 60000) l, rp_release(l)});
	last if $f eq '5';
}
# The token written is the one the new lease was issued, not a literal: a
# loop that never reached 5 writes NULL, which the guard refuses (22004).
my $fv = $f =~ /^\d+$/ ? $f : 'NULL';
my (undef, $n) = $node->psql('postgres',
	"WITH u AS (UPDATE sent_nofloor SET fence = $fv, writes = writes + 1 WHERE id = 1 RETURNING 1) SELECT count(*) FROM u");
is("$f|$n", '5|1', 'without the floor, token 5 is issued again to another lease and the table accepts it');

# With the floor: above every token the table holds.
my $fl = sql($node, "SELECT (rp_acquire('sent-floor', 60000, 0, rp_fence_floor('sent_floor'))).fence");
ok($fl =~ /^\d+$/ && $fl > 5, "with rp_fence_floor, the next token ($fl) is above every token the table accepted");
is(sql($node, "WITH u AS (UPDATE sent_floor SET fence = $fl, writes = writes + 1 WHERE id = 1 RETURNING 1) SELECT count(*) FROM u"),
	'1', 'and its write is accepted');

# ---- C. demoted under a connected session --------------------------------------
my $s = session($node);
# READONLY is what this part shows: the session's connection must be the
# one it made before the demotion, however long a loaded machine takes
# between two statements (a connection idle past sentinel_idle_recheck
# asks the sentinels again: 009_sentinel_idle.pl).
sq($s, 'SET redis_primitives.sentinel_idle_recheck = 0');
is(sq($s, "SELECT held FROM rp_lock_info('sent-ro')"), 'f', 'a session connected to the master');
$pm->cli('REPLICAOF', '127.0.0.1', '1');    # a replica of nothing
is(sq($s, "SELECT rp_acquire('sent-ro', 10000)"), 'ERROR:  25006',
	'the demoted server refuses the acquire with READONLY (25006)');
is($pm->cli('EXISTS', 'rp:{sent-ro}:lock'), '0', 'the refused script did not run');
is(sq($s, "SELECT rp_acquire('sent-ro', 10000)"), 'ERROR:  08001',
	'the next call asks the sentinels again; ROLE refuses the replica they still name (08001)');
$pm->cli('REPLICAOF', 'NO', 'ONE');
is(sq($s, "SELECT (rp_acquire('sent-ro', 10000)).fence IS NOT NULL"), 't',
	'a master again: the same session works, no action needed');
$s->quit;

# The same demotion met by a release sent at COMMIT (release_at_commit =
# send): its READONLY is read by the session's next call, before that
# call's own command, and drops the connection as the call's own READONLY
# would: the call asks the sentinels again (08001, ROLE refuses the server
# they still name) instead of sending its command to the demoted server
# (25006).
my $s2 = session($node);
sq($s2, 'SET redis_primitives.sentinel_idle_recheck = 0');
sq($s2, 'SET redis_primitives.release_at_commit = send');
sq($s2, 'BEGIN');
is(sq($s2, "SELECT (rp_acquire_xact('sent-ro2', 600000)).fence IS NOT NULL"), 't',
	'send: a session holding an xact lease on the master');
$pm->cli('REPLICAOF', '127.0.0.1', '1');
sq($s2, 'COMMIT');
is(sq($s2, "SELECT rp_acquire('sent-ro3', 10000)"), 'ERROR:  08001',
	'the sent release answered READONLY: the next call asks the sentinels again (08001), its command not sent to the demoted server');
is($pm->cli('EXISTS', 'rp:{sent-ro3}:lock'), '0', 'nothing of that call ran on the demoted server');
$pm->cli('REPLICAOF', 'NO', 'ONE');
is(sq($s2, "SELECT (rp_acquire('sent-ro3', 10000)).fence IS NOT NULL"), 't',
	'a master again: the same session works');
ok(wait_until(sub { $pm->cli('EXISTS', 'rp:{sent-ro2}:lock') eq '0' }, 30),
	'and the lease whose sent release was refused is released again (within 30 s, not its 600 s TTL)');
$s2->quit;

$node->stop;
done_testing();
