/*-------------------------------------------------------------------------
 *
 * lock.c
 *		The lease lock: rp_acquire[_xact], rp_release, rp_release_all,
 *		rp_extend, rp_lock_info, rp_leases, and the session's lease registry
 *		with its transaction, subtransaction and backend-exit release.
 *
 * Before editing, know this: the registry is what the session *believes*;
 * Redis is the truth.  Cleanup paths (transaction end, backend exit) release
 * through rp_eval_quiet and never ereport(ERROR): a lease that cannot be
 * released expires by its TTL.  Only XACT_EVENT_PRE_COMMIT may throw, and it
 * does so on purpose (RP002) to abort a commit whose lease was lost.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "common/pg_prng.h"
#include "port.h"

#include "conn.h"
#include "lock.h"
#include "rp_scripts.h"
#include "stats.h"

#define RP_TOKEN_BYTES	16
StaticAssertDecl(RP_TOKEN_LEN == RP_TOKEN_BYTES * 2, "a token is hex");

/* How long backend exit and transaction end may spend releasing. */
#define RP_CLEANUP_TIMEOUT_MS	500

/* One lease the session believes it holds. */
typedef struct RpLease
{
	char	   *name;			/* in TopMemoryContext */
	size_t		namelen;
	char		token[RP_TOKEN_LEN + 1];
	int64		fence;
	TimestampTz expires_at;
	bool		xact;			/* released at top-level transaction end */
	bool		verify;			/* checked at PRE_COMMIT (xact leases only) */
	SubTransactionId subid;		/* subtransaction that took it (xact only) */
	int			tries;			/* orphans only: answered release attempts */
	RpLeaseKind kind;			/* a lock, or a semaphore permit (semaphore.c) */
} RpLease;

static List *rp_leases_held = NIL;	/* of RpLease *, in TopMemoryContext */

static RpLease *rp_registry_add_kind(const char *name, size_t namelen,
									 const char *token, int64 fence,
									 TimestampTz expires_at, bool xact,
									 bool verify, RpLeaseKind kind);
static void rp_register_callbacks(void);

/*
 * Acquires that failed after they may have been sent (a timeout, a cancel, a
 * lost connection).  Redis may still run such a command when it wakes,
 * taking a lease whose token only this backend knows: an orphan that would
 * block the name for its whole TTL.  They are released by compare-and-delete
 * at a transaction end once Redis has answered a lock call again (so a hung
 * Redis never slows a transaction down), and at backend exit.  An orphan is
 * forgotten when released, after two answered attempts, or past its TTL.
 */
static List *rp_orphans = NIL;		/* of RpLease *, in TopMemoryContext */
static bool rp_redis_answered = false;	/* a lock call was answered since */

/* rp_eval for this file: notes that Redis answers again. */
static RpReply *
rp_lock_eval(const RpScript *script, int nkeys, const RpArg *keys,
			 int nargs, const RpArg *argv)
{
	RpReply    *r = rp_eval(script, nkeys, keys, nargs, argv);

	rp_redis_answered = true;
	return r;
}

/* Settings: how many replicas must have a new fence token before it is used. */
static int	rp_fence_replicas = 0;
static int	rp_fence_replicas_timeout_ms = 500;
static bool rp_callbacks_registered = false;

/* ------------------------------------------------------------------------
 * Arguments.
 * ------------------------------------------------------------------------
 */

text *
rp_arg_text(FunctionCallInfo fcinfo, int argno, const char *what)
{
	text	   *t;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", what)));
	t = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(t) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	return t;
}

int64
rp_arg_int8(FunctionCallInfo fcinfo, int argno, const char *what,
			int64 min, int64 max)
{
	int64		v;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", what)));
	v = PG_GETARG_INT64(argno);
	if (v < min || v > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be between " INT64_FORMAT " and " INT64_FORMAT
						", got " INT64_FORMAT, what, min, max, v)));
	return v;
}

/* ------------------------------------------------------------------------
 * The registry.
 * ------------------------------------------------------------------------
 */

static RpLease *
rp_registry_add(const char *name, size_t namelen, const char *token,
				int64 fence, TimestampTz expires_at, bool xact, bool verify)
{
	return rp_registry_add_kind(name, namelen, token, fence, expires_at, xact,
								verify, RP_LEASE_LOCK);
}

static RpLease *
rp_registry_add_kind(const char *name, size_t namelen, const char *token,
					 int64 fence, TimestampTz expires_at, bool xact, bool verify,
					 RpLeaseKind kind)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	RpLease    *l = palloc0(sizeof(RpLease));

	l->name = pnstrdup(name, namelen);
	l->namelen = namelen;
	memcpy(l->token, token, RP_TOKEN_LEN + 1);
	l->fence = fence;
	l->expires_at = expires_at;
	l->xact = xact;
	l->verify = verify;
	l->subid = xact ? GetCurrentSubTransactionId() : InvalidSubTransactionId;
	l->kind = kind;
	rp_leases_held = lappend(rp_leases_held, l);
	MemoryContextSwitchTo(old);
	rp_locks_publish(l, l->name, namelen, fence, expires_at, xact);
	return l;
}

static void
rp_registry_remove(RpLease *l)
{
	rp_leases_held = list_delete_ptr(rp_leases_held, l);
	rp_locks_unpublish(l);
	pfree(l->name);
	pfree(l);
}

static RpLease *
rp_registry_find(const char *name, size_t namelen, const char *token)
{
	ListCell   *lc;

	foreach(lc, rp_leases_held)
	{
		RpLease    *l = lfirst(lc);

		if (l->namelen == namelen && memcmp(l->name, name, namelen) == 0 &&
			(token == NULL || strcmp(l->token, token) == 0))
			return l;
	}
	return NULL;
}

/* The session's lease of one kind on name, if any. */
static RpLease *
rp_registry_find_kind(const char *name, size_t namelen, RpLeaseKind kind)
{
	ListCell   *lc;

	foreach(lc, rp_leases_held)
	{
		RpLease    *l = lfirst(lc);

		if (l->kind == kind && l->namelen == namelen &&
			memcmp(l->name, name, namelen) == 0)
			return l;
	}
	return NULL;
}

/* ------------------------------------------------------------------------
 * Talking to Redis.
 * ------------------------------------------------------------------------
 */

static void
rp_new_token(char *out)
{
	uint8		buf[RP_TOKEN_BYTES];
	static const char hex[] = "0123456789abcdef";

	if (!pg_strong_random(buf, sizeof(buf)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random lease token")));
	for (int i = 0; i < RP_TOKEN_BYTES; i++)
	{
		out[2 * i] = hex[buf[i] >> 4];
		out[2 * i + 1] = hex[buf[i] & 0xf];
	}
	out[RP_TOKEN_LEN] = '\0';
}

/* One attempt.  Returns the fence, or 0 when the lock is held. */
static int64
rp_try_acquire(const char *name, size_t namelen, const char *token,
			   int64 ttl_ms, int64 floor)
{
	RpArg		keys[2];
	RpArg		argv[3];
	RpReply    *r;

	keys[0] = rp_key(name, namelen, "lock");
	keys[1] = rp_key(name, namelen, "fence");
	argv[0] = rp_arg_str(token);
	argv[1] = rp_arg_int(ttl_ms);
	argv[2] = rp_arg_int(floor);
	r = rp_lock_eval(&rp_script_lock_acquire, 2, keys, 3, argv);
	if (rp_reply_is_nil(r))
		return 0;
	/* Returned as text: above 2^53 a Lua number would round it. */
	if (r->type != RP_REPLY_STRING)
		elog(ERROR, "unexpected Redis reply for lock_acquire: expected a decimal string");
	return pg_strtoint64(r->str);
}

/* rp_try_acquire that remembers the token as a possible orphan on failure. */
static int64
rp_try_acquire_recorded(const char *name, size_t namelen, const char *token,
						int64 ttl_ms, int64 floor, TimestampTz sent)
{
	volatile int64 fence = 0;

	PG_TRY();
	{
		fence = rp_try_acquire(name, namelen, token, ttl_ms, floor);
	}
	PG_CATCH();
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		RpLease    *o = palloc0(sizeof(RpLease));

		o->name = pnstrdup(name, namelen);
		o->namelen = namelen;
		memcpy(o->token, token, RP_TOKEN_LEN + 1);
		o->expires_at = TimestampTzPlusMilliseconds(sent, ttl_ms);
		o->kind = RP_LEASE_LOCK;
		rp_orphans = lappend(rp_orphans, o);
		rp_redis_answered = false;
		MemoryContextSwitchTo(old);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return fence;
}

/*
 * Order n keys so that keys of one Redis Cluster hash slot are adjacent:
 * fills order[] (a permutation of 0..n-1) and returns the number of groups;
 * group g is order[start[g] .. start[g + 1] - 1].  A script runs on one
 * node, so a many-lease script (release, verify) is sent once per group.
 * Outside Cluster mode everything is one group: one round trip, as before.
 */
static int
rp_slot_groups(int n, const RpArg *keys, int *order, int *start)
{
	int		   *slot;
	int			ngroups = 0;

	for (int i = 0; i < n; i++)
		order[i] = i;
	if (!rp_cluster_mode())
	{
		start[0] = 0;
		start[1] = n;
		return 1;
	}
	slot = palloc(sizeof(int) * n);
	for (int i = 0; i < n; i++)
		slot[i] = rp_key_slot(keys[i].data, keys[i].len);
	/* Insertion sort by slot, stable: a session holds a handful of leases. */
	for (int i = 1; i < n; i++)
	{
		int			v = order[i];
		int			j = i - 1;

		while (j >= 0 && slot[order[j]] > slot[v])
		{
			order[j + 1] = order[j];
			j--;
		}
		order[j + 1] = v;
	}
	for (int i = 0; i < n; i++)
		if (i == 0 || slot[order[i]] != slot[order[i - 1]])
			start[ngroups++] = i;
	start[ngroups] = n;
	pfree(slot);
	return ngroups;
}

/*
 * The (lock key, token) pairs of some leases, grouped so that each group is
 * one hash slot (a single group outside Cluster mode): one group is one
 * lock_release or lock_verify call.
 */
typedef struct RpLeaseBatch
{
	RpArg	   *keys;			/* by position in the list */
	RpArg	   *argv;
	int		   *order;			/* list positions, grouped by slot */
	int		   *start;			/* group g is order[start[g] .. start[g + 1]) */
	int			ngroups;
	RpArg	   *gkeys;			/* one group's pairs, see rp_batch_group */
	RpArg	   *gargv;
} RpLeaseBatch;

static void
rp_batch_init(RpLeaseBatch *b, List *leases)
{
	int			n = list_length(leases);
	int			i = 0;
	ListCell   *lc;

	b->keys = palloc(sizeof(RpArg) * n);
	b->argv = palloc(sizeof(RpArg) * n);
	b->gkeys = palloc(sizeof(RpArg) * n);
	b->gargv = palloc(sizeof(RpArg) * n);
	b->order = palloc(sizeof(int) * n);
	b->start = palloc(sizeof(int) * (n + 1));
	foreach(lc, leases)
	{
		RpLease    *l = lfirst(lc);

		b->keys[i] = rp_key(l->name, l->namelen,
							l->kind == RP_LEASE_PERMIT ? "sem" : "lock");
		b->argv[i] = rp_arg_str(l->token);
		i++;
	}
	b->ngroups = rp_slot_groups(n, b->keys, b->order, b->start);
}

/* Fill gkeys/gargv with group g; returns its size. */
static int
rp_batch_group(RpLeaseBatch *b, int g)
{
	int			gn = b->start[g + 1] - b->start[g];

	for (int k = 0; k < gn; k++)
	{
		b->gkeys[k] = b->keys[b->order[b->start[g] + k]];
		b->gargv[k] = b->argv[b->order[b->start[g] + k]];
	}
	return gn;
}

/*
 * Release leases: one round trip (one per hash slot in Cluster mode).
 * Returns how many Redis still held with our token.  quiet: never ereport,
 * for cleanup paths, and all of it within RP_CLEANUP_TIMEOUT_MS.
 */
static int	rp_release_leases_of(List *leases, const RpScript *script,
								 bool quiet, TimestampTz deadline, bool *answered);

/*
 * (Locks and permits (semaphore.c) are released by their own script, each
 * in one round trip per hash slot, all within the one cleanup deadline.)
 */
static int
rp_release_leases(List *leases, bool quiet, bool *answered)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   Min(rp_command_timeout_ms, RP_CLEANUP_TIMEOUT_MS));
	List	   *locks = NIL;
	List	   *permits = NIL;
	ListCell   *lc;
	bool		a1 = true;
	bool		a2 = true;
	int			released;

	foreach(lc, leases)
	{
		RpLease    *l = lfirst(lc);

		if (l->kind == RP_LEASE_PERMIT)
			permits = lappend(permits, l);
		else
			locks = lappend(locks, l);
	}
	released = rp_release_leases_of(locks, &rp_script_lock_release, quiet,
									deadline, &a1);
	released += rp_release_leases_of(permits, &rp_script_semaphore_release, quiet,
									 deadline, &a2);
	if (answered)
		*answered = a1 && a2;
	list_free(locks);
	list_free(permits);
	return released;
}

static int
rp_release_leases_of(List *leases, const RpScript *script, bool quiet,
					 TimestampTz deadline, bool *answered)
{
	RpLeaseBatch b;
	int			released = 0;

	if (answered)
		*answered = true;
	if (leases == NIL)
		return 0;
	rp_batch_init(&b, leases);
	for (int g = 0; g < b.ngroups; g++)
	{
		int			gn = rp_batch_group(&b, g);
		RpReply    *r;

		if (quiet)
		{
			char	   *err;
			long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

			r = rp_eval_quiet(script, gn, b.gkeys, gn, b.gargv,
							  (int) Max(left, 1), &err);
			if (r == NULL)
			{
				ereport(WARNING,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not release %d Redis lease(s); they will expire by their TTL", gn),
						 errdetail_internal("%s", err)));
				if (answered)
					*answered = false;
				continue;
			}
		}
		else
			r = rp_lock_eval(script, gn, b.gkeys, gn, b.gargv);

		if (r->type == RP_REPLY_ARRAY)
			for (size_t j = 0; j < r->nelem; j++)
				if (r->elem[j]->type == RP_REPLY_INTEGER && r->elem[j]->integer == 1)
					released++;
	}
	return released;
}

/* ------------------------------------------------------------------------
 * Transaction, subtransaction and exit callbacks.
 * ------------------------------------------------------------------------
 */

/* Take every xact lease (or those of one subtransaction) out of the registry. */
static List *
rp_registry_take_xact(SubTransactionId subid)
{
	List	   *taken = NIL;
	ListCell   *lc;

	foreach(lc, rp_leases_held)
	{
		RpLease    *l = lfirst(lc);

		if (l->xact && (subid == InvalidSubTransactionId || l->subid == subid))
		{
			taken = lappend(taken, l);
			rp_locks_unpublish(l);
			rp_leases_held = foreach_delete_current(rp_leases_held, lc);
		}
	}
	return taken;
}

static void
rp_release_and_forget(List *leases)
{
	ListCell   *lc;

	if (leases == NIL)
		return;
	(void) rp_release_leases(leases, true, NULL);
	foreach(lc, leases)
	{
		RpLease    *l = lfirst(lc);

		pfree(l->name);
		pfree(l);
	}
	list_free(leases);
}

/*
 * PRE_COMMIT: with verify set, every such lease must still be ours in Redis,
 * checked in one round trip; otherwise the commit is aborted with RP002.
 */
static void
rp_verify_at_commit(void)
{
	List	   *check = NIL;
	ListCell   *lc;
	RpLeaseBatch b;
	int			g;
	int64		bad = 0;
	RpLease    *badl;

	foreach(lc, rp_leases_held)
	{
		RpLease    *l = lfirst(lc);

		if (l->xact && l->verify)
			check = lappend(check, l);
	}
	if (check == NIL)
		return;
	rp_batch_init(&b, check);
	for (g = 0; g < b.ngroups; g++)
	{
		int			gn = rp_batch_group(&b, g);

		bad = rp_reply_int(rp_lock_eval(&rp_script_lock_verify, gn, b.gkeys, gn, b.gargv),
						   "lock_verify");
		if (bad != 0)
			break;
	}
	if (bad == 0)
		return;
	badl = list_nth(check, b.order[b.start[g] + (int) bad - 1]);
	ereport(ERROR,
			(errcode(MAKE_SQLSTATE('R', 'P', '0', '0', '2')),
			 errmsg("lease on \"%s\" was lost before commit", badl->name),
			 errdetail("The lease with fence token " INT64_FORMAT
					   " is no longer held in Redis: it expired or was taken over.",
					   badl->fence),
			 errhint("The transaction was rolled back.  Take a longer lease or extend it while working.")));
}

/*
 * Release possible orphans (see rp_orphans): at a transaction end once Redis
 * has answered a lock call since they were recorded, or at backend exit
 * (always, within the cleanup deadline).  Never throws.
 */
static void
rp_orphans_release(bool at_exit)
{
	List	   *live = NIL;
	ListCell   *lc;
	TimestampTz now = GetCurrentTimestamp();
	bool		answered;

	if (rp_orphans == NIL || (!at_exit && !rp_redis_answered))
		return;
	foreach(lc, rp_orphans)
	{
		RpLease    *o = lfirst(lc);

		if (o->expires_at > now)
			live = lappend(live, o);
		else
		{
			pfree(o->name);
			pfree(o);
		}
	}
	list_free(rp_orphans);
	rp_orphans = NIL;
	if (live == NIL)
		return;
	(void) rp_release_leases(live, true, &answered);
	foreach(lc, live)
	{
		RpLease    *o = lfirst(lc);

		if (!at_exit && (!answered || ++o->tries < 2))
		{
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

			rp_orphans = lappend(rp_orphans, o);
			MemoryContextSwitchTo(old);
		}
		else
		{
			pfree(o->name);
			pfree(o);
		}
	}
	list_free(live);
}

static void
rp_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			rp_verify_at_commit();
			break;
		case XACT_EVENT_PRE_PREPARE:
			/*
			 * A prepared transaction outlives this session's part in it:
			 * nothing would release its leases at COMMIT PREPARED, and
			 * verify_at_commit could not run there.  Refuse, as
			 * postgres_fdw does for its remote transactions.
			 */
			{
				ListCell   *lc;

				foreach(lc, rp_leases_held)
					if (((RpLease *) lfirst(lc))->xact)
						ereport(ERROR,
								(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
								 errmsg("cannot PREPARE a transaction that holds a lease from rp_acquire_xact"),
								 errhint("Release the lease first, or take it with rp_acquire.")));
			}
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			rp_release_and_forget(rp_registry_take_xact(InvalidSubTransactionId));
			rp_orphans_release(false);
			break;
		default:
			break;
	}
}

static void
rp_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	if (event == SUBXACT_EVENT_ABORT_SUB)
		rp_release_and_forget(rp_registry_take_xact(mySubid));
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, rp_leases_held)
		{
			RpLease    *l = lfirst(lc);

			if (l->xact && l->subid == mySubid)
				l->subid = parentSubid;
		}
	}
}

/*
 * Backend exit.  Once proc_exit has begun, errstart() promotes every ERROR
 * to FATAL, which no PG_CATCH sees: a Redis timeout here would end the
 * process with a second FATAL halfway through its exit callbacks.  For the
 * duration of this one bounded, quiet release the flag is lowered, so an
 * error stays an ERROR that rp_eval_quiet catches and turns into a WARNING.
 */
static void
rp_exit_callback(int code, Datum arg)
{
	List	   *all = rp_leases_held;
	bool		exiting = proc_exit_inprogress;

	rp_leases_held = NIL;
	proc_exit_inprogress = false;
	rp_release_and_forget(all);
	rp_orphans_release(true);
	proc_exit_inprogress = exiting;
	rp_conn_reset();
}

static void
rp_register_callbacks(void)
{
	if (rp_callbacks_registered)
		return;
	RegisterXactCallback(rp_xact_callback, NULL);
	RegisterSubXactCallback(rp_subxact_callback, NULL);
	before_shmem_exit(rp_exit_callback, (Datum) 0);
	rp_callbacks_registered = true;
}

void
rp_lock_init(void)
{
	/* Callbacks are registered on first use: this may run in the postmaster. */
	DefineCustomIntVariable("redis_primitives.fence_replicas",
							"Number of Redis replicas that must acknowledge a new fence token before rp_acquire returns it.",
							"0 (the default) does not wait.  Otherwise WAIT follows the acquire script, one more round trip; if fewer replicas acknowledge in time, the lease is released and the acquire fails with RP003.",
							&rp_fence_replicas, 0, 0, 64, PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("redis_primitives.fence_replicas_timeout",
							"Time Redis' WAIT may take for redis_primitives.fence_replicas acknowledgements.",
							"Capped at half of redis_primitives.command_timeout, so the reply comes back before the command times out.",
							&rp_fence_replicas_timeout_ms, 500, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
}

/*
 * With fence_replicas > 0: WAIT until that many replicas have the counter
 * increment the acquire script just made, so that a failover to one of them
 * cannot re-issue the token.  Too few in time: release the lease (quietly,
 * bounded: the TTL is the safety net) and fail with RP003, rather than hand
 * out a token the setting exists to refuse.
 */
static void
rp_wait_replicas(const char *name, size_t namelen, const char *token, int64 fence)
{
	RpArg		cmd[3];
	int64		acked;
	int			timeout = Max(1, Min(rp_fence_replicas_timeout_ms,
									 rp_command_timeout_ms / 2));
	RpLease    *l;

	if (rp_fence_replicas <= 0)
		return;
	cmd[0] = rp_arg_str("WAIT");
	cmd[1] = rp_arg_int(rp_fence_replicas);
	cmd[2] = rp_arg_int(timeout);
	acked = rp_reply_int(rp_command(3, cmd), "WAIT");
	if (acked >= rp_fence_replicas)
		return;
	l = palloc0(sizeof(RpLease));
	l->name = (char *) name;
	l->namelen = namelen;
	strlcpy(l->token, token, sizeof(l->token));
	(void) rp_release_leases(list_make1(l), true, NULL);
	ereport(ERROR,
			(errcode(MAKE_SQLSTATE('R', 'P', '0', '0', '3')),
			 errmsg("fence token for \"%s\" was not replicated", pnstrdup(name, namelen)),
			 errdetail(INT64_FORMAT " of %d replica(s) acknowledged fence token " INT64_FORMAT
					   " within %d ms; the lease was released.",
					   acked, rp_fence_replicas, fence, timeout),
			 errhint("A failover now could re-issue this token.  Check the replicas, or lower redis_primitives.fence_replicas.")));
}

/* ------------------------------------------------------------------------
 * SQL functions.
 * ------------------------------------------------------------------------
 */

static Datum
rp_make_lease(FunctionCallInfo fcinfo, const char *name, size_t namelen,
			  const char *token, int64 fence, TimestampTz expires_at)
{
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = PointerGetDatum(cstring_to_text_with_len(name, namelen));
	values[1] = CStringGetTextDatum(token);
	values[2] = Int64GetDatum(fence);
	values[3] = TimestampTzGetDatum(expires_at);
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}

/* Sleep up to ms, waking for cancel and statement_timeout. */
static void
rp_sleep(long ms)
{
	int			rc;

	if (ms <= 0)
		return;
	rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
				   ms, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * Shared body of rp_acquire and rp_acquire_xact.
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
	TimestampTz deadline = TimestampTzPlusMilliseconds(start, wait_ms);
	TimestampTz lock_deadline = 0;
	long		backoff = 5;
	MemoryContext attempt_cxt;

	if (xact && PG_NARGS() > 4)
	{
		if (PG_ARGISNULL(4))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("verify_at_commit must not be NULL")));
		verify = PG_GETARG_BOOL(4);
	}
	if (!xact)
		rp_pool_check_session_acquire(name, namelen);	/* pool.c */
	if (LockTimeout > 0 && wait_ms > LockTimeout)
		lock_deadline = TimestampTzPlusMilliseconds(start, LockTimeout);

	rp_register_callbacks();
	rp_new_token(token);
	/* A wait may last for hours: each attempt's memory goes with it. */
	attempt_cxt = AllocSetContextCreate(CurrentMemoryContext, "rp_acquire attempt",
										ALLOCSET_SMALL_SIZES);

	for (;;)
	{
		TimestampTz sent = GetCurrentTimestamp();
		MemoryContext old = MemoryContextSwitchTo(attempt_cxt);
		int64		fence = rp_try_acquire_recorded(name, namelen, token, ttl_ms,
													floor, sent);
		TimestampTz now;
		long		remaining;
		long		pause;

		MemoryContextSwitchTo(old);
		MemoryContextReset(attempt_cxt);

		if (fence > 0)
		{
			/* The lease is counted from when it was asked for: conservative. */
			TimestampTz expires = TimestampTzPlusMilliseconds(sent, ttl_ms);
			RpLease    *stale;

			rp_wait_replicas(name, namelen, token, fence);

			/*
			 * Redis just granted this name to a new token, so any lease the
			 * session still remembers for it has expired: forget it, or
			 * rp_release(name) would find the dead one first.
			 */
			while ((stale = rp_registry_find_kind(name, namelen, RP_LEASE_LOCK)) != NULL)
				rp_registry_remove(stale);
			rp_registry_add(name, namelen, token, fence, expires, xact, verify);
			PG_RETURN_DATUM(rp_make_lease(fcinfo, name, namelen, token, fence, expires));
		}

		now = GetCurrentTimestamp();
		if (lock_deadline != 0 && now >= lock_deadline)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not obtain lease on \"%s\"",
							text_to_cstring(name_t)),
					 errdetail("lock_timeout (%d ms) ended the wait.", LockTimeout)));
		remaining = TimestampDifferenceMilliseconds(now, deadline);
		if (now >= deadline)
			PG_RETURN_NULL();

		/* Full jitter in [backoff/2, backoff], never past the deadline. */
		pause = backoff / 2 + (long) pg_prng_uint64_range(&pg_global_prng_state, 0, backoff / 2);
		if (lock_deadline != 0)
			pause = Min(pause, TimestampDifferenceMilliseconds(now, lock_deadline));
		pause = Min(pause, remaining);
		pgstat_report_wait_start(PG_WAIT_EXTENSION);
		rp_sleep(Max(pause, 1));
		pgstat_report_wait_end();
		backoff = Min(backoff * 2, 250);
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

/* A lease built by hand, not from this session's registry. */
static RpLease *
rp_transient_lease(text *name, text *token)
{
	RpLease    *l = palloc0(sizeof(RpLease));
	char	   *tok = text_to_cstring(token);

	l->name = VARDATA_ANY(name);
	l->namelen = VARSIZE_ANY_EXHDR(name);
	strlcpy(l->token, tok, sizeof(l->token));
	if (strlen(tok) != RP_TOKEN_LEN)
		l->token[0] = '\0';		/* cannot match any lease we issued */
	l->kind = rp_token_kind(l->token);
	return l;
}

RP_TRACKED_FUNCTION(rp_release_lease, RP_PRIM_RELEASE, RP_OUT_FALSE_REFUSED)
{
	text	   *name;
	text	   *token;
	int64		fence;
	RpLease    *l;
	RpLease    *mine;
	bool		fence_isnull;
	bool		released;

	rp_lease_arg(fcinfo, 0, &name, &token, &fence, &fence_isnull);
	l = rp_transient_lease(name, token);
	if (l->token[0] == '\0' || l->namelen == 0)
		PG_RETURN_BOOL(false);
	released = rp_release_leases(list_make1(l), false, NULL) == 1;
	mine = rp_registry_find(l->name, l->namelen, l->token);
	if (mine)
		rp_registry_remove(mine);
	PG_RETURN_BOOL(released);
}

RP_TRACKED_FUNCTION(rp_release_name, RP_PRIM_RELEASE, RP_OUT_FALSE_REFUSED)
{
	text	   *name_t = rp_arg_text(fcinfo, 0, "lock name");
	RpLease    *mine = rp_registry_find(VARDATA_ANY(name_t),
										VARSIZE_ANY_EXHDR(name_t), NULL);
	bool		released;

	if (mine == NULL)
	{
		rp_pool_warn_release_not_held(VARDATA_ANY(name_t), VARSIZE_ANY_EXHDR(name_t));	/* pool.c */
		PG_RETURN_BOOL(false);
	}
	released = rp_release_leases(list_make1(mine), false, NULL) == 1;
	rp_registry_remove(mine);
	PG_RETURN_BOOL(released);
}

RP_TRACKED_FUNCTION(rp_release_all, RP_PRIM_RELEASE_ALL, RP_OUT_PLAIN)
{
	List	   *all = rp_leases_held;
	int			released;
	ListCell   *lc;

	if (all == NIL)
		PG_RETURN_INT32(0);
	released = rp_release_leases(all, false, NULL);
	rp_leases_held = NIL;
	foreach(lc, all)
	{
		RpLease    *l = lfirst(lc);

		rp_locks_unpublish(l);
		pfree(l->name);
		pfree(l);
	}
	list_free(all);
	PG_RETURN_INT32(released);
}

RP_TRACKED_FUNCTION(rp_extend, RP_PRIM_EXTEND, RP_OUT_NULL_REFUSED)
{
	text	   *name;
	text	   *token;
	int64		fence;
	int64		ttl_ms;
	RpLease    *l;
	RpLease    *mine;
	RpArg		keys[1];
	RpArg		argv[2];
	TimestampTz sent;
	TimestampTz expires;

	/* The fence is required: the lease returned carries it. */
	rp_lease_arg(fcinfo, 0, &name, &token, &fence, NULL);
	ttl_ms = rp_arg_int8(fcinfo, 1, "ttl_ms", 1, RP_MAX_TTL_MS);
	l = rp_transient_lease(name, token);
	if (l->token[0] == '\0' || l->namelen == 0)
		PG_RETURN_NULL();
	keys[0] = rp_key(l->name, l->namelen,
					 l->kind == RP_LEASE_PERMIT ? "sem" : "lock");
	argv[0] = rp_arg_str(l->token);
	argv[1] = rp_arg_int(ttl_ms);
	sent = GetCurrentTimestamp();
	mine = rp_registry_find(l->name, l->namelen, l->token);
	if (rp_reply_int(rp_lock_eval(l->kind == RP_LEASE_PERMIT ?
								  &rp_script_semaphore_extend : &rp_script_lock_extend,
								  1, keys, 2, argv),
					 "lock_extend") != 1)
	{
		/* Not ours any more: stop believing it. */
		if (mine)
			rp_registry_remove(mine);
		PG_RETURN_NULL();
	}
	expires = TimestampTzPlusMilliseconds(sent, ttl_ms);
	if (mine)
		mine->expires_at = expires;
	if (mine)
		rp_locks_publish(mine, mine->name, mine->namelen, mine->fence, expires, mine->xact);
	PG_RETURN_DATUM(rp_make_lease(fcinfo, l->name, l->namelen, l->token,
								  fence, expires));
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
	r = rp_lock_eval(&rp_script_lock_info, 2, keys, 0, NULL);
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

PG_FUNCTION_INFO_V1(rp_leases);
Datum
rp_leases(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, rp_leases_held)
	{
		RpLease    *l = lfirst(lc);
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		values[0] = PointerGetDatum(cstring_to_text_with_len(l->name, l->namelen));
		values[1] = CStringGetTextDatum(l->token);
		values[2] = Int64GetDatum(l->fence);
		values[3] = TimestampTzGetDatum(l->expires_at);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* ------------------------------------------------------------------------
 * Registry lookup for the fence guard (core's restructure replaces this).
 * ------------------------------------------------------------------------
 */

/*
 * The lease this session holds on name with the latest deadline, if any.
 * The registry keeps one lease per name (a new grant drops the old one), but
 * taking the latest deadline keeps the answer right if that ever changes.
 */
bool
rp_lease_lookup(const char *name, size_t namelen, int64 *fence,
				TimestampTz *expires_at)
{
	ListCell   *lc;
	RpLease    *best = NULL;

	foreach(lc, rp_leases_held)
	{
		RpLease    *l = lfirst(lc);

		if (l->namelen == namelen && memcmp(l->name, name, namelen) == 0 &&
			(best == NULL || l->expires_at > best->expires_at))
			best = l;
	}
	if (best == NULL)
		return false;
	*fence = best->fence;
	*expires_at = best->expires_at;
	return true;
}

/* ------------------------------------------------------------------------
 * Pool-safe forms (the "apps" area; see docs/applications.md).
 *
 * rp_release(name, token) and rp_extend(name, token, ttl_ms) act by token
 * alone, from any connection: a pooled client's release lands on whichever
 * backend the pool hands it, which need not be the one that acquired.  When
 * this session's registry does hold that token, it is kept consistent:
 * forgotten on release, its deadline moved on extend.  Also here: what the
 * pool module (pool.c) needs from the registry.
 * ------------------------------------------------------------------------
 */

/* Name and token arguments: 22004 for NULL, 22023 for empty. */
static RpLease *
rp_token_args(FunctionCallInfo fcinfo)
{
	text	   *name = rp_arg_text(fcinfo, 0, "lock name");
	text	   *token = rp_arg_text(fcinfo, 1, "lease token");

	return rp_transient_lease(name, token);
}

RP_TRACKED_FUNCTION(rp_release_token, RP_PRIM_RELEASE, RP_OUT_FALSE_REFUSED)
{
	RpLease    *l = rp_token_args(fcinfo);
	RpLease    *mine;
	bool		released;

	rp_register_callbacks();
	/* Not one of our tokens' shape: no lease can hold it. */
	if (l->token[0] == '\0')
		PG_RETURN_BOOL(false);
	released = rp_release_leases(list_make1(l), false, NULL) == 1;
	mine = rp_registry_find(l->name, l->namelen, l->token);
	if (mine)
		rp_registry_remove(mine);
	PG_RETURN_BOOL(released);
}

/*
 * rp_extend(name, token, ttl_ms) for a semaphore permit (its token begins
 * with 's'): the permit's own compare-and-extend script.  Redis keeps no
 * fence per permit, so the lease returned carries the fence only when this
 * session holds the permit; from another session its fence is NULL.
 */
static Datum
rp_extend_permit_token(FunctionCallInfo fcinfo, RpLease *l, int64 ttl_ms)
{
	RpLease    *mine = rp_registry_find(l->name, l->namelen, l->token);
	RpArg		key = rp_key(l->name, l->namelen, "sem");
	RpArg		argv[2];
	TimestampTz sent = GetCurrentTimestamp();
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	argv[0] = rp_arg_str(l->token);
	argv[1] = rp_arg_int(ttl_ms);
	if (rp_reply_int(rp_lock_eval(&rp_script_semaphore_extend, 1, &key, 2, argv),
					 "semaphore_extend") != 1)
	{
		/* Not ours any more: stop believing it. */
		if (mine)
			rp_registry_remove(mine);
		PG_RETURN_NULL();
	}
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = PointerGetDatum(cstring_to_text_with_len(l->name, l->namelen));
	values[1] = CStringGetTextDatum(l->token);
	values[2] = Int64GetDatum(mine ? mine->fence : 0);
	nulls[2] = (mine == NULL);
	values[3] = TimestampTzGetDatum(TimestampTzPlusMilliseconds(sent, ttl_ms));
	if (mine)
	{
		mine->expires_at = DatumGetTimestampTz(values[3]);
		rp_locks_publish(mine, mine->name, mine->namelen, mine->fence,
						 mine->expires_at, mine->xact);
	}
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}

RP_TRACKED_FUNCTION(rp_extend_token, RP_PRIM_EXTEND, RP_OUT_NULL_REFUSED)
{
	RpLease    *l = rp_token_args(fcinfo);
	int64		ttl_ms = rp_arg_int8(fcinfo, 2, "ttl_ms", 1, RP_MAX_TTL_MS);
	RpLease    *mine;
	RpArg		keys[2];
	RpArg		argv[2];
	RpReply    *r;
	TimestampTz sent;
	TimestampTz expires;
	int64		fence;

	rp_register_callbacks();
	if (l->token[0] == '\0')
		PG_RETURN_NULL();
	if (l->kind == RP_LEASE_PERMIT)
		return rp_extend_permit_token(fcinfo, l, ttl_ms);
	keys[0] = rp_key(l->name, l->namelen, "lock");
	keys[1] = rp_key(l->name, l->namelen, "fence");
	argv[0] = rp_arg_str(l->token);
	argv[1] = rp_arg_int(ttl_ms);
	mine = rp_registry_find(l->name, l->namelen, l->token);
	sent = GetCurrentTimestamp();
	r = rp_lock_eval(&rp_script_lock_extend_token, 2, keys, 2, argv);
	if (rp_reply_is_nil(r))
	{
		/* Not ours any more: stop believing it. */
		if (mine)
			rp_registry_remove(mine);
		PG_RETURN_NULL();
	}
	if (r->type != RP_REPLY_STRING)
		elog(ERROR, "unexpected Redis reply for lock_extend_token: expected a decimal string");
	/* The session's own record is exact; otherwise the counter (see script). */
	fence = mine ? mine->fence : pg_strtoint64(r->str);
	/* Counted from when it was asked for: conservative, like rp_acquire. */
	expires = TimestampTzPlusMilliseconds(sent, ttl_ms);
	if (mine)
		mine->expires_at = expires;
	if (mine)
		rp_locks_publish(mine, mine->name, mine->namelen, mine->fence, expires, mine->xact);
	PG_RETURN_DATUM(rp_make_lease(fcinfo, l->name, l->namelen, l->token,
								  fence, expires));
}

/*
 * Release every session-scoped lease this backend holds, for DISCARD ALL
 * (pool.c).  Never throws: a lease that cannot be released expires by its
 * TTL.  Returns how many Redis still held.
 */
int
rp_lock_release_session_leases(void)
{
	List	   *session = NIL;
	ListCell   *lc;
	int			released;

	foreach(lc, rp_leases_held)
	{
		RpLease    *l = lfirst(lc);

		if (!l->xact)
		{
			session = lappend(session, l);
			rp_locks_unpublish(l);
			rp_leases_held = foreach_delete_current(rp_leases_held, lc);
		}
	}
	if (session == NIL)
		return 0;
	released = rp_release_leases(session, true, NULL);
	foreach(lc, session)
	{
		RpLease    *l = lfirst(lc);

		pfree(l->name);
		pfree(l);
	}
	list_free(session);
	return released;
}

/* ------------------------------------------------------------------------
 * Leases of other kinds: semaphore permits (src/semaphore.c).
 *
 * A permit is a registry entry like a lock's, so rp_release, rp_extend,
 * rp_release_all, rp_leases, transaction and exit release and the
 * lock-bound fence guard treat it as a lease.  What differs per kind is the
 * key (":sem", a sorted set, instead of ":lock") and the release and extend
 * scripts.  The kind is also written into the token itself (a permit's
 * begins with 's', which no hex lock token can), so rp_release(lease) and
 * rp_extend work for a permit from any session.
 * ------------------------------------------------------------------------
 */

RpLeaseKind
rp_token_kind(const char *token)
{
	return token[0] == 's' ? RP_LEASE_PERMIT : RP_LEASE_LOCK;
}

void
rp_lease_new_token(char *out, RpLeaseKind kind)
{
	rp_new_token(out);
	if (kind == RP_LEASE_PERMIT)
		out[0] = 's';
}

RpReply *
rp_lease_eval(const RpScript *script, int nkeys, const RpArg *keys,
			  int nargs, const RpArg *argv)
{
	return rp_lock_eval(script, nkeys, keys, nargs, argv);
}

bool
rp_lease_find_live(const char *name, size_t namelen, RpLeaseKind kind,
				   char *token, int64 *fence, TimestampTz *expires_at)
{
	RpLease    *l = rp_registry_find_kind(name, namelen, kind);

	if (l == NULL || l->expires_at <= GetCurrentTimestamp())
		return false;
	memcpy(token, l->token, RP_TOKEN_LEN + 1);
	*fence = l->fence;
	*expires_at = l->expires_at;
	return true;
}

void
rp_lease_remember(const char *name, size_t namelen, const char *token,
				  int64 fence, TimestampTz expires_at, bool xact,
				  RpLeaseKind kind)
{
	RpLease    *stale;

	rp_register_callbacks();
	/* One lease of a kind per name: one that expired is forgotten. */
	while ((stale = rp_registry_find_kind(name, namelen, kind)) != NULL)
		rp_registry_remove(stale);
	(void) rp_registry_add_kind(name, namelen, token, fence, expires_at, xact,
								false, kind);
}

void
rp_lease_orphan(const char *name, size_t namelen, const char *token,
				TimestampTz expires_at, RpLeaseKind kind)
{
	MemoryContext old;
	RpLease    *o;

	rp_register_callbacks();
	old = MemoryContextSwitchTo(TopMemoryContext);
	o = palloc0(sizeof(RpLease));
	o->name = pnstrdup(name, namelen);
	o->namelen = namelen;
	memcpy(o->token, token, RP_TOKEN_LEN + 1);
	o->expires_at = expires_at;
	o->kind = kind;
	rp_orphans = lappend(rp_orphans, o);
	rp_redis_answered = false;
	MemoryContextSwitchTo(old);
}

Datum
rp_lease_datum(FunctionCallInfo fcinfo, const char *name, size_t namelen,
			   const char *token, int64 fence, TimestampTz expires_at)
{
	return rp_make_lease(fcinfo, name, namelen, token, fence, expires_at);
}
