# test/t/009_sentinel_idle.pl -- a connection idle through a Sentinel
# failover is not used on the old master.
#
# The failure this tells the story of: a session took a lease and went
# idle.  Meanwhile the sentinels lost the master and promoted its replica;
# the old master is alive and, until the sentinels reach it to demote it,
# still answers as a master.  The session wakes: its connection is open,
# the server has not closed it, and the ROLE check runs only at connect, so
# it takes a lease on the old master and is granted the same fence another
# server was granted on the new one.  Two holders, one token.
#
# Here the old master is kept a master for good: it is given a password
# the sentinels do not have, and their connections and its replica's are
# cut, so they see it down, promote the replica, and can never demote it.
# The sessions connected before keep their (authenticated) connections,
# which is what a partitioned or frozen-then-thawed master gives them.
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

my $node = rp_node('idle', "redis_primitives.sentinels = '$sentinels'\n"
	  . "redis_primitives.sentinel_master = 'rpm'\n");

ok(wait_until(sub { $pr->link_up && !grep { !$_->sees($pm, $pr, 2) } @sent }),
	'master, replica and three sentinels are up and know each other');

# Two sessions connect to the master and take (and release) a lease, on k2
# and k4: their counters are 1, on the replica too.  One keeps the default
# sentinel_idle_recheck; the naive twin turns the check off.
my $s = session($node);
my $naive = session($node);
sq($naive, 'SET redis_primitives.sentinel_idle_recheck = 0');
is(sq($s, "SELECT l.fence FROM rp_acquire('k4', 60000) l, rp_release(l)"), '1', 'a session takes and releases k4 on the master: fence 1');
is(sq($naive, "SELECT l.fence FROM rp_acquire('k2', 60000) l, rp_release(l)"), '1', 'the naive twin does the same with k2');
is($pm->cli('WAIT', '1', '10000'), '1', 'the replica has the counters');

# The master drops out of the sentinels' sight (and its replica's), alive.
$pm->cli('CONFIG', 'SET', 'requirepass', 'only-the-old-sessions');
$pm->{password} = 'only-the-old-sessions';
for my $line (split /\n/, $pm->cli('CLIENT', 'LIST'))
{
	my ($id) = $line =~ /\bid=(\d+)/;
	$pm->cli('CLIENT', 'KILL', 'ID', $id) if $id && $line =~ /\bname=sentinel-/;
}
$pm->cli('CLIENT', 'KILL', 'TYPE', 'replica');
ok(wait_until(sub { $sent[0]->master_port eq $pr->port }), 'the sentinels promote the replica');
my $role = $pm->cli('ROLE');
like($role, qr/^master/, 'the old master still answers ROLE as a master (ROLE alone cannot tell)');

# Another session (a new connection: it asks the sentinels) takes k2 and
# k4 on the new master: fence 2 each.
my $other = session($node);
is(sq($other, "SELECT string_agg(fence::text, ',') FROM unnest(rp_acquire_all(ARRAY['k2', 'k4'], 60000))"), '2,2',
	'another session takes k2 and k4 on the new master: fence 2 each');

# The idle sessions wake (both idle for more than a second: the promotion
# alone takes longer).
my $nf = sq($naive, "SELECT coalesce((rp_acquire('k2', 60000)).fence::text, 'NULL')");
is($nf, '2', 'naive (no recheck): the idle connection is used on the old master, which grants k2 with fence 2 again');
is(sq($s, "SELECT coalesce((rp_acquire('k4', 60000)).fence::text, 'NULL')"), 'NULL',
	'the idle session asks the sentinels again: k4 is held on the new master, the acquire is refused');
is($pm->cli('GET', 'rp:{k4}:fence') . '|' . $pr->cli('GET', 'rp:{k4}:fence'), '1|2',
	'fence 2 of k4 was issued once, by the new master (the old one still has 1)');
is(sq($s, "SELECT (rp_acquire('k3', 60000)).fence"), '1', 'the session goes on working on the new master');
is($pr->cli('EXISTS', 'rp:{k3}:lock'), '1', 'its lease is on the new master');

$_->quit for ($s, $naive, $other);
$node->stop;
done_testing();
