# test/t/008_tls_topology.pl -- Sentinel and Cluster over TLS (docs/tls.md),
# every server TLS-only (plain port 0).  The failures this guards against:
#
#  A. sentinels that require AUTH: 1.0 could not ask them at all (NOAUTH, the
#     naive twin here); with sentinel_password the master is found over TLS,
#     a wrong password is refused without being shown, and a failover is
#     followed by the same session;
#  B. a Cluster over TLS (tls-cluster yes): the slot map names TLS ports,
#     calls reach all three masters over TLS, and a slot range moved under
#     load (MOVED/ASK to TLS ports) fails no call.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use List::Util qw(min);

use RedisPrimitives::Test::Certs;
use RedisPrimitives::Test::Redis;
use RedisPrimitives::Test::Node;

my $R = 'RedisPrimitives::Test::Redis';
my $C = RedisPrimitives::Test::Certs::make_certs(PostgreSQL::Test::Utils::tempdir('certs'));
my $TLS = "SET redis_primitives.tls = 'verify-full'; SET redis_primitives.tls_ca_file = '$C/ca.crt'; "
  . 'SET redis_primitives.connect_timeout = 3000; SET redis_primitives.command_timeout = 3000;';
# Statements are not logged: the log check below looks for a password.
my $node = rp_node('tls_topology', "log_statement = none\n");

# ---- A. Sentinel with AUTH, over TLS -------------------------------------------
my $pm = $R->new(name => 'master', tls => $C);
my $pr = $R->new(name => 'replica', tls => $C, args => [ '--replicaof', '127.0.0.1', $pm->port ]);
my $ps = $R->new(tls => $C, sentinel => { master => $pm }, password => 'sentinel-Secret-77');
ok(wait_until(sub { $pr->link_up && $ps->sees($pm, $pr, 0) }),
	'TLS-only master, replica and a sentinel requiring AUTH are up');

my $SENT = "SET redis_primitives.sentinels = '127.0.0.1:" . $ps->port . "'; SET redis_primitives.sentinel_master = 'rpm';";
my $WORK = "SELECT (rp_acquire('tls-sent', 10000)).fence IS NOT NULL AND rp_release('tls-sent')";
my ($state, $msg) = sqlstate($node, "$TLS $SENT $WORK");
is($state, '08001', 'naive twin (1.0): no sentinel_password, the sentinel refuses to name the master');
like($msg, qr/NOAUTH/, "... the sentinel's NOAUTH is in the detail");
($state, $msg) = sqlstate($node, "$TLS $SENT SET redis_primitives.sentinel_password = 'wrong-Pass-42'; $WORK");
is($state, '08001', 'a wrong sentinel_password is refused');
ok($msg =~ /refused AUTH/ && $msg !~ /wrong-Pass-42/, '... saying AUTH was refused, without the password');
is(sqlstate($node, "$TLS $SENT SET redis_primitives.sentinel_password = 'sentinel-Secret-77'; $WORK"), 'OK',
	'with sentinel_password the master is found and used, all over TLS');
my $pwfile = "$PostgreSQL::Test::Utils::tmp_check/sentpw";
PostgreSQL::Test::Utils::append_to_file($pwfile, "sentinel-Secret-77\n");
chmod 0600, $pwfile;
is(sqlstate($node, "$TLS $SENT SET redis_primitives.sentinel_password_file = '$pwfile'; $WORK"), 'OK',
	'sentinel_password_file works too');
my (undef, undef, $err) = $node->psql('postgres',
	'CREATE ROLE tls_plain LOGIN; SET ROLE tls_plain; SHOW redis_primitives.sentinel_password');
is(scalar(() = $err =~ /permission denied|must be superuser/g), 1, 'a plain user cannot SHOW sentinel_password');
sql($node, 'DROP ROLE tls_plain');
is(sqlstate($node, "ALTER ROLE CURRENT_USER SET redis_primitives.sentinel_password = 'x'"), '42501',
	'sentinel_password cannot be stored in a world-readable role setting');
# A reload logs every changed setting with its value; the twin (a setting
# that is not secret) shows the log check can see one.
my $logfrom = -s $node->logfile;
sql($node, "ALTER SYSTEM SET redis_primitives.sentinel_password = 'log-Secret-31'; "
	  . "ALTER SYSTEM SET redis_primitives.sentinel_username = 'log-User-9'; SELECT pg_reload_conf()");
$node->wait_for_log(qr/log-User-9/, $logfrom);
my $log = slurp_file($node->logfile);
is( scalar(() = $log =~ /log-Secret-31/g) . '/'
	  . scalar(() = substr($log, $logfrom) =~ /parameter "redis_primitives\.sentinel_password" changed$/mg),
	'0/1', "a reload logs that sentinel_password changed, never its value (sentinel_username's value is logged: the twin)");
sql($node, 'ALTER SYSTEM RESET redis_primitives.sentinel_password; ALTER SYSTEM RESET redis_primitives.sentinel_username; SELECT pg_reload_conf()');

# Failover: the same session follows the sentinel to the promoted replica.
my $s = session($node);
sq($s, "$TLS $SENT SET redis_primitives.sentinel_password = 'sentinel-Secret-77'");
my $before = sq($s, "SELECT (rp_acquire('tls-fo', 60000)).fence");
$ps->cli('SENTINEL', 'FAILOVER', 'rpm');
ok(wait_until(sub { $ps->master_port eq $pr->port }),
	'sentinel failover: the replica is promoted');
# Until the old master is demoted, a call may still land there and be lost
# with it (asynchronous replication: docs/failures.md); wait for the demotion.
wait_until(sub { ($pm->cli_ok('ROLE') // '') =~ /^slave/ });
my $after = wait_for(sub { sq($s, "SELECT (rp_acquire('tls-fo2', 60000)).fence") }, '1');
is("$before/$after", '1/1', "the same session's calls reach the new master over TLS");
is($pr->cli('EXISTS', 'rp:{tls-fo2}:lock'), '1', '... the lease is on the promoted server');
$s->quit;
$_->stop for ($ps, $pm, $pr);

# ---- B. a 3-master Cluster over TLS ------------------------------------------------
my @cp = $R->cluster(3, tls => $C);
ok(RedisPrimitives::Test::Redis::cluster_ok(@cp), 'three TLS-only masters form a cluster (tls-cluster yes)');
# The ports CLUSTER SLOTS names: in --raw output, the line after an address.
my %seen = map { $_ => 1 } $cp[0]->cli('CLUSTER', 'SLOTS') =~ /^127\.0\.0\.1\n(\d+)$/mg;
is(join(' ', sort keys %seen), join(' ', sort map { $_->port } @cp), 'CLUSTER SLOTS names the TLS ports');
$ENV{PGOPTIONS} = '-c redis_primitives.cluster=on -c redis_primitives.port=' . $cp[0]->port
  . " -c redis_primitives.tls=verify-full -c redis_primitives.tls_ca_file=$C/ca.crt";
is(sql($node, "SELECT count(*) FROM generate_series(1, 60) n WHERE (rp_acquire('tspread-' || n, 60000)).fence = 1"), '60',
	'60 leases taken through the cluster over TLS');
my @counts = map { $_->cli('DBSIZE') } @cp;
cmp_ok(min(@counts), '>=', 10, "every master holds a share (@counts)");

# A slot range moves under load: MOVED and ASK point at TLS ports.
my ($resharded, @names) = $cp[0]->reshard_under_load($cp[1], 200, $node, log => 'tlsclu_log', names => 4,
	filler => 500, warm => 20);
ok($resharded, '200 slots resharded over TLS while calls run');
is(sql($node, "SELECT (rp_acquire('$names[0]', 1000)).fence"), sql($node, "SELECT max(fence) + 1 FROM tlsclu_log WHERE name = '$names[0]'"),
	"a new session reaches the slot's new owner over TLS and continues the counter");

$node->stop;
done_testing();
