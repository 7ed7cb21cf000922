/*-------------------------------------------------------------------------
 *
 * lock.h
 *		The lease lock: acquire, release, extend, and the session's registry.
 *
 * Other primitives that need a lease-shaped lock (leader election) use the
 * key builders here so that every lock of a name shares one fence counter.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_LOCK_H
#define RP_LOCK_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "fmgr.h"

/* Longest lease or wait we accept, in ms (Redis rejects PX past int64 time). */
#define RP_MAX_TTL_MS	INT64CONST(1000000000000)

extern void rp_lock_init(void);

/* Argument checks shared by the SQL functions of every primitive. */
extern text *rp_arg_text(FunctionCallInfo fcinfo, int argno, const char *what);
extern int64 rp_arg_int8(FunctionCallInfo fcinfo, int argno, const char *what,
						 int64 min, int64 max);

/* Pool-safe forms and pool support (end of lock.c; pool.c). */
extern int	rp_lock_release_session_leases(void);
extern void rp_pool_check_session_acquire(const char *name, size_t namelen);
extern void rp_pool_warn_release_not_held(const char *name, size_t namelen);
/*
 * The session's live lease on a name, from its own registry (no round trip):
 * true with the lease's fence and expires_at (the time the acquire was sent
 * + ttl); false when the session holds none.  Used by the lock-bound fence
 * guard (fence.c), which applies redis_primitives.lease_margin itself.
 */
extern bool rp_lease_lookup(const char *name, size_t namelen, int64 *fence,
							TimestampTz *expires_at);

#endif							/* RP_LOCK_H */
