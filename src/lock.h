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
#include "datatype/timestamp.h"

#include "conn.h"

/* Longest lease or wait we accept, in ms (Redis rejects PX past int64 time). */
#define RP_MAX_TTL_MS	INT64CONST(1000000000000)

extern void rp_lock_init(void);

/*
 * Leases of other kinds in the session's registry (src/semaphore.c).  A
 * token is RP_TOKEN_LEN characters; its first says its kind.
 */
#define RP_TOKEN_LEN	32

typedef enum RpLeaseKind
{
	RP_LEASE_LOCK,				/* <prefix>{name}:lock, a string */
	RP_LEASE_PERMIT				/* a member of <prefix>{name}:sem, a sorted set */
} RpLeaseKind;

extern RpLeaseKind rp_token_kind(const char *token);
extern void rp_lease_new_token(char *out, RpLeaseKind kind);
/* rp_eval that also tells the registry Redis answers (orphans go then). */
extern RpReply *rp_lease_eval(const RpScript *script, int nkeys, const RpArg *keys,
							  int nargs, const RpArg *argv);
/* The session's live lease of this kind on name: token (RP_TOKEN_LEN + 1). */
extern bool rp_lease_find_live(const char *name, size_t namelen, RpLeaseKind kind,
							   char *token, int64 *fence, TimestampTz *expires_at);
/* Record a granted lease; released at exit, or at transaction end if xact. */
extern void rp_lease_remember(const char *name, size_t namelen, const char *token,
							  int64 fence, TimestampTz expires_at, bool xact,
							  RpLeaseKind kind);
/* Record a lease Redis may have granted to a call that failed. */
extern void rp_lease_orphan(const char *name, size_t namelen, const char *token,
							TimestampTz expires_at, RpLeaseKind kind);
/* An rp_lease datum for fcinfo's result type. */
extern Datum rp_lease_datum(FunctionCallInfo fcinfo, const char *name, size_t namelen,
							const char *token, int64 fence, TimestampTz expires_at);

/* Argument checks shared by the SQL functions of every primitive. */
extern text *rp_arg_text(FunctionCallInfo fcinfo, int argno, const char *what);
extern int64 rp_arg_int8(FunctionCallInfo fcinfo, int argno, const char *what,
						 int64 min, int64 max);

/*
 * The session's live lease on a name, from its own registry (no round trip):
 * true with the lease's fence and expires_at (the time the acquire was sent
 * + ttl); false when the session holds none.  Used by the lock-bound fence
 * guard (fence.c), which applies redis_primitives.lease_margin itself.
 */
extern bool rp_lease_lookup(const char *name, size_t namelen, int64 *fence,
							TimestampTz *expires_at);
/* Pool-safe forms and pool support (end of lock.c; pool.c). */
extern int	rp_lock_release_session_leases(void);
extern void rp_pool_check_session_acquire(const char *name, size_t namelen);
extern void rp_pool_warn_release_not_held(const char *name, size_t namelen);

#endif							/* RP_LOCK_H */
