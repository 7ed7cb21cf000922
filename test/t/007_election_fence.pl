# test/t/007_election_fence.pl -- one server with a background elector: the
# leader-bound guard, epochs that never go back after Redis lost the
# counter, and one set of election keys for every database of the server.
#
# Naive twins: an SQL campaign with no floor after the FLUSHALL starts again
# at epoch 1 (what 1.0's elector did); in a database with its own key_prefix
# 1.0's rp_leader showed nobody and an SQL campaign won a second leadership.
use strict;
use warnings;

use Test::More;

use RedisPrimitives::Test::Redis;
use RedisPrimitives::Test::Node;
use RedisPrimitives::Test::Election;

my $redis = RedisPrimitives::Test::Redis->new;
my $n1 = election_node('n1', $redis);

ok(wait_leader($n1, 'true', 30000) ne '', "n1's elector leads '$ELECTION'");

# A leader-bound write is refused (RP004) whenever the elector's deadline has
# passed, which a loaded machine can do to a 400 ms lease at any moment (an
# elector descheduled for 300 ms): a write the test needs to go through is
# tried until the elector leads again (wait_for ... 'OK', the harness's
# timeout; then the check after it fails).

# ---- leader-bound guard ----------------------------------------------------
sql($n1, qq{CREATE TABLE sched (id int PRIMARY KEY, v text, epoch bigint);
  CREATE TRIGGER sched_fence BEFORE INSERT OR UPDATE OR DELETE ON sched
    FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('epoch', 'leader=$ELECTION')});
wait_for(sub { sqlstate($n1, "INSERT INTO sched (id, v) VALUES (1, 'a')") }, 'OK');
my $e1 = election($n1, 'epoch');
is(sql($n1, 'SELECT epoch FROM sched'), $e1, "leader-bound: the row is stamped with the elector's epoch");
# Freeze the elector: its deadline passes and the writes stop at once.
my $pid = elector_pid($n1);
kill 'STOP', $pid;
$n1->poll_query_until('postgres', "SELECT NOT rp_is_leader('$ELECTION')");
is(sqlstate($n1, "UPDATE sched SET v = 'b'"), 'RP004',
	"leader-bound: once the elector's deadline passed, a write is refused (RP004)");
kill 'CONT', $pid;
ok(wait_leader($n1, 'true', 30000) ne '', 'the elector leads again after it resumes');

# ---- epochs never go back --------------------------------------------------
my $e2 = election($n1, 'epoch');
$redis->cli('FLUSHALL');
my $e3 = '';
wait_until(sub { $e3 = election($n1, 'epoch'); return $e3 ne '' && $e3 ne $e2; });
ok($e3 =~ /^\d+$/ && $e3 > $e2, "after FLUSHALL the elector's new epoch ($e3) is above the last one it held ($e2)");
wait_for(sub { sqlstate($n1, "UPDATE sched SET v = 'c'") }, 'OK');
# the term it led in when the write went through (a lease lost under load
# in between is a newer term still)
my $e_w = election($n1, 'epoch');
my $stamp = sql($n1, "SELECT epoch || ' ' || v FROM sched");
ok($stamp eq "$e_w c" && $e_w >= $e3, "and the leader-bound table accepts the new term ($stamp; term $e_w, new term $e3)");
$redis->cli('FLUSHALL');
is(sql($n1, "SELECT rp_campaign('other', 'x', 10000)"), '1',
	'naive twin: a campaign with no floor after a FLUSHALL starts again at epoch 1');
is(sql($n1, "SELECT rp_resign('other', 'x'); SELECT rp_campaign('other', 'x', 10000, 41)") =~ s/.*\n//sr, '42',
	"rp_campaign's floor: the new term is above it");

# ---- every database sees the same election ----------------------------------
wait_until(sub { election($n1, 'epoch') ne '' });
sql($n1, 'CREATE DATABASE db2');
sql($n1, "ALTER DATABASE db2 SET redis_primitives.key_prefix = 'db2:'");
sql($n1, 'CREATE EXTENSION redis_primitives', 'db2');
is(sql($n1, 'SHOW redis_primitives.key_prefix', 'db2'), 'db2:', 'db2 has its own key_prefix');
# The elector's term and belief, read while it holds them: judged on the
# reading that ended the wait (an elector descheduled past its 400 ms lease
# on a loaded machine shows nobody for a moment; a db2 that reads another
# namespace never shows n1).
my $got = '';
wait_until(sub { ($got = sql($n1, "SELECT node_id || ' ' || epoch FROM rp_leader('$ELECTION')", 'db2')) eq 'n1 ' . election($n1, 'epoch') });
is($got, 'n1 ' . election($n1, 'epoch'),
	"in db2, rp_leader shows the elector's term (1.0: nobody)");
is(sql($n1, "SELECT coalesce(rp_campaign('$ELECTION', 'intruder', 10000)::text, 'NULL')", 'db2'), 'NULL',
	'in db2, an SQL campaign cannot win a second leadership');
is(wait_for(sub { sql($n1, "SELECT rp_is_leader('$ELECTION')", 'db2') }, 't'), 't', 'in db2, rp_is_leader reads the same belief');
sql($n1, "SELECT rp_acquire('$ELECTION', 600000)", 'db2');
# Waited for 120 s at most: a lock that took the election's own keys would
# keep the elector out for its 600 s; a busy machine delays the elector's
# next renewal by seconds, not minutes.
is(wait_for(sub { sql($n1, "SELECT rp_is_leader('$ELECTION') AND (SELECT epoch FROM rp_leader('$ELECTION')) = " . election($n1, 'epoch')) }, 't', 120),
	't', 'a lock of the same name in db2\'s own namespace leaves the election alone');
is($redis->cli('EXISTS', "db2:{$ELECTION}:fence") . ' ' . ($redis->cli('GET', "rp:{$ELECTION}:lock") =~ s/:.*//r),
	'1 election', "db2's lock counts under db2:, the election holds its lock under the server-wide prefix");

# A clean (fast) stop: an elector that does not exit fails the test here
# (the harness's own teardown at exit is an immediate stop, which would not).
$n1->stop;
done_testing();
