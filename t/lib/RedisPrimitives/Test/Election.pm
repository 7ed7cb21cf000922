# t/lib/RedisPrimitives/Test/Election.pm -- PostgreSQL servers that run a
# background elector, for the election tests (t/*_election_*.pl).
#
#   my $n1 = election_node('n1', $redis);   # node_id n1, election "job"
#   wait_leader($n1, 'true', 5000)   polled inside the server every 2 ms:
#                                    the wall-clock ms at which rp_elections()
#                                    said is_leader = want, or '' (timeout)
#   node_epoch($n1)  node_state($n1)  leaders($n1, $n2)  elector_pid($n1)  wait_row($n1)
#
# The one thing to know before editing: the lease is short (400 ms, renew
# 100 ms, margin 100 ms) so that failures happen in test time; a check on
# how fast something happened measures it with wait_leader, in the server,
# never with a sleep in the test.
package RedisPrimitives::Test::Election;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Utils;
use RedisPrimitives::Test::Node;

our @EXPORT = qw(election_node wait_leader wait_row node_epoch node_state leaders elector_pid waiter_running
  $LEASE $RENEW $MARGIN $ELECTION);
our ($LEASE, $RENEW, $MARGIN, $ELECTION) = (400, 100, 100, 'job');

sub election_node
{
	my ($name, $redis) = @_;
	my $node = rp_node($name, $redis->pg_conf . qq(log_min_messages = log
redis_primitives.node_id = '$name'
redis_primitives.elections = '$ELECTION'
redis_primitives.election_lease = $LEASE
redis_primitives.election_renew = $RENEW
redis_primitives.election_margin = $MARGIN
));
	$node->safe_psql('postgres', qq{
	-- Poll rp_is_leader every 2 ms until it equals want; the wall-clock ms
	-- at which it did, or NULL after timeout_ms.
	CREATE FUNCTION wait_leader(want bool, timeout_ms int) RETURNS float8
	LANGUAGE plpgsql AS \$\$
	DECLARE t_end timestamptz := clock_timestamp() + timeout_ms * interval '1 ms';
	BEGIN
	  WHILE clock_timestamp() < t_end LOOP
	    IF coalesce((SELECT is_leader FROM rp_elections() WHERE name = '$ELECTION'), false) = want THEN
	      RETURN extract(epoch FROM clock_timestamp()) * 1000;
	    END IF;
	    PERFORM pg_sleep(0.002);
	  END LOOP;
	  RETURN NULL;
	END \$\$;});
	wait_row($node);
	return $node;
}

# Wait until the node's elector publishes the election (it starts a moment
# after the server accepts connections, and after a reload).
sub wait_row
{
	my ($node) = @_;
	return $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM rp_elections() WHERE name = '$ELECTION'");
}

sub wait_leader
{
	my ($node, $want, $timeout_ms) = @_;
	return scalar $node->safe_psql('postgres', "SELECT round(wait_leader($want, $timeout_ms))");
}

# Wait until a statement calling $func runs on the node (a waiter or poller
# started with psql_start is connected and polling): on a loaded machine
# connecting may take longer than any fixed sleep.
sub waiter_running
{
	my ($node, $func) = @_;
	return $node->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active' AND query LIKE '%$func(%'");
}

sub node_epoch
{
	my ($node) = @_;
	return scalar $node->safe_psql('postgres', "SELECT epoch FROM rp_elections() WHERE name = '$ELECTION'");
}

# 'state is_leader' of the node's election ('follower false'); each node's
# rp_is_leader, joined by '|' ('t|f').
sub node_state { return scalar $_[0]->safe_psql('postgres', "SELECT state || ' ' || is_leader FROM rp_elections()"); }
sub leaders { return join('|', map { scalar $_->safe_psql('postgres', "SELECT rp_is_leader('$ELECTION')") } @_); }

# The elector is a background worker without a database connection, so it
# is not in pg_stat_activity: find it among the postmaster's children.
sub elector_pid
{
	my ($node) = @_;
	my ($out) = run_command([ 'pgrep', '-P', $node->{_pid}, '-f', 'redis_primitives elector' ]);
	return $out;
}

1;
