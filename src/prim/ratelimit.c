/*-------------------------------------------------------------------------
 *
 * ratelimit.c
 *		Rate limiting: rp_ratelimit, rp_ratelimit_consume, rp_ratelimit_peek
 *		and rp_ratelimit_reset over three algorithms (sliding_log,
 *		sliding_window, gcra), each one Lua script and one round trip.
 *
 * Before editing, know this: every decision is made inside the script, on
 * Redis' own clock, so that concurrent callers cannot interleave between a
 * count and a record.  This file only validates arguments (Lua numbers are
 * doubles: nothing may reach a script that a double cannot hold exactly),
 * builds the call, and applies redis_primitives.ratelimit_on_error, which
 * may turn an unreachable Redis (SQLSTATE class 08, nothing else) into an
 * answer.  The field semantics are documented in docs/ratelimit.md.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>

#include "access/htup_details.h"
#include "common/pg_prng.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "conn.h"
#include "args.h"
#include "ratecache.h"
#include "ratelimit.h"
#include "rp_scripts.h"
#include "stats.h"

/*
 * The scripts compute in integers scaled by window_ms, up to a few times
 * max_requests * window_ms: keeping that product at or below 2^51 keeps every
 * intermediate value below 2^53, where doubles are exact.
 */
#define RP_RL_MAX_PRODUCT	(INT64CONST(1) << 51)

/* sliding_log keeps one sorted-set member per unit: bound one key's size. */
#define RP_RL_LOG_MAX_REQUESTS	INT64CONST(100000)

/* The largest pinned clock: far past any real time, far below 2^53. */
#define RP_RL_MAX_CLOCK_MS	INT64CONST(1000000000000000)

/* How long a shadow count lives after its last refusal: 7 days, in ms. */
#define RP_RL_SHADOW_TTL_DEFAULT	(7 * 24 * 3600 * 1000)

typedef enum RpRlOnError
{
	RP_RL_ON_ERROR_ERROR,
	RP_RL_ON_ERROR_ALLOW,
	RP_RL_ON_ERROR_DENY
} RpRlOnError;

static const struct config_enum_entry rp_rl_on_error_options[] = {
	{"error", RP_RL_ON_ERROR_ERROR, false},
	{"allow", RP_RL_ON_ERROR_ALLOW, false},
	{"deny", RP_RL_ON_ERROR_DENY, false},
	{NULL, 0, false}
};

/* Settings. */
static int	rp_rl_on_error = RP_RL_ON_ERROR_ERROR;
static char *rp_rl_clock_setting = NULL;
static int64 rp_rl_clock_ms = 0;	/* parsed rp_rl_clock_setting; 0 = TIME */
static int	rp_rl_shadow_ttl_ms = RP_RL_SHADOW_TTL_DEFAULT;

/* One algorithm: its name in SQL, its script, its key suffix. */
typedef struct RpRlAlgorithm
{
	const char *name;
	const RpScript *script;
	const char *suffix;
} RpRlAlgorithm;

static const RpRlAlgorithm rp_rl_algorithms[] = {
	{"sliding_log", &rp_script_ratelimit_sliding_log, "rl:sliding_log"},
	{"sliding_window", &rp_script_ratelimit_sliding_window, "rl:sliding_window"},
	{"gcra", &rp_script_ratelimit_gcra, "rl:gcra"},
};

#define RP_RL_NALGORITHMS	lengthof(rp_rl_algorithms)

/* One call, validated. */
typedef struct RpRlRequest
{
	const char *key;
	size_t		keylen;
	int64		max_requests;
	int64		window_ms;
	int64		cost;
	const RpRlAlgorithm *algorithm;
	bool		shadow;			/* mode 'shadow': admit, count the refusals */
} RpRlRequest;

/* What the script answered; known = false when ratelimit_on_error did. */
typedef struct RpRlResult
{
	bool		allowed;
	bool		known;
	bool		retry_known;	/* retry_after_ms is meaningful */
	int64		remaining;
	int64		retry_after_ms;
	int64		reset_after_ms;
	bool		would_refuse;	/* the limit's own verdict (meaningful if known) */
} RpRlResult;

/*
 * For statistics (rp_stats): when set, called once per answered
 * rp_ratelimit / rp_ratelimit_consume call with the algorithm, whether the
 * call admitted, whether the limit refused (in shadow mode the call admits
 * what the limit refuses), and the mode.  Not called for peeks, nor when
 * ratelimit_on_error answered.
 */
rp_ratelimit_observer_hook_type rp_ratelimit_observer_hook = NULL;

/* ------------------------------------------------------------------------
 * Settings.
 * ------------------------------------------------------------------------
 */

/* The pinned clock: "0" (off) or a whole number of ms up to the maximum. */
static bool
rp_rl_check_clock(char **newval, void **extra, GucSource source)
{
	const char *s = *newval ? *newval : "0";
	char	   *end;
	int64		v;
	int64	   *parsed;

	errno = 0;
	v = strtoi64(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 0 || v > RP_RL_MAX_CLOCK_MS)
	{
		GUC_check_errdetail("The value must be 0 or a whole number of milliseconds up to " INT64_FORMAT ".",
							RP_RL_MAX_CLOCK_MS);
		return false;
	}
	parsed = guc_malloc(LOG, sizeof(int64));
	if (parsed == NULL)
		return false;
	*parsed = v;
	*extra = parsed;
	return true;
}

static void
rp_rl_assign_clock(const char *newval, void *extra)
{
	rp_rl_clock_ms = extra ? *(int64 *) extra : 0;
}

void
rp_ratelimit_init(void)
{
	DefineCustomEnumVariable("redis_primitives.ratelimit_on_error",
							 "What a rate limit answers when Redis cannot be reached: error, allow (fail open) or deny (fail closed).",
							 "Only connection failures (SQLSTATE class 08) are answered this way, with a WARNING; "
							 "cancellation, timeouts of the statement and argument errors are always raised.",
							 &rp_rl_on_error, RP_RL_ON_ERROR_ERROR,
							 rp_rl_on_error_options, PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("redis_primitives.ratelimit_shadow_ttl",
							"How long a shadow-mode count of refusals stays in Redis after its last refusal.",
							"Every refusal counted in shadow mode sets the count's TTL to this, "
							"so a key no longer refused leaves nothing behind.",
							&rp_rl_shadow_ttl_ms, RP_RL_SHADOW_TTL_DEFAULT, 1000, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomStringVariable("redis_primitives.ratelimit_clock_ms",
							   "For tests only: a fixed time in milliseconds that the rate limiter uses instead of Redis' TIME; 0 uses TIME.",
							   "Production never sets this: a pinned clock freezes every window.",
							   &rp_rl_clock_setting, "0", PGC_SUSET, GUC_NOT_IN_SAMPLE,
							   rp_rl_check_clock, rp_rl_assign_clock, NULL);
}

/* ------------------------------------------------------------------------
 * Arguments.
 * ------------------------------------------------------------------------
 */

static const RpRlAlgorithm *
rp_rl_algorithm(FunctionCallInfo fcinfo, int argno)
{
	char	   *name;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("algorithm must not be NULL")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	for (size_t i = 0; i < RP_RL_NALGORITHMS; i++)
		if (strcmp(name, rp_rl_algorithms[i].name) == 0)
			return &rp_rl_algorithms[i];
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown rate limit algorithm \"%s\"", name),
			 errhint("Valid algorithms are sliding_log, sliding_window and gcra.")));
	pg_unreachable();
}

static void
rp_rl_args(FunctionCallInfo fcinfo, RpRlRequest *req)
{
	text	   *key = rp_arg_text(fcinfo, 0, "rate limit key");

	req->key = VARDATA_ANY(key);
	req->keylen = VARSIZE_ANY_EXHDR(key);
	req->max_requests = rp_arg_int8(fcinfo, 1, "max_requests", 1, RP_RL_MAX_PRODUCT);
	req->window_ms = rp_arg_int8(fcinfo, 2, "window_ms", 1, RP_MAX_TTL_MS);
	req->cost = rp_arg_int8(fcinfo, 3, "cost", 1, PG_INT64_MAX);
	req->algorithm = rp_rl_algorithm(fcinfo, 4);
	req->shadow = false;
	/* A 1.0 catalog calls with five arguments: mode is 'enforce'. */
	if (PG_NARGS() > 5)
	{
		char	   *mode;

		if (PG_ARGISNULL(5))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("mode must not be NULL")));
		mode = text_to_cstring(PG_GETARG_TEXT_PP(5));
		if (strcmp(mode, "shadow") == 0)
			req->shadow = true;
		else if (strcmp(mode, "enforce") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown rate limit mode \"%s\"", mode),
					 errhint("Valid modes are enforce and shadow.")));
	}

	if (req->max_requests > RP_RL_MAX_PRODUCT / req->window_ms)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_requests * window_ms must be at most " INT64_FORMAT
						", got " INT64_FORMAT " * " INT64_FORMAT,
						RP_RL_MAX_PRODUCT, req->max_requests, req->window_ms),
				 errdetail("The limiter computes in exact integers inside Redis' Lua, whose numbers are doubles.")));
	if (req->algorithm->script == &rp_script_ratelimit_sliding_log &&
		req->max_requests > RP_RL_LOG_MAX_REQUESTS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_requests must be at most " INT64_FORMAT " for sliding_log, got " INT64_FORMAT,
						RP_RL_LOG_MAX_REQUESTS, req->max_requests),
				 errdetail("sliding_log keeps one entry per admitted unit in Redis."),
				 errhint("Use sliding_window or gcra, whose keys have a constant size.")));
}

/* ------------------------------------------------------------------------
 * Talking to Redis.
 * ------------------------------------------------------------------------
 */

/* A sorted-set member no other call can produce: pid, counter, random. */
static RpArg
rp_rl_member_id(void)
{
	static uint64 counter = 0;

	return rp_arg_str(psprintf("%x.%llx.%08x", (unsigned) MyProcPid,
							   (unsigned long long) ++counter,
							   (unsigned) pg_prng_uint32(&pg_global_prng_state)));
}

/*
 * Run the script through the status core; only what means "Redis could not
 * be reached", SQLSTATE class 08, comes back as a failure (false, *st filled
 * in).  Redis' own error replies and every other failure are raised, and
 * cancel and statement_timeout (57014) pass through the core untouched.
 */
static bool
rp_rl_try_eval(const RpScript *script, int nkeys, const RpArg *keys, int nargs,
			   const RpArg *argv, RpReply **reply, RpStatus *st)
{
	if (rp_eval_try(script, nkeys, keys, nargs, argv, rp_command_timeout_ms,
					reply, st))
		return true;
	if (ERRCODE_TO_CATEGORY(st->sqlstate) != ERRCODE_CONNECTION_EXCEPTION)
		rp_status_raise(st);
	return false;
}

/*
 * Run the script of req.  Returns false, with *result filled in from
 * redis_primitives.ratelimit_on_error and a WARNING, when Redis could not be
 * reached and the setting is allow or deny.  never: the request can never be
 * admitted (cost > max_requests), so even allow answers false.
 */
static bool
rp_rl_eval(const RpRlRequest *req, RpArg rkey, int nargs, const RpArg *argv,
		   bool never, bool count_shadow, RpReply **reply, RpRlResult *result)
{
	RpArg		keys[2];
	int			nkeys = 1;
	RpStatus	st;

	keys[0] = rkey;
	if (count_shadow)
		keys[nkeys++] = rp_key(req->key, req->keylen, "rl:shadow");
	if (rp_rl_on_error == RP_RL_ON_ERROR_ERROR)
	{
		*reply = rp_eval(req->algorithm->script, nkeys, keys, nargs, argv);
		return true;
	}
	if (rp_rl_try_eval(req->algorithm->script, nkeys, keys, nargs, argv, reply,
					   &st))
		return true;

	memset(result, 0, sizeof(*result));
	/* Shadow mode never refuses, even when deny would. */
	result->allowed = req->shadow ||
		((rp_rl_on_error == RP_RL_ON_ERROR_ALLOW) && !never);
	result->known = false;
	result->retry_known = result->allowed || never;
	result->retry_after_ms = never ? -1 : 0;
	ereport(WARNING,
			(errcode(st.sqlstate),
			 errmsg("Redis could not be reached: rate limit on \"%s\" %s",
					pnstrdup(req->key, req->keylen),
					req->shadow ? "allowed by shadow mode" :
					result->allowed ? "allowed by redis_primitives.ratelimit_on_error" :
					"denied by redis_primitives.ratelimit_on_error"),
			 errdetail("The call failed with: %s%s%s", st.message,
					   st.detail ? ". " : "", st.detail ? st.detail : "")));
	return false;
}

/*
 * rp_rl_eval (count_shadow: pass the shadow count's key), and when consume:
 * a call that failed may have been admitted all the same (Redis runs what it
 * received, whether or not the reply comes back), so a refusal of the key
 * cached under other parameters goes, as for an admission that was answered
 * (ratecache.c).  rc->target must be set.
 */
static bool
rp_rl_eval_consuming(const RpRlRequest *req, RpArg rkey, int nargs,
					 const RpArg *argv, bool never, bool consume,
					 bool count_shadow, const RpRcRequest *rc,
					 RpReply **reply, RpRlResult *result)
{
	bool		answered = false;

	/* A backend exit while it waits on Redis: the exit does it (ratecache.c). */
	if (consume)
		rp_ratecache_flight_admitting(rc);
	PG_TRY();
	{
		answered = rp_rl_eval(req, rkey, nargs, argv, never, count_shadow,
							  reply, result);
	}
	PG_CATCH();
	{
		rp_ratecache_flight_settle();
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (answered)
		rp_ratecache_flight_end();
	else
		rp_ratecache_flight_settle();
	return answered;
}

/*
 * One rate-limit call.  consume = false peeks.  A cost above max_requests can
 * never be admitted: it records nothing, is answered from a peek (so the
 * other fields describe the key as it is) and says so with retry_after_ms -1;
 * in shadow mode that same script call counts it as refused (ARGV[4] '2').
 *
 * The refusal cache (ratecache.c): from_cache lets a refusal Redis gave
 * earlier answer this call with no round trip (only rp_ratelimit, whose
 * answer is the boolean alone: the record's other fields need Redis); every
 * refusal Redis gives fills it, except in shadow mode; every admission and
 * reset tells it.  Shadow mode never reads it.
 */
static void
rp_rl_call(FunctionCallInfo fcinfo, bool consume, bool from_cache,
		   RpRlResult *result)
{
	RpRlRequest req;
	bool		never;
	bool		consuming;
	RpArg		argv[7];
	int			nargs = 6;
	RpReply    *r;
	RpArg		rkey;
	RpRcRequest rc;
	uint32		rc_epoch = 0;
	int64		sent_us = 0;

	rp_rl_args(fcinfo, &req);
	consuming = consume;
	never = req.cost > req.max_requests;
	if (never)
		consume = false;

	rkey = rp_key(req.key, req.keylen, req.algorithm->suffix);
	rc.key = rkey.data;
	rc.keylen = rkey.len;
	rc.max_requests = req.max_requests;
	rc.window_ms = req.window_ms;
	rc.cost = req.cost;
	rc.clock_ms = rp_rl_clock_ms;
	rc.target = 0;
	if (rp_ratecache_usable() && !never)
	{
		rc.target = rp_conn_target_signature();
		if (rp_ratecache_lookup(&rc, from_cache && consume && !req.shadow,
								&rc_epoch))
		{
			/* Refused by Redis, and still: no round trip. */
			memset(result, 0, sizeof(*result));
			result->known = true;
			result->retry_known = true;
			result->allowed = false;
			result->would_refuse = true;
			if (rp_ratelimit_observer_hook)
				rp_ratelimit_observer_hook(req.algorithm->name, false, true, false);
			return;
		}
		sent_us = rp_ratecache_now_us();
	}

	argv[0] = rp_arg_int(req.max_requests);
	argv[1] = rp_arg_int(req.window_ms);
	argv[2] = rp_arg_int(never ? req.max_requests : req.cost);
	argv[3] = rp_arg_str(consume ? "1" : (req.shadow && never && consuming) ? "2" : "0");
	argv[4] = rp_arg_int(rp_rl_clock_ms);
	argv[5] = rp_arg_int(rp_rl_shadow_ttl_ms);
	if (req.algorithm->script == &rp_script_ratelimit_sliding_log)
		argv[nargs++] = consume ? rp_rl_member_id() : rp_arg_str("");

	if (consume)
		rc.target = rp_conn_target_signature();
	if (!rp_rl_eval_consuming(&req, rkey, nargs, argv, never, consume,
							  req.shadow && consuming, &rc, &r, result))
		return;

	if (r->type != RP_REPLY_ARRAY || r->nelem != 5)
		elog(ERROR, "unexpected Redis reply for %s", req.algorithm->script->name);
	result->known = true;
	result->retry_known = true;
	result->allowed = rp_reply_int(r->elem[0], req.algorithm->script->name) == 1;
	result->remaining = rp_reply_int(r->elem[1], req.algorithm->script->name);
	result->retry_after_ms = rp_reply_int(r->elem[2], req.algorithm->script->name);
	result->reset_after_ms = rp_reply_int(r->elem[3], req.algorithm->script->name);
	if (never)
	{
		result->allowed = false;
		result->retry_after_ms = -1;
	}
	result->would_refuse = !result->allowed;
	if (sent_us != 0)
	{
		if (result->would_refuse && !req.shadow)
			rp_ratecache_store(&rc, rc_epoch, sent_us, result->retry_after_ms,
							   rp_reply_int(r->elem[4], req.algorithm->script->name));
		else if (!result->would_refuse && consume)
			rp_ratecache_admitted(&rc);
	}
	else if (!result->would_refuse && consume)
	{
		/* The session has the cache off; other sessions' entries still learn. */
		rp_ratecache_admitted(&rc);
	}
	if (req.shadow && result->would_refuse)
	{
		/*
		 * Admitted although the limit refuses.  The algorithm's script
		 * counted the refusal (and, like any refusal, recorded nothing), a
		 * request that can never be admitted included.
		 */
		result->allowed = true;
	}
	if (rp_ratelimit_observer_hook && consuming)
		rp_ratelimit_observer_hook(req.algorithm->name, result->allowed,
								   result->would_refuse, req.shadow);
}

static Datum
rp_rl_record(FunctionCallInfo fcinfo, const RpRlResult *res)
{
	TupleDesc	tupdesc;
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	/* 1.0's record has four fields, 1.1's rp_ratelimit_consume five. */
	if (tupdesc->natts != 4 && tupdesc->natts != 5)
		elog(ERROR, "return type must have 4 or 5 fields");
	values[0] = BoolGetDatum(res->allowed);
	values[1] = Int64GetDatum(res->remaining);
	values[2] = Int64GetDatum(res->retry_after_ms);
	values[3] = Int64GetDatum(res->reset_after_ms);
	if (!res->known)
	{
		/*
		 * Answered by ratelimit_on_error: only the answer is known, and the
		 * retry when it follows from it (0 if allowed, -1 if never).
		 */
		nulls[1] = true;
		nulls[2] = !res->retry_known;
		nulls[3] = true;
	}
	values[4] = BoolGetDatum(res->would_refuse);
	nulls[4] = !res->known;
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}

/* ------------------------------------------------------------------------
 * SQL functions.
 * ------------------------------------------------------------------------
 */

RP_TRACKED_FUNCTION(rp_ratelimit, rp_stats_ratelimit_prim(fcinfo, 4), RP_OUT_FALSE_REFUSED)
{
	RpRlResult	res;

	rp_rl_call(fcinfo, true, true, &res);
	PG_RETURN_BOOL(res.allowed);
}

RP_TRACKED_FUNCTION(rp_ratelimit_consume, rp_stats_ratelimit_prim(fcinfo, 4), RP_OUT_RECORD_REFUSED)
{
	RpRlResult	res;

	rp_rl_call(fcinfo, true, false, &res);
	PG_RETURN_DATUM(rp_rl_record(fcinfo, &res));
}

RP_TRACKED_FUNCTION(rp_ratelimit_peek, RP_PRIM_RATELIMIT_PEEK, RP_OUT_RECORD_REFUSED)
{
	RpRlResult	res;

	rp_rl_call(fcinfo, false, false, &res);
	PG_RETURN_DATUM(rp_rl_record(fcinfo, &res));
}

/* Delete the key of every algorithm; true if any existed. */
RP_TRACKED_FUNCTION(rp_ratelimit_reset, RP_PRIM_RATELIMIT_RESET, RP_OUT_PLAIN)
{
	text	   *key = rp_arg_text(fcinfo, 0, "rate limit key");
	RpArg		keys[RP_RL_NALGORITHMS + 1];
	bool		existed;
	bool		ok;
	RpReply    *r;
	RpStatus	st;
	uint64		target;

	for (size_t i = 0; i < RP_RL_NALGORITHMS; i++)
		keys[i] = rp_key(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
						 rp_rl_algorithms[i].suffix);
	/* and the shadow-mode count of refusals */
	keys[RP_RL_NALGORITHMS] = rp_key(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
									 "rl:shadow");
	target = rp_conn_target_signature();

	/*
	 * Once Redis answered, or may have run it: a refusal cached here before
	 * or meanwhile goes (ratecache.c; the epoch catches fills in flight).  A
	 * cancel or statement_timeout is thrown out of the exchange after the
	 * reset was sent, and Redis may run it all the same: it clears them too,
	 * and so does a backend exit meanwhile (a FATAL runs no handler here).
	 */
	StaticAssertStmt(RP_RL_NALGORITHMS <= RP_RC_FLIGHT_KEYS,
					 "a reset in flight records one key per algorithm");
	rp_ratecache_flight_end();
	for (size_t i = 0; i < RP_RL_NALGORITHMS; i++)
		rp_ratecache_flight_forgetting(keys[i].data, keys[i].len, target);
	PG_TRY();
	{
		ok = rp_eval_try(&rp_script_ratelimit_reset, RP_RL_NALGORITHMS + 1, keys,
						 0, NULL, rp_command_timeout_ms, &r, &st);
	}
	PG_CATCH();
	{
		rp_ratecache_flight_settle();
		PG_RE_THROW();
	}
	PG_END_TRY();
	rp_ratecache_flight_settle();
	if (!ok)
		rp_status_raise(&st);
	existed = rp_reply_int(r, "ratelimit_reset") > 0;
	PG_RETURN_BOOL(existed);
}

/*
 * rp_ratelimit_shadow_refusals(key): how many requests on key the limit
 * refused in shadow mode (and the calls admitted), under every algorithm,
 * since the count began or rp_ratelimit_reset(key).
 */
PG_FUNCTION_INFO_V1(rp_ratelimit_shadow_refusals);
Datum
rp_ratelimit_shadow_refusals(PG_FUNCTION_ARGS)
{
	text	   *key = rp_arg_text(fcinfo, 0, "rate limit key");
	RpArg		skey = rp_key(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), "rl:shadow");

	PG_RETURN_INT64(rp_reply_int(rp_eval(&rp_script_ratelimit_shadow_read, 1, &skey, 0, NULL),
								 "ratelimit_shadow_read"));
}
