# test/timing/sentinel_failover_time.pl -- how long a session's calls pause
# while Sentinel promotes a replica of a master that died under load.
# test/t/003_sentinel.pl asserts that the calls resume against the new
# master by themselves, fail meanwhile only as unreachable or lost, and
# that every token is above every token before it; this file bounds the
# pause, from the last call the old master served to the first the new one
# served: the failover time (down-after 1000 ms, failover-timeout 3000 ms)
# and room, 20 s.
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
my $node = rp_node('sentinel_time', "redis_primitives.sentinels = '$sentinels'\n"
	  . "redis_primitives.sentinel_master = 'rpm'\n");
sub ms_of { return sql($node, "SELECT (extract(epoch FROM $_[0]) * 1000)::bigint"); }
wait_until(sub { $pr->link_up && !grep { !$_->sees($pm, $pr, 2) } @sent }, 180)
  or diag('the sentinels did not see master and replica in 180 s');

# A lease every 20 ms, until the new master has granted ten.
my $loader = lease_load($node, 'sent_log', 600, ['sent-time'], q{PERFORM pg_sleep(0.02);
        l := rp_acquire(n, 2000);
        IF l IS NOT NULL THEN PERFORM rp_release(l); END IF;});
wait_until(sub { sql($node, 'SELECT count(*) FROM sent_log WHERE ok AND fence IS NOT NULL') >= 20 }, 180);
my $kill_at = now_ms();
$pm->stop;
my $first_fail = "(SELECT min(at) FROM sent_log WHERE NOT ok AND at > to_timestamp($kill_at / 1000.0))";
wait_until(sub { $sent[0]->master_port eq $pr->port }, 180) or diag('no promotion in 180 s');
wait_until(sub { sql($node, "SELECT count(*) FROM sent_log WHERE ok AND fence IS NOT NULL AND at > $first_fail") >= 10 }, 180);
sql($node, 'INSERT INTO sent_log_stop DEFAULT VALUES');
psql_finish($loader);
my $first_ok = ms_of("(SELECT min(at) FROM sent_log WHERE ok AND at > $first_fail)");
my $last_ok = ms_of("(SELECT max(at) FROM sent_log WHERE ok AND at < $first_fail)");
my $pause = ($first_ok || 0) - ($last_ok || 0);
ok($first_ok ne '' && $last_ok ne '' && $pause < 20000,
	"a session's calls pause for the failover time (sentinel down-after 1000 ms), not more: $pause ms from the old master's last call to the new one's first");

$node->stop;
done_testing();
