# test/t/001_standby.pl -- the extension on a hot standby, and after promotion.
#
# A streaming replica made with pg_basebackup -R: there the background
# elector runs but never campaigns, rp_is_leader(name) is false (not the
# 42704 "not run by this server's elector" of 1.0, whose elector did not
# start in recovery), rp_elections() shows state "standby" with the reason;
# the lock functions work against Redis; the fenced store is read-only.
# When the primary's elector is gone, the standby still does not campaign;
# once promoted it campaigns and leads within a few renew intervals.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use RedisPrimitives::Test::Redis;
use RedisPrimitives::Test::Node;

my $redis = RedisPrimitives::Test::Redis->new;
my $renew_ms = 200;
my $primary = rp_node('primary', $redis->pg_conf . qq(redis_primitives.elections = 'job'
redis_primitives.node_id = 'primary'
redis_primitives.election_lease = 3000
redis_primitives.election_renew = $renew_ms
redis_primitives.election_margin = 300
), allows_streaming => 1);
$primary->safe_psql('postgres', q{SELECT rp_fenced_write('job', '{"n": 1}', 1)});
ok($primary->poll_query_until('postgres', "SELECT rp_is_leader('job')"),
	'the primary\'s elector leads "job"');

# pg_basebackup -R: standby.signal and primary_conninfo come with the backup
# (with the application name wait_for_catchup looks for).
$primary->backup('base', backup_options => [ '-R', '-d', 'application_name=standby' ]);
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base');
$standby->append_conf('postgresql.conf', "redis_primitives.node_id = 'standby'\n");
$standby->start;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
$primary->wait_for_catchup($standby);

# The elector publishes its elections on the standby too.
ok( $standby->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM rp_elections() WHERE state = 'standby'"),
	'rp_elections() on the standby shows "job" in state standby');
my ($rc, $out, $err) = $standby->psql('postgres', "SELECT rp_is_leader('job')");
is("$rc|$out|$err", '0|f|', "rp_is_leader('job') on the standby is false, without an error");
is( $standby->safe_psql('postgres',
		"SELECT node_id || ' | ' || is_leader || ' | ' || coalesce(epoch::text, 'null') || ' | ' || last_error FROM rp_elections()"),
	'standby | false | null | this server is a hot standby: the elector campaigns once it is promoted',
	'rp_elections() gives the reason');

# Lock, rate-limit and Redis-side election functions go to Redis from a
# standby; the fenced store is read-only there.
is( $standby->safe_psql('postgres',
		"SELECT (rp_acquire('standby-lock', 10000)).fence > 0, rp_release('standby-lock'), "
		  . "rp_ratelimit('standby-rl', 5, 1000), (rp_leader('job')).node_id"),
	't|t|t|primary',
	'on the standby rp_acquire, rp_release, rp_ratelimit and rp_leader work against Redis');
# A backend on the standby that cannot reach Redis when it exits (its
# session points at a port where nothing listens) hands its lease to the
# standby's background worker, which releases it: the worker drains its
# queue in recovery too (it did not: the lease lived out its TTL).  The
# lease is 600 s long and the release is waited for 120 s: far longer than
# a busy machine delays it, far less than the TTL.
my $dead = PostgreSQL::Test::Cluster::get_free_port();
is( $standby->safe_psql('postgres',
		"SELECT (rp_acquire('standby-orphan', 600000)).fence > 0; SET redis_primitives.port = $dead"),
	't', 'a backend on the standby takes a lease, then loses its way to Redis and exits');
my $t = now_ms();
ok(wait_until(sub { $redis->cli('EXISTS', 'rp:{standby-orphan}:lock') eq '0' }, 120),
	'the standby\'s worker releases the lease it handed over, not left for its TTL (' . (now_ms() - $t) . ' ms)');
is( $standby->safe_psql('postgres', "SELECT value->>'n' || ' ' || fence FROM rp_fenced_read('job')"),
	'1 1', 'rp_fenced_read reads the replicated store');
($rc, $out, $err) = $standby->psql('postgres', "SELECT rp_fenced_write('job', '{}', 2)",
	extra_params => [ '-v', 'VERBOSITY=sqlstate' ]);
like($err, qr/25006/, 'rp_fenced_write on the standby fails: read-only transaction (25006)');

# The primary's elector leaves (a clean stop resigns): the standby must
# still not campaign, however long it waits.
$primary->stop('fast');
is($redis->cli('EXISTS', 'rp:{job}:leader'), '0', 'the stopped primary resigned: nobody leads "job" in Redis');
usleep(10 * $renew_ms * 1000);
is($redis->cli('EXISTS', 'rp:{job}:leader'), '0',
	'ten renew intervals later the standby has not campaigned');
is($standby->safe_psql('postgres', "SELECT state || ' ' || rp_is_leader('job') FROM rp_elections()"),
	'standby false', 'and still reports standby, not leader');
ok(!$standby->log_contains('elected leader'), 'the standby\'s log has no election');

# Promotion: the elector campaigns at once.
$standby->promote;
ok( $standby->poll_query_until('postgres', "SELECT rp_is_leader('job')"),
	'after promotion the former standby leads "job"');
is( $standby->safe_psql('postgres',
		"SELECT state || ' | ' || coalesce(last_error, '') || ' | ' || (epoch > 0) FROM rp_elections()"),
	'leader |  | true', 'rp_elections() shows it leading, the standby reason gone');
like($redis->cli('HGET', 'rp:{job}:leader', 'owner'), qr/^standby#/, 'Redis names the promoted server as the owner of the term');
ok($standby->log_contains('the server left recovery, campaigning'), 'the log says why it started campaigning');
is( $standby->safe_psql('postgres',
		"SELECT rp_fenced_write('job', '{\"n\": 2}', (SELECT epoch FROM rp_elections()))")
	  . ' ' . $standby->safe_psql('postgres', "SELECT (rp_fenced_read('job')).value->>'n'"),
	't 2', 'the promoted server writes the store under its epoch');

$standby->stop;
done_testing();
