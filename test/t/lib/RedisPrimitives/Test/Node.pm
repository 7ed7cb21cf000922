# test/t/lib/RedisPrimitives/Test/Node.pm -- PostgreSQL nodes with the
# extension, and the few ways the tests talk to them that
# PostgreSQL::Test::Cluster has no word for.
#
#   my $node = rp_node('n1', $redis->pg_conf . "more = 'conf'\n");
#   sql($node, $query, $db)        $query's one value in database $db (postgres)
#   sqlstate($node, $sql)          'OK', or the error's SQLSTATE
#   my $s = session($node);  sq($s, $sql)    one long-lived session;
#                                  an error reads "ERROR:  <SQLSTATE>"
#   my $p = psql_start($node, $sql, qr/running/);  psql_finish($p)   a
#                                  statement run in the background (a load,
#                                  a waiter), once its NOTICE says it runs
#   my $p = lease_load($node, 'log', $secs, \@names, $call)   lock calls
#                                  in the background, each logged in a table;
#                                  a row in table log_stop ends them early
#   now_ms()                       wall-clock milliseconds
#   wait_until(sub { ... }, $secs) poll until true, or the harness's timeout
#   wait_for(sub { ... }, $want, $secs)  poll until it reads $want; the
#                                  last reading
#
# The one thing to know before editing: every helper runs psql against
# the node's own socket as the superuser the harness made; settings that
# should apply to one call only go in PGOPTIONS (local $ENV{PGOPTIONS}),
# which psql_start and sqlstate pass on, as safe_psql does.
package RedisPrimitives::Test::Node;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(usleep);

our @EXPORT = qw(rp_node sql sqlstate session sq psql_start psql_finish lease_load now_ms wait_until wait_for);

# A started node with the extension preloaded and created in "postgres";
# $conf comes last in postgresql.conf.
sub rp_node
{
	my ($name, $conf, %params) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%params);
	$node->append_conf('postgresql.conf', "shared_preload_libraries = 'redis_primitives'\n"
		  . "redis_primitives.connect_timeout = 1000\n"
		  . "redis_primitives.command_timeout = 1000\n"
		  . "max_connections = 50\n" . ($conf // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION redis_primitives');
	return $node;
}

sub now_ms { return int(Time::HiRes::time() * 1000); }

# Evaluate $cond every 50 ms until it returns true (returned) or $secs
# (default: the harness's timeout, PG_TEST_TIMEOUT_DEFAULT) have passed
# (false).  For what must happen eventually; a bound on how fast it happens
# is a separate check on a measured time.
sub wait_until
{
	my ($cond, $secs) = @_;
	my $end = Time::HiRes::time() + ($secs // $PostgreSQL::Test::Utils::timeout_default);
	while (1)
	{
		my $v = $cond->();
		return $v if $v;
		return 0 if Time::HiRes::time() > $end;
		usleep(50_000);
	}
}

# Read $read->() as wait_until polls until it returns $want (or $secs
# pass); the last value read.  A check judges the reading that ended the
# wait: a second reading may differ on a loaded machine (a belief that
# lapses for a moment, a term renewed in between).
sub wait_for
{
	my ($read, $want, $secs) = @_;
	my $got;
	wait_until(sub { ($got = $read->()) eq $want }, $secs);
	return $got;
}

# $query's one value in database $db (postgres), as safe_psql returns it.
sub sql { my ($node, $query, $db) = @_; return scalar $node->safe_psql($db // 'postgres', $query); }

# Run $sql (one or more statements, ON_ERROR_STOP) in database postgres;
# 'OK', or the SQLSTATE of the error.  In list context also the
# error text, verbose (for checks on what a message says or hides).
sub sqlstate
{
	my ($node, $sql) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', $sql,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	my $state = $rc == 0 && $err !~ /ERROR:/ ? 'OK'
	  : $err =~ /ERROR:\s+([0-9A-Z]{5}):/ ? $1 : "rc $rc";
	return wantarray ? ($state, $err) : $state;
}

# A session kept open across steps; errors do not end it.
sub session
{
	my ($node) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0,
		extra_params => [ '-v', 'VERBOSITY=sqlstate' ]);
	# the harness's timeout bounds each query, not the session's life
	$s->set_query_timer_restart;
	return $s;
}

# One batch in the session: its output, or "ERROR:  <SQLSTATE>" of the
# first error.
sub sq
{
	my ($s, $sql) = @_;
	my $out = $s->query($sql);
	# PostgreSQL::Test::BackgroundPsql of 16.2 and 17beta2 leaves the
	# newline after its separator on the output; later releases take it off.
	chomp $out if defined $out;
	my $err = $s->{stderr};
	$s->{stderr} = '';
	return $1 if $err =~ /(ERROR:\s+[0-9A-Z]{5})/;
	return $out;
}

# A session that runs $sql and ends: psql_finish waits for it.  Twice the
# harness's timeout bounds it all (a load, a waiter).  It returns once
# connected, with the statement sent; given $running, once the statement
# also said so in a NOTICE that matches it (a waiter polling: on a loaded
# machine connecting may take longer than any fixed sleep, and asking
# pg_stat_activity from another psql takes as long again).
sub psql_start
{
	my ($node, $sql, $running) = @_;
	my $p = $node->background_psql('postgres', timeout => 2 * $PostgreSQL::Test::Utils::timeout_default);
	$p->{stdin} .= "$sql;\n\\q\n";
	$p->{run}->pump_nb;
	pump_until($p->{run}, $p->{timeout}, \$p->{stderr}, $running) if $running;
	return $p;
}

# Lock calls on each of @$names (no spaces in a name) in turn for $secs
# seconds, in the background (psql_finish waits for them): each call's
# outcome is a row of table $log (at, name, ok, state: SQLSTATE and
# message, fence of l).  $call is the PL/pgSQL of one call on name n, its
# lease in l (by default an acquire and its release).  A row in table
# ${log}_stop ends the calls before $secs: a load that must last as long as
# something else does, however long a loaded machine makes it.
sub lease_load
{
	my ($node, $log, $secs, $names, $call) = @_;
	$call //= 'l := rp_acquire(n, 5000); PERFORM rp_release(l);';
	$node->safe_psql('postgres', "CREATE TABLE $log (at timestamptz NOT NULL, name text, ok bool NOT NULL, state text, fence bigint); "
		  . "CREATE TABLE ${log}_stop ()");
	return psql_start($node, qq{DO \$\$
DECLARE l rp_lease; n text; stop timestamptz := clock_timestamp() + $secs * interval '1 second';
BEGIN
  WHILE clock_timestamp() < stop AND NOT EXISTS (SELECT FROM ${log}_stop) LOOP
    FOREACH n IN ARRAY string_to_array('@$names', ' ') LOOP
      BEGIN
        $call
        INSERT INTO $log VALUES (clock_timestamp(), n, true, NULL, l.fence);
      EXCEPTION WHEN OTHERS THEN
        INSERT INTO $log VALUES (clock_timestamp(), n, false, SQLSTATE || ' ' || SQLERRM, NULL);
        BEGIN PERFORM rp_release_all(); EXCEPTION WHEN OTHERS THEN NULL; END;
      END;
      COMMIT;
    END LOOP;
  END LOOP;
END \$\$});
}

# Wait for it; its output, chomped (what it printed so far if it ran past
# twice the harness's timeout and was killed).
sub psql_finish
{
	my ($p) = @_;
	eval { $p->{run}->finish; 1 } or $p->{run}->kill_kill;
	chomp $p->{stdout};
	return $p->{stdout};
}

1;
