/*-------------------------------------------------------------------------
 *
 * replicas.c
 *		redis_primitives.fence_replicas and fence_replicas_timeout, and the
 *		WAIT that the lock (rp_acquire, rp_acquire_all), SQL rp_campaign and
 *		the background elector send after a script that issued a fence token
 *		or an epoch.
 *
 * Redis replicates asynchronously: a failover to a replica that had not
 * received a counter's last increments lets the new master issue the same
 * token, or the same epoch, a second time (docs/topology.md).  WAIT n t
 * returns how many replicas acknowledged every write made on this
 * connection within t ms; with n of them holding the increment, a failover
 * to any of them cannot re-issue it.  What each caller does with too few is
 * its own: the lock releases and raises RP003, rp_campaign resigns and
 * raises RP003, the elector does not believe the term (docs/election.md).
 *
 * Before editing, know this: see replicas.h (same connection, nothing in
 * between).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "conn.h"
#include "replicas.h"

int			rp_fence_replicas = 0;
int			rp_fence_replicas_timeout_ms = 500;

void
rp_replicas_init(void)
{
	DefineCustomIntVariable("redis_primitives.fence_replicas",
							"Number of Redis replicas that must acknowledge a new fence token or epoch before it is returned or believed.",
							"0 (the default) does not wait.  Otherwise WAIT follows the script, one more round trip.  Too few in time: rp_acquire releases the lease and rp_campaign resigns the term, both failing with RP003; the background elector does not believe the term.",
							&rp_fence_replicas, 0, 0, 64, PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("redis_primitives.fence_replicas_timeout",
							"Time Redis' WAIT may take for redis_primitives.fence_replicas acknowledgements.",
							"Capped at half of redis_primitives.command_timeout, so the reply comes back before the command times out.",
							&rp_fence_replicas_timeout_ms, 500, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
}

/* WAIT's arguments, with the timeout capped; fills *timeout_ms. */
static void
rp_replicas_args(RpArg *cmd, int cap_ms, int *timeout_ms)
{
	int			t = Min(rp_fence_replicas_timeout_ms, rp_command_timeout_ms / 2);

	if (cap_ms > 0)
		t = Min(t, cap_ms);
	*timeout_ms = Max(1, t);
	cmd[0] = rp_arg_str("WAIT");
	cmd[1] = rp_arg_int(rp_fence_replicas);
	cmd[2] = rp_arg_int(*timeout_ms);
}

int64
rp_replicas_wait(int cap_ms, int *timeout_ms)
{
	RpArg		cmd[3];

	rp_replicas_args(cmd, cap_ms, timeout_ms);
	return rp_reply_int(rp_command(3, cmd), "WAIT");
}

int64
rp_replicas_wait_quiet(int cap_ms, int *timeout_ms, char **err)
{
	RpArg		cmd[3];
	RpReply    *r;
	RpStatus	st;

	*err = NULL;
	rp_replicas_args(cmd, cap_ms, timeout_ms);
	/* The WAIT's timeout is at most half of this: its reply comes back. */
	if (!rp_command_quiet(3, cmd, rp_command_timeout_ms, &r, &st))
	{
		*err = rp_status_text(&st);
		return -1;
	}
	if (r->type != RP_REPLY_INTEGER)
	{
		*err = pstrdup("unexpected reply to WAIT: expected an integer");
		return -1;
	}
	return r->integer;
}
