/*-------------------------------------------------------------------------
 *
 * pool.h
 *		Connection pools: the check that refuses session leases for a pooled
 *		role and the warning when rp_release(name) finds nothing.
 *
 * Before editing, know this: pool.c calls nothing of the lease layer; the
 * lock (lock.c) and the lease functions (leasefuncs.c) call the check and
 * the warning, and DISCARD ALL ends the session's leases through module.c's
 * ProcessUtility hook (rp_lease_discard_all).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_POOL_H
#define RP_POOL_H

#include "postgres.h"

/* redis_primitives.session_leases; called by _PG_init. */
extern void rp_pool_init(void);

/* ERROR when session leases are off for this session. */
extern void rp_pool_check_session_acquire(const char *name, size_t namelen);

/* WARNING: rp_release(name) found no lease of this session on name. */
extern void rp_pool_warn_release_not_held(const char *name, size_t namelen);

#endif							/* RP_POOL_H */
