/*-------------------------------------------------------------------------
 *
 * pool.h
 *		Connection pools: the check that refuses session leases and session
 *		permits for a pooled role and the warning when rp_release(name)
 *		finds nothing.
 *
 * Before editing, know this: pool.c calls nothing of the lease layer; the
 * lock (lock.c), the semaphore (semaphore.c) and the lease functions
 * (leasefuncs.c) call the check and the warning, and DISCARD ALL ends the
 * session's leases through module.c's ProcessUtility hook
 * (rp_lease_discard_all).  Every SQL function whose lease or permit belongs
 * to the database session calls the check before anything is sent to Redis.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_POOL_H
#define RP_POOL_H

#include "postgres.h"

/* redis_primitives.session_leases; called by _PG_init. */
extern void rp_pool_init(void);

/* What a session acquire takes: names the _xact form in the refusal. */
typedef enum RpSessionAcquire
{
	RP_SESSION_LOCK,			/* rp_acquire: rp_acquire_xact */
	RP_SESSION_LOCK_ALL,		/* rp_acquire_all: rp_acquire_all_xact */
	RP_SESSION_PERMIT			/* rp_semaphore_acquire: rp_semaphore_acquire_xact */
} RpSessionAcquire;

/* ERROR (55000) when session leases are off for this session. */
extern void rp_pool_check_session_acquire(RpSessionAcquire what,
										  const char *name, size_t namelen);

/* WARNING: rp_release(name) found no lease of this session on name. */
extern void rp_pool_warn_release_not_held(const char *name, size_t namelen);

#endif							/* RP_POOL_H */
