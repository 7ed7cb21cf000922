/*-------------------------------------------------------------------------
 *
 * pool.h
 *		Connection pools: the check that refuses session leases for a pooled
 *		role, the warning when rp_release(name) finds nothing, and the hook
 *		through which DISCARD ALL ends the session's leases.
 *
 * Before editing, know this: pool.c sits below the lease lock.  lock.c
 * calls the check and the warning; pool.c reaches the leases only through
 * rp_pool_discard_all_hook, which lock.c sets.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_POOL_H
#define RP_POOL_H

#include "postgres.h"

/* redis_primitives.session_leases and the DISCARD hook; called by _PG_init. */
extern void rp_pool_init(void);

/* ERROR when session leases are off for this session. */
extern void rp_pool_check_session_acquire(const char *name, size_t namelen);

/* WARNING: rp_release(name) found no lease of this session on name. */
extern void rp_pool_warn_release_not_held(const char *name, size_t namelen);

/*
 * Called after a DISCARD ALL succeeded: release every session lease of this
 * backend.  Must not throw (the DISCARD has already run).
 */
typedef int (*rp_pool_discard_all_hook_type) (void);

extern PGDLLIMPORT rp_pool_discard_all_hook_type rp_pool_discard_all_hook;

#endif							/* RP_POOL_H */
