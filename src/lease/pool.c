/*-------------------------------------------------------------------------
 *
 * pool.c
 *		Connection pools (PgBouncer, application pools): the setting that
 *		refuses session leases and session semaphore permits for a pooled
 *		role and the warning when rp_release(name) finds nothing.  DISCARD
 *		ALL releasing this session's leases, as it releases advisory locks,
 *		is module.c's ProcessUtility hook calling rp_lease_discard_all
 *		(lease.c).
 *
 * Before editing, know this: behind a pool the backend is not the client.
 * Session state (the lease registry) outlives the client that made it and is
 * seen by the next client the pool hands the backend to.  Everything here
 * makes that visible (an error, a warning) or ends it at the point a pool
 * declares a session over (DISCARD ALL, PgBouncer's server_reset_query).
 * The DISCARD ALL release runs after the standard command and never throws.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "pool.h"

static bool rp_session_leases = true;

/*
 * Every SQL function whose lease or permit belongs to the database session
 * (rp_acquire, rp_acquire_all, rp_semaphore_acquire) calls this first, before
 * anything is sent to Redis: refused, it leaves nothing behind.  Leadership
 * (rp_campaign) is not checked: it belongs to a node_id, not to a session.
 */
void
rp_pool_check_session_acquire(RpSessionAcquire what, const char *name, size_t namelen)
{
	if (rp_session_leases)
		return;
	if (what == RP_SESSION_PERMIT)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("session permits are disabled for this session"),
				 errdetail("redis_primitives.session_leases is off, as set for connections "
						   "that reach PostgreSQL through a transaction-pooling connection pool, "
						   "where the next client handed this backend would inherit a session permit "
						   "of semaphore \"%s\".",
						   pnstrdup(name, namelen)),
				 errhint("Take the permit with rp_semaphore_acquire_xact inside a transaction, "
						 "or hold one connection for the whole permit without transaction pooling.")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("session leases are disabled for this session"),
			 errdetail("redis_primitives.session_leases is off, as set for connections "
					   "that reach PostgreSQL through a transaction-pooling connection pool, "
					   "where the next client handed this backend would inherit a session lease on \"%s\".",
					   pnstrdup(name, namelen)),
			 what == RP_SESSION_LOCK_ALL ?
			 errhint("Take the leases with rp_acquire_all_xact inside a transaction, "
					 "or hold one connection for as long as they are held, without transaction pooling.") :
			 errhint("Take the lease with rp_acquire_xact inside a transaction, "
					 "or hold one connection for the whole lease without transaction pooling.")));
}

void
rp_pool_warn_release_not_held(const char *name, size_t namelen)
{
	ereport(WARNING,
			(errcode(ERRCODE_WARNING),
			 errmsg("this session holds no lease on \"%s\"", pnstrdup(name, namelen)),
			 errdetail("rp_release(name) releases only a lease taken by this same database session, "
					   "and nothing was released."),
			 errhint("Behind a connection pool the release may run on another backend: "
					 "release with rp_release(name, token) instead.")));
}

void
rp_pool_init(void)
{
	DefineCustomBoolVariable("redis_primitives.session_leases",
							 "Allows rp_acquire, rp_acquire_all and rp_semaphore_acquire, whose lease "
							 "or permit belongs to the database session.",
							 "Set it off for the role that connects through a transaction-pooling "
							 "connection pool (ALTER ROLE ... SET): there a session lease or permit "
							 "would pass to whichever client the pool hands the backend to next, so "
							 "rp_acquire, rp_acquire_all and rp_semaphore_acquire fail instead.  "
							 "rp_acquire_xact, rp_acquire_all_xact and rp_semaphore_acquire_xact are "
							 "unaffected.",
							 &rp_session_leases, true, PGC_SUSET, 0,
							 NULL, NULL, NULL);
}
