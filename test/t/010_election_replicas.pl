# test/t/010_election_replicas.pl -- fence_replicas covers elections: a term
# is not believed until the replicas hold it.
#
# The failure this tells the story of (a Sentinel soak's "epoch 5 held by n2
# and n1"): replication is asynchronous, so a master can issue an epoch and
# be replaced by a replica that never received it.  The new master issues
# the same epoch again, to another server, and two servers lead with one
# epoch: a leader-bound guard (or any resource fenced by the epoch) accepts
# both.  Each elector's floor knows only the epochs its own server saw.
# With fence_replicas = 1 a term is believed only once a replica holds it
# (WAIT after the campaign), so a failover to that replica cannot issue it
# again; rp_campaign in SQL resigns the term and fails with RP003.
#
# The replica is cut off as in 003_sentinel.pl (a wrong masterauth): it
# stays healthy and promotable, and misses every write from then on.
#   n0  fence_replicas = 0, election "naive"  (the naive twin)
#   n1  fence_replicas = 1, election "x"
#   n2  fence_replicas = 0, elections "naive,x": campaigns after the failover
use strict;
use warnings;

use Test::More;

use RedisPrimitives::Test::Redis;
use RedisPrimitives::Test::Node;

my $R = 'RedisPrimitives::Test::Redis';
my $pm = $R->new(name => 'master');
my $pr = $R->new(name => 'replica', args => [ '--replicaof', '127.0.0.1', $pm->port ]);
my @sent = map { $R->new(sentinel => { master => $pm, quorum => 2 }) } 1 .. 3;
my $sentinels = join(',', map { '127.0.0.1:' . $_->port } @sent);

sub elector_node
{
	my ($name, $replicas) = @_;
	return rp_node($name, "redis_primitives.sentinels = '$sentinels'\n"
		  . "redis_primitives.sentinel_master = 'rpm'\n"
		  . "redis_primitives.node_id = '$name'\n"
		  . "redis_primitives.elections = ''\n"
		  . "redis_primitives.election_lease = 1000\n"
		  . "redis_primitives.election_renew = 200\n"
		  . "redis_primitives.election_margin = 200\n"
		  . "redis_primitives.fence_replicas = $replicas\n"
		  . "redis_primitives.fence_replicas_timeout = 300\n");
}
my $n0 = elector_node('n0', 0);
my $n1 = elector_node('n1', 1);
my $n2 = elector_node('n2', 0);

sub elect
{
	my ($node, $list) = @_;
	sql($node, "ALTER SYSTEM SET redis_primitives.elections = '$list'; SELECT pg_reload_conf()");
	my @names = split /,/, $list;
	my $n = @names;
	$node->poll_query_until('postgres', "SELECT count(*) = $n FROM rp_elections()");
}
sub row { my ($node, $name, $expr) = @_; return sql($node, "SELECT $expr FROM rp_elections() WHERE name = '$name'"); }
# rp_elections() sampled every 5 ms for ms (a loop of statements: one
# query's rp_elections() scan would be read once): "<samples believed>|<the
# epochs believed, comma-separated>"
sub believed
{
	my ($node, $name, $ms) = @_;
	sql($node, q{CREATE OR REPLACE FUNCTION believed(e text, ms int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE n int := 0; epochs text[] := '{}'; il bool; ep bigint;
  t_end timestamptz := clock_timestamp() + ms * interval '1 ms';
BEGIN
  WHILE clock_timestamp() < t_end LOOP
    SELECT is_leader, epoch INTO il, ep FROM rp_elections() WHERE name = e;
    IF il THEN
      n := n + 1;
      IF NOT ep::text = ANY (epochs) THEN epochs := epochs || ep::text; END IF;
    END IF;
    PERFORM pg_sleep(0.005);
  END LOOP;
  RETURN n || '|' || array_to_string(epochs, ',');
END $$});
	return sql($node, "SELECT believed('$name', $ms)");
}

ok(wait_until(sub { $pr->link_up && !grep { !$_->sees($pm, $pr, 2) } @sent }),
	'master, replica and three sentinels are up and know each other');

# ---- SQL rp_campaign with the replica in sync ---------------------------------
is( sql($n0, "SET redis_primitives.fence_replicas = 1; SET redis_primitives.command_timeout = 60000; "
		  . "SET redis_primitives.fence_replicas_timeout = 30000; SELECT rp_campaign('sql-ok', 'a', 60000) IS NOT NULL"),
	't', 'rp_campaign with fence_replicas = 1 and the replica in sync: an epoch, after WAIT');

# Sentinels skip a replica whose link has been down for more than
# 10 x down-after when the master fails: 5 s here gives the steps from the
# cut to the kill 50 s on a loaded machine.
$_->cli('SENTINEL', 'SET', 'rpm', 'down-after-milliseconds', '5000') for @sent;
$pr->cli('CONFIG', 'SET', 'masterauth', 'wrong-Pw');
$pr->cli('CLIENT', 'KILL', 'TYPE', 'master');
ok(wait_until(sub { !$pr->link_up }), 'the replica is cut off from the master');

# ---- SQL rp_campaign with no replica acknowledging ----------------------------
is( sqlstate($n0, "SET redis_primitives.fence_replicas = 1; SET redis_primitives.fence_replicas_timeout = 200; "
		  . "SELECT rp_campaign('sql-cut', 'a', 60000)"),
	'RP003', 'rp_campaign with fence_replicas = 1 and no replica acknowledging: RP003');
is($pm->cli('EXISTS', 'rp:{sql-cut}:leader', 'rp:{sql-cut}:lock'), '0', 'and the term it began was resigned');

# ---- The electors begin their terms on the master alone -----------------------
elect($n0, 'naive');
elect($n1, 'x');
ok($n0->poll_query_until('postgres', "SELECT rp_is_leader('naive')"), 'n0 (fence_replicas = 0) leads "naive"');
my $e_naive = row($n0, 'naive', 'epoch');
ok(wait_until(sub { ($pm->cli('HGET', 'rp:{x}:leader', 'node') // '') eq 'n1' }), 'n1 holds the term of "x" on the master');
ok($n1->poll_query_until('postgres', "SELECT last_error LIKE '%is not believed%replica%' FROM rp_elections() WHERE name = 'x'"),
	'n1 says why it does not believe it: ' . row($n1, 'x', 'last_error'));
my $n1_believed = believed($n1, 'x', 2000);
is($n1_believed, '0|', 'n1 (fence_replicas = 1) never believes the term: no sample over 2 s (10 renewals) says it leads');
is(believed($n0, 'naive', 200) =~ /^\d+\|(\d+)$/ ? $1 : '', $e_naive, "naive: n0 (fence_replicas = 0) believes epoch $e_naive");
is($pr->cli('GET', 'rp:{naive}:fence') . '|' . $pr->cli('GET', 'rp:{x}:fence'), '|',
	'the cut-off replica has neither epoch');

# ---- Failover -------------------------------------------------------------------
# n0 and n1 stop (the resigns go to the master about to die); n2 starts
# campaigning only on the new master: like the soak's server, it never saw
# the epochs the old master issued, so its floor cannot hold them back.
$_->stop for ($n0, $n1);
$pm->stop;
ok(wait_until(sub { $sent[0]->master_port eq $pr->port }), 'the master dies; the sentinels promote the cut-off replica');
elect($n2, 'naive,x');
ok($n2->poll_query_until('postgres', "SELECT rp_is_leader('naive') AND rp_is_leader('x')"), 'n2 leads both elections on the new master');
my $n2_naive = row($n2, 'naive', 'epoch');
my $n2_x = row($n2, 'x', 'epoch');
is($n2_naive, $e_naive, "naive: n2 leads \"naive\" with epoch $n2_naive, the epoch n0 believed before the failover");
my ($n1_epochs) = $n1_believed =~ /\|(.*)$/;
ok(!grep({ $_ eq $n2_x } split /,/, $n1_epochs // ''),
	"n2 leads \"x\" with epoch $n2_x, which n1 never believed (n1 believed: '" . ($n1_epochs // '') . "')");

$n2->stop;
done_testing();
