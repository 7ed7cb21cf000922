/*-------------------------------------------------------------------------
 *
 * lock.h
 *		The lease lock: acquire, release, extend, and the session's registry
 *		of leases.
 *
 * Before editing, know this: the registry is keyed by name and every entry
 * remembers the full Redis key it was taken under, so a later change of
 * key_prefix never misdirects a release, extend or commit-time check.
 * Entries enter through rp_registry_add and leave through
 * rp_registry_remove, nowhere else.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_LOCK_H
#define RP_LOCK_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "fmgr.h"

#include "conn.h"
#include "token.h"				/* RP_TOKEN_LEN, RpLeaseKind */

#include "args.h"				/* rp_arg_text, rp_arg_int8, RP_MAX_TTL_MS */

extern void rp_lock_init(void);

/* Leases of other kinds in the session's registry (src/prim/semaphore.c). */
extern void rp_lease_new_token(char *out, RpLeaseKind kind);
/* rp_eval that also tells the registry Redis answers (unsettled go then). */
extern RpReply *rp_lease_eval(const RpScript *script, int nkeys, const RpArg *keys,
							  int nargs, const RpArg *argv);
/* The session's live lease of this kind on name: token (RP_TOKEN_LEN + 1). */
extern bool rp_lease_find_live(const char *name, size_t namelen, RpLeaseKind kind,
							   char *token, int64 *fence, TimestampTz *expires_at);
/* Record a granted lease; released at exit, or at transaction end if xact. */
extern void rp_lease_remember(const char *name, size_t namelen, const char *token,
							  int64 fence, TimestampTz expires_at, bool xact,
							  RpLeaseKind kind);
/*
 * Record an acquire about to be sent (before sending it): until settled it
 * is released at transaction end or backend exit, as a lock's acquire is.
 * Settle with the fence granted (the lease enters the registry) or 0 (not
 * granted: forgotten).  An acquire that threw stays recorded.
 */
extern void *rp_lease_pending(const char *name, size_t namelen, const char *token,
							  TimestampTz expires_at, RpLeaseKind kind);
extern void rp_lease_settle(void *pending, int64 fence, bool xact);
/* Record a lease Redis may have granted to a call that failed. */
extern void rp_lease_orphan(const char *name, size_t namelen, const char *token,
							TimestampTz expires_at, RpLeaseKind kind);
/* An rp_lease datum for fcinfo's result type. */
extern Datum rp_lease_datum(FunctionCallInfo fcinfo, const char *name, size_t namelen,
							const char *token, int64 fence, TimestampTz expires_at);

/*
 * The session's live lease on a name, from its own registry (no round trip):
 * true with the lease's fence and expires_at (the time the acquire was sent
 * + ttl); false when the session holds none.  Used by the lock-bound fence
 * guard (fence.c), which applies redis_primitives.lease_margin itself.
 */
extern bool rp_lease_lookup(const char *name, size_t namelen, int64 *fence,
							TimestampTz *expires_at);
/* Release every session lease of this backend (pool.c's DISCARD ALL). */
extern int	rp_lock_release_session_leases(void);

#endif							/* RP_LOCK_H */
