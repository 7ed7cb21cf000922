# test/t/lib/RedisPrimitives/Test/Redis.pm -- throwaway Redis servers, Sentinels
# and Clusters for the Perl TAP tests (t/*.pl), beside
# PostgreSQL::Test::Cluster.
#
#   my $redis = RedisPrimitives::Test::Redis->new;          # started, pinged
#   my $r = RedisPrimitives::Test::Redis->new(args => ['--replicaof', '127.0.0.1', $m->port]);
#   my $r = RedisPrimitives::Test::Redis->new(tls => $certdir);   # TLS only
#   my $s = RedisPrimitives::Test::Redis->new(sentinel => { master => $m, quorum => 2 }, password => $pw);
#   my @masters = RedisPrimitives::Test::Redis->cluster(3);    # formed: check cluster_ok(@masters)
#   $r->port;  $r->cli('GET', 'k');  $r->stop;    # SIGKILL
#   $r->freeze;  $r->thaw;  $r->calls('evalsha');  $r->link_up;  $sentinel->master_port;  $sentinel->sees($m, $r, 2);
#   my $h = $r->monitor_start;  $r->monitor_text;  my @lines = $r->monitor_stop($h);   # MONITOR
#   my ($ok, @names) = $masters[0]->reshard_under_load($masters[1], 300, $node, log => 'mig', names => 6, ...);
#   $node->append_conf('postgresql.conf', $redis->pg_conf);
#
# The one thing to know before editing: every server this module starts is
# a child of the test, killed and reaped by stop or when the test exits,
# whatever happened, so a failing test leaves no redis-server behind (what
# a killed test left, scripts/lib.sh finds by its working directory); its
# files (log, config) live in the test's tmp_check folder and stay there
# for inspection.
package RedisPrimitives::Test::Redis;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use IPC::Run;
use POSIX ();
use RedisPrimitives::Test::Node qw(sql lease_load psql_finish now_ms wait_until);
use Test::More;

my %running;    # started and not stopped: the END block stops them

# Start a Redis on a free port (PostgreSQL::Test::Cluster's port finder, so
# it never collides with a node's port).
#   port      a port of its own (a server started again where one died)
#   args      extra redis-server arguments (last: they override ours)
#   name      for the files
#   password  requirepass (redis-cli is given it)
#   tls       a folder of RedisPrimitives::Test::Certs: TLS only (plain
#             port 0), the server certificate, replication over TLS too
#   cluster   cluster-enabled, its bus on a second free port
#   sentinel  { master => $redis, quorum => 1 }: a Sentinel monitoring that
#             master as 'rpm' (down-after 1000 ms, failover 3000 ms)
sub new
{
	my ($class, %params) = @_;
	my $port = $params{port} // PostgreSQL::Test::Cluster::get_free_port();
	my $name = $params{name} // ($params{sentinel} ? "sentinel_$port" : "redis_$port");
	my $dir = PostgreSQL::Test::Utils::tempdir($name);
	my $self = bless {
		%params,
		port => $port,
		bus_port => $params{cluster} && PostgreSQL::Test::Cluster::get_free_port(),
		logfile => "$PostgreSQL::Test::Utils::log_path/${name}.log",
	}, $class;
	# Every server gets a configuration file (a Sentinel needs one to write
	# to); extra arguments on the command line override it.  What is not
	# here is Redis' default (no AOF, noeviction, not a daemon).
	my @conf = (
		"bind 127.0.0.1", "port $port", "dir $dir", "logfile $self->{logfile}", "save ''");
	push @conf, "requirepass $self->{password}" if defined $self->{password};
	if (my $c = $self->{tls})
	{
		push @conf, 'port 0', "tls-port $port", "tls-cert-file $c/server.crt",
		  "tls-key-file $c/server.key", "tls-ca-cert-file $c/ca.crt",
		  'tls-auth-clients no', 'tls-replication yes';
		push @conf, 'tls-cluster yes' if $self->{cluster};
	}
	push @conf, 'cluster-enabled yes', "cluster-port $self->{bus_port}",
	  "cluster-config-file $dir/nodes.conf", 'cluster-node-timeout 2000'
	  if $self->{cluster};
	push @conf,
	  'sentinel monitor rpm 127.0.0.1 ' . $self->{sentinel}{master}->port . ' ' . ($self->{sentinel}{quorum} // 1),
	  'sentinel down-after-milliseconds rpm 1000',
	  'sentinel failover-timeout rpm 3000'
	  if $self->{sentinel};
	PostgreSQL::Test::Utils::append_to_file("$dir/redis.conf", join("\n", @conf) . "\n");
	# What it says before it opens its log (a bad option) goes there too.
	# In a session of its own, as a daemon: the kernel (autogroup) shares
	# the CPU between sessions, and on a loaded machine a Redis left in the
	# test's served t/004's load a third of the calls.
	my $prog = $self->{sentinel} ? 'redis-sentinel' : 'redis-server';
	$self->{h} = IPC::Run::start([ $prog, "$dir/redis.conf", @{ $self->{args} // [] } ],
		init => sub { POSIX::setsid() }, '<', '/dev/null', '>', '/dev/null', '2>>', $self->{logfile});
	$running{$self} = $self;
	return $self if wait_until(sub { !$self->{h}->pumpable || ($self->cli_ok('PING') // '') eq 'PONG' })
	  && $self->{h}->pumpable;
	die "$prog on port $port did not start; see $self->{logfile}\n";
}

sub port { return $_[0]->{port}; }

# The setting a PostgreSQL node needs to use this Redis (the host is
# redis_primitives.host's default, 127.0.0.1).
sub pg_conf { return "redis_primitives.port = $_[0]->{port}\n"; }

# The redis-cli command line of this server (TLS, password included).
sub cli_cmd
{
	my ($self) = @_;
	return ('redis-cli', '--raw', '-p', $self->{port},
		$self->{tls} ? ('--tls', '--cacert', "$self->{tls}/ca.crt") : (),
		defined $self->{password} ? ('-a', $self->{password}, '--no-auth-warning') : ());
}

# Run redis-cli with @args; returns its output without carriage returns and
# the final newline, or undef if redis-cli failed or took longer than
# $self->{timeout} seconds (30).  stdin: what to feed it (a pipeline).
sub cli_ok
{
	my ($self, @args) = @_;
	my $stdin = ref $args[0] eq 'SCALAR' ? shift @args : \undef;
	my ($stdout, $stderr) = ('', '');
	my $ok = eval {
		IPC::Run::run([ $self->cli_cmd, @args ],
			'<', $stdin, '>', \$stdout, '2>', \$stderr,
			IPC::Run::timeout($self->{timeout} // 30));
	};
	return undef unless $ok;
	$stdout =~ s/\r//g;
	chomp $stdout;
	return $stdout;
}

# Like cli_ok, but a failure of redis-cli fails the test.
sub cli
{
	my ($self, @args) = @_;
	return $self->cli_ok(@args) // die "redis-cli -p $self->{port} @args failed\n";
}

# A replica's link to its master is up; the port of the master a Sentinel
# names for 'rpm' ('' if none).
sub link_up { return ($_[0]->cli_ok('INFO', 'replication') // '') =~ /^master_link_status:up$/m; }
sub master_port { return ($_[0]->cli_ok('SENTINEL', 'get-master-addr-by-name', 'rpm') // '') =~ /\n(\d+)$/ ? $1 : ''; }

# This Sentinel names $m master of 'rpm', lists $r as a healthy replica of
# it, and knows $n other sentinels (a failover needs their votes).
sub sees
{
	my ($self, $m, $r, $n) = @_;
	return $self->master_port eq $m->port
	  && ($self->cli_ok('SENTINEL', 'replicas', 'rpm') // '') =~ /^port\n${\ $r->port}\nrunid\n\S+\nflags\nslave$/m
	  && (() = ($self->cli_ok('SENTINEL', 'sentinels', 'rpm') // '') =~ /^name$/mg) >= $n;
}

# Calls of a command so far (INFO commandstats): 'evalsha', 'cluster|slots'.
sub calls { return ($_[0]->cli_ok('INFO', 'commandstats') // '') =~ /^cmdstat_\Q$_[1]\E:calls=(\d+)/m ? $1 : 0; }

# Redis MONITOR shows every command with Redis' own clock, and the commands a
# script runs (its "lua" lines): what the clients did, in order, whatever
# the load.  monitor_start returns once MONITOR runs (into a file of this
# server's); monitor_text is what it wrote so far; monitor_stop sends a
# marker and waits for it, so every command Redis ran before the marker is
# in the lines it returns (nothing is cut off in transit).
sub monitor_start
{
	my ($self) = @_;
	$self->{monitor_out} = "$PostgreSQL::Test::Utils::tmp_check/monitor_$self->{port}.out";
	unlink $self->{monitor_out};
	my $h = IPC::Run::start([ $self->cli_cmd, 'MONITOR' ], '<', \undef, '>', $self->{monitor_out}, '2>&1');
	wait_until(sub { -s $self->{monitor_out} });
	return $h;
}
sub monitor_text { return -e $_[0]->{monitor_out} ? PostgreSQL::Test::Utils::slurp_file($_[0]->{monitor_out}) : ''; }
sub monitor_stop
{
	my ($self, $h) = @_;
	$self->cli('ECHO', 'rp-monitor-end');
	wait_until(sub { $self->monitor_text =~ /rp-monitor-end/ });
	$h->kill_kill;
	return split /\n/, $self->monitor_text;
}

# SIGSTOP / SIGCONT: the server stalls, with its connections open.
sub freeze { $_[0]->{h}->signal('STOP') if $_[0]->{h}; return; }
sub thaw { $_[0]->{h}->signal('CONT') if $_[0]->{h}; return; }

# Stop the server: SIGKILL (which ends a frozen one too), and reap it (a
# restart binds its port again).  Its data does not matter, so nothing is
# saved.
sub stop
{
	my ($self) = @_;
	delete $running{$self};
	my $h = delete $self->{h} or return;
	local $?;    # finish sets it to the kill: at exit it is the exit code
	$h->signal('KILL');
	$h->finish;
	return;
}

# n masters on TLS or plain ports, joined into a cluster with every slot
# assigned (redis-cli --cluster create); returns them once each says
# cluster_state:ok, or after the harness's timeout: the caller's check of
# cluster_ok(@nodes) is what fails when the cluster did not form.
sub cluster
{
	my ($class, $n, %params) = @_;
	my @nodes = map { $class->new(%params, cluster => 1) } 1 .. $n;
	local $nodes[0]{timeout} = 120;
	$nodes[0]->cli('--cluster', 'create', (map { '127.0.0.1:' . $_->port } @nodes),
		'--cluster-replicas', '0', '--cluster-yes');
	wait_until(sub { cluster_ok(@nodes) });
	return @nodes;
}

sub cluster_ok
{
	return !grep { ($_->cli_ok('CLUSTER', 'INFO') // '') !~ /^cluster_state:ok$/m } @_;
}

# Move $slots slots of this master to master $to (redis-cli --cluster
# reshard, 180 s at most) while lock calls run on names in those slots: the
# first $p{names} names "$p{log}-<i>" whose slot is below $slots, each slot
# padded with $p{filler} keys so that its migration lasts long enough for
# calls to meet it half-moved (ASK, TRYAGAIN), not only after (MOVED), under
# lease_load($node, $p{log}, ..., names, $p{call}) from before the reshard
# until it ended (a fixed 8 s of calls ended long before a reshard that took
# 48 s at load 45, and met no slot half-moved), command_timeout 60 s (a
# TRYAGAIN is retried for as long as the slot is half-moved), the reshard
# started once $p{warm} calls succeeded.  Checks that no call failed;
# returns reshard's result and the names.
sub reshard_under_load
{
	my ($self, $to, $slots, $node, %p) = @_;
	my @names = split /\n/, $node->safe_psql('postgres', qq{SELECT n FROM (SELECT '$p{log}-' || i AS n
		FROM generate_series(1, 5000) i) s WHERE rp_key_slot('rp:{' || n || '}:lock') < $slots ORDER BY n LIMIT $p{names}});
	# Filler keys make each slot's migration last long enough for calls to
	# meet it half-moved.  One MSET per name: a SET per key (9,000 round
	# trips) outlasted redis-cli's 30 s at load 45.
	$self->cli(\join('', map { my $n = $_; 'MSET ' . join(' ', map { "rp:{$n}:filler:$_ x" } 1 .. $p{filler}) . "\n" } @names));
	# A call that meets its slot half-moved is answered TRYAGAIN and retried
	# until its command_timeout is spent: the load's calls get 60 s, not the
	# node's 1 s, which a reshard descheduled for a second in the middle of a
	# slot outlasted (57P03).  A call that does not follow ASK or TRYAGAIN
	# still fails at once.
	my $load = do {
		local $ENV{PGOPTIONS} = ($ENV{PGOPTIONS} // '') . ' -c redis_primitives.command_timeout=60000';
		lease_load($node, $p{log}, 300, \@names, $p{call});
	};
	wait_until(sub { $node->safe_psql('postgres', "SELECT count(*) FROM $p{log} WHERE ok") >= $p{warm} });
	my $t = now_ms();
	local $self->{timeout} = 180;
	my $ok = defined $self->cli_ok('--cluster', 'reshard', '127.0.0.1:' . $self->port,
		'--cluster-from', $self->cli('CLUSTER', 'MYID'), '--cluster-to', $to->cli('CLUSTER', 'MYID'),
		'--cluster-slots', $slots, '--cluster-pipeline', '10', '--cluster-yes');
	diag("$slots slots resharded in " . (now_ms() - $t) . " ms under load on @names");
	sql($node, "INSERT INTO $p{log}_stop DEFAULT VALUES");   # ends the load
	psql_finish($load);
	diag('during the move: ' . $node->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE ok) || ' calls ok, ' || count(*) FILTER (WHERE NOT ok) || ' failed' FROM $p{log}"));
	is(sql($node, "SELECT count(*) FROM $p{log} WHERE NOT ok"), '0',
		'no call failed' . sql($node, "SELECT coalesce(' (' || min(state) || ')', '') FROM $p{log} WHERE NOT ok"));
	return ($ok, @names);
}

# Servers still running when the test ends are stopped here, before global
# destruction, where the harness may already be torn down and signal
# nothing, and the server would outlive the test (t/004's cluster did).
# %running holds every started server, so its object never goes away
# before stop: a server runs until stopped or the test ends.
END { $_->stop for values %running; }

1;
