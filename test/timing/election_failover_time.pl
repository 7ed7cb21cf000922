# test/timing/election_failover_time.pl -- how fast leadership moves between
# two servers' electors (lease 400 ms, renew 100 ms, margin 100 ms).
# test/t/005_election_failover.pl asserts that it moves: the stopped
# leader resigns in Redis (its DEL) and no longer owns the term, the other
# server takes over, and after a stall only once a full lease has passed
# since the stalled leader's last renewal; this file bounds how soon:
#   a clean stop: the other server wins before the leader's last renewal
#      would have expired (a 4 s lease for this part; a resign that does
#      nothing always takes the whole lease), on Redis' clock (MONITOR);
#   a stall (SIGSTOP of the leader's elector): the other server leads
#      within 5 leases, timed by wait_leader inside that server.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;

use RedisPrimitives::Test::Redis;
use RedisPrimitives::Test::Node;
use RedisPrimitives::Test::Election;

my $redis = RedisPrimitives::Test::Redis->new;
my $leader_key = "rp:{$ELECTION}:leader";
my $lock_key = "rp:{$ELECTION}:lock";

my $n1 = election_node('n1', $redis);
wait_leader($n1, 'true', 60000);
my $n2 = election_node('n2', $redis);

# ---- a clean stop: n1's server stops, n2 takes over ------------------------
my $HANDOVER_LEASE = 4000;
sql($n1, "ALTER SYSTEM SET redis_primitives.election_lease = $HANDOVER_LEASE; SELECT pg_reload_conf()");
my $waiter = psql_start($n2, 'SELECT round(wait_leader(true, 60000))', qr/polling/);
my $monitor = $redis->monitor_start;
# a renewal with the 4 s lease: the elector has reloaded
wait_until(sub { $redis->monitor_text =~ /"SET" "\Q$lock_key\E" "election:n1#[^"]*" "PX" "$HANDOVER_LEASE"/ });
$n1->stop('fast');
my $t1 = psql_finish($waiter);
my @mon = $redis->monitor_stop($monitor);
my ($renewed, $won);
for (@mon)
{
	my ($ts) = /^(\d+\.\d+) / or next;
	$renewed = $ts if !defined $won && /"SET" "\Q$lock_key\E" "election:n1#/;
	$won = $ts if !defined $won && /"HSET" "\Q$leader_key\E" "node" "n2"/;
}
my $gap = defined $renewed && defined $won ? int(($won - $renewed) * 1000) : '';
ok($t1 ne '' && $gap ne '' && $gap < $HANDOVER_LEASE,
	"n1's server stopped: n2 won the term " . ($gap ne '' ? $gap : '?')
	  . " ms after n1's last renewal (Redis' clock), before that renewal's lease ($HANDOVER_LEASE ms) ran out");

# ---- a stall: n2's elector is frozen, n1 takes over -------------------------
$n1->start;
sql($n1, 'ALTER SYSTEM RESET redis_primitives.election_lease; SELECT pg_reload_conf()');
$n1->poll_query_until('postgres', "SELECT state = 'follower' FROM rp_elections()");
$n2->poll_query_until('postgres', "SELECT is_leader FROM rp_elections()");
my $pid = elector_pid($n2);
$waiter = psql_start($n1, 'SELECT round(wait_leader(true, 60000))', qr/polling/);
# read after the kill: the stall began at or before it
kill 'STOP', $pid;
my $t0 = now_ms();
$t1 = psql_finish($waiter);
kill 'CONT', $pid;
my $failover = $t1 ne '' ? $t1 - $t0 : '';
ok($failover ne '' && $failover < 5 * $LEASE,
	"n2's elector stalled: n1 leads within 5 leases (" . ($failover ne '' ? $failover : '?') . " ms, lease $LEASE ms)");

$_->stop for ($n1, $n2);
done_testing();
