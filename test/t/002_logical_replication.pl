# test/t/002_logical_replication.pl -- a fenced table on a logical-replication
# subscriber.
#
# Row triggers do not fire for the apply worker unless the table says
# ENABLE ALWAYS TRIGGER, so by default a subscriber's rp_fence_guard lets
# through whatever the publisher sent, even a token lower than one a local
# writer stored there (the publisher's own guard is what checks its
# writers).  Local writes on the subscriber are still guarded.  With ENABLE
# ALWAYS TRIGGER the guard runs in the apply worker: in 'error' mode a stale
# row stops replication (the worker fails and retries the same change),
# in 'skip' mode the row is dropped and replication goes on.  docs/lock.md
# states the choice.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RedisPrimitives::Test::Redis;
use RedisPrimitives::Test::Node;

my $redis = RedisPrimitives::Test::Redis->new;
my $schema = q{
	CREATE TABLE account (id int PRIMARY KEY, balance int, fence_token bigint);
	CREATE TRIGGER account_fence BEFORE INSERT OR UPDATE ON account
	  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token');
	CREATE TABLE ledger (id int PRIMARY KEY, balance int, fence_token bigint);
	CREATE TRIGGER ledger_fence BEFORE INSERT OR UPDATE ON ledger
	  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'skip');
};

my $pub = rp_node('publisher', $redis->pg_conf, allows_streaming => 'logical');
my $sub = rp_node('subscriber', $redis->pg_conf . "wal_retrieve_retry_interval = 200ms\n");

$pub->safe_psql('postgres', $schema . q{
	INSERT INTO account VALUES (1, 100, 5);
	INSERT INTO ledger VALUES (1, 100, 5);
	CREATE PUBLICATION pub_account FOR TABLE account;
	CREATE PUBLICATION pub_ledger FOR TABLE ledger;
});
$sub->safe_psql('postgres', $schema);
for my $t ('account', 'ledger')
{
	$sub->safe_psql('postgres',
		"CREATE SUBSCRIPTION sub_$t CONNECTION '" . $pub->connstr . " dbname=postgres' PUBLICATION pub_$t");
	$sub->wait_for_subscription_sync($pub, "sub_$t");
}
is($sub->safe_psql('postgres', 'SELECT fence_token FROM account'), '5', 'the initial copy reaches the subscriber');

# A writer on the subscriber stores token 10; the publisher, whose own
# guard knows only its 5, then accepts token 7.
$sub->safe_psql('postgres', 'UPDATE account SET balance = 1, fence_token = 10');
$pub->safe_psql('postgres', 'UPDATE account SET balance = 2, fence_token = 7');
$pub->wait_for_catchup('sub_account');
is($sub->safe_psql('postgres', 'SELECT balance || \' \' || fence_token FROM account'), '2 7',
	'default: the apply worker writes token 7 over the subscriber\'s 10 (the guard does not fire)');
my ($rc, $out, $err) = $sub->psql('postgres', 'UPDATE account SET balance = 3, fence_token = 6',
	extra_params => [ '-v', 'VERBOSITY=sqlstate' ]);
like($err, qr/RP001/, 'local writes on the subscriber are still guarded (RP001)');

# ENABLE ALWAYS TRIGGER, 'error' mode: the stale change stops replication.
$sub->safe_psql('postgres', 'ALTER TABLE account ENABLE ALWAYS TRIGGER account_fence');
$sub->safe_psql('postgres', 'UPDATE account SET balance = 4, fence_token = 20');
my $offset = -s $sub->logfile;
$pub->safe_psql('postgres', 'UPDATE account SET balance = 5, fence_token = 8');
ok($sub->wait_for_log(qr/stale fence token for table "account"/, $offset),
	'ENABLE ALWAYS: the apply worker runs the guard and fails on the stale row');
is($sub->safe_psql('postgres', 'SELECT balance || \' \' || fence_token FROM account'), '4 20',
	'the subscriber keeps its newer row');
ok( $sub->poll_query_until('postgres',
		"SELECT apply_error_count > 0 FROM pg_stat_subscription_stats WHERE subname = 'sub_account'"),
	'and the failure shows in pg_stat_subscription_stats: replication of later changes waits behind it');
$sub->safe_psql('postgres', 'ALTER SUBSCRIPTION sub_account DISABLE');

# ENABLE ALWAYS TRIGGER, 'skip' mode: the stale row is dropped, replication goes on.
$sub->safe_psql('postgres', q{
	ALTER TABLE ledger ENABLE ALWAYS TRIGGER ledger_fence;
	UPDATE ledger SET balance = 1, fence_token = 10;
});
$pub->safe_psql('postgres', q{
	UPDATE ledger SET balance = 2, fence_token = 7;
	INSERT INTO ledger VALUES (2, 200, 11);
});
ok( $sub->poll_query_until('postgres', 'SELECT count(*) = 2 FROM ledger'),
	'skip mode: replication goes on (the next row arrives)');
is($sub->safe_psql('postgres', 'SELECT string_agg(id || \' \' || balance || \' \' || fence_token, \', \' ORDER BY id) FROM ledger'),
	'1 1 10, 2 200 11', 'and the stale row was dropped: the subscriber keeps token 10');

$sub->stop;
$pub->stop;
done_testing();
