/*-------------------------------------------------------------------------
 *
 * lock.c
 *		The lease lock's SQL functions: rp_acquire[_xact],
 *		rp_acquire_all[_xact] and rp_lock_info (the fence_replicas WAIT
 *		after an acquire; its settings are src/redis/replicas.c's).
 *
 * Before editing, know this: a lock is a lease of the session's registry
 * (src/lease/lease.h, kind RP_LEASE_LOCK); releasing, extending, listing,
 * transaction, subtransaction and backend-exit release and the commit-time
 * check are the lease layer's, and this file hands it what a lock is in
 * Redis (rp_lock_kind) at _PG_init.  An acquire is recorded with the lease
 * layer (rp_lease_pending) *before* it is sent, and settled only when its
 * answer is definite: a lease Redis may grant is never one the session
 * does not know of.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "args.h"
#include "conn.h"
#include "errcodes.h"
#include "fence_commit.h"
#include "lease.h"
#include "lock.h"
#include "pool.h"
#include "replicas.h"			/* fence_replicas, its settings */
#include "retry.h"
#include "rp_scripts.h"
#include "stats.h"
#include "token.h"

/* What a lock is in Redis, for the lease layer (lease.h). */
static const RpLeaseKindDef rp_lock_kind = {
	.suffix = "lock",
	.release = &rp_script_lock_release,
	.extend = &rp_script_lock_extend,
	.extend_counter = &rp_script_lock_extend_token,
	.verify = &rp_script_lock_verify,
	.exclusive = true,
};

void
rp_lock_init(void)
{
	rp_lease_define_kind(RP_LEASE_LOCK, &rp_lock_kind);
}

/* ------------------------------------------------------------------------
 * Acquiring.
 * ------------------------------------------------------------------------
 */

/*
 * One attempt, recorded as unsettled before it is sent.  Returns the fence
 * with *u still unsettled (the caller settles it), or 0 when the lock is
 * held by someone else (u forgotten).  On failure u is forgotten only when
 * the command cannot have run (never sent, or refused by Redis); otherwise
 * it stays for the transaction end or the backend exit to release
 * (rp_lease_attempt_failed).
 */
static int64
rp_try_acquire(const char *name, size_t namelen, const char *token,
			   int64 ttl_ms, int64 floor, RpLease **u)
{
	RpArg		keys[2];
	RpArg		argv[3];
	RpReply    *r;
	RpStatus	st;
	TimestampTz sent = GetCurrentTimestamp();

	keys[0] = rp_key(name, namelen, "lock");
	keys[1] = rp_key(name, namelen, "fence");
	argv[0] = rp_arg_str(token);
	argv[1] = rp_arg_int(ttl_ms);
	argv[2] = rp_arg_int(floor);
	/* Until Redis answers, it may be hung (rp_lease_pending). */
	*u = rp_lease_pending(name, namelen, RP_LEASE_LOCK, token,
						  TimestampTzPlusMilliseconds(sent, ttl_ms));
	if (!rp_eval_try(&rp_script_lock_acquire, 2, keys, 3, argv,
					 rp_command_timeout_ms, &r, &st))
	{
		RpLease    *pending = *u;

		*u = NULL;
		rp_lease_attempt_failed(&pending, 1, false, &st);
	}
	rp_lease_redis_answered(true);
	if (rp_reply_is_nil(r))
	{
		rp_lease_pending_forget(*u);
		*u = NULL;
		return 0;
	}
	/* Returned as text: above 2^53 a Lua number would round it. */
	if (r->type != RP_REPLY_STRING)
		elog(ERROR, "unexpected Redis reply for lock_acquire: expected a decimal string");
	return pg_strtoint64(r->str);
}

/*
 * With fence_replicas > 0: WAIT until that many replicas have the counter
 * increments the acquire script just made (one WAIT covers them all), so
 * that a failover to one of them cannot re-issue a token.  true when enough
 * acknowledged.  Too few in time: release the n leases and return false
 * with acked and the WAIT's timeout, for the caller's RP003, rather than
 * hand out a token the setting exists to refuse.  The leases are still
 * unsettled here: a cancel, a timeout or a lost connection during the WAIT
 * leaves them for the abort to release.
 */
static bool
rp_replicas_acked(RpLease **u, int n, int64 *acked, int *timeout)
{
	RpArg		cmd[3];
	bool	   *answered;

	*timeout = Max(1, Min(rp_fence_replicas_timeout_ms, rp_command_timeout_ms / 2));
	cmd[0] = rp_arg_str("WAIT");
	cmd[1] = rp_arg_int(rp_fence_replicas);
	cmd[2] = rp_arg_int(*timeout);
	*acked = rp_reply_int(rp_command(3, cmd), "WAIT");
	if (*acked >= rp_fence_replicas)
		return true;
	answered = palloc0(sizeof(bool) * n);
	(void) rp_lease_release(u, n, true, answered);
	for (int i = 0; i < n; i++)
		if (answered[i])
			rp_lease_pending_forget(u[i]);
	return false;
}

/* rp_acquire's: RP003 names the lock and its token. */
static void
rp_wait_replicas(RpLease *u, int64 fence)
{
	int64		acked;
	int			timeout;
	char	   *name;

	if (rp_fence_replicas <= 0)
		return;
	name = pstrdup(u->name);
	if (rp_replicas_acked(&u, 1, &acked, &timeout))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_RP_NOT_REPLICATED),
			 errmsg("fence token for \"%s\" was not replicated", name),
			 errdetail(INT64_FORMAT " of %d replica(s) acknowledged fence token " INT64_FORMAT
					   " within %d ms; the lease was released.",
					   acked, rp_fence_replicas, fence, timeout),
			 errhint("A failover now could re-issue this token.  Check the replicas, or lower redis_primitives.fence_replicas.")));
}

/*
 * Between two attempts of a waiting acquire: raise lock_timeout's error once
 * it has passed, return false once wait_ms has (the caller returns NULL),
 * else sleep (retry.c: a jittered pause, doubling up to 250 ms).  name is
 * the one lock name asked for, or NULL for n names asked for together.
 */
static bool
rp_retry_pause(RpRetry *retry, text *name, int n)
{
	TimestampTz now = GetCurrentTimestamp();

	if (rp_retry_lock_timeout(retry, now))
	{
		if (name != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not obtain lease on \"%s\"", text_to_cstring(name)),
					 errdetail("lock_timeout (%d ms) ended the wait.", LockTimeout)));
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not obtain leases on %d lock names", n),
				 errdetail("lock_timeout (%d ms) ended the wait.", LockTimeout)));
	}
	if (now >= retry->deadline)
		return false;
	rp_retry_sleep(retry, now);
	return true;
}

/*
 * Shared body of rp_acquire and rp_acquire_xact.
 *
 * A name this *transaction* already holds live is returned as it is: same
 * token, fence and deadline, no round trip (docs/lock.md).  So SELECT
 * (rp_acquire(...)).*, which PostgreSQL evaluates once per column, yields
 * one whole lease, and code that acquires twice in one transaction gets one
 * lease.  A lease an earlier transaction of the session took is a holder
 * like any other: behind a pool that transaction was perhaps another
 * client's, so the call goes to Redis, which refuses (the key holds that
 * lease's token), and waits or returns NULL.  rp_extend is how a holder
 * keeps a lease across transactions.
 *
 * With wait_ms > 0 the attempt is repeated with full-jitter exponential
 * backoff (5 ms doubling to 250 ms) until the deadline; the last attempt is
 * made at the deadline.  lock_timeout, when set and shorter, ends the wait
 * with 55P03 as pg_advisory_lock would.
 */
static Datum
rp_acquire_common(FunctionCallInfo fcinfo, bool xact)
{
	text	   *name_t = rp_arg_text(fcinfo, 0, "lock name");
	int64		ttl_ms = rp_arg_int8(fcinfo, 1, "ttl_ms", 1, RP_MAX_TTL_MS);
	int64		wait_ms = rp_arg_int8(fcinfo, 2, "wait_ms", 0, RP_MAX_TTL_MS);
	int64		floor = rp_arg_int8(fcinfo, 3, "floor", 0, PG_INT64_MAX - 1);
	bool		verify = false;
	const char *name = VARDATA_ANY(name_t);
	size_t		namelen = VARSIZE_ANY_EXHDR(name_t);
	char		token[RP_TOKEN_LEN + 1];
	TimestampTz start = GetCurrentTimestamp();
	RpRetry		retry;
	MemoryContext attempt_cxt;
	RpLease    *held;

	if (xact && PG_NARGS() > 4)
	{
		if (PG_ARGISNULL(4))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("verify_at_commit must not be NULL")));
		verify = PG_GETARG_BOOL(4);
	}
	if (!xact)
		rp_pool_check_session_acquire(RP_SESSION_LOCK, name, namelen);	/* pool.c */
	rp_retry_start(&retry, start, wait_ms, 250);

	rp_lease_setup();
	held = rp_lease_reenter(name, namelen, RP_LEASE_LOCK, start, ttl_ms, rp_lease_margin_ms);
	if (held != NULL)
	{
		if (verify)
			rp_lease_verify_at_commit(held);
		PG_RETURN_DATUM(rp_lease_datum(fcinfo, held, true));
	}

	rp_token_new(token, RP_LEASE_LOCK);
	/* A wait may last for hours: each attempt's memory goes with it. */
	attempt_cxt = AllocSetContextCreate(CurrentMemoryContext, "rp_acquire attempt",
										ALLOCSET_SMALL_SIZES);

	for (;;)
	{
		MemoryContext old = MemoryContextSwitchTo(attempt_cxt);
		RpLease    *u;
		int64		fence = rp_try_acquire(name, namelen, token, ttl_ms, floor, &u);

		if (fence > 0)
		{
			RpLease    *l;

			rp_wait_replicas(u, fence);
			MemoryContextSwitchTo(old);

			/*
			 * Redis just granted this name to a new token, so any lease the
			 * session still remembers for it was lost: rp_lease_settle
			 * forgets it (a lost verify_at_commit lease leaves its
			 * obligation behind).
			 */
			l = rp_lease_settle(u, fence, xact, verify);
			MemoryContextDelete(attempt_cxt);
			PG_RETURN_DATUM(rp_lease_datum(fcinfo, l, true));
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(attempt_cxt);

		if (!rp_retry_pause(&retry, name_t, 1))
			PG_RETURN_NULL();
	}
}

RP_TRACKED_FUNCTION(rp_acquire, RP_PRIM_ACQUIRE, RP_OUT_NULL_REFUSED)
{
	return rp_acquire_common(fcinfo, false);
}

RP_TRACKED_FUNCTION(rp_acquire_xact, RP_PRIM_ACQUIRE_XACT, RP_OUT_NULL_REFUSED)
{
	return rp_acquire_common(fcinfo, true);
}


RP_TRACKED_FUNCTION(rp_lock_info, RP_PRIM_LOCK_INFO, RP_OUT_PLAIN)
{
	text	   *name_t = rp_arg_text(fcinfo, 0, "lock name");
	const char *name = VARDATA_ANY(name_t);
	size_t		namelen = VARSIZE_ANY_EXHDR(name_t);
	RpArg		keys[2];
	RpReply    *r;
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	bool		held;
	int64		pttl;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	keys[0] = rp_key(name, namelen, "lock");
	keys[1] = rp_key(name, namelen, "fence");
	r = rp_lease_eval(&rp_script_lock_info, 2, keys, 0, NULL);
	if (r->type != RP_REPLY_ARRAY || r->nelem != 3)
		elog(ERROR, "unexpected Redis reply for lock_info");
	held = rp_reply_int(r->elem[0], "lock_info") == 1;
	pttl = rp_reply_int(r->elem[1], "lock_info");
	values[0] = BoolGetDatum(held);
	if (held && r->elem[2]->type == RP_REPLY_STRING)
		values[1] = DirectFunctionCall1(int8in, CStringGetDatum(r->elem[2]->str));
	else
		nulls[1] = true;
	/* -1: held with no expiry (set by hand); -2: absent. */
	if (held && pttl >= 0)
		values[2] = Int64GetDatum(pttl);
	else
		nulls[2] = true;
	if (r->elem[2]->type == RP_REPLY_STRING)
		values[3] = DirectFunctionCall1(int8in, CStringGetDatum(r->elem[2]->str));
	else
		nulls[3] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}

/* ------------------------------------------------------------------------
 * Many locks in one round trip: rp_acquire_all[_xact] (docs/lock.md, "Many
 * locks at once").
 *
 * All or nothing, in one script (lock_acquire_all.lua): each name gets its
 * own lease, token and fence, or none does.  Waiting repeats the whole
 * attempt, so nothing is held between attempts and two callers asking for
 * the same names in different orders cannot deadlock.  Every name is
 * recorded as unsettled before the script is sent, as rp_acquire does.
 * Names this transaction already holds live are taken as they are (no
 * round trip for them), as rp_acquire does.  In Redis Cluster a
 * script runs on one node: the names must share a hash slot.  The result is
 * an rp_lease[] in the order of the names, NULL when not acquired.
 * ------------------------------------------------------------------------
 */
/*
 * Every name is an unsettled entry while the script is in flight, and the
 * unsettled list drops its oldest past RP_MAX_UNSETTLED: one call's own
 * entries must never be among those dropped.
 */
#define RP_ACQUIRE_ALL_MAX	100
StaticAssertDecl(RP_ACQUIRE_ALL_MAX < RP_MAX_UNSETTLED,
				 "rp_acquire_all's names must fit in the unsettled list");

/*
 * A copy of a registry entry for the result: a sweep during the call (the
 * registry is swept as it grows) may free an entry whose deadline passed.
 */
static RpLease *
rp_lease_copy(const RpLease *l)
{
	RpLease    *c = palloc(sizeof(RpLease));

	*c = *l;
	c->name = pnstrdup(l->name, l->namelen);
	c->key = NULL;
	return c;
}

/* The rp_lease[] result: one element per lease, in the order given. */
static Datum
rp_acquire_all_result(FunctionCallInfo fcinfo, RpLease **leases, int n)
{
	Oid			elemtype = get_element_type(get_fn_expr_rettype(fcinfo->flinfo));
	TupleDesc	tupdesc;
	Datum	   *d = palloc(sizeof(Datum) * n);
	int16		typlen;
	bool		typbyval;
	char		typalign;

	if (!OidIsValid(elemtype))
		elog(ERROR, "return type must be an array of rp_lease");
	tupdesc = lookup_rowtype_tupdesc_copy(elemtype, -1);
	for (int i = 0; i < n; i++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		values[0] = PointerGetDatum(cstring_to_text_with_len(leases[i]->name,
															 leases[i]->namelen));
		values[1] = CStringGetTextDatum(leases[i]->token);
		values[2] = Int64GetDatum(leases[i]->fence);
		values[3] = TimestampTzGetDatum(rp_lease_own_until(leases[i]));
		d[i] = HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
	}
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	PG_RETURN_ARRAYTYPE_P(construct_array(d, n, elemtype, typlen, typbyval, typalign));
}

/*
 * One attempt for the names in todo[] (indexes into name/len), recorded as
 * unsettled before it is sent.  Returns true with u[] still unsettled and
 * fences[] filled, or false when one of the locks is held (u[] forgotten).
 * On failure the u[] are forgotten only when the command cannot have run.
 */
static bool
rp_try_acquire_all(int n, const char **name, const size_t *len,
				   char (*token)[RP_TOKEN_LEN + 1], int64 ttl_ms, int64 floor,
				   RpLease **u, int64 *fences)
{
	RpArg	   *keys = palloc(sizeof(RpArg) * 2 * n);
	RpArg	   *argv = palloc(sizeof(RpArg) * (2 + n));
	RpReply    *r;
	RpStatus	st;
	TimestampTz sent = GetCurrentTimestamp();

	argv[0] = rp_arg_int(ttl_ms);
	argv[1] = rp_arg_int(floor);
	for (int i = 0; i < n; i++)
	{
		keys[2 * i] = rp_key(name[i], len[i], "lock");
		keys[2 * i + 1] = rp_key(name[i], len[i], "fence");
		argv[2 + i] = rp_arg_str(token[i]);
	}
	for (int i = 0; i < n; i++)
		u[i] = rp_lease_pending(name[i], len[i], RP_LEASE_LOCK, token[i],
								TimestampTzPlusMilliseconds(sent, ttl_ms));

	if (!rp_eval_try(&rp_script_lock_acquire_all, 2 * n, keys, 2 + n, argv,
					 rp_command_timeout_ms, &r, &st))
		rp_lease_attempt_failed(u, n, false, &st);
	rp_lease_redis_answered(true);
	if (rp_reply_is_nil(r))
	{
		for (int i = 0; i < n; i++)
			rp_lease_pending_forget(u[i]);
		return false;
	}
	if (r->type != RP_REPLY_ARRAY || r->nelem != (size_t) n)
		elog(ERROR, "unexpected Redis reply for lock_acquire_all");
	for (int i = 0; i < n; i++)
	{
		if (r->elem[i]->type != RP_REPLY_STRING)
			elog(ERROR, "unexpected Redis reply for lock_acquire_all: expected decimal strings");
		fences[i] = pg_strtoint64(r->elem[i]->str);
	}
	return true;
}

/* rp_acquire_all's: one WAIT for every counter the script raised. */
static void
rp_wait_replicas_all(RpLease **u, int n)
{
	int64		acked;
	int			timeout;

	if (rp_fence_replicas <= 0 || rp_replicas_acked(u, n, &acked, &timeout))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_RP_NOT_REPLICATED),
			 errmsg("fence tokens of %d locks were not replicated", n),
			 errdetail(INT64_FORMAT " of %d replica(s) acknowledged within %d ms; the leases were released.",
					   acked, rp_fence_replicas, timeout),
			 errhint("A failover now could re-issue these tokens.  Check the replicas, or lower redis_primitives.fence_replicas.")));
}

static Datum
rp_acquire_all_common(FunctionCallInfo fcinfo, bool xact)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *enulls;
	int			n;
	int64		ttl_ms = rp_arg_int8(fcinfo, 1, "ttl_ms", 1, RP_MAX_TTL_MS);
	int64		wait_ms = rp_arg_int8(fcinfo, 2, "wait_ms", 0, RP_MAX_TTL_MS);
	int64		floor = rp_arg_int8(fcinfo, 3, "floor", 0, PG_INT64_MAX - 1);
	const char **name;
	size_t	   *len;
	RpLease   **out;
	int		   *todo;
	int			ntodo = 0;
	const char **tname;
	size_t	   *tlen;
	char		(*token)[RP_TOKEN_LEN + 1];
	TimestampTz start = GetCurrentTimestamp();
	RpRetry		retry;
	MemoryContext attempt_cxt;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lock names must not be NULL")));
	arr = PG_GETARG_ARRAYTYPE_P(0);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &enulls, &n);
	if (n == 0 || n > RP_ACQUIRE_ALL_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rp_acquire_all takes between 1 and %d lock names, got %d",
						RP_ACQUIRE_ALL_MAX, n)));
	name = palloc(sizeof(char *) * n);
	len = palloc(sizeof(size_t) * n);
	for (int i = 0; i < n; i++)
	{
		text	   *t;

		if (enulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("lock name must not be NULL")));
		t = DatumGetTextPP(elems[i]);
		name[i] = VARDATA_ANY(t);
		len[i] = VARSIZE_ANY_EXHDR(t);
		if (len[i] == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lock name must not be empty")));
		for (int j = 0; j < i; j++)
			if (len[j] == len[i] && memcmp(name[j], name[i], len[i]) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("lock name \"%s\" appears twice",
								pnstrdup(name[i], len[i])),
						 errdetail("Each name is one lease; rp_acquire_all takes each name once.")));
		if (!xact)
			rp_pool_check_session_acquire(RP_SESSION_LOCK_ALL, name[i], len[i]);	/* pool.c */
	}
	rp_retry_start(&retry, start, wait_ms, 250);

	/* One script runs on one Cluster node: every key must share a slot. */
	if (rp_cluster_mode())
	{
		RpArg		k0 = rp_key(name[0], len[0], "lock");
		int			slot0 = rp_key_slot(k0.data, k0.len);

		for (int i = 1; i < n; i++)
		{
			RpArg		k = rp_key(name[i], len[i], "lock");

			if (rp_key_slot(k.data, k.len) != slot0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("lock names \"%s\" and \"%s\" are in different Redis Cluster hash slots",
								pnstrdup(name[0], len[0]), pnstrdup(name[i], len[i])),
						 errdetail("rp_acquire_all takes its locks in one script, which Redis Cluster runs on one node."),
						 errhint("Give the names a common beginning that ends in '}', such as 'order-42}:items' and 'order-42}:payment': a name's hash slot is decided by its text up to its first '}'.")));
		}
	}

	rp_lease_setup();
	out = palloc0(sizeof(RpLease *) * n);
	todo = palloc(sizeof(int) * n);
	tname = palloc(sizeof(char *) * n);
	tlen = palloc(sizeof(size_t) * n);
	token = palloc(sizeof(*token) * n);
	for (int i = 0; i < n; i++)
		rp_token_new(token[i], RP_LEASE_LOCK);

	attempt_cxt = AllocSetContextCreate(CurrentMemoryContext, "rp_acquire_all attempt",
										ALLOCSET_SMALL_SIZES);
	for (;;)
	{
		MemoryContext old = MemoryContextSwitchTo(attempt_cxt);
		RpLease   **u = palloc(sizeof(RpLease *) * n);
		int64	   *fences = palloc(sizeof(int64) * n);
		char		(*ttoken)[RP_TOKEN_LEN + 1] = palloc(sizeof(*ttoken) * n);
		TimestampTz now = GetCurrentTimestamp();

		/*
		 * A name this transaction holds is re-entered by rp_acquire's rule
		 * (rp_lease_reenter): handed back if the guard would accept it,
		 * extended by ttl_ms inside its last lease_margin, else asked for
		 * with the others.  Decided anew at each attempt: a lease that
		 * expired while the call waited for the others is no longer the
		 * session's, and is asked for with them.
		 */
		ntodo = 0;
		for (int i = 0; i < n; i++)
		{
			RpLease    *held = rp_lease_reenter(name[i], len[i], RP_LEASE_LOCK, now,
												ttl_ms, rp_lease_margin_ms);

			if (held != NULL)
				out[i] = rp_lease_copy(held);	/* in attempt_cxt */
			else
			{
				out[i] = NULL;
				tname[ntodo] = name[i];
				tlen[ntodo] = len[i];
				memcpy(ttoken[ntodo], token[i], RP_TOKEN_LEN + 1);
				todo[ntodo++] = i;
			}
		}

		if (ntodo == 0 ||
			rp_try_acquire_all(ntodo, tname, tlen, ttoken, ttl_ms, floor, u, fences))
		{
			if (ntodo > 0)
				rp_wait_replicas_all(u, ntodo);
			MemoryContextSwitchTo(old);
			for (int i = 0; i < n; i++)
				if (out[i] != NULL)
					out[i] = rp_lease_copy(out[i]);
			/* Granted anew: a lease the session remembers on it was lost. */
			for (int j = 0; j < ntodo; j++)
				out[todo[j]] = rp_lease_copy(rp_lease_settle(u[j], fences[j], xact, false));
			MemoryContextDelete(attempt_cxt);
			return rp_acquire_all_result(fcinfo, out, n);
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(attempt_cxt);

		if (!rp_retry_pause(&retry, NULL, n))
			PG_RETURN_NULL();
	}
}

RP_TRACKED_FUNCTION(rp_acquire_all, RP_PRIM_ACQUIRE_ALL, RP_OUT_NULL_REFUSED)
{
	return rp_acquire_all_common(fcinfo, false);
}

RP_TRACKED_FUNCTION(rp_acquire_all_xact, RP_PRIM_ACQUIRE_ALL_XACT, RP_OUT_NULL_REFUSED)
{
	return rp_acquire_all_common(fcinfo, true);
}
