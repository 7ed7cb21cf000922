/*-------------------------------------------------------------------------
 *
 * semaphore.c
 *		A counting semaphore whose permits are leases: rp_semaphore_acquire,
 *		rp_semaphore_acquire_xact and rp_semaphore_info.
 *
 * Before editing, know this: a permit is an entry of the session's lease
 * registry (src/lease/lease.h, kind RP_LEASE_PERMIT), so releasing,
 * extending, transaction and exit release and the fence guard are the lease
 * layer's; this file only takes permits, and tells the lease layer what a
 * permit is in Redis (rp_permit_kind).  Every decision (count, queue order, reclaiming expired permits
 * and silent waiters) is made inside semaphore_acquire.lua on Redis' clock,
 * in one round trip per attempt.  docs/semaphore.md states what is and is
 * not guaranteed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "args.h"
#include "conn.h"
#include "fence_commit.h"		/* rp_lease_margin_ms */
#include "lease.h"
#include "pool.h"
#include "retry.h"
#include "rp_scripts.h"
#include "semaphore.h"
#include "stats.h"
#include "token.h"

/* The most permits one semaphore may have. */
#define RP_SEM_MAX_PERMITS		1000000

/*
 * A waiter polls at most this far apart, and its place in the queue lives
 * RP_SEM_HEARTBEAT_MS after its last poll: a waiter that vanished (killed,
 * cancelled, its connection lost) stops holding up the queue after that.
 */
#define RP_SEM_MAX_BACKOFF_MS	100
#define RP_SEM_HEARTBEAT_MS		2000

/*
 * What a permit is in Redis, for the lease layer (lease.h): a member of
 * <prefix>{name}:sem, with no fence of its own to read on extend and no
 * commit-time check; not exclusive: a session may hold several permits of
 * one semaphore, one per transaction that took one.
 */
static const RpLeaseKindDef rp_permit_kind = {
	.suffix = "sem",
	.release = &rp_script_semaphore_release,
	.extend = &rp_script_semaphore_extend,
	.extend_counter = NULL,
	.verify = NULL,
	.exclusive = false,
};

void
rp_semaphore_init(void)
{
	rp_lease_define_kind(RP_LEASE_PERMIT, &rp_permit_kind);
}

/*
 * One attempt, pending its unsettled entry.  Returns the fence, or 0 when
 * refused.  On failure pending is forgotten when the command cannot have
 * run (never sent, or answered with an error), unless placed: an earlier
 * attempt of the same token was sent, and its place in the queue may still
 * be there for the abort to release (rp_lease_attempt_failed).
 */
static int64
rp_sem_try(const char *name, size_t namelen, const char *token, int32 permits,
		   int64 ttl_ms, bool queue, RpLease *pending, bool placed)
{
	RpArg		keys[4];
	RpArg		argv[5];
	RpReply    *r;
	RpStatus	st;

	keys[0] = rp_key(name, namelen, "sem");
	keys[1] = rp_key(name, namelen, "fence");
	keys[2] = rp_key(name, namelen, "semq");
	keys[3] = rp_key(name, namelen, "semw");
	argv[0] = rp_arg_str(token);
	argv[1] = rp_arg_int(permits);
	argv[2] = rp_arg_int(ttl_ms);
	argv[3] = rp_arg_str(queue ? "1" : "0");
	argv[4] = rp_arg_int(RP_SEM_HEARTBEAT_MS);
	if (!rp_eval_try(&rp_script_semaphore_acquire, 4, keys, 5, argv,
					 rp_command_timeout_ms, &r, &st))
		rp_lease_attempt_failed(&pending, 1, placed, &st);
	rp_lease_redis_answered(true);
	if (rp_reply_is_nil(r))
		return 0;
	if (r->type != RP_REPLY_STRING)
		elog(ERROR, "unexpected Redis reply for semaphore_acquire: expected a decimal string");
	return pg_strtoint64(r->str);
}

/*
 * rp_sem_try recorded before it is sent (rp_lease_pending): Redis may grant
 * the permit (or queue the waiter) after a cancel, a timeout or a FATAL, and
 * only this backend knows the token, so the registry releases it at
 * transaction end or backend exit unless the answer settled it, or the
 * attempt failed where it cannot have run (rp_sem_try).  A grant enters the
 * registry here: returns its entry, or NULL when refused.
 */
static RpLease *
rp_sem_try_recorded(const char *name, size_t namelen, const char *token,
					int32 permits, int64 ttl_ms, bool queue, TimestampTz sent,
					bool xact, RpLease **waiting)
{
	RpLease    *pending;
	int64		fence;
	bool		placed = *waiting != NULL;

	/* The previous attempt's place in the queue is this attempt's now. */
	if (placed)
	{
		rp_lease_pending_forget(*waiting);
		*waiting = NULL;
	}
	pending = rp_lease_pending(name, namelen, RP_LEASE_PERMIT, token,
							   TimestampTzPlusMilliseconds(sent, Max(ttl_ms, RP_SEM_HEARTBEAT_MS)));
	fence = rp_sem_try(name, namelen, token, permits, ttl_ms, queue, pending, placed);
	if (fence > 0)
	{
		rp_lease_pending_deadline(pending, TimestampTzPlusMilliseconds(sent, ttl_ms));
		return rp_lease_settle(pending, fence, xact, false);
	}
	if (queue)
	{
		/*
		 * Refused and queued: the waiter's place stays recorded as unsettled
		 * while it sleeps, so a cancel, a timeout or an exit releases it
		 * (semaphore_release.lua leaves the queue) at the abort, not a
		 * heartbeat later.
		 */
		rp_lease_redis_answered(true);
		*waiting = pending;
		return NULL;
	}
	return rp_lease_settle(pending, 0, xact, false);
}

/*
 * Shared body of rp_semaphore_acquire and rp_semaphore_acquire_xact.
 *
 * Re-entry is per transaction, as for a lock (rp_lease_reenter): asked again
 * in the transaction that took a live permit, it returns that permit (so
 * SELECT (rp_semaphore_acquire(...)).* takes one permit, not one per column,
 * and a transaction never waits on itself).  A permit an earlier transaction
 * of the session took is not handed back: behind a pool it may be another
 * request's, and handing it over would let more requests in than there are
 * permits.  A later transaction takes a permit of its own, so a session may
 * hold several of one semaphore.  With wait_ms > 0 the caller joins the name's queue in
 * Redis and polls with jittered backoff (5 ms doubling to 100 ms) until the
 * deadline; the last attempt, made at the deadline, leaves the queue when
 * refused.  lock_timeout, when set and shorter, ends the wait with 55P03.
 */
static Datum
rp_semaphore_acquire_common(FunctionCallInfo fcinfo, bool xact)
{
	text	   *name_t = rp_arg_text(fcinfo, 0, "semaphore name");
	int32		permits;
	int64		ttl_ms = rp_arg_int8(fcinfo, 2, "ttl_ms", 1, RP_MAX_TTL_MS);
	int64		wait_ms = rp_arg_int8(fcinfo, 3, "wait_ms", 0, RP_MAX_TTL_MS);
	const char *name = VARDATA_ANY(name_t);
	size_t		namelen = VARSIZE_ANY_EXHDR(name_t);
	char		token[RP_TOKEN_LEN + 1];
	RpLease    *l;
	TimestampTz start = GetCurrentTimestamp();
	RpRetry		retry;
	MemoryContext attempt_cxt;
	RpLease    *waiting = NULL;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("permits must not be NULL")));
	permits = PG_GETARG_INT32(1);
	if (permits < 1 || permits > RP_SEM_MAX_PERMITS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("permits must be between 1 and %d, got %d",
						RP_SEM_MAX_PERMITS, permits)));

	/* A session permit behind a transaction pool: refused, nothing sent. */
	if (!xact)
		rp_pool_check_session_acquire(RP_SESSION_PERMIT, name, namelen);	/* pool.c */
	rp_lease_setup();
	l = rp_lease_reenter(name, namelen, RP_LEASE_PERMIT, start, ttl_ms, rp_lease_margin_ms);
	if (l != NULL)
		PG_RETURN_DATUM(rp_lease_datum(fcinfo, l, true));

	rp_retry_start(&retry, start, wait_ms, RP_SEM_MAX_BACKOFF_MS);
	rp_token_new(token, RP_LEASE_PERMIT);
	/* A wait may last for hours: each attempt's memory goes with it. */
	attempt_cxt = AllocSetContextCreate(CurrentMemoryContext, "rp_semaphore_acquire attempt",
										ALLOCSET_SMALL_SIZES);
	for (;;)
	{
		TimestampTz sent = GetCurrentTimestamp();
		bool		last = sent >= retry.deadline || rp_retry_lock_timeout(&retry, sent);
		MemoryContext old = MemoryContextSwitchTo(attempt_cxt);

		l = rp_sem_try_recorded(name, namelen, token, permits, ttl_ms,
								!last, sent, xact, &waiting);
		MemoryContextSwitchTo(old);
		MemoryContextReset(attempt_cxt);

		/* Its deadline counted from when it was asked for: conservative. */
		if (l != NULL)
			PG_RETURN_DATUM(rp_lease_datum(fcinfo, l, true));
		if (last)
		{
			if (rp_retry_lock_timeout(&retry, sent) && sent < retry.deadline)
				ereport(ERROR,
						(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
						 errmsg("could not obtain a permit of semaphore \"%s\"",
								text_to_cstring(name_t)),
						 errdetail("lock_timeout (%d ms) ended the wait.", LockTimeout)));
			PG_RETURN_NULL();
		}
		rp_retry_sleep(&retry, sent);
	}
}

RP_TRACKED_FUNCTION(rp_semaphore_acquire, RP_PRIM_SEMAPHORE_ACQUIRE, RP_OUT_NULL_REFUSED)
{
	return rp_semaphore_acquire_common(fcinfo, false);
}

RP_TRACKED_FUNCTION(rp_semaphore_acquire_xact, RP_PRIM_SEMAPHORE_ACQUIRE_XACT, RP_OUT_NULL_REFUSED)
{
	return rp_semaphore_acquire_common(fcinfo, true);
}

/* (in_use, oldest_ttl_ms, oldest_expires_at, waiters, last_fence) */
RP_TRACKED_FUNCTION(rp_semaphore_info, RP_PRIM_SEMAPHORE_INFO, RP_OUT_PLAIN)
{
	text	   *name_t = rp_arg_text(fcinfo, 0, "semaphore name");
	const char *name = VARDATA_ANY(name_t);
	size_t		namelen = VARSIZE_ANY_EXHDR(name_t);
	RpArg		keys[3];
	RpReply    *r;
	TupleDesc	tupdesc;
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};
	TimestampTz now;
	int64		ttl;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	keys[0] = rp_key(name, namelen, "sem");
	keys[1] = rp_key(name, namelen, "fence");
	keys[2] = rp_key(name, namelen, "semw");
	now = GetCurrentTimestamp();
	r = rp_lease_eval(&rp_script_semaphore_info, 3, keys, 0, NULL);
	if (r->type != RP_REPLY_ARRAY || r->nelem != 4)
		elog(ERROR, "unexpected Redis reply for semaphore_info");
	values[0] = Int32GetDatum((int32) rp_reply_int(r->elem[0], "semaphore_info"));
	ttl = rp_reply_int(r->elem[1], "semaphore_info");
	if (ttl >= 0)
	{
		values[1] = Int64GetDatum(ttl);
		values[2] = TimestampTzGetDatum(TimestampTzPlusMilliseconds(now, ttl));
	}
	else
		nulls[1] = nulls[2] = true;
	values[3] = Int32GetDatum((int32) rp_reply_int(r->elem[2], "semaphore_info"));
	if (r->elem[3]->type == RP_REPLY_STRING)
		values[4] = Int64GetDatum(pg_strtoint64(r->elem[3]->str));
	else
		nulls[4] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}
