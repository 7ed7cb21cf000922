/*-------------------------------------------------------------------------
 *
 * stats.h
 *		Shared-memory statistics (rp_stats) and the cross-backend lease table
 *		(rp_locks): one module, one piece of shared memory.
 *
 * Before editing, know this: every hook here is on the hot path of a
 * primitive and must never throw, block or take a lock that serializes
 * backends.  Counters live in per-backend slots (one writer each), leases in
 * entries claimed by compare-and-swap; only readers of the views pay.
 * Adding a primitive is one line in RP_PRIMITIVES.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_STATS_H
#define RP_STATS_H

#include "postgres.h"

#include "fmgr.h"
#include "datatype/timestamp.h"

/*
 * Every counted primitive: enum suffix and the name rp_stats shows.  The
 * rate limiter's rows are "ratelimit_" plus the algorithm's SQL name, found
 * by name at run time: a new algorithm is one line here.
 */
#define RP_PRIMITIVES(X) \
	X(ACQUIRE, "acquire") \
	X(ACQUIRE_XACT, "acquire_xact") \
	X(ACQUIRE_ALL, "acquire_all") \
	X(ACQUIRE_ALL_XACT, "acquire_all_xact") \
	X(RELEASE, "release") \
	X(RELEASE_ALL, "release_all") \
	X(EXTEND, "extend") \
	X(LOCK_INFO, "lock_info") \
	X(RATELIMIT_SLIDING_LOG, "ratelimit_sliding_log") \
	X(RATELIMIT_SLIDING_WINDOW, "ratelimit_sliding_window") \
	X(RATELIMIT_GCRA, "ratelimit_gcra") \
	X(RATELIMIT_PEEK, "ratelimit_peek") \
	X(RATELIMIT_RESET, "ratelimit_reset") \
	X(SEMAPHORE_ACQUIRE, "semaphore_acquire") \
	X(SEMAPHORE_ACQUIRE_XACT, "semaphore_acquire_xact") \
	X(SEMAPHORE_INFO, "semaphore_info") \
	X(CAMPAIGN, "campaign") \
	X(RESIGN, "resign") \
	X(LEADER, "leader") \
	X(ELECTOR_RENEW, "elector_renew") \
	X(OTHER, "other")

#define RP_PRIM_ENUM(id, name) RP_PRIM_##id,
typedef enum RpPrimitive
{
	RP_PRIMITIVES(RP_PRIM_ENUM)
	RP_NUM_PRIMITIVES
} RpPrimitive;
#undef RP_PRIM_ENUM

/* How an SQL function's result reads. */
typedef enum RpOutcomeKind
{
	RP_OUT_PLAIN,				/* any result is a success */
	RP_OUT_NULL_REFUSED,		/* NULL = not acquired / no longer held */
	RP_OUT_FALSE_REFUSED,		/* false = refused / not held */
	RP_OUT_RECORD_REFUSED		/* a record whose first column false = refused */
} RpOutcomeKind;

typedef enum RpOutcome
{
	RP_OUTCOME_OK,
	RP_OUTCOME_REFUSED,
	RP_OUTCOME_ERROR
} RpOutcome;

/* Events the connection layer reports, counted for the current primitive. */
typedef enum RpConnEvent
{
	RP_EVENT_TIMEOUT,			/* a wait on Redis reached its deadline */
	RP_EVENT_CONNECT,			/* a connection is being opened */
	RP_EVENT_NOSCRIPT			/* a script was reloaded after NOSCRIPT */
} RpConnEvent;

/* Settings.  Called by _PG_init. */
extern void rp_stats_init(void);

/* Shared memory, when preloaded: module.c's shmem hooks call these. */
extern void rp_stats_shmem_request(void);
extern void rp_stats_shmem_startup(void);

/*
 * The wrapper of an SQL entry point: times body, classifies its result or
 * its error, and counts it.  Use RP_TRACKED_FUNCTION rather than calling it.
 */
extern Datum rp_stats_call(RpPrimitive prim, RpOutcomeKind kind,
						   PGFunction body, FunctionCallInfo fcinfo);

/* The rate limiter's primitive, from the algorithm argument (argno). */
extern RpPrimitive rp_stats_ratelimit_prim(FunctionCallInfo fcinfo, int argno);

/*
 * The rate limiter's observer (a rp_ratelimit_observer_hook_type, set by
 * _PG_init): counts shadow-mode refusals.
 */
extern void rp_stats_ratelimit_observed(const char *algorithm, bool allowed,
										bool would_refuse, bool shadow);

/*
 * Define the SQL-callable C function `fn`, counted as `prim`, whose body
 * follows as the block after the macro:
 *
 *		RP_TRACKED_FUNCTION(rp_extend, RP_PRIM_EXTEND, RP_OUT_NULL_REFUSED)
 *		{
 *			... the function's body, using fcinfo as usual ...
 *		}
 *
 * `prim` is evaluated inside the function and may use fcinfo.
 */
#define RP_TRACKED_FUNCTION(fn, prim, kind) \
	static Datum fn##_body(FunctionCallInfo fcinfo); \
	PG_FUNCTION_INFO_V1(fn); \
	Datum \
	fn(PG_FUNCTION_ARGS) \
	{ \
		return rp_stats_call((prim), (kind), fn##_body, fcinfo); \
	} \
	static Datum \
	fn##_body(FunctionCallInfo fcinfo)

/*
 * For code that is not an SQL entry point (the elector's renewals): count
 * one call that took elapsed_us with this outcome (sqlerrcode for errors).
 */
extern void rp_stats_record(RpPrimitive prim, int64 elapsed_us,
							RpOutcome outcome, int sqlerrcode);

/* Attribute connection events outside any counted call to prim. */
extern void rp_stats_set_default(RpPrimitive prim);

/* Called by the connection layer: one call per event. */
extern void rp_stats_conn_event(RpConnEvent event);

/*
 * Called by rp_eval_quiet when it swallows an error; rp_stats_quiet_sqlstate
 * returns the last such SQLSTATE (0 if none) for rp_stats_record.
 */
extern void rp_stats_quiet_error(int sqlerrcode);
extern int	rp_stats_quiet_sqlstate(void);

/*
 * The lease table.  key identifies the lease within this backend (the
 * registry's own pointer); publishing a key again updates its row (after
 * an extend).  Neither call throws; a full table counts the lease as not
 * shown.  A backend's rows are cleared when it exits.
 */
extern void rp_locks_publish(const void *key, const char *name, size_t namelen,
							 int64 fence, TimestampTz expires_at, bool xact);
extern void rp_locks_unpublish(const void *key);

/*
 * Register the callback that clears this backend's rows at its exit, if it
 * is not yet (the first publish does too).  Exit callbacks registered after
 * it run before it, so they can still read what other backends told.
 */
extern void rp_locks_register_exit(void);

/*
 * The table as this server's truth about its leases (only when preloaded;
 * without shared memory these do nothing and find nothing).  A published
 * row is bound to its lease's token and Redis key by a keyed hash
 * (rp_locks_bind_token; the token itself is never stored).  A backend that
 * releases or extends a lease by token tells its owner through
 * rp_locks_override_token, before the round trip (RP_LOCKS_DOUBTED for a
 * release; for an extend the deadline asked for, pending +1) and after
 * Redis answered (RP_LOCKS_REVOKED: released; RP_LOCKS_DOUBTED: not held,
 * perhaps because the call reached another server; for an extend that ran,
 * its deadline again, pending -1).  A row keeps the
 * earliest deadline told; the call returns how many rows it marked.  The
 * owner reads its own row's override with rp_locks_override_of (seq: how
 * many overrides so far), and, after its own extend, clears it with
 * rp_locks_override_clear only if no override came since seq and no extend
 * by token is pending (one whose reply was lost stays pending: it may run
 * after the owner's own).  A release, confirmed or doubted, is never
 * cleared.  rp_locks_override_of also gives the latest deadline an extend
 * by token asked for, answered or not (0: none; never cleared while the row
 * is bound): it may have run, so although belief never goes past the
 * owner's own deadline, its duty to release lasts until then.
 */
/* Long past, yet safe to subtract a margin from (DT_NOBEGIN would wrap). */
#define RP_LOCKS_REVOKED	((TimestampTz) 1)
/*
 * A release by token asked for, its outcome not known (told before the
 * round trip; it stays when the reply is lost, and is told again when Redis
 * answers "not held" for a release or an extend, since that answer may come
 * from another server; RP_LOCKS_REVOKED follows "released").  The owner
 * stops believing the lease but still releases it at its end.  Earlier
 * than any deadline, later than a release; like a release, never cleared.
 */
#define RP_LOCKS_DOUBTED	((TimestampTz) 2)
extern void rp_locks_bind_token(const void *key, const char *rkey, size_t rkeylen,
								const char *token);
extern bool rp_locks_override_of(const void *key, TimestampTz *deadline, uint32 *seq,
								 TimestampTz *latest);
extern void rp_locks_override_clear(const void *key, uint32 seq);
extern int	rp_locks_override_token(const char *rkey, size_t rkeylen, const char *token,
									TimestampTz deadline, int pending);

#endif							/* RP_STATS_H */
