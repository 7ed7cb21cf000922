/*-------------------------------------------------------------------------
 *
 * leasefuncs.c
 *		The SQL functions that act on a lease of any kind (a lock, a
 *		semaphore permit): rp_release (by lease, by name, by name and
 *		token), rp_release_all, rp_extend (by lease, by name and token) and
 *		rp_leases.
 *
 * Before editing, know this: Redis decides, by compare-and-delete or
 * compare-and-extend with the lease's token; the session's registry
 * (lease.c) is kept consistent with what Redis answered, never consulted in
 * its place.  A lease the session holds is acted on under the key it was
 * taken with; any other, under the current key_prefix.  The token's first
 * character says its kind (token.h), so these work for a permit from any
 * session.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "args.h"
#include "conn.h"
#include "lease.h"
#include "pool.h"
#include "stats.h"

#define RP_KIND_SUFFIX(kind)	(rp_lease_kind(kind)->suffix)

/* ------------------------------------------------------------------------
 * Releasing, extending, looking.
 * ------------------------------------------------------------------------
 */

/*
 * Read the fields of an rp_lease argument.  A NULL name or token is 22004 and
 * an empty name 22023, as for rp_release(name): no lease can have them, so
 * answering "not held" would make false/NULL mean bad input too.  fence may
 * be NULL only where the caller does not use it (fence_isnull == NULL means
 * it is required).
 */
static void
rp_lease_arg(FunctionCallInfo fcinfo, int argno, text **name, text **token,
			 int64 *fence, bool *fence_isnull)
{
	HeapTupleHeader rec;
	bool		isnull;
	Datum		d;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease must not be NULL")));
	rec = PG_GETARG_HEAPTUPLEHEADER(argno);
	d = GetAttributeByName(rec, "name", &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease name must not be NULL")));
	*name = DatumGetTextPP(d);
	if (VARSIZE_ANY_EXHDR(*name) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease name must not be empty")));
	d = GetAttributeByName(rec, "token", &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease token must not be NULL")));
	*token = DatumGetTextPP(d);
	d = GetAttributeByName(rec, "fence", &isnull);
	if (isnull && fence_isnull == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease fence must not be NULL")));
	*fence = isnull ? 0 : DatumGetInt64(d);
	if (fence_isnull)
		*fence_isnull = isnull;
}

/*
 * The lease an rp_lease argument names: this session's registry entry when
 * it holds that name with that token (its own key, its own fence), else a
 * transient one under the current key_prefix (*mine = false).  A token that
 * is not one we could have issued (not a token's shape: an election's mark,
 * say) cannot match: token[0] is then '\0'.
 */
static RpLease *
rp_lease_of(text *name, text *token, bool *mine)
{
	const char *n = VARDATA_ANY(name);
	size_t		nlen = VARSIZE_ANY_EXHDR(name);
	char	   *tok = text_to_cstring(token);
	RpLeaseKind kind = rp_token_kind(tok);
	RpLease    *l = rp_lease_find_token(n, nlen, kind, tok);
	RpArg		key;

	*mine = (l != NULL);
	if (*mine)
		return l;
	l = palloc0(sizeof(RpLease));
	l->name = (char *) n;
	l->namelen = nlen;
	l->kind = kind;
	key = rp_key(n, nlen, RP_KIND_SUFFIX(kind));
	l->key = (char *) key.data;
	l->keylen = key.len;
	if (rp_token_well_formed(tok))
		memcpy(l->token, tok, RP_TOKEN_LEN + 1);
	return l;
}

/*
 * A release or extend by token of a lease this session does not hold: the
 * backend of this server that holds it (if any) is told through its
 * rp_locks row, before the round trip (RP_LOCKS_DOUBTED for a release: it
 * stops believing the lease and still releases it at its end; the new
 * deadline for an extend, believed if earlier, pending until answered)
 * and once Redis answered: RP_LOCKS_REVOKED when it released the lease;
 * RP_LOCKS_DOUBTED when it did not hold it, since that answer may come
 * from another server than the owner's, which still holds it there (the
 * owner stops believing it and still releases it).  A call whose reply is
 * lost leaves the owner on the safe side.  Another server's backends
 * cannot be told: docs/lock.md.
 */
static void
rp_tell_owner(RpLease *l, TimestampTz deadline, int pending)
{
	(void) rp_locks_override_token(l->key, l->keylen, l->token, deadline, pending);
}

/*
 * A release is about to be asked for: until Redis answers, the lease is not
 * believed, here (mine) or by its owner.  Should the reply be lost, it
 * stays so, and is still released at its end.
 */
static void
rp_release_doubt(RpLease *l, bool mine)
{
	if (mine)
		rp_lease_doubt(l);
	else
		rp_tell_owner(l, RP_LOCKS_DOUBTED, 0);
}

RP_TRACKED_FUNCTION(rp_release_lease, RP_PRIM_RELEASE, RP_OUT_FALSE_REFUSED)
{
	text	   *name;
	text	   *token;
	int64		fence;
	bool		fence_isnull;
	bool		mine;
	bool		released;
	RpLease    *l;

	rp_lease_arg(fcinfo, 0, &name, &token, &fence, &fence_isnull);
	l = rp_lease_of(name, token, &mine);
	if (l->token[0] == '\0')
		PG_RETURN_BOOL(false);
	rp_release_doubt(l, mine);
	released = rp_lease_release(&l, 1, false, NULL) == 1;
	if (mine)
		rp_lease_forget(l);
	else
		rp_tell_owner(l, released ? RP_LOCKS_REVOKED : RP_LOCKS_DOUBTED, 0);
	PG_RETURN_BOOL(released);
}

/*
 * rp_release(name): the session's lock of the name, else its permit of the
 * name; of several permits (one per transaction that took one), the newest
 * live one, else the newest (rp_lease_find).  One lease per call.
 */
RP_TRACKED_FUNCTION(rp_release_name, RP_PRIM_RELEASE, RP_OUT_FALSE_REFUSED)
{
	text	   *name_t = rp_arg_text(fcinfo, 0, "lock name");
	const char *name = VARDATA_ANY(name_t);
	size_t		namelen = VARSIZE_ANY_EXHDR(name_t);
	RpLease    *mine = rp_lease_find(name, namelen, RP_LEASE_LOCK);
	bool		released;

	/* A semaphore permit is a lease too (docs/semaphore.md). */
	if (mine == NULL)
		mine = rp_lease_find(name, namelen, RP_LEASE_PERMIT);
	if (mine == NULL)
	{
		rp_pool_warn_release_not_held(name, namelen);	/* pool.c */
		PG_RETURN_BOOL(false);
	}
	rp_lease_doubt(mine);
	released = rp_lease_release(&mine, 1, false, NULL) == 1;
	rp_lease_forget(mine);
	PG_RETURN_BOOL(released);
}

RP_TRACKED_FUNCTION(rp_release_all, RP_PRIM_RELEASE_ALL, RP_OUT_PLAIN)
{
	PG_RETURN_INT32(rp_lease_release_all());
}

/*
 * Compare-and-extend l (the session's entry when mine, else a transient one)
 * by ttl_ms with its kind's script; the new deadline is counted from when it
 * was asked, like rp_acquire's.  false when Redis no longer holds it with
 * l's token: the session's entry is then forgotten.  With counter, a kind
 * that has one (a lock: lock_extend_token) is extended by its extend_counter
 * script, which also reads the name's fence counter into *counter (see that
 * script); a permit leaves *counter at 0.
 */
static bool
rp_extend_lease(RpLease *l, bool mine, int64 ttl_ms, int64 *counter)
{
	TimestampTz asked;

	if (mine)
	{
		/* Not held any more: stop believing it. */
		if (!rp_lease_extend_held(l, ttl_ms, counter))
		{
			rp_lease_forget(l);
			return false;
		}
		return true;
	}

	/*
	 * Before the round trip, the owner believes the deadline asked for if
	 * it is shorter: should the reply be lost, the extend may have run.
	 */
	asked = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ttl_ms);
	rp_tell_owner(l, asked, 1);
	if (!rp_lease_extend_script(l, ttl_ms, counter))
	{
		rp_tell_owner(l, RP_LOCKS_DOUBTED, -1);
		return false;
	}
	l->expires_at = asked;

	/*
	 * Answered: no longer pending (the owner may clear the telling with its
	 * own next extend); the deadline told again is the same.
	 */
	rp_tell_owner(l, asked, -1);
	return true;
}

RP_TRACKED_FUNCTION(rp_extend, RP_PRIM_EXTEND, RP_OUT_NULL_REFUSED)
{
	text	   *name;
	text	   *token;
	int64		fence;
	int64		ttl_ms;
	bool		mine;
	RpLease    *l;

	/* The fence is required: the lease returned carries it. */
	rp_lease_arg(fcinfo, 0, &name, &token, &fence, NULL);
	ttl_ms = rp_arg_int8(fcinfo, 1, "ttl_ms", 1, RP_MAX_TTL_MS);
	l = rp_lease_of(name, token, &mine);
	if (l->token[0] == '\0' || !rp_extend_lease(l, mine, ttl_ms, NULL))
		PG_RETURN_NULL();
	/* The registry's fence, not whatever the caller passed. */
	if (!mine)
		l->fence = fence;
	PG_RETURN_DATUM(rp_lease_datum(fcinfo, l, true));
}

/* rp_leases(): the live leases this session believes it holds, oldest first. */
PG_FUNCTION_INFO_V1(rp_leases);
Datum
rp_leases(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RpLease    *l;
	RpLease   **all;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	all = rp_lease_list(&n);
	for (int i = 0; i < n; i++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		l = all[i];
		/* Not believed: a release asked for, or a deadline told, past. */
		if (rp_lease_believed_until(l) <= GetCurrentTimestamp())
			continue;
		values[0] = PointerGetDatum(cstring_to_text_with_len(l->name, l->namelen));
		values[1] = CStringGetTextDatum(l->token);
		values[2] = Int64GetDatum(l->fence);
		values[3] = TimestampTzGetDatum(rp_lease_believed_until(l));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* ------------------------------------------------------------------------
 * Pool-safe forms (the "apps" area; see docs/applications.md).
 *
 * rp_release(name, token) and rp_extend(name, token, ttl_ms) act by token
 * alone, from any connection: a pooled client's release lands on whichever
 * backend the pool hands it, which need not be the one that acquired.  When
 * this session's registry does hold that token, it is kept consistent:
 * forgotten on release, its deadline moved on extend, and its own key used.
 * ------------------------------------------------------------------------
 */

/* Name and token arguments: 22004 for NULL, 22023 for empty. */
static RpLease *
rp_token_args(FunctionCallInfo fcinfo, bool *mine)
{
	text	   *name = rp_arg_text(fcinfo, 0, "lock name");
	text	   *token = rp_arg_text(fcinfo, 1, "lease token");

	rp_lease_setup();
	return rp_lease_of(name, token, mine);
}

RP_TRACKED_FUNCTION(rp_release_token, RP_PRIM_RELEASE, RP_OUT_FALSE_REFUSED)
{
	bool		mine;
	RpLease    *l = rp_token_args(fcinfo, &mine);
	bool		released;

	/* Not one of our tokens' shape: no lease can hold it. */
	if (l->token[0] == '\0')
		PG_RETURN_BOOL(false);
	rp_release_doubt(l, mine);
	released = rp_lease_release(&l, 1, false, NULL) == 1;
	if (mine)
		rp_lease_forget(l);
	else
		rp_tell_owner(l, released ? RP_LOCKS_REVOKED : RP_LOCKS_DOUBTED, 0);
	PG_RETURN_BOOL(released);
}

/*
 * rp_extend(name, token, ttl_ms).  The session holding the lease returns its
 * own fence.  Elsewhere, a lock returns the name's fence counter (see
 * lock_extend_token); a permit (its token begins with 's') a NULL fence:
 * Redis keeps no fence per permit.
 */
RP_TRACKED_FUNCTION(rp_extend_token, RP_PRIM_EXTEND, RP_OUT_NULL_REFUSED)
{
	bool		mine;
	RpLease    *l = rp_token_args(fcinfo, &mine);
	int64		ttl_ms = rp_arg_int8(fcinfo, 2, "ttl_ms", 1, RP_MAX_TTL_MS);
	int64		counter = 0;

	if (l->token[0] == '\0' || !rp_extend_lease(l, mine, ttl_ms, &counter))
		PG_RETURN_NULL();
	if (!mine)
		l->fence = counter;
	PG_RETURN_DATUM(rp_lease_datum(fcinfo, l, mine || l->kind != RP_LEASE_PERMIT));
}
