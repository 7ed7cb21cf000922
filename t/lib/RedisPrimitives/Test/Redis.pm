# t/lib/RedisPrimitives/Test/Redis.pm -- a throwaway redis-server for the
# Perl TAP tests (t/*.pl), beside PostgreSQL::Test::Cluster.
#
#   my $redis = RedisPrimitives::Test::Redis->new;          # started, pinged
#   my $redis = RedisPrimitives::Test::Redis->new(args => ['--tls-port', ...]);
#   $redis->port;  $redis->cli('GET', 'k');  $redis->stop;
#   $node->append_conf('postgresql.conf', $redis->pg_conf);
#
# The one thing to know before editing: every server this module starts is
# killed when its object goes away or the test exits, whatever happened, so
# a failing test leaves no redis-server behind; its files (log, pid) live in
# the test's tmp_check folder and stay there for inspection.
package RedisPrimitives::Test::Redis;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);

my @running;

# Start a Redis on a free port (PostgreSQL::Test::Cluster's port finder, so
# it never collides with a node's port).  args: extra redis-server arguments
# (they come last and override ours); name: for the files.
sub new
{
	my ($class, %params) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $name = $params{name} // "redis_$port";
	my $dir = PostgreSQL::Test::Utils::tempdir($name);
	my $self = bless {
		port => $port,
		name => $name,
		dir => $dir,
		pidfile => "$dir/redis.pid",
		logfile => "$PostgreSQL::Test::Utils::log_path/${name}.log",
	}, $class;

	PostgreSQL::Test::Utils::system_or_bail(
		'redis-server', '--port', $port, '--bind', '127.0.0.1',
		'--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction',
		'--enable-debug-command', 'local', '--daemonize', 'yes',
		'--dir', $dir, '--pidfile', $self->{pidfile},
		'--logfile', $self->{logfile}, @{ $params{args} // [] });
	push @running, $self;
	for (1 .. 200)
	{
		return $self if ($self->cli_ok('PING') // '') eq 'PONG';
		usleep(50_000);
	}
	BAIL_OUT("redis-server on port $port did not start; see $self->{logfile}");
}

sub port { return $_[0]->{port}; }
sub logfile { return $_[0]->{logfile}; }

# The settings a PostgreSQL node needs to use this Redis.
sub pg_conf
{
	my ($self) = @_;
	return "redis_primitives.host = '127.0.0.1'\n"
	  . "redis_primitives.port = $self->{port}\n";
}

# Run redis-cli with @args; returns its output without the final newline,
# or undef if redis-cli failed or took longer than $timeout seconds (30).
sub cli_ok
{
	my ($self, @args) = @_;
	my ($stdout, $stderr) = ('', '');
	my $ok = eval {
		IPC::Run::run([ 'redis-cli', '--raw', '-p', $self->{port}, @args ],
			'<', \undef, '>', \$stdout, '2>', \$stderr,
			IPC::Run::timeout($self->{timeout} // 30));
	};
	return undef unless $ok;
	chomp $stdout;
	return $stdout;
}

# Like cli_ok, but a failure of redis-cli fails the test.
sub cli
{
	my ($self, @args) = @_;
	my $out = $self->cli_ok(@args);
	BAIL_OUT("redis-cli -p $self->{port} @args failed") unless defined $out;
	return $out;
}

# Stop the server: SIGKILL (after SIGCONT, in case a test froze it).  Its
# data does not matter, so nothing is saved.
sub stop
{
	my ($self) = @_;
	return unless $self->{pidfile};
	if (open my $fh, '<', $self->{pidfile})
	{
		my $pid = <$fh>;
		close $fh;
		if ($pid && $pid =~ /^(\d+)/)
		{
			kill 'CONT', $1;
			kill 'KILL', $1;
		}
	}
	unlink $self->{pidfile};
	delete $self->{pidfile};
	@running = grep { $_ != $self } @running;
	return;
}

sub DESTROY { $_[0]->stop; }
END { $_->stop for @running; }

1;
