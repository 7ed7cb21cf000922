/*-------------------------------------------------------------------------
 *
 * lock.c
 *		The lease lock: rp_acquire[_xact], rp_release, rp_release_all,
 *		rp_extend, rp_lock_info, rp_leases, and the session's lease registry
 *		with its transaction, subtransaction and backend-exit release.
 *
 * Before editing, know this: the registry is what the session *believes*;
 * Redis is the truth.  A lease Redis may grant is recorded (as unsettled)
 * *before* its acquire is sent, and forgotten only when the answer is
 * definite; whatever is left when the transaction or the backend ends is
 * released by compare-and-delete through the cleanup face (rp_eval_quiet),
 * which never throws; what even that cannot release at backend exit is
 * handed to the background worker (orphans.c).  Only XACT_EVENT_PRE_COMMIT
 * may throw, on purpose (RP002), to abort a commit whose lease was lost.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "conn.h"
#include "errcodes.h"
#include "lock.h"
#include "orphans.h"
#include "pool.h"
#include "retry.h"
#include "rp_scripts.h"
#include "stats.h"
#include "token.h"

#define RP_TOKEN_BYTES	16
StaticAssertDecl(RP_TOKEN_LEN == RP_TOKEN_BYTES * 2, "a token is hex");

/* How long backend exit and transaction end may spend releasing. */
#define RP_CLEANUP_TIMEOUT_MS	500

/* At most this many unsettled acquires are remembered; the oldest go first. */
#define RP_MAX_UNSETTLED		256

/*
 * What a registry entry is a lease of (RpLeaseKind, lock.h): release and
 * extend dispatch on it.  A lock's key is <prefix>{name}:lock; a semaphore
 * permit's (semaphore.c) is a member of <prefix>{name}:sem.
 */
#define RP_KIND_SUFFIX(kind)	((kind) == RP_LEASE_PERMIT ? "sem" : "lock")

/*
 * The hash key of the registry: a name of any length and a kind (a session
 * may hold a lock and a permit of one name).
 */
typedef struct RpNameKey
{
	const char *data;
	size_t		len;
	RpLeaseKind kind;
} RpNameKey;

/* One lease the session believes it holds, or may have been granted. */
typedef struct RpLease
{
	RpNameKey	hkey;			/* must be first; hkey.data == name */
	char	   *name;			/* in rp_lease_cxt */
	size_t		namelen;
	RpLeaseKind kind;
	char	   *key;			/* the full key it was taken under */
	size_t		keylen;
	char		token[RP_TOKEN_LEN + 1];
	int64		fence;
	TimestampTz expires_at;		/* time the acquire was sent + ttl */
	bool		xact;			/* released at top-level transaction end */
	bool		verify;			/* checked at PRE_COMMIT (xact leases only) */
	SubTransactionId subid;		/* subtransaction that took it (xact only) */
	uint64		seq;			/* order of acquisition, for rp_leases() */
	int			tries;			/* unsettled only: answered release attempts */
	dlist_node	node;			/* unsettled only */
} RpLease;

static MemoryContext rp_lease_cxt = NULL;	/* every string of every entry */
static HTAB *rp_held = NULL;	/* name -> RpLease, the granted leases */
static int	rp_nxact = 0;		/* how many of them are xact leases */
static int	rp_nverify = 0;		/* and of those, with verify_at_commit */
static long rp_sweep_at = 64;	/* sweep expired entries past this many */
static uint64 rp_seq = 0;

/*
 * Unsettled acquires: sent (or about to be), with no definite answer yet, or
 * granted but not yet handed to the caller (the fence_replicas WAIT).  Redis
 * may run such a command after we gave up on it, taking a lease whose token
 * only this backend knows.  They are released by compare-and-delete at a
 * transaction end (once Redis has answered since, so a hung Redis never
 * slows a transaction down) and at backend exit; forgotten when released,
 * after two answered attempts, or past their TTL.
 */
static dlist_head rp_unsettled = DLIST_STATIC_INIT(rp_unsettled);
static int	rp_nunsettled = 0;
static bool rp_redis_answered = true;	/* no lock call has timed out since */

/*
 * A verify_at_commit lease that was lost and replaced by re-acquiring its
 * name: the transaction still owes its check, which can only fail.
 */
static char *rp_lost_name = NULL;
static int64 rp_lost_fence = 0;

/* Settings: how many replicas must have a new fence token before it is used. */
static int	rp_fence_replicas = 0;
static int	rp_fence_replicas_timeout_ms = 500;
static bool rp_callbacks_registered = false;

static ExecutorEnd_hook_type rp_prev_executor_end = NULL;
static ProcessUtility_hook_type rp_prev_process_utility = NULL;

/* ------------------------------------------------------------------------
 * The registry.
 * ------------------------------------------------------------------------
 */

static uint32
rp_name_hash(const void *key, Size keysize)
{
	const RpNameKey *k = key;

	return hash_bytes((const unsigned char *) k->data, (int) k->len) ^ (uint32) k->kind;
}

static int
rp_name_match(const void *key1, const void *key2, Size keysize)
{
	const RpNameKey *a = key1;
	const RpNameKey *b = key2;

	return !(a->kind == b->kind && a->len == b->len &&
			 memcmp(a->data, b->data, a->len) == 0);
}

static void
rp_registry_setup(void)
{
	HASHCTL		ctl;

	if (rp_held != NULL)
		return;
	rp_lease_cxt = AllocSetContextCreate(TopMemoryContext,
										 "redis_primitives leases",
										 ALLOCSET_SMALL_SIZES);
	ctl.keysize = sizeof(RpNameKey);
	ctl.entrysize = sizeof(RpLease);
	ctl.hash = rp_name_hash;
	ctl.match = rp_name_match;
	ctl.hcxt = rp_lease_cxt;
	rp_held = hash_create("redis_primitives lease registry", 64, &ctl,
						  HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
}

/* Fill the fields of a lease; strings are copied into rp_lease_cxt. */
static void
rp_lease_fill(RpLease *l, const char *name, size_t namelen, RpLeaseKind kind,
			  RpArg key, const char *token, TimestampTz expires_at)
{
	l->name = MemoryContextAlloc(rp_lease_cxt, namelen + 1);
	memcpy(l->name, name, namelen);
	l->name[namelen] = '\0';
	l->namelen = namelen;
	l->hkey.data = l->name;
	l->hkey.len = namelen;
	l->hkey.kind = kind;
	l->kind = kind;
	l->key = MemoryContextAlloc(rp_lease_cxt, key.len + 1);
	memcpy(l->key, key.data, key.len);
	l->key[key.len] = '\0';
	l->keylen = key.len;
	memcpy(l->token, token, RP_TOKEN_LEN + 1);
	l->expires_at = expires_at;
}

static void
rp_lease_free_strings(RpLease *l)
{
	pfree(l->name);
	pfree(l->key);
}

static RpLease *
rp_registry_find_kind(const char *name, size_t namelen, RpLeaseKind kind)
{
	RpNameKey	k = {name, namelen, kind};

	if (rp_held == NULL)
		return NULL;
	return hash_search(rp_held, &k, HASH_FIND, NULL);
}

/* The session's lock (not permit) on name. */
static RpLease *
rp_registry_find(const char *name, size_t namelen)
{
	return rp_registry_find_kind(name, namelen, RP_LEASE_LOCK);
}

static void rp_registry_sweep(void);

/*
 * The one way into the registry: a granted lease, moved from the unsettled
 * entry u (which is freed).  Any entry for the name must be gone already.
 */
static RpLease *
rp_registry_add(RpLease *u, int64 fence, bool xact, bool verify)
{
	RpLease    *l;
	bool		found;

	if (hash_get_num_entries(rp_held) >= rp_sweep_at)
		rp_registry_sweep();
	l = hash_search(rp_held, &u->hkey, HASH_ENTER, &found);
	Assert(!found);
	/* The unsettled entry's strings move over; its shell is freed. */
	l->name = u->name;
	l->namelen = u->namelen;
	l->hkey.data = l->name;
	l->hkey.len = l->namelen;
	l->hkey.kind = u->kind;
	l->kind = u->kind;
	l->key = u->key;
	l->keylen = u->keylen;
	memcpy(l->token, u->token, RP_TOKEN_LEN + 1);
	l->expires_at = u->expires_at;
	l->fence = fence;
	l->xact = xact;
	l->verify = xact && verify;
	l->subid = xact ? GetCurrentSubTransactionId() : InvalidSubTransactionId;
	l->seq = ++rp_seq;
	l->tries = 0;
	dlist_delete(&u->node);
	rp_nunsettled--;
	pfree(u);
	if (l->xact)
		rp_nxact++;
	if (l->verify)
		rp_nverify++;
	rp_locks_publish(l, l->name, l->namelen, l->fence, l->expires_at, l->xact);
	return l;
}

/* The one way out of the registry. */
static void
rp_registry_remove(RpLease *l)
{
	RpNameKey	k = l->hkey;
	char	   *name = l->name;
	char	   *key = l->key;

	if (l->xact)
		rp_nxact--;
	if (l->verify)
		rp_nverify--;
	rp_locks_unpublish(l);
	/* The hash key points at the name: free it only once the entry is out. */
	hash_search(rp_held, &k, HASH_REMOVE, NULL);
	pfree(name);
	pfree(key);
}

/*
 * Drop the leases whose local deadline has passed: Redis has let them go (or
 * is about to), so holding on to them only grows the backend.  A lease with
 * verify_at_commit stays until its transaction ends: its check must fail.
 * Called when the registry has doubled since the last sweep, so the cost
 * per acquire is constant.
 */
static void
rp_registry_sweep(void)
{
	HASH_SEQ_STATUS seq;
	RpLease    *l;
	TimestampTz now = GetCurrentTimestamp();

	if (rp_held == NULL)
		return;
	hash_seq_init(&seq, rp_held);
	while ((l = hash_seq_search(&seq)) != NULL)
		if (l->expires_at <= now && !l->verify)
			rp_registry_remove(l);
	rp_sweep_at = Max(64, 2 * hash_get_num_entries(rp_held));
}

/* Record an acquire about to be sent: unsettled until its answer is known. */
static RpLease *
rp_unsettled_add(const char *name, size_t namelen, RpLeaseKind kind, RpArg key,
				 const char *token, TimestampTz expires_at)
{
	RpLease    *u = MemoryContextAllocZero(rp_lease_cxt, sizeof(RpLease));

	rp_lease_fill(u, name, namelen, kind, key, token, expires_at);
	if (rp_nunsettled >= RP_MAX_UNSETTLED)
	{
		RpLease    *old = dlist_container(RpLease, node,
										  dlist_pop_head_node(&rp_unsettled));

		rp_nunsettled--;
		rp_lease_free_strings(old);
		pfree(old);
	}
	dlist_push_tail(&rp_unsettled, &u->node);
	rp_nunsettled++;
	return u;
}

/* Its answer is known and nothing was granted: forget it. */
static void
rp_unsettled_forget(RpLease *u)
{
	dlist_delete(&u->node);
	rp_nunsettled--;
	rp_lease_free_strings(u);
	pfree(u);
}

/*
 * The lease (lock or permit) this session holds on name with the latest
 * deadline, even one whose deadline has passed: the lock-bound guard
 * (fence.c) tells "expired" from "none" and applies lease_margin itself.
 */
bool
rp_lease_lookup(const char *name, size_t namelen, int64 *fence,
				TimestampTz *expires_at)
{
	RpLease    *l = rp_registry_find_kind(name, namelen, RP_LEASE_LOCK);
	RpLease    *p = rp_registry_find_kind(name, namelen, RP_LEASE_PERMIT);

	if (l == NULL || (p != NULL && p->expires_at > l->expires_at))
		l = p;
	if (l == NULL)
		return false;
	*fence = l->fence;
	*expires_at = l->expires_at;
	return true;
}

/* rp_eval for this file: a lock call answered means Redis answers again. */
static RpReply *
rp_lock_eval(const RpScript *script, int nkeys, const RpArg *keys,
			 int nargs, const RpArg *argv)
{
	RpReply    *r = rp_eval(script, nkeys, keys, nargs, argv);

	rp_redis_answered = true;
	return r;
}

/* ------------------------------------------------------------------------
 * Releasing many leases: one round trip per hash slot.
 * ------------------------------------------------------------------------
 */

/*
 * Release n leases (lock kind) by compare-and-delete under the keys they
 * were taken with.  released[i] is set when Redis still held leases[i] with
 * our token.  quiet: the cleanup face, never ereports, all of it within
 * RP_CLEANUP_TIMEOUT_MS; answered[i] tells which got an answer.  Returns how
 * many were released.
 */
static int
rp_release_kind(RpLease **leases, int n, const RpScript *script, bool quiet,
				TimestampTz deadline, bool *answered)
{
	RpArg	   *keys = palloc(sizeof(RpArg) * Max(n, 1));
	RpArg	   *argv = palloc(sizeof(RpArg) * Max(n, 1));
	RpArg	   *gkeys = palloc(sizeof(RpArg) * Max(n, 1));
	RpArg	   *gargv = palloc(sizeof(RpArg) * Max(n, 1));
	int		   *order = palloc(sizeof(int) * Max(n, 1));
	int		   *start = palloc(sizeof(int) * (n + 1));
	int			ngroups;
	int			released = 0;

	if (n == 0)
		return 0;
	for (int i = 0; i < n; i++)
	{
		keys[i].data = leases[i]->key;
		keys[i].len = leases[i]->keylen;
		argv[i] = rp_arg_str(leases[i]->token);
	}
	ngroups = rp_slot_groups(n, keys, order, start);
	for (int g = 0; g < ngroups; g++)
	{
		int			gn = start[g + 1] - start[g];
		RpReply    *r;

		for (int k = 0; k < gn; k++)
		{
			gkeys[k] = keys[order[start[g] + k]];
			gargv[k] = argv[order[start[g] + k]];
		}
		if (quiet)
		{
			char	   *err;
			long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

			r = rp_eval_quiet(script, gn, gkeys, gn, gargv,
							  (int) Max(left, 1), &err);
			if (r == NULL)
			{
				ereport(WARNING,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not release %d Redis lease(s); they will expire by their TTL", gn),
						 errdetail_internal("%s", err)));
				continue;
			}
		}
		else
			r = rp_lock_eval(script, gn, gkeys, gn, gargv);
		rp_redis_answered = true;
		for (int k = 0; k < gn; k++)
		{
			if (answered)
				answered[order[start[g] + k]] = true;
			if (r->type == RP_REPLY_ARRAY && (size_t) k < r->nelem &&
				r->elem[k]->type == RP_REPLY_INTEGER && r->elem[k]->integer == 1)
				released++;
		}
	}
	return released;
}

/*
 * Release n leases by compare-and-delete under the keys they were taken
 * with, each kind by its own script (locks, then semaphore permits), all
 * within one cleanup deadline.  answered[i] (if given) is set for the leases
 * that got an answer; quiet: the cleanup face, never ereports.  Returns how
 * many Redis still held with our token.
 */
static int
rp_release_leases(RpLease **leases, int n, bool quiet, bool *answered)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   Min(rp_command_timeout_ms, RP_CLEANUP_TIMEOUT_MS));
	RpLease   **locks;
	RpLease   **permits;
	int		   *lidx;
	int		   *pidx;
	bool	   *la;
	bool	   *pa;
	int			nl = 0;
	int			np = 0;
	int			released;

	if (n == 0)
		return 0;
	locks = palloc(sizeof(RpLease *) * n);
	permits = palloc(sizeof(RpLease *) * n);
	lidx = palloc(sizeof(int) * n);
	pidx = palloc(sizeof(int) * n);
	la = palloc0(sizeof(bool) * n);
	pa = palloc0(sizeof(bool) * n);
	for (int i = 0; i < n; i++)
	{
		if (leases[i]->kind == RP_LEASE_PERMIT)
		{
			pidx[np] = i;
			permits[np++] = leases[i];
		}
		else
		{
			lidx[nl] = i;
			locks[nl++] = leases[i];
		}
	}
	released = rp_release_kind(locks, nl, &rp_script_lock_release, quiet,
							   deadline, la);
	released += rp_release_kind(permits, np, &rp_script_semaphore_release, quiet,
								deadline, pa);
	if (answered)
	{
		for (int i = 0; i < nl; i++)
			answered[lidx[i]] = la[i];
		for (int i = 0; i < np; i++)
			answered[pidx[i]] = pa[i];
	}
	return released;
}

/* ------------------------------------------------------------------------
 * Transaction, subtransaction and exit callbacks.
 * ------------------------------------------------------------------------
 */

/* Which registry entries rp_release_where takes. */
typedef enum RpTake
{
	RP_TAKE_ALL,				/* rp_release_all() */
	RP_TAKE_SESSION,			/* DISCARD ALL: the session-scoped ones */
	RP_TAKE_XACT				/* transaction end: xact ones (of one subxact) */
} RpTake;

/*
 * Take the registry's entries of one sort out (RP_TAKE_XACT: of subid only,
 * unless InvalidSubTransactionId), release them and forget them.  quiet: the
 * cleanup face, never throws; otherwise a failure raises and leaves the
 * registry as it was.  Returns how many Redis still held.
 */
static int
rp_release_where(RpTake which, SubTransactionId subid, bool quiet)
{
	HASH_SEQ_STATUS seq;
	RpLease    *l;
	RpLease   **take;
	int			n = 0;
	int			released;

	if (rp_held == NULL || hash_get_num_entries(rp_held) == 0 ||
		(which == RP_TAKE_XACT && rp_nxact == 0))
		return 0;
	take = palloc(sizeof(RpLease *) * hash_get_num_entries(rp_held));
	hash_seq_init(&seq, rp_held);
	while ((l = hash_seq_search(&seq)) != NULL)
		if (which == RP_TAKE_ALL ||
			(which == RP_TAKE_SESSION && !l->xact) ||
			(which == RP_TAKE_XACT && l->xact &&
			 (subid == InvalidSubTransactionId || l->subid == subid)))
			take[n++] = l;
	released = rp_release_leases(take, n, quiet, NULL);
	for (int i = 0; i < n; i++)
		rp_registry_remove(take[i]);
	pfree(take);
	return released;
}

/*
 * PRE_COMMIT: with verify set, every such lease must still be ours in Redis,
 * checked in one round trip (per hash slot); otherwise the commit is aborted
 * with RP002.  A lost lease replaced by re-acquiring its name fails at once.
 */
static void
rp_verify_at_commit(void)
{
	HASH_SEQ_STATUS seq;
	RpLease    *l;
	RpLease   **check;
	RpArg	   *keys;
	RpArg	   *argv;
	int		   *order;
	int		   *start;
	int			n = 0;
	int			ngroups;

	if (rp_lost_name != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_RP_LEASE_LOST),
				 errmsg("lease on \"%s\" was lost before commit", rp_lost_name),
				 errdetail("The lease with fence token " INT64_FORMAT
						   " expired and its name was acquired again in this transaction.",
						   rp_lost_fence),
				 errhint("The transaction was rolled back.  Take a longer lease or extend it while working.")));
	if (rp_nverify == 0)
		return;
	check = palloc(sizeof(RpLease *) * rp_nverify);
	keys = palloc(sizeof(RpArg) * rp_nverify);
	argv = palloc(sizeof(RpArg) * rp_nverify);
	order = palloc(sizeof(int) * rp_nverify);
	start = palloc(sizeof(int) * (rp_nverify + 1));
	hash_seq_init(&seq, rp_held);
	while ((l = hash_seq_search(&seq)) != NULL)
		if (l->verify)
		{
			check[n] = l;
			keys[n].data = l->key;
			keys[n].len = l->keylen;
			argv[n] = rp_arg_str(l->token);
			n++;
		}
	ngroups = rp_slot_groups(n, keys, order, start);
	for (int g = 0; g < ngroups; g++)
	{
		int			gn = start[g + 1] - start[g];
		RpArg	   *gkeys = palloc(sizeof(RpArg) * gn);
		RpArg	   *gargv = palloc(sizeof(RpArg) * gn);
		int64		bad;

		for (int k = 0; k < gn; k++)
		{
			gkeys[k] = keys[order[start[g] + k]];
			gargv[k] = argv[order[start[g] + k]];
		}
		bad = rp_reply_int(rp_lock_eval(&rp_script_lock_verify, gn, gkeys, gn, gargv),
						   "lock_verify");
		if (bad > 0 && bad <= gn)
		{
			l = check[order[start[g] + (int) bad - 1]];
			ereport(ERROR,
					(errcode(ERRCODE_RP_LEASE_LOST),
					 errmsg("lease on \"%s\" was lost before commit", l->name),
					 errdetail("The lease with fence token " INT64_FORMAT
							   " is no longer held in Redis: it expired or was taken over.",
							   l->fence),
					 errhint("The transaction was rolled back.  Take a longer lease or extend it while working.")));
		}
	}
}

/*
 * Release unsettled acquires (see rp_unsettled) at a transaction end, once
 * Redis has answered a lock call since they were recorded.  Never throws.
 */
static void
rp_unsettled_release(void)
{
	RpLease   **live;
	bool	   *answered;
	int			n = 0;
	dlist_mutable_iter it;
	TimestampTz now = GetCurrentTimestamp();

	if (rp_nunsettled == 0 || !rp_redis_answered)
		return;
	live = palloc(sizeof(RpLease *) * rp_nunsettled);
	answered = palloc0(sizeof(bool) * rp_nunsettled);
	dlist_foreach_modify(it, &rp_unsettled)
	{
		RpLease    *u = dlist_container(RpLease, node, it.cur);

		if (u->expires_at > now)
			live[n++] = u;
		else
			rp_unsettled_forget(u);
	}
	(void) rp_release_leases(live, n, true, answered);
	for (int i = 0; i < n; i++)
		if (answered[i] && ++live[i]->tries >= 2)
			rp_unsettled_forget(live[i]);
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
			 * verify_at_commit could not run there.  Refuse, as postgres_fdw
			 * does for its remote transactions.
			 */
			if (rp_nxact > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that holds a lease from rp_acquire_xact"),
						 errhint("Release the lease first, or take it with rp_acquire.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			if (rp_lost_name != NULL)
			{
				pfree(rp_lost_name);
				rp_lost_name = NULL;
			}
			/* As pgfdw_abort_cleanup: no more work when errors recurse. */
			if (in_error_recursion_trouble())
				break;
			(void) rp_release_where(RP_TAKE_XACT, InvalidSubTransactionId, true);
			rp_unsettled_release();
			break;
		default:
			break;
	}
}

static void
rp_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	HASH_SEQ_STATUS seq;
	RpLease    *l;

	if (rp_nxact == 0)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		if (!in_error_recursion_trouble())
			(void) rp_release_where(RP_TAKE_XACT, mySubid, true);
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		hash_seq_init(&seq, rp_held);
		while ((l = hash_seq_search(&seq)) != NULL)
			if (l->xact && l->subid == mySubid)
				l->subid = parentSubid;
	}
}

/*
 * Backend exit: release everything held and everything unsettled, through
 * the cleanup face, which never throws (so nothing here can turn into a
 * second FATAL).  What Redis did not answer in time goes to the background
 * worker, which releases it once Redis answers again.
 */
static void
rp_exit_callback(int code, Datum arg)
{
	HASH_SEQ_STATUS seq;
	RpLease    *l;
	RpLease   **all;
	bool	   *answered;
	int			n = 0;
	long		max = rp_nunsettled;
	dlist_iter	it;
	TimestampTz now = GetCurrentTimestamp();

	if (rp_held != NULL)
		max += hash_get_num_entries(rp_held);
	if (max > 0)
	{
		/* One round trip (per slot) for the held and the unsettled alike. */
		all = palloc(sizeof(RpLease *) * max);
		answered = palloc0(sizeof(bool) * max);
		if (rp_held != NULL)
		{
			hash_seq_init(&seq, rp_held);
			while ((l = hash_seq_search(&seq)) != NULL)
				if (l->expires_at > now)
					all[n++] = l;
		}
		dlist_foreach(it, &rp_unsettled)
		{
			l = dlist_container(RpLease, node, it.cur);
			if (l->expires_at > now)
				all[n++] = l;
		}
		(void) rp_release_leases(all, n, true, answered);
		for (int i = 0; i < n; i++)
			if (!answered[i])
				rp_orphans_handoff(all[i]->key, all[i]->keylen, all[i]->token,
								   all[i]->expires_at);
	}
	rp_conn_reset();
}

/*
 * Transaction callbacks run last-registered-first.  postgres_fdw registers
 * its own (which commits the remote transactions at PRE_COMMIT) on its
 * first use in the session, which may come after ours: then a remote write
 * would commit before verify_at_commit could refuse the commit.  While a
 * verify lease exists, every statement's end moves our callback to the
 * front (unregister, register again: it is a list of a few entries).
 */
static void
rp_callback_to_front(void)
{
	if (!rp_callbacks_registered || rp_nverify == 0)
		return;
	UnregisterXactCallback(rp_xact_callback, NULL);
	RegisterXactCallback(rp_xact_callback, NULL);
}

static void
rp_executor_end(QueryDesc *queryDesc)
{
	if (rp_prev_executor_end)
		rp_prev_executor_end(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
	rp_callback_to_front();
}

static void
rp_process_utility(PlannedStmt *pstmt, const char *queryString,
				   bool readOnlyTree, ProcessUtilityContext context,
				   ParamListInfo params, QueryEnvironment *queryEnv,
				   DestReceiver *dest, QueryCompletion *qc)
{
	/* Before a COMMIT too: it runs the callbacks itself. */
	rp_callback_to_front();
	if (rp_prev_process_utility)
		rp_prev_process_utility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
	rp_callback_to_front();
}

static void
rp_register_callbacks(void)
{
	rp_registry_setup();
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
	rp_prev_executor_end = ExecutorEnd_hook;
	ExecutorEnd_hook = rp_executor_end;
	rp_prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = rp_process_utility;
	rp_pool_discard_all_hook = rp_lock_release_session_leases;
}

/* ------------------------------------------------------------------------
 * Acquiring.
 * ------------------------------------------------------------------------
 */

static void
rp_new_token(char *out)
{
	uint8		buf[RP_TOKEN_BYTES];
	static const char hex[] = "0123456789abcdef";

	if (!rp_token_random(buf, sizeof(buf)))
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

/*
 * One attempt, recorded as unsettled before it is sent.  Returns the fence
 * with *u still unsettled (the caller settles it), or 0 when the lock is
 * held by someone else (u forgotten).  On failure u is forgotten only when
 * the command cannot have run (never sent, or refused by Redis); otherwise
 * it stays for the transaction end or the backend exit to release.
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
	*u = rp_unsettled_add(name, namelen, RP_LEASE_LOCK, keys[0], token,
						  TimestampTzPlusMilliseconds(sent, ttl_ms));

	/*
	 * Until Redis answers, it may be hung: a cancel or timeout from here on
	 * leaves the flag down, so the abort does not wait on Redis to release.
	 */
	rp_redis_answered = false;
	if (!rp_eval_try(&rp_script_lock_acquire, 2, keys, 3, argv,
					 rp_command_timeout_ms, &r, &st))
	{
		if (!st.sent || st.answered)
			rp_unsettled_forget(*u);
		rp_redis_answered = st.answered;
		*u = NULL;
		rp_status_raise(&st);
	}
	rp_redis_answered = true;
	if (rp_reply_is_nil(r))
	{
		rp_unsettled_forget(*u);
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
	(void) rp_release_leases(u, n, true, answered);
	for (int i = 0; i < n; i++)
		if (answered[i])
			rp_unsettled_forget(u[i]);
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

static Datum
rp_make_lease(FunctionCallInfo fcinfo, const RpLease *l, bool fence_known)
{
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, !fence_known, false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = PointerGetDatum(cstring_to_text_with_len(l->name, l->namelen));
	values[1] = CStringGetTextDatum(l->token);
	values[2] = Int64GetDatum(l->fence);
	values[3] = TimestampTzGetDatum(l->expires_at);
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
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
 * A name granted anew while the registry still remembers a lease on it: that
 * lease was lost.  Note it for verify_at_commit, then forget it.
 */
static void
rp_registry_forget_lost(RpLease *held)
{
	if (held == NULL)
		return;
	if (held->verify && rp_lost_name == NULL)
	{
		rp_lost_name = MemoryContextStrdup(TopMemoryContext, held->name);
		rp_lost_fence = held->fence;
	}
	rp_registry_remove(held);
}

/*
 * Shared body of rp_acquire and rp_acquire_xact.
 *
 * A name the session already holds live is returned as it is: same token,
 * fence and deadline, no round trip, like pg_advisory_lock re-entering a
 * lock the session holds (docs/lock.md).  So a session never waits on
 * itself, and SELECT (rp_acquire(...)).*, which PostgreSQL evaluates once
 * per column, yields one whole lease.
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
		rp_pool_check_session_acquire(name, namelen);	/* pool.c */
	rp_retry_start(&retry, start, wait_ms, 250);

	rp_register_callbacks();
	held = rp_registry_find(name, namelen);
	if (held != NULL && held->expires_at > start)
	{
		if (xact && verify && held->xact && !held->verify)
		{
			held->verify = true;
			rp_nverify++;
		}
		PG_RETURN_DATUM(rp_make_lease(fcinfo, held, true));
	}

	rp_new_token(token);
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
			 * session still remembers for it was lost.  A lost lease that
			 * had to be verified at commit leaves its obligation behind.
			 */
			held = rp_registry_find(name, namelen);
			rp_registry_forget_lost(held);
			l = rp_registry_add(u, fence, xact, verify);
			MemoryContextDelete(attempt_cxt);
			PG_RETURN_DATUM(rp_make_lease(fcinfo, l, true));
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
 * is not one we could have issued cannot match: token[0] is then '\0'.
 */
static RpLease *
rp_lease_of(text *name, text *token, bool *mine)
{
	const char *n = VARDATA_ANY(name);
	size_t		nlen = VARSIZE_ANY_EXHDR(name);
	char	   *tok = text_to_cstring(token);
	RpLeaseKind kind = rp_token_kind(tok);
	RpLease    *l = rp_registry_find_kind(n, nlen, kind);
	RpArg		key;

	*mine = (l != NULL && strcmp(l->token, tok) == 0);
	if (*mine)
		return l;
	l = palloc0(sizeof(RpLease));
	l->name = (char *) n;
	l->namelen = nlen;
	l->kind = kind;
	key = rp_key(n, nlen, RP_KIND_SUFFIX(kind));
	l->key = (char *) key.data;
	l->keylen = key.len;
	if (strlen(tok) == RP_TOKEN_LEN)
		memcpy(l->token, tok, RP_TOKEN_LEN + 1);
	return l;
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
	released = rp_release_leases(&l, 1, false, NULL) == 1;
	if (mine)
		rp_registry_remove(l);
	PG_RETURN_BOOL(released);
}

RP_TRACKED_FUNCTION(rp_release_name, RP_PRIM_RELEASE, RP_OUT_FALSE_REFUSED)
{
	text	   *name_t = rp_arg_text(fcinfo, 0, "lock name");
	const char *name = VARDATA_ANY(name_t);
	size_t		namelen = VARSIZE_ANY_EXHDR(name_t);
	RpLease    *mine = rp_registry_find(name, namelen);
	bool		released;

	/* A semaphore permit is a lease too (docs/semaphore.md). */
	if (mine == NULL)
		mine = rp_registry_find_kind(name, namelen, RP_LEASE_PERMIT);
	if (mine == NULL)
	{
		rp_pool_warn_release_not_held(name, namelen);	/* pool.c */
		PG_RETURN_BOOL(false);
	}
	released = rp_release_leases(&mine, 1, false, NULL) == 1;
	rp_registry_remove(mine);
	PG_RETURN_BOOL(released);
}

RP_TRACKED_FUNCTION(rp_release_all, RP_PRIM_RELEASE_ALL, RP_OUT_PLAIN)
{
	PG_RETURN_INT32(rp_release_where(RP_TAKE_ALL, InvalidSubTransactionId, false));
}

/*
 * Compare-and-extend l (the session's entry when mine, else a transient one)
 * by ttl_ms with its kind's script; the new deadline is counted from when it
 * was asked, like rp_acquire's.  false when Redis no longer holds it with
 * l's token: the session's entry is then forgotten.  With counter, a lock is
 * extended by lock_extend_token, which also reads the name's fence counter
 * into *counter (see that script); a permit leaves *counter at 0.
 */
static bool
rp_extend_lease(RpLease *l, bool mine, int64 ttl_ms, int64 *counter)
{
	RpArg		keys[2];
	RpArg		argv[2];
	TimestampTz sent;
	bool		ok;

	keys[0].data = l->key;
	keys[0].len = l->keylen;
	argv[0] = rp_arg_str(l->token);
	argv[1] = rp_arg_int(ttl_ms);
	sent = GetCurrentTimestamp();
	if (l->kind == RP_LEASE_PERMIT)
		ok = rp_reply_int(rp_lock_eval(&rp_script_semaphore_extend, 1, keys, 2, argv),
						  "semaphore_extend") == 1;
	else if (counter == NULL)
		ok = rp_reply_int(rp_lock_eval(&rp_script_lock_extend, 1, keys, 2, argv),
						  "lock_extend") == 1;
	else
	{
		RpReply    *r;

		/* The same hash tag as the lock key, so the same slot. */
		keys[1] = rp_key(l->name, l->namelen, "fence");
		r = rp_lock_eval(&rp_script_lock_extend_token, 2, keys, 2, argv);
		ok = !rp_reply_is_nil(r);
		if (ok && r->type != RP_REPLY_STRING)
			elog(ERROR, "unexpected Redis reply for lock_extend_token: expected a decimal string");
		if (ok)
			*counter = pg_strtoint64(r->str);
	}
	if (!ok)
	{
		/* Not ours any more: stop believing it. */
		if (mine)
			rp_registry_remove(l);
		return false;
	}
	l->expires_at = TimestampTzPlusMilliseconds(sent, ttl_ms);
	if (mine)
		rp_locks_publish(l, l->name, l->namelen, l->fence, l->expires_at, l->xact);
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
	PG_RETURN_DATUM(rp_make_lease(fcinfo, l, true));
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

static int
rp_lease_seq_cmp(const void *a, const void *b)
{
	uint64		x = (*(RpLease *const *) a)->seq;
	uint64		y = (*(RpLease *const *) b)->seq;

	return (x > y) - (x < y);
}

/* rp_leases(): the live leases this session believes it holds, oldest first. */
PG_FUNCTION_INFO_V1(rp_leases);
Datum
rp_leases(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS seq;
	RpLease    *l;
	RpLease   **all;
	int			n = 0;

	InitMaterializedSRF(fcinfo, 0);
	if (rp_held == NULL)
		return (Datum) 0;
	rp_registry_sweep();
	all = palloc(sizeof(RpLease *) * Max(hash_get_num_entries(rp_held), 1));
	hash_seq_init(&seq, rp_held);
	while ((l = hash_seq_search(&seq)) != NULL)
		all[n++] = l;
	qsort(all, n, sizeof(RpLease *), rp_lease_seq_cmp);
	for (int i = 0; i < n; i++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		l = all[i];
		values[0] = PointerGetDatum(cstring_to_text_with_len(l->name, l->namelen));
		values[1] = CStringGetTextDatum(l->token);
		values[2] = Int64GetDatum(l->fence);
		values[3] = TimestampTzGetDatum(l->expires_at);
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
 * Also here: what the pool module (pool.c) needs from the registry.
 * ------------------------------------------------------------------------
 */

/* Name and token arguments: 22004 for NULL, 22023 for empty. */
static RpLease *
rp_token_args(FunctionCallInfo fcinfo, bool *mine)
{
	text	   *name = rp_arg_text(fcinfo, 0, "lock name");
	text	   *token = rp_arg_text(fcinfo, 1, "lease token");

	rp_register_callbacks();
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
	released = rp_release_leases(&l, 1, false, NULL) == 1;
	if (mine)
		rp_registry_remove(l);
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
	PG_RETURN_DATUM(rp_make_lease(fcinfo, l, mine || l->kind != RP_LEASE_PERMIT));
}

/*
 * Release every session-scoped lease this backend holds, for DISCARD ALL
 * (pool.c).  Never throws: a lease that cannot be released expires by its
 * TTL.  Returns how many Redis still held.
 */
int
rp_lock_release_session_leases(void)
{
	return rp_release_where(RP_TAKE_SESSION, InvalidSubTransactionId, true);
}

/* ------------------------------------------------------------------------
 * Leases of other kinds: semaphore permits (src/prim/semaphore.c).
 *
 * A permit is a registry entry like a lock's, so rp_release, rp_extend,
 * rp_release_all, rp_leases, transaction and exit release and the
 * lock-bound fence guard treat it as a lease.  What differs per kind is the
 * key (":sem", a sorted set, instead of ":lock") and the release and extend
 * scripts.  The kind is also written into the token itself (a permit's
 * begins with 's', which no hex lock token can), so rp_release(lease) and
 * rp_extend work for a permit from any session.  An acquire is recorded
 * (rp_lease_pending) before it is sent, like a lock's.
 * ------------------------------------------------------------------------
 */

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

void *
rp_lease_pending(const char *name, size_t namelen, const char *token,
				 TimestampTz expires_at, RpLeaseKind kind)
{
	rp_register_callbacks();
	/* Until Redis answers it may be hung (see rp_try_acquire). */
	rp_redis_answered = false;
	return rp_unsettled_add(name, namelen, kind,
							rp_key(name, namelen, RP_KIND_SUFFIX(kind)),
							token, expires_at);
}

void
rp_lease_settle(void *pending, int64 fence, bool xact)
{
	RpLease    *u = pending;
	RpLease    *stale;

	rp_redis_answered = true;
	if (fence <= 0)
	{
		rp_unsettled_forget(u);
		return;
	}
	/* One lease of a kind per name: one that expired is forgotten. */
	stale = rp_registry_find_kind(u->name, u->namelen, u->kind);
	if (stale != NULL)
		rp_registry_remove(stale);
	(void) rp_registry_add(u, fence, xact, false);
}

void
rp_lease_remember(const char *name, size_t namelen, const char *token,
				  int64 fence, TimestampTz expires_at, bool xact,
				  RpLeaseKind kind)
{
	rp_lease_settle(rp_lease_pending(name, namelen, token, expires_at, kind),
					fence, xact);
}

void
rp_lease_orphan(const char *name, size_t namelen, const char *token,
				TimestampTz expires_at, RpLeaseKind kind)
{
	(void) rp_lease_pending(name, namelen, token, expires_at, kind);
}

Datum
rp_lease_datum(FunctionCallInfo fcinfo, const char *name, size_t namelen,
			   const char *token, int64 fence, TimestampTz expires_at)
{
	RpLease		l;

	memset(&l, 0, sizeof(l));
	l.name = (char *) name;
	l.namelen = namelen;
	strlcpy(l.token, token, sizeof(l.token));
	l.fence = fence;
	l.expires_at = expires_at;
	return rp_make_lease(fcinfo, &l, true);
}

/* ------------------------------------------------------------------------
 * Many locks in one round trip: rp_acquire_all[_xact] (issue 17).
 *
 * All or nothing, in one script (lock_acquire_all.lua): each name gets its
 * own lease, token and fence, or none does.  Waiting repeats the whole
 * attempt, so nothing is held between attempts and two callers asking for
 * the same names in different orders cannot deadlock.  Every name is
 * recorded as unsettled before the script is sent, as rp_acquire does.
 * Names the session already holds live are taken as they are (no round
 * trip for them), so a session never waits on itself.  In Redis Cluster a
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
		values[3] = TimestampTzGetDatum(leases[i]->expires_at);
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
		u[i] = rp_unsettled_add(name[i], len[i], RP_LEASE_LOCK, keys[2 * i],
								token[i], TimestampTzPlusMilliseconds(sent, ttl_ms));

	rp_redis_answered = false;
	if (!rp_eval_try(&rp_script_lock_acquire_all, 2 * n, keys, 2 + n, argv,
					 rp_command_timeout_ms, &r, &st))
	{
		if (!st.sent || st.answered)
			for (int i = 0; i < n; i++)
				rp_unsettled_forget(u[i]);
		rp_redis_answered = st.answered;
		rp_status_raise(&st);
	}
	rp_redis_answered = true;
	if (rp_reply_is_nil(r))
	{
		for (int i = 0; i < n; i++)
			rp_unsettled_forget(u[i]);
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
			rp_pool_check_session_acquire(name[i], len[i]);	/* pool.c */
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

	rp_register_callbacks();
	out = palloc0(sizeof(RpLease *) * n);
	todo = palloc(sizeof(int) * n);
	tname = palloc(sizeof(char *) * n);
	tlen = palloc(sizeof(size_t) * n);
	token = palloc(sizeof(*token) * n);
	for (int i = 0; i < n; i++)
		rp_new_token(token[i]);

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
		 * A name the session holds live is taken as it is, as rp_acquire
		 * does.  Decided anew at each attempt: a lease that expired while
		 * the call waited for the others is no longer the session's, and
		 * is asked for with them.
		 */
		ntodo = 0;
		for (int i = 0; i < n; i++)
		{
			RpLease    *held = rp_registry_find(name[i], len[i]);

			if (held != NULL && held->expires_at > now)
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
			for (int j = 0; j < ntodo; j++)
			{
				/* Granted anew: a lease the session remembers on it was lost. */
				RpLease    *held = rp_registry_find(tname[j], tlen[j]);

				rp_registry_forget_lost(held);
				out[todo[j]] = rp_lease_copy(rp_registry_add(u[j], fences[j], xact, false));
			}
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
