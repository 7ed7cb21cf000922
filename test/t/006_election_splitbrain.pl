# test/t/006_election_splitbrain.pl -- lease 400 ms, leader stalled 1500 ms: for
# how long do both servers believe they lead?
#
# The TypeScript redis-primitives library (ioredis, one Redis) measured
# 1095 ms with the same lease and stall: its isLeader flag stayed true for
# as long as the stalled process could not look at it (docs/election.md,
# "Measurements", has its numbers beside ours).  Here both answers are
# sampled in pairs from an observer, a third server whose database asks both
# nodes in turn through dblink, so every sample is a pair of answers taken
# well under a millisecond apart on one clock, from separate connections:
#   state      the elector's own flag, set when elected and cleared when the
#              elector sees it lost: the naive isLeader.  It reproduces
#              that window of about stall - lease (1095 ms there).
#   is_leader  rp_is_leader(name): true only before sent + lease - margin of
#              the last confirmed renewal.  Its window must be zero.
# Stalls: the leader's elector process (SIGSTOP/SIGCONT), then Redis itself.
# During the first stall both leaders write to a fenced table: only the new
# epoch gets through.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use List::Util qw(max);

use RedisPrimitives::Test::Redis;
use RedisPrimitives::Test::Node;
use RedisPrimitives::Test::Election;

my $STALL_MS = 1500;
my $redis = RedisPrimitives::Test::Redis->new;

# The observer's sample(run, a, b, seconds) asks node a, then node b, every
# 2 ms until the test says stop (a row in sampling_stop, committed after the
# stall, however long the stall took on a loaded machine; a fixed run ended
# before a late stall did), for seconds at most: is_leader (the
# deadline-bounded belief) and state (the elector's own flag, what a plain
# isLeader would say).  skew_ms: how far apart the two answers were.  It
# says when it has taken 20 pairs and the last one saw node a lead (the
# samples commit at its end): the stall starts after a sample of a leading,
# whatever a loaded elector did before.  schedule is the resource both
# leaders write to, fenced by the epoch; naive_schedule its naive twin,
# which trusts whoever believes it leads.
my $obs = rp_node('observer', $redis->pg_conf);
sql($obs, qq{
CREATE EXTENSION dblink;
CREATE TABLE samples (run text, t_ms float8, skew_ms float8,
                      a_leader bool, b_leader bool, a_state text, b_state text);
CREATE TABLE sampling_stop (run text);
CREATE FUNCTION sample(run text, a text, b text, seconds float8) RETURNS int
LANGUAGE plpgsql AS \$\$
DECLARE
  q text := 'SELECT is_leader, state FROM rp_elections() WHERE name = ''$ELECTION''';
  t_end timestamptz := clock_timestamp() + seconds * interval '1 s';
  ta timestamptz; al bool; bl bool; ast text; bst text; n int := 0; said bool := false;
BEGIN
  PERFORM dblink_connect('a', a);
  PERFORM dblink_connect('b', b);
  WHILE clock_timestamp() < t_end AND NOT EXISTS (SELECT 1 FROM sampling_stop s WHERE s.run = sample.run) LOOP
    ta := clock_timestamp();
    SELECT l, s INTO al, ast FROM dblink('a', q) AS x(l bool, s text);
    SELECT l, s INTO bl, bst FROM dblink('b', q) AS x(l bool, s text);
    INSERT INTO samples VALUES (run, extract(epoch FROM ta) * 1000,
      extract(epoch FROM clock_timestamp() - ta) * 1000, al, bl, ast, bst);
    n := n + 1;
    IF n >= 20 AND al AND NOT said THEN RAISE NOTICE 'sampling'; said := true; END IF;
    PERFORM pg_sleep(0.002);
  END LOOP;
  RETURN n;
END \$\$;
CREATE TABLE schedule (id int PRIMARY KEY, owner text, epoch bigint NOT NULL);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON schedule
  FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('epoch');
CREATE TABLE naive_schedule (id int PRIMARY KEY, owner text, epoch bigint);
INSERT INTO schedule VALUES (1, 'nobody', 0);
INSERT INTO naive_schedule VALUES (1, 'nobody', 0);});

# Sample node a and node b in the background until sample_stats stops it
# (150 s at most), once the sampler has taken 20 pairs and seen node a lead
# (on a loaded machine connecting may take longer than any fixed sleep).
sub sample_start
{
	my ($run, $a, $b) = @_;
	return psql_start($obs, "SELECT sample('$run', \$\$" . $a->connstr('postgres') . "\$\$, \$\$"
		  . $b->connstr('postgres') . "\$\$, 150)", qr/sampling/);
}

# Stop the sampler and read the stats of its run (the samples commit at its
# end), relative to t0 (epoch ms, read just after the stall began: the stall
# began at or before it); t_before: read just before the stall began.  A
# window is the sum, over samples where the condition holds, of the time to
# the next sample; *_after: ms from t0 to the first sample after it with the
# condition (-1: never); a_last_true: ms from t0 to the last sample before
# t_end at which node a still said is_leader (a gap in the sampling can only
# make it earlier, never later: it is the sound bound to assert on).
sub sample_stats
{
	my ($sampler, $run, $t_before, $t0, $t_end) = @_;
	sql($obs, "INSERT INTO sampling_stop VALUES ('$run')");
	psql_finish($sampler);
	return { map { split /=/ } split /\n/, sql($obs, qq{
	CREATE TEMP VIEW s AS
	  SELECT *, lead(t_ms) OVER (ORDER BY t_ms) - t_ms AS dt
	  FROM samples WHERE run = '$run';
	SELECT 'n=' || count(*) FROM s
	UNION ALL SELECT 'max_gap=' || coalesce(round(max(dt)::numeric), 0) FROM s
	UNION ALL SELECT 'max_skew=' || coalesce(round(max(skew_ms)::numeric, 2), 0) FROM s
	UNION ALL SELECT 'both_leader=' || count(*) FILTER (WHERE a_leader AND b_leader) FROM s
	UNION ALL SELECT 'both_state=' || count(*) FILTER (WHERE a_state = 'leader' AND b_state = 'leader') FROM s
	UNION ALL SELECT 'elector_window=' || round(coalesce(sum(dt) FILTER (WHERE a_leader AND b_leader), 0)::numeric) FROM s
	UNION ALL SELECT 'naive_window=' || round(coalesce(sum(dt) FILTER (WHERE a_state = 'leader' AND b_state = 'leader'), 0)::numeric) FROM s
	UNION ALL SELECT 'a_leader_before=' || count(*) FILTER (WHERE a_leader AND t_ms < $t_before) FROM s
	UNION ALL SELECT 'a_last_true=' || coalesce(round((max(t_ms) - $t0)::numeric), -1) FROM s WHERE t_ms >= $t0 AND t_ms < $t_end AND a_leader
	UNION ALL SELECT 'a_believed_after=' || coalesce(round((min(t_ms) - $t0)::numeric), -1) FROM s WHERE t_ms >= $t0 AND NOT a_leader
	UNION ALL SELECT 'a_flag_after=' || coalesce(round((min(t_ms) - $t0)::numeric), -1) FROM s WHERE t_ms >= $t0 AND a_state <> 'leader'
	UNION ALL SELECT 'b_leads_after=' || coalesce(round((min(t_ms) - $t0)::numeric), -1) FROM s WHERE t_ms >= $t0 AND b_leader}) };
}

my $n1 = election_node('n1', $redis);
wait_leader($n1, 'true', 30000);
my $n2 = election_node('n2', $redis);
wait_leader($n2, 'false', 5000);
# judged on the first reading in which someone believes (a belief lapses
# for a moment when its elector is descheduled past the margin on a busy
# machine: 'f|f'); a 't|t' ends the wait too, and fails
my $leaders = '';
wait_until(sub { ($leaders = leaders($n1, $n2)) ne 'f|f' });
is($leaders, 't|f',
	'n1 leads, n2 follows');

# ---- 1. the leader's elector is frozen for 1.5 s -------------------------
my $epoch_a = election($n1, 'epoch');
# The naive table starts with nobody: what it holds at the end was written
# during the stall.
sql($obs, "UPDATE schedule SET owner = 'n1', epoch = $epoch_a; UPDATE naive_schedule SET owner = 'nobody', epoch = 0");
my $pid = elector_pid($n1);
# During the stall every statement goes through a session opened before it:
# starting a psql per statement takes seconds on a loaded machine.
my %s = (n1 => session($n1), n2 => session($n2), obs => session($obs));
my $sampler = sample_start('elector', $n1, $n2);
# The freeze falls between t_before and t0: a test descheduled between
# reading the clock and the kill must not count as n1 leading after it.
my $t_before = now_ms();
kill 'STOP', $pid;
my $t0 = now_ms();
# n2 takes over while n1 is frozen (the stall lasts until it has); both now
# write.
my $t_b = sq($s{n2}, "SELECT round(wait_leader(true, 30000))");
my $epoch_b = sq($s{n2}, "SELECT coalesce(epoch, 0) FROM rp_elections() WHERE name = '$ELECTION'");
my $flags = sq($s{n1}, 'SELECT state || \' \' || is_leader FROM rp_elections()');
my $r_b = sq($s{obs}, "UPDATE schedule SET owner = 'n2', epoch = $epoch_b RETURNING owner");
my $r_a = sq($s{obs}, "UPDATE schedule SET owner = 'n1', epoch = $epoch_a RETURNING owner");
# The naive twin: each node writes when its own leadership flag (state, the
# plain isLeader) says it leads, as an application trusting it would.
my @naive_writers;
for my $n ('n2', 'n1')
{
	my ($state, $e) = split /\|/, sq($s{$n}, "SELECT state, coalesce(epoch, 0) FROM rp_elections() WHERE name = '$ELECTION'");
	next unless $state eq 'leader';
	sq($s{obs}, "UPDATE naive_schedule SET owner = '$n', epoch = $e");
	push @naive_writers, $n;
}
my $fw_b = sq($s{obs}, "SELECT rp_fenced_write('job-output', '\"n2\"', $epoch_b)");
my $fw_a = sq($s{obs}, "SELECT rp_fenced_write('job-output', '\"n1\"', $epoch_a)");
my $t_w = now_ms();
# still stopped (state T) after every write: they all happened in the stall
my $stopped_at_w = (split ' ', slurp_file("/proc/$pid/stat") =~ s/^.*\) //sr)[0] eq 'T';
# The stall lasts $STALL_MS ms, and $STALL_MS - $LEASE ms at least after n2
# was elected (on a loaded machine n2's elector may be late): the naive
# window is the time both flags say leader, so its length is the test's.
my $rest = max($t0 + $STALL_MS, ($t_b =~ /^\d+$/ ? $t_b : 0) + $STALL_MS - $LEASE) - now_ms();
usleep($rest * 1000) if $rest > 0;
my $t_cont = now_ms();    # read before the thaw: nothing after it is "during the stall"
kill 'CONT', $pid;
my $S = sample_stats($sampler, 'elector', $t_before, $t0, $t_cont);
$_->quit for values %s;

ok($t_b ne '', "n2 is elected while n1's elector is frozen");
is($flags, 'leader false', 'frozen n1: its own flag still says leader, its deadline says no');
ok($stopped_at_w && $t_w <= $t_cont, "both leaders wrote during the stall (n1's elector still stopped after the last write)");
is($r_b, 'n2', "the new leader's write (epoch $epoch_b) is accepted by the fenced table");
is($r_a, 'ERROR:  RP001', "the old leader's write with its stale epoch ($epoch_a) is refused (RP001)");
is(sql($obs, 'SELECT owner FROM naive_schedule') . ' (written by ' . join(', ', @naive_writers) . ')', 'n1 (written by n2, n1)',
	"naive: both trusted their own leader flag and wrote; the stale leader's write came last and stands");
is("$fw_b|$fw_a", 't|f', 'rp_fenced_write accepts the new epoch and refuses the stale one');
cmp_ok($t_cont - $t0, '>=', $STALL_MS - 100, "n1's elector was frozen for the whole stall (" . ($t_cont - $t0) . ' ms)');

diag("elector stall: $S->{n} sample pairs, max gap $S->{max_gap} ms, max skew within a pair $S->{max_skew} ms");
diag("split-brain window, naive flag (state): $S->{naive_window} ms over $S->{both_state} pairs (TypeScript redis-primitives: 1095 ms)");
diag("split-brain window, rp_is_leader: $S->{elector_window} ms over $S->{both_leader} pairs (margin $MARGIN ms)");
diag("n1 stopped believing $S->{a_believed_after} ms after the freeze (last seen true at $S->{a_last_true} ms); n2 led after $S->{b_leads_after} ms");
# That the observer ran through the stall, not how fast this machine is:
# a pair every 25 ms of the 1.5 s stall on average.  The checks below judge
# what the pairs showed; 200 here failed at 195 in a CI run with nothing
# else on the machine.
cmp_ok($S->{n}, '>=', $STALL_MS / 25, 'the observer sampled both servers through the stall');
cmp_ok($S->{a_leader_before}, '>', 0, 'the observer saw n1 lead before the freeze');
cmp_ok($S->{naive_window}, '>=', 500, 'naive: both flags said leader for most of the stall (at least 500 of 1500 ms)');
is($S->{both_leader}, '0', 'rp_is_leader: never true on both servers in the same sample pair');
cmp_ok($S->{a_last_true}, '<=', $LEASE, "frozen n1's rp_is_leader was never seen true later than one lease after the freeze");
ok($S->{a_believed_after} >= 0 && $S->{a_believed_after} <= $LEASE + $S->{max_gap},
	"and was seen false during the freeze, within a lease (+ one sampling gap), without its elector running ($S->{a_believed_after} ms)");

$n1->poll_query_until('postgres', "SELECT state = 'follower' FROM rp_elections()");
# judged on the reading that ended the wait: n2's belief lapses for a moment
# when its elector is descheduled past the margin on a loaded machine
is(wait_for(sub { election($n1, "state || ' ' || is_leader") . '|' . leaders($n2) }, 'follower false|t'), 'follower false|t',
	'after thawing, n1 follows and n2 leads');

# ---- 2. Redis is frozen for 1.5 s ----------------------------------------
# Now n2 leads.  Nobody can renew or campaign: the leader must stop
# believing on its own, and nobody may believe until Redis answers again.
$epoch_b = election($n2, 'epoch');
$sampler = sample_start('redis', $n2, $n1);
$t_before = now_ms();
$redis->freeze;
$t0 = now_ms();
usleep($STALL_MS * 1000);
$t_cont = now_ms();
$redis->thaw;
$S = sample_stats($sampler, 'redis', $t_before, $t0, $t_cont);
diag("Redis stall: $S->{n} sample pairs, max gap $S->{max_gap} ms");
diag("leader stopped believing $S->{a_believed_after} ms after Redis froze (last seen true at $S->{a_last_true} ms; its flag: $S->{a_flag_after} ms)");
diag("split-brain window, rp_is_leader: $S->{elector_window} ms over $S->{both_leader} pairs; naive flag $S->{naive_window} ms");
cmp_ok($S->{a_leader_before}, '>', 0, 'the observer saw n2 lead before Redis froze');
cmp_ok($S->{a_last_true}, '<=', $LEASE, 'with Redis frozen, the leader was never seen believing later than one lease after');
ok($S->{a_believed_after} >= 0 && $S->{a_believed_after} < $t_cont - $t0,
	"it was seen not believing before Redis answered again ($S->{a_believed_after} ms; -1 would be never)");
is($S->{both_leader}, '0', 'rp_is_leader: never true on both servers in the same sample pair');
# exactly one leads again once an elector has renewed against the thawed Redis:
# judged on the reading that ended the wait (a second reading could miss a
# brief 't|t')
$leaders = '';
wait_until(sub { ($leaders = leaders($n1, $n2)) ne 'f|f' });
ok($leaders eq 't|f' || $leaders eq 'f|t', "after Redis thaws, exactly one server leads again ($leaders)");
my $epoch_now = election($leaders eq 't|f' ? $n1 : $n2, 'epoch');
ok($epoch_now =~ /^\d+$/ && $epoch_now >= $epoch_b, "and its epoch ($epoch_now) did not go backwards (was $epoch_b)");

# A clean (fast) stop: an elector that does not exit fails the test here
# (the harness's own teardown at exit is an immediate stop, which would not).
$_->stop for ($n1, $n2, $obs);
done_testing();
