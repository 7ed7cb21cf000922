# test/t/lib/RedisPrimitives/Test/Election.pm -- PostgreSQL servers that run a
# background elector, for the election tests (t/*_election_*.pl).
#
#   my $n1 = election_node('n1', $redis);   # node_id n1, election "job"
#   wait_leader($n1, 'true', 5000)   polled inside the server every 2 ms:
#                                    the wall-clock ms at which rp_elections()
#                                    said is_leader = want, or '' (timeout);
#                                    in the background: psql_start($n1,
#                                    'SELECT wait_leader(...)', qr/polling/)
#   election($n1, 'epoch')  rp_elections()'s epoch (any expression) for "job"
#   leaders($n1, $n2)  elector_pid($n1)
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

our @EXPORT = qw(election_node wait_leader election leaders elector_pid $LEASE $MARGIN $ELECTION);
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
	# wait_leader(want, timeout_ms) polls rp_is_leader every 2 ms until it
	# equals want: the wall-clock ms at which it did, or NULL after
	# timeout_ms.  It says when it polls.
	$node->safe_psql('postgres', qq{CREATE FUNCTION wait_leader(want bool, timeout_ms int) RETURNS float8
	LANGUAGE plpgsql AS \$\$
	DECLARE t_end timestamptz := clock_timestamp() + timeout_ms * interval '1 ms';
	BEGIN
	  RAISE NOTICE 'polling';
	  WHILE clock_timestamp() < t_end LOOP
	    IF coalesce((SELECT is_leader FROM rp_elections() WHERE name = '$ELECTION'), false) = want THEN
	      RETURN extract(epoch FROM clock_timestamp()) * 1000;
	    END IF;
	    PERFORM pg_sleep(0.002);
	  END LOOP;
	  RETURN NULL;
	END \$\$;});
	# the elector publishes the election a moment after the server accepts
	# connections
	$node->poll_query_until('postgres', "SELECT count(*) = 1 FROM rp_elections() WHERE name = '$ELECTION'");
	return $node;
}

sub wait_leader
{
	my ($node, $want, $timeout_ms) = @_;
	return scalar $node->safe_psql('postgres', "SELECT round(wait_leader($want, $timeout_ms))");
}

# rp_elections()'s $expr for the election ('follower false' for
# "state || ' ' || is_leader"); each node's rp_is_leader, joined by '|'
# ('t|f').
sub election { return sql($_[0], "SELECT $_[1] FROM rp_elections() WHERE name = '$ELECTION'"); }
sub leaders { return join('|', map { sql($_, "SELECT rp_is_leader('$ELECTION')") } @_); }

# The elector is a background worker without a database connection, so it
# is not in pg_stat_activity: find it among the postmaster's children.
sub elector_pid
{
	my ($node) = @_;
	return (run_command([ 'pgrep', '-P', $node->{_pid}, '-f', 'redis_primitives elector' ]))[0];
}

1;
