# t/lib/RedisPrimitives/Test/Redis.pm -- throwaway Redis servers, Sentinels
# and Clusters for the Perl TAP tests (t/*.pl), beside
# PostgreSQL::Test::Cluster.
#
#   my $redis = RedisPrimitives::Test::Redis->new;          # started, pinged
#   my $r = RedisPrimitives::Test::Redis->new(args => ['--replicaof', '127.0.0.1', $m->port]);
#   my $r = RedisPrimitives::Test::Redis->new(tls => $certdir);   # TLS only
#   my $s = RedisPrimitives::Test::Redis->new(sentinel => { master => $m, quorum => 2 });
#   my @masters = RedisPrimitives::Test::Redis->cluster(3);    # formed, all slots
#   $r->port;  $r->cli('GET', 'k');  $r->kill9;  $r->restart(args => [...]);
#   $r->freeze;  $r->thaw;  $r->calls('evalsha');  $r->link_up;  $sentinel->master_port;  $masters[0]->reshard($masters[1], 300);
#   $node->append_conf('postgresql.conf', $redis->pg_conf);
#
# The one thing to know before editing: every server this module starts is
# killed when its object goes away or the test exits, whatever happened, so
# a failing test leaves no redis-server behind; its files (log, pid, config)
# live in the test's tmp_check folder and stay there for inspection.
package RedisPrimitives::Test::Redis;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use IPC::Run;
use Time::HiRes qw(usleep);
use RedisPrimitives::Test::Node qw(wait_until);

my @running;

# Start a Redis on a free port (PostgreSQL::Test::Cluster's port finder, so
# it never collides with a node's port).
#   args      extra redis-server arguments (last: they override ours)
#   name      for the files
#   tls       a folder of RedisPrimitives::Test::Certs: TLS only (plain
#             port 0), the server certificate, replication over TLS too
#   cluster   cluster-enabled, on a port whose bus port (+10000) is free
#   sentinel  { master => $redis, quorum => 1, password => ... }: a
#             Sentinel monitoring that master as 'rpm' (down-after
#             1000 ms, failover 3000 ms)
sub new
{
	my ($class, %params) = @_;
	my $port = $params{cluster} ? _cluster_port() : PostgreSQL::Test::Cluster::get_free_port();
	my $name = $params{name} // ($params{sentinel} ? "sentinel_$port" : "redis_$port");
	my $dir = PostgreSQL::Test::Utils::tempdir($name);
	my $self = bless {
		%params,
		port => $port,
		name => $name,
		dir => $dir,
		logfile => "$PostgreSQL::Test::Utils::log_path/${name}.log",
	}, $class;
	$self->_start;
	return $self;
}

sub port { return $_[0]->{port}; }

# Start again on the same port (after kill9), with new extra arguments.
sub restart
{
	my ($self, %params) = @_;
	$self->stop;
	$self->{args} = $params{args} // [];
	$self->_start;
	return $self;
}

# A port in 20000..22767 whose bus port is free too: both stay below 32768,
# where Linux hands out ephemeral ports (a client socket bound there passes
# a probe yet makes the server's listen() fail later).
sub _cluster_port
{
	for (1 .. 1000)
	{
		my $p = 20000 + int(rand(2768));
		next unless PostgreSQL::Test::Cluster::can_bind('127.0.0.1', $p)
		  && PostgreSQL::Test::Cluster::can_bind('127.0.0.1', $p + 10000);
		return $p if PostgreSQL::Test::Cluster::_reserve_port($p);
	}
	die "no free port for a cluster node\n";
}

sub _tls_args
{
	my ($self) = @_;
	my $c = $self->{tls};
	return ('port 0', "tls-port $self->{port}", "tls-cert-file $c/server.crt",
		"tls-key-file $c/server.key", "tls-ca-cert-file $c/ca.crt",
		'tls-auth-clients no', 'tls-replication yes',
		$self->{cluster} ? ('tls-cluster yes') : ());
}

sub _start
{
	my ($self) = @_;
	my ($port, $dir) = ($self->{port}, $self->{dir});
	$self->{pidfile} = "$dir/redis.pid";
	# Every server gets a configuration file (a Sentinel needs one to write
	# to); extra arguments on the command line override it.
	my @conf = (
		"bind 127.0.0.1", "port $port", "daemonize yes", "dir $dir",
		"pidfile $self->{pidfile}", "logfile $self->{logfile}");
	push @conf, $self->_tls_args if $self->{tls};
	my @cmd;
	if (my $s = $self->{sentinel})
	{
		my $m = 'rpm';
		push @conf, "requirepass $s->{password}" if defined $s->{password};
		push @conf,
		  "sentinel monitor $m 127.0.0.1 " . $s->{master}->port . ' ' . ($s->{quorum} // 1),
		  "sentinel down-after-milliseconds $m 1000",
		  "sentinel failover-timeout $m 3000",
		  "sentinel parallel-syncs $m 1";
		@cmd = ('redis-sentinel', "$dir/redis.conf");
	}
	else
	{
		push @conf, "save ''", 'appendonly no', 'maxmemory-policy noeviction',
		  'enable-debug-command local';
		push @conf, 'cluster-enabled yes', "cluster-config-file $dir/nodes.conf",
		  'cluster-node-timeout 2000'
		  if $self->{cluster};
		@cmd = ('redis-server', "$dir/redis.conf");
	}
	PostgreSQL::Test::Utils::append_to_file("$dir/redis.conf.new", join("\n", @conf) . "\n");
	rename("$dir/redis.conf.new", "$dir/redis.conf") or die "rename: $!";
	PostgreSQL::Test::Utils::system_or_bail(@cmd, @{ $self->{args} // [] });
	push @running, $self;
	return if wait_until(sub { ($self->cli_ok('PING') // '') eq 'PONG' });
	die "$cmd[0] on port $port did not start; see $self->{logfile}\n";
}

# The settings a PostgreSQL node needs to use this Redis.
sub pg_conf
{
	my ($self) = @_;
	return "redis_primitives.host = '127.0.0.1'\n"
	  . "redis_primitives.port = $self->{port}\n";
}

# The redis-cli command line of this server (TLS, password included).
sub cli_cmd
{
	my ($self) = @_;
	return ('redis-cli', '--raw', '-p', $self->{port},
		$self->{tls} ? ('--tls', '--cacert', "$self->{tls}/ca.crt") : (),
		($self->{sentinel} && defined $self->{sentinel}{password})
		? ('-a', $self->{sentinel}{password}, '--no-auth-warning') : ());
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
	my $out = $self->cli_ok(@args);
	die "redis-cli -p $self->{port} @args failed\n" unless defined $out;
	return $out;
}

# One field of INFO: $r->info('replication', 'master_link_status').
sub info
{
	my ($self, $section, $field) = @_;
	my $out = $self->cli_ok('INFO', $section) // '';
	return $out =~ /^\Q$field\E:(.*)$/m ? $1 : undef;
}

# A replica's link to its master is up; the port of the master a Sentinel
# names for 'rpm' ('' if none).
sub link_up { return ($_[0]->info('replication', 'master_link_status') // '') eq 'up'; }
sub master_port { return ($_[0]->cli_ok('SENTINEL', 'get-master-addr-by-name', 'rpm') // '') =~ /\n(\d+)$/ ? $1 : ''; }

# Calls of a command so far (INFO commandstats): 'evalsha', 'cluster|slots'.
sub calls
{
	my ($self, $cmd) = @_;
	my $out = $self->cli_ok('INFO', 'commandstats') // '';
	return $out =~ /^cmdstat_\Q$cmd\E:calls=(\d+)/m ? $1 : 0;
}

sub pid
{
	my ($self) = @_;
	open my $fh, '<', $self->{pidfile} or return undef;
	my $pid = <$fh>;
	close $fh;
	return ($pid && $pid =~ /^(\d+)/) ? $1 : undef;
}

# SIGSTOP / SIGCONT: the server stalls, with its connections open.
sub freeze { my $pid = $_[0]->pid; kill 'STOP', $pid if $pid; return; }
sub thaw { my $pid = $_[0]->pid; kill 'CONT', $pid if $pid; return; }

# Stop the server: SIGKILL (after SIGCONT, in case a test froze it).  Its
# data does not matter, so nothing is saved.
sub stop
{
	my ($self) = @_;
	return unless $self->{pidfile};
	if (my $pid = $self->pid)
	{
		kill 'CONT', $pid;
		kill 'KILL', $pid;
		# wait until it is gone (a restart binds its port again); a zombie
		# whose parent does not reap it counts as gone
		for (1 .. 200)
		{
			open(my $fh, '<', "/proc/$pid/stat") or last;
			my $st = <$fh> // '';
			close $fh;
			last if $st =~ /\) Z /;
			usleep(20_000);
		}
	}
	unlink $self->{pidfile};
	delete $self->{pidfile};
	@running = grep { defined $_ && $_ != $self } @running;
	return;
}
*kill9 = \&stop;

# n masters on TLS or plain ports, joined into a cluster with every slot
# assigned (redis-cli --cluster create); returns them once each says
# cluster_state:ok, or bails out.
sub cluster
{
	my ($class, $n, %params) = @_;
	my @nodes = map { $class->new(%params, cluster => 1) } 1 .. $n;
	local $nodes[0]{timeout} = 120;
	my $out = $nodes[0]->cli_ok('--cluster', 'create',
		(map { '127.0.0.1:' . $_->port } @nodes),
		'--cluster-replicas', '0', '--cluster-yes');
	die "redis-cli --cluster create failed\n" unless defined $out;
	return @nodes if wait_until(sub { cluster_ok(@nodes) });
	die "the cluster did not form:\n$out\n";
}

sub cluster_ok
{
	return !grep { ($_->cli_ok('CLUSTER', 'INFO') // '') !~ /^cluster_state:ok$/m } @_;
}

# Move $slots slots of this master to master $to (redis-cli --cluster
# reshard, 180 s at most); true if redis-cli succeeded.
sub reshard
{
	my ($self, $to, $slots) = @_;
	local $self->{timeout} = 180;
	return defined $self->cli_ok('--cluster', 'reshard', '127.0.0.1:' . $self->port,
		'--cluster-from', $self->cli('CLUSTER', 'MYID'), '--cluster-to', $to->cli('CLUSTER', 'MYID'),
		'--cluster-slots', $slots, '--cluster-pipeline', '10', '--cluster-yes');
}

sub DESTROY { $_[0]->stop; }
# stop() edits @running: iterate over a copy.
END { my @all = @running; $_->stop for @all; }

1;
