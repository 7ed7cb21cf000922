# t/lib/RedisPrimitives/Test/Redis.pm -- throwaway Redis servers, Sentinels
# and Clusters for the Perl TAP tests (t/*.pl), beside
# PostgreSQL::Test::Cluster.
#
#   my $redis = RedisPrimitives::Test::Redis->new;          # started, pinged
#   my $r = RedisPrimitives::Test::Redis->new(args => ['--replicaof', '127.0.0.1', $m->port]);
#   my $r = RedisPrimitives::Test::Redis->new(tls => $certdir);   # TLS only
#   my $s = RedisPrimitives::Test::Redis->new(sentinel => { master => $m, quorum => 2 });
#   my @masters = RedisPrimitives::Test::Redis->cluster(3);    # formed: check cluster_ok(@masters)
#   $r->port;  $r->cli('GET', 'k');  $r->kill9;  $r->restart(args => [...]);
#   $r->freeze;  $r->thaw;  $r->calls('evalsha');  $r->link_up;  $sentinel->master_port;  $masters[0]->reshard($masters[1], 300);
#   $node->append_conf('postgresql.conf', $redis->pg_conf);
#
# The one thing to know before editing: every server this module starts is
# a child of the test, killed and reaped when its object goes away or the
# test exits, whatever happened, so a failing test leaves no redis-server
# behind (its pidfile is for scripts/lib.sh, which kills what a killed test
# left); its files (log, pid, config) live in the test's tmp_check folder
# and stay there for inspection.
package RedisPrimitives::Test::Redis;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use IPC::Run;
use POSIX ();
use RedisPrimitives::Test::Node qw(wait_until);

my %running;    # started and not stopped: the END block stops them

# Start a Redis on a free port (PostgreSQL::Test::Cluster's port finder, so
# it never collides with a node's port).
#   args      extra redis-server arguments (last: they override ours)
#   name      for the files
#   tls       a folder of RedisPrimitives::Test::Certs: TLS only (plain
#             port 0), the server certificate, replication over TLS too
#   cluster   cluster-enabled, its bus on a second free port
#   sentinel  { master => $redis, quorum => 1, password => ... }: a
#             Sentinel monitoring that master as 'rpm' (down-after
#             1000 ms, failover 3000 ms)
sub new
{
	my ($class, %params) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $name = $params{name} // ($params{sentinel} ? "sentinel_$port" : "redis_$port");
	my $self = bless {
		%params,
		port => $port,
		bus_port => $params{cluster} && PostgreSQL::Test::Cluster::get_free_port(),
		name => $name,
		dir => PostgreSQL::Test::Utils::tempdir($name),
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

sub _start
{
	my ($self) = @_;
	my ($port, $dir) = ($self->{port}, $self->{dir});
	# Every server gets a configuration file (a Sentinel needs one to write
	# to); extra arguments on the command line override it.
	my @conf = (
		"bind 127.0.0.1", "port $port", "daemonize no", "dir $dir",
		"pidfile $dir/redis.pid", "logfile $self->{logfile}");
	if (my $c = $self->{tls})
	{
		push @conf, 'port 0', "tls-port $port", "tls-cert-file $c/server.crt",
		  "tls-key-file $c/server.key", "tls-ca-cert-file $c/ca.crt",
		  'tls-auth-clients no', 'tls-replication yes';
		push @conf, 'tls-cluster yes' if $self->{cluster};
	}
	my @cmd;
	if (my $s = $self->{sentinel})
	{
		push @conf, "requirepass $s->{password}" if defined $s->{password};
		push @conf,
		  'sentinel monitor rpm 127.0.0.1 ' . $s->{master}->port . ' ' . ($s->{quorum} // 1),
		  'sentinel down-after-milliseconds rpm 1000',
		  'sentinel failover-timeout rpm 3000',
		  'sentinel parallel-syncs rpm 1';
		@cmd = ('redis-sentinel', "$dir/redis.conf");
	}
	else
	{
		push @conf, "save ''", 'appendonly no', 'maxmemory-policy noeviction',
		  'enable-debug-command local';
		push @conf, 'cluster-enabled yes', "cluster-port $self->{bus_port}",
		  "cluster-config-file $dir/nodes.conf", 'cluster-node-timeout 2000'
		  if $self->{cluster};
		@cmd = ('redis-server', "$dir/redis.conf");
	}
	PostgreSQL::Test::Utils::append_to_file("$dir/redis.conf.new", join("\n", @conf) . "\n");
	rename("$dir/redis.conf.new", "$dir/redis.conf") or die "rename: $!";
	# What it says before it opens its log (a bad option) goes there too.
	# In a session of its own, as a daemon: the kernel (autogroup) shares
	# the CPU between sessions, and on a loaded machine a Redis left in the
	# test's served t/004's load a third of the calls.
	$self->{h} = IPC::Run::start([ @cmd, @{ $self->{args} // [] } ], init => sub { POSIX::setsid() },
		'<', '/dev/null', '>', '/dev/null', '2>>', $self->{logfile});
	$running{$self} = $self;
	return if wait_until(sub { !$self->{h}->pumpable || ($self->cli_ok('PING') // '') eq 'PONG' })
	  && $self->{h}->pumpable;
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
sub calls { return ($_[0]->info('commandstats', "cmdstat_$_[1]") // '') =~ /^calls=(\d+)/ ? $1 : 0; }

# SIGSTOP / SIGCONT: the server stalls, with its connections open.
sub freeze { $_[0]->{h}->signal('STOP') if $_[0]->{h}; return; }
sub thaw { $_[0]->{h}->signal('CONT') if $_[0]->{h}; return; }

# Stop the server: SIGKILL (after SIGCONT, in case a test froze it), and
# reap it (a restart binds its port again).  Its data does not matter, so
# nothing is saved.
sub stop
{
	my ($self) = @_;
	delete $running{$self};
	my $h = delete $self->{h} or return;
	local $?;    # finish sets it to the kill: at exit it is the exit code
	$h->signal('CONT');
	$h->signal('KILL');
	$h->finish;
	unlink "$self->{dir}/redis.pid";
	return;
}
*kill9 = \&stop;

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
# reshard, 180 s at most); true if redis-cli succeeded.
sub reshard
{
	my ($self, $to, $slots) = @_;
	local $self->{timeout} = 180;
	return defined $self->cli_ok('--cluster', 'reshard', '127.0.0.1:' . $self->port,
		'--cluster-from', $self->cli('CLUSTER', 'MYID'), '--cluster-to', $to->cli('CLUSTER', 'MYID'),
		'--cluster-slots', $slots, '--cluster-pipeline', '10', '--cluster-yes');
}

# An object that goes out of scope stops its server at once.
sub DESTROY { $_[0]->stop; }
# Servers still running when the test ends are stopped here, before global
# destruction: there DESTROY may meet a harness already torn down, which
# signals nothing, and the server outlives the test (t/004's cluster did).
END { $_->stop for values %running; }

1;
