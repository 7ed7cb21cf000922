/*-------------------------------------------------------------------------
 *
 * fence_commit.c
 *		The commit-time check of lease- and leader-bound fenced writes, and
 *		redis_primitives.lease_margin, which the trigger applies too.
 *
 * Before editing, know this: the PRE_COMMIT check may throw (that is its
 * point: RP004 aborts the commit); every other event only forgets.  No
 * round trip: it reads this session's registry and the elector's shared
 * memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "election.h"
#include "errcodes.h"
#include "fence_commit.h"
#include "lease.h"

/* redis_primitives.lease_margin, ms */
int			rp_lease_margin_ms = 100;

void
rp_fence_commit_init(void)
{
	DefineCustomIntVariable("redis_primitives.lease_margin",
							"Time before a lease's local deadline at which a lock-bound fence guard stops accepting writes under it.",
							"A lock-bound guard accepts a write while (time the acquire was sent) + ttl - lease_margin has not passed.  The margin absorbs clock rate differences between this machine and Redis and the time from the write to its commit.",
							&rp_lease_margin_ms, 100, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
}

/* ------------------------------------------------------------------------
 * The commit-time check.  A write is checked when it is made, but takes
 * effect at commit: a transaction that commits after the lease it wrote
 * under ran out (or was released) would publish a write the next holder may
 * already have read past.  Every lease (or term) a bound guard accepted a
 * write under is remembered for the transaction and checked again, with no
 * round trip, at PRE_COMMIT: RP004 aborts the commit.
 * ------------------------------------------------------------------------
 */

typedef struct RpCommitCheck
{
	bool		leader;
	char	   *name;			/* lock name or election */
	int64		fence;			/* the fence (epoch) written under */
	SubTransactionId subid;		/* subtransaction that wrote under it */
} RpCommitCheck;

static List *rp_commit_checks = NIL;	/* in TopTransactionContext */
static bool rp_fence_callback_registered = false;

static void
rp_fence_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event != XACT_EVENT_PRE_COMMIT && event != XACT_EVENT_PARALLEL_PRE_COMMIT &&
		event != XACT_EVENT_PRE_PREPARE)
	{
		/* Commit, abort, prepare: the list went with TopTransactionContext. */
		rp_commit_checks = NIL;
		return;
	}
	/* COMMIT PREPARED may come at any time, after any lease ran out. */
	if (event == XACT_EVENT_PRE_PREPARE && rp_commit_checks != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that made lease-bound fenced writes"),
				 errdetail("A fenced write takes effect at commit, which must come before its lease's deadline; COMMIT PREPARED has none.")));
	foreach(lc, rp_commit_checks)
	{
		RpCommitCheck *c = lfirst(lc);
		int64		fence;
		TimestampTz expires_at;
		bool		live;

		/*
		 * The lease the write was made under, by its fence: not the name's
		 * latest lease, which may be another permit of the name the session
		 * took after the write (the write's own permit still live).
		 */
		if (c->leader)
			live = rp_election_believed(c->name, strlen(c->name), &fence) &&
				fence == c->fence;
		else
			live = rp_lease_lookup_fence(c->name, strlen(c->name), c->fence, &expires_at) &&
				TimestampTzPlusMilliseconds(expires_at, -(int64) rp_lease_margin_ms) >
				GetCurrentTimestamp();
		if (!live)
			ereport(ERROR,
					(errcode(ERRCODE_RP_NO_LEASE),
					 errmsg(c->leader ? "leadership of \"%s\" was lost before commit" :
							"lease on \"%s\" is no longer live at commit", c->name),
					 errdetail("A fenced write of this transaction was made under fence token " INT64_FORMAT
							   ", which is no longer live: the write would take effect after another holder may have taken over.",
							   c->fence),
					 errhint("The transaction was rolled back.  Commit before the lease's deadline (minus redis_primitives.lease_margin), and release the lease only after the commit.")));
	}
}

/*
 * A subtransaction that rolls back takes its writes with it, and their
 * checks; one that commits hands them to its parent.
 */
static void
rp_fence_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	foreach(lc, rp_commit_checks)
	{
		RpCommitCheck *c = lfirst(lc);

		if (c->subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
			rp_commit_checks = foreach_delete_current(rp_commit_checks, lc);
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
			c->subid = parentSubid;
	}
}

/*
 * Transaction callbacks run last-registered-first, and postgres_fdw commits
 * its remote transactions in its own PRE_COMMIT callback, registered at its
 * first use in the session, which may come after ours (at the session's
 * first guarded write): a remote write would then commit before this check
 * refused the commit.  While the transaction has writes to check, every
 * statement's end moves the callback to the front, as the lease layer does
 * for verify_at_commit.
 */
void
rp_fence_callback_to_front(void)
{
	if (!rp_fence_callback_registered || rp_commit_checks == NIL)
		return;
	UnregisterXactCallback(rp_fence_xact_callback, NULL);
	RegisterXactCallback(rp_fence_xact_callback, NULL);
}

/* Remember that a write was accepted under (name, fence). */
void
rp_commit_remember(bool leader, const char *name, int64 fence)
{
	ListCell   *lc;
	MemoryContext old;
	RpCommitCheck *c;

	SubTransactionId subid = GetCurrentSubTransactionId();

	foreach(lc, rp_commit_checks)
	{
		c = lfirst(lc);
		if (c->leader == leader && c->fence == fence && c->subid == subid &&
			strcmp(c->name, name) == 0)
			return;
	}
	if (!rp_fence_callback_registered)
	{
		RegisterXactCallback(rp_fence_xact_callback, NULL);
		RegisterSubXactCallback(rp_fence_subxact_callback, NULL);
		rp_fence_callback_registered = true;
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	c = palloc(sizeof(RpCommitCheck));
	c->leader = leader;
	c->name = pstrdup(name);
	c->fence = fence;
	c->subid = subid;
	rp_commit_checks = lappend(rp_commit_checks, c);
	MemoryContextSwitchTo(old);
}
