# test/t/011_election_late_reply.pl -- a renewal whose reply is read late:
# the belief runs from the send, never from the reply.
#
# n1's elector reaches Redis through test/t/delay_proxy.py (n1's sessions
# and n2 go to Redis directly).  Once n1 leads, the proxy is told to let
# one more command through and hold its reply 1500 ms, five margins: the
# renewal runs in Redis at once, so the key's expiry counts from then, and
# n1 reads the reply 1500 ms later; nothing n1 sends after it reaches Redis,
# so the key expires one lease after that renewal and n2 takes it.
#   From the send (the rule): n1 believes until send + lease - margin, a
#   margin before the key can expire.
#   From the reply (the naive twin): until reply + lease - margin, 1200 ms
#   past the key's expiry, while n2 takes over.
# A sampler in n1 asks Redis who holds the key (rp_leader, on Redis' clock)
# and then, after Redis answered, n1's rp_is_leader: a sample where Redis no
# longer had n1's key and n1 still believed is an instant at which n1
# believed with the key gone from under it.
use strict;
use warnings;

use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RedisPrimitives::Test::Redis;
use RedisPrimitives::Test::Node;
use RedisPrimitives::Test::Election;

my ($LEASE_MS, $RENEW_MS, $MARGIN_MS, $HOLD_MS) = (3000, 500, 300, 1500);
my $BELIEVE_MS = $LEASE_MS - $MARGIN_MS;
my $here = File::Spec->rel2abs(dirname(__FILE__));

my $redis = RedisPrimitives::Test::Redis->new;

# The proxy, on a port of its own; its events file says when it listens.
my $proxy_port = PostgreSQL::Test::Cluster::get_free_port();
my $events = "$PostgreSQL::Test::Utils::tmp_check/delay_proxy_events";
my $python = -x '/usr/bin/python3' ? '/usr/bin/python3' : 'python3';
my $proxy = IPC::Run::start([ $python, "$here/delay_proxy.py", $proxy_port, $redis->port, $HOLD_MS, $events ],
	'>', "$PostgreSQL::Test::Utils::log_path/delay_proxy.log", '2>&1');
END { $proxy->kill_kill if $proxy; }

# events: "kind ms ..." lines; the ms of the first of a kind ('' if none yet)
sub proxy_event
{
	my ($kind) = @_;
	return '' unless -e $events;
	return slurp_file($events) =~ /^\Q$kind\E (\S+)/m ? $1 : '';
}
ok(wait_until(sub { proxy_event('listening') ne '' }), 'the proxy listens');

# An elector with a lease long enough that a reply held five margins still
# comes well inside the campaign's timeout (lease - margin) on a loaded
# machine.  command_timeout: the campaign waits min(command_timeout, lease -
# margin).
sub node
{
	my ($name, $port, $renew) = @_;
	my $node = rp_node($name, qq(log_min_messages = log
redis_primitives.port = $port
redis_primitives.command_timeout = 10000
redis_primitives.node_id = '$name'
redis_primitives.elections = '$ELECTION'
redis_primitives.election_lease = $LEASE_MS
redis_primitives.election_renew = $renew
redis_primitives.election_margin = $MARGIN_MS
));
	$node->poll_query_until('postgres', "SELECT count(*) = 1 FROM rp_elections() WHERE name = '$ELECTION'");
	return $node;
}

# n1's elector (no database: it reads only the configuration file) goes
# through the proxy; its sessions in "postgres" go to Redis directly.
my $n1 = node('n1', $proxy_port, $RENEW_MS);
sql($n1, "ALTER DATABASE postgres SET redis_primitives.port = " . $redis->port);
$n1->poll_query_until('postgres', "SELECT rp_is_leader('$ELECTION')");
# n2 renews often, to take the key soon after it expires
my $n2 = node('n2', $redis->port, 100);
# judged on the reading that ended the wait: n1's belief may lapse for a
# moment on a loaded machine ('f|f')
my $leaders = '';
wait_until(sub { ($leaders = leaders($n1, $n2)) ne 'f|f' });
is($leaders, 't|f', 'n1 leads, n2 follows');
# n1's sessions (the sampler, the checks) must not go through the proxy
my $s1 = session($n1);
is(sq($s1, 'SHOW redis_primitives.port'), $redis->port, "n1's sessions reach Redis directly, its elector through the proxy");

# The sampler: Redis first (who holds the key, its PTTL), then n1's belief,
# every millisecond until the test says stop (a row in sampling_stop) or 120
# s.  t_ms is read before both: a belief read true was true after t_ms.  It
# says 'sampling' once it has seen n1 hold the key and believe.
sql($n1, qq{
CREATE TABLE samples (t_ms float8, node text, epoch bigint, ttl_ms bigint, believed bool);
CREATE TABLE sampling_stop ();
CREATE FUNCTION sample() RETURNS int LANGUAGE plpgsql AS \$\$
DECLARE
  t_end timestamptz := clock_timestamp() + interval '120 s';
  t timestamptz; l record; b bool; n int := 0; said bool := false;
BEGIN
  WHILE clock_timestamp() < t_end AND NOT EXISTS (SELECT FROM sampling_stop) LOOP
    t := clock_timestamp();
    SELECT * INTO l FROM rp_leader('$ELECTION');
    b := rp_is_leader('$ELECTION');
    INSERT INTO samples VALUES (extract(epoch FROM t) * 1000, l.node_id, l.epoch, l.ttl_ms, b);
    n := n + 1;
    IF n >= 20 AND l.node_id = 'n1' AND b AND NOT said THEN RAISE NOTICE 'sampling'; said := true; END IF;
    PERFORM pg_sleep(0.001);
  END LOOP;
  RETURN n;
END \$\$;});
my $sampler = psql_start($n1, 'SELECT sample()', qr/sampling/);

# ---- the held renewal ------------------------------------------------------
my $epoch0 = sq($s1, "SELECT epoch FROM rp_elections() WHERE name = '$ELECTION'");
$proxy->signal('USR1');
ok(wait_until(sub { proxy_event('forwarded') ne '' }), "the proxy forwarded n1's next command to Redis");
# n1's last confirmed renewal while the held one's reply is on its way: the
# elector published the previous renewal's outcome before it sent this one.
my $renewal0 = sq($s1, "SELECT extract(epoch FROM last_renewal) * 1000 FROM rp_elections() WHERE name = '$ELECTION'");
my $t_read = now_ms();
ok(wait_until(sub { proxy_event('released') ne '' }), 'and released its reply');
my ($t_fwd, $t_held, $t_rel) = map { proxy_event($_) } qw(forwarded held released);
# n2 takes the key once it expires, and n1's next campaign (cut off by the
# proxy) ends in its timeout: n1 steps down.  Then stop sampling.
$n2->poll_query_until('postgres', "SELECT rp_is_leader('$ELECTION')");
$n1->poll_query_until('postgres', "SELECT state = 'follower' FROM rp_elections()");
sql($n1, 'INSERT INTO sampling_stop DEFAULT VALUES');
psql_finish($sampler);
# last_renewal outlives a step-down: the send time of n1's last confirmed
# renewal
my $sent1 = sq($s1, "SELECT extract(epoch FROM last_renewal) * 1000 FROM rp_elections() WHERE name = '$ELECTION'");
$s1->quit;

my %S = map { split /=/ } split /\n/, sql($n1, qq{
CREATE TEMP VIEW s AS
  SELECT *, lead(t_ms) OVER (ORDER BY t_ms) - t_ms AS dt FROM samples WHERE t_ms >= $t_fwd;
SELECT 'n=' || count(*) FROM s
UNION ALL SELECT 'max_gap=' || coalesce(round(max(dt)::numeric), 0) FROM s
UNION ALL SELECT 'n1_held=' || count(*) FILTER (WHERE node = 'n1') FROM s
UNION ALL SELECT 'n1_epochs=' || coalesce(string_agg(DISTINCT epoch::text, ',') FILTER (WHERE node = 'n1'), '') FROM s
UNION ALL SELECT 'gone=' || count(*) FILTER (WHERE node IS DISTINCT FROM 'n1') FROM s
UNION ALL SELECT 'n2_held=' || count(*) FILTER (WHERE node = 'n2') FROM s
UNION ALL SELECT 'gone_after=' || coalesce(round((min(t_ms) FILTER (WHERE node IS DISTINCT FROM 'n1') - $t_fwd)::numeric), -1) FROM s
UNION ALL SELECT 'expiry_after=' || coalesce(round((max(t_ms + ttl_ms) FILTER (WHERE node = 'n1') - $t_fwd)::numeric), -1) FROM s
UNION ALL SELECT 'both=' || count(*) FILTER (WHERE node IS DISTINCT FROM 'n1' AND believed) FROM s
UNION ALL SELECT 'both_ms=' || round(coalesce(sum(dt) FILTER (WHERE node IS DISTINCT FROM 'n1' AND believed), 0)::numeric) FROM s
UNION ALL SELECT 'last_true_after=' || coalesce(round((max(t_ms) FILTER (WHERE believed) - $t_fwd)::numeric), -1) FROM s});

diag(sprintf("renewal forwarded to Redis at 0 ms (sent %.0f ms before), its reply held at +%.0f ms, released to n1 at +%.0f ms",
	$t_fwd - $sent1, $t_held - $t_fwd, $t_rel - $t_fwd)) if $sent1 =~ /^[\d.]+$/;
diag("$S{n} samples after the forward, max gap $S{max_gap} ms; Redis' PTTL put the key's expiry at +$S{expiry_after} ms");
diag("Redis first without n1's key at +$S{gone_after} ms ($S{gone} samples, $S{n2_held} with n2's); n1 last believed at +$S{last_true_after} ms");
diag("n1 believed with the key gone in $S{both} samples ($S{both_ms} ms)");

cmp_ok($t_rel - $t_fwd, '>=', $HOLD_MS,
	"the renewal's reply reached n1 at least $HOLD_MS ms (five margins) after the renewal reached Redis");
ok($t_read < $t_rel && $sent1 =~ /^[\d.]+$/ && $renewal0 =~ /^[\d.]+$/ && $sent1 > $renewal0 && $sent1 <= $t_fwd,
	"n1 read the held reply and accepted it: its last confirmed renewal is the held one (sent "
	  . sprintf('%.0f', $t_fwd - ($sent1 || 0)) . ' ms before the forward), no longer the previous one (read before the release)');
ok($S{n1_held} > 0 && $S{n1_epochs} eq $epoch0 && $S{gone} > 0 && $S{n2_held} > 0,
	"Redis was seen with n1's key after the renewal ($S{n1_held} samples, epoch $S{n1_epochs}: the same term, $epoch0), then without it ($S{gone}), then with n2's ($S{n2_held})");
is($S{both}, '0',
	"rp_is_leader on n1 was never true after Redis was seen without n1's key ($S{gone} samples)");
ok($S{last_true_after} ne '-1' && $t_fwd + $S{last_true_after} < $sent1 + $BELIEVE_MS + 10,
	"n1 never believed past its renewal's send + lease - margin (last seen true at +$S{last_true_after} ms; deadline +"
	  . sprintf('%.0f', $sent1 + $BELIEVE_MS - $t_fwd) . ' ms, 10 ms for the two clocks)');
# The naive twin, from the observed times: a deadline counted from the
# reply would have lasted past the key's expiry as Redis showed it.
cmp_ok($t_rel + $BELIEVE_MS - $t_fwd, '>', $S{gone_after},
	"naive twin: a belief counted from the reply (released to n1 at +" . sprintf('%.0f', $t_rel - $t_fwd)
	  . " ms) would have run to +" . sprintf('%.0f', $t_rel + $BELIEVE_MS - $t_fwd)
	  . " ms, past the key's expiry seen at +$S{gone_after} ms");
# judged on the reading that ended the wait (n2's belief may lapse for a
# moment on a loaded machine)
is(wait_for(sub { leaders($n1, $n2) }, 'f|t'), 'f|t', 'n2 leads and n1 does not');

$_->stop for ($n1, $n2);
done_testing();
