/*-------------------------------------------------------------------------
 *
 * lease.c
 *		The session's leases, of every kind: the registry, the unsettled
 *		acquires, releasing many leases in one round trip per hash slot, the
 *		transaction, subtransaction and backend-exit callbacks with
 *		verify_at_commit's check, and DISCARD ALL.
 *
 * What it guarantees: a lease Redis may grant is recorded (as unsettled)
 * *before* its acquire is sent, and forgotten only when the answer is
 * definite; every lease of the session is released by compare-and-delete
 * under the key it was taken with, at top-level transaction end (xact
 * leases), subtransaction abort (those it took), DISCARD ALL (session
 * leases) and backend exit (all); a verify_at_commit lease is checked in
 * Redis at PRE_COMMIT, ahead of postgres_fdw's callback.
 *
 * Before editing, know this: the registry is what the session *believes*;
 * Redis is the truth.  Whatever is left when the transaction or the backend
 * ends is released through the cleanup face (rp_eval_quiet), which never
 * throws; what even that cannot release at backend exit is handed to the
 * background worker (orphans.c).  Only XACT_EVENT_PRE_COMMIT (RP002, a lost
 * lease) and PRE_PREPARE (0A000: an xact lease, or a verify_at_commit check
 * owed, which COMMIT PREPARED would not run) may throw, on purpose.  What a kind of lease is in
 * Redis comes from its primitive as data (rp_lease_define_kind): nothing
 * here calls up into src/prim/.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "conn.h"
#include "errcodes.h"
#include "lease.h"
#include "orphans.h"
#include "stats.h"

/* How long backend exit and transaction end may spend releasing. */
#define RP_CLEANUP_TIMEOUT_MS	500

/*
 * What a registry entry is a lease of (RpLeaseKind, token.h): release,
 * extend and verify dispatch on it, through the table its primitives fill
 * at _PG_init.  A lock's key is <prefix>{name}:lock; a semaphore permit's
 * is a member of <prefix>{name}:sem.
 */
static const RpLeaseKindDef *rp_kinds[RP_LEASE_PERMIT + 1];

#define RP_KIND_SUFFIX(kind)	(rp_lease_kind(kind)->suffix)

/*
 * The granted leases of one name and kind, oldest first (RpLease.node): a
 * lock has at most one per key (two only when the name was taken again
 * after key_prefix changed), a semaphore as many permits as the session took,
 * each in a transaction of its own (re-entry is per transaction, so one
 * session behind a pool may hold several requests' permits of one name).
 */
typedef struct RpHeldName
{
	RpNameKey	hkey;			/* must be first; data: its own copy */
	dlist_head	leases;
} RpHeldName;

static MemoryContext rp_lease_cxt = NULL;	/* every entry and its strings */
static HTAB *rp_held = NULL;	/* (name, kind) -> RpHeldName */
/* Every granted lease, oldest first (RpLease.all), and how many. */
static dlist_head rp_granted = DLIST_STATIC_INIT(rp_granted);
static long rp_ngranted = 0;
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

/* rp_orphans_displaced() when the unsettled list was last offered. */
static uint32 rp_handed_gen = 0;
static uint64 rp_unsettled_uid = 0;	/* the last uid given (rp_unsettled_push) */
static bool rp_redis_answered = true;	/* no lock call has timed out since */

/*
 * An acquire's round trip is under way (rp_lease_pending until its answer
 * or failure is known, or its transaction ends): a reply owed, read on its
 * way, is not its answer, and does not say that Redis answers.
 */
static bool rp_acquire_waiting = false;

/*
 * The verify_at_commit leases that were lost and replaced by re-acquiring
 * their names: the transaction still owes their checks, which can only
 * fail.  Each is owed by the subtransaction that took the lost lease
 * (InvalidSubTransactionId for a session lease: the whole transaction), so
 * a ROLLBACK TO SAVEPOINT past it drops it with the lease, and a RELEASE
 * hands it to the parent.  In TopMemoryContext; emptied at every top-level
 * transaction end.
 */
typedef struct RpLostCheck
{
	char	   *name;
	int64		fence;
	SubTransactionId subid;
} RpLostCheck;

static RpLostCheck *rp_lost = NULL;
static int	rp_nlost = 0;
static int	rp_maxlost = 0;

static bool rp_callbacks_registered = false;

/*
 * The backend's exit released (or handed to the background worker) every
 * lease: the abort of an open transaction, which PostgreSQL runs after the
 * exit callback, must not release them again and wait a second deadline.
 */
static bool rp_exited = false;

/*
 * Which top-level transaction this is, counted from the registry's setup:
 * bumped at every top-level transaction end (commit, abort, prepare), so it
 * tells apart every transaction, read-only and implicit ones included.  A
 * lease remembers the value it was taken in (RpLease.xact_gen).
 */
static uint64 rp_xact_gen = 1;

/*
 * redis_primitives.release_at_commit: 'wait' (the default) reads the reply
 * of the compare-and-delete that ends a transaction's leases before COMMIT
 * returns; 'send' only sends it, and the next call on the connection (or
 * backend exit) reads it (rp_release_settle).  Cluster mode always waits.
 */
typedef enum RpReleaseAtCommit
{
	RP_RELEASE_WAIT,
	RP_RELEASE_SEND
} RpReleaseAtCommit;

static const struct config_enum_entry rp_release_at_commit_options[] = {
	{"wait", RP_RELEASE_WAIT, false},
	{"send", RP_RELEASE_SEND, false},
	{NULL, 0, false}
};
static int	rp_release_at_commit = RP_RELEASE_WAIT;

void
rp_lease_init(void)
{
	DefineCustomEnumVariable("redis_primitives.release_at_commit",
							 "Whether COMMIT and ROLLBACK wait for Redis to answer the release of the transaction's leases.",
							 "wait: the release is answered before the transaction end returns. "
							 "send: it is sent, and its answer read by the session's next Redis call "
							 "or at backend exit; a release that fails or is lost is retried as any "
							 "unsettled one.",
							 &rp_release_at_commit, RP_RELEASE_WAIT,
							 rp_release_at_commit_options, PGC_SUSET, 0,
							 NULL, NULL, NULL);
}

/* ------------------------------------------------------------------------
 * The kinds of lease.
 * ------------------------------------------------------------------------
 */

void
rp_lease_define_kind(RpLeaseKind kind, const RpLeaseKindDef *def)
{
	rp_kinds[kind] = def;
}

const RpLeaseKindDef *
rp_lease_kind(RpLeaseKind kind)
{
	if (rp_kinds[kind] == NULL)
		elog(ERROR, "lease kind %d is not defined", (int) kind);
	return rp_kinds[kind];
}

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
	ctl.entrysize = sizeof(RpHeldName);
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

/*
 * What another backend of this server told of l (rp_locks, stats.h): a
 * release Redis answered "released" ends it (nothing left to release); a
 * release asked for, or answered "not held", makes it doubted (not
 * believed, still released at its end); an extend by token's deadline,
 * the earliest told since the session's own last extend, goes to told
 * (belief only).  Every lookup goes through here, so re-entry, the guards,
 * the commit-time check, permits and rp_leases all honour it, with no
 * round trip.
 */
static void
rp_lease_truth(RpLease *l)
{
	TimestampTz d;
	TimestampTz latest;
	uint32		seq;
	bool		told;

	l->told = 0;
	told = rp_locks_override_of(l, &d, &seq, &latest);
	if (told && d == RP_LOCKS_REVOKED)
	{
		l->expires_at = d;		/* Redis answered: nothing left to release */
		return;
	}

	/*
	 * An extend by token asked for a later deadline and may have run: Redis
	 * may hold the lease until then, so the duty to release lasts as long;
	 * belief still ends at the owner's own deadline.
	 */
	if (latest > l->expires_at)
	{
		if (l->own == 0)
			l->own = l->expires_at;
		l->expires_at = latest;
	}
	if (!told)
		return;
	if (d == RP_LOCKS_DOUBTED)
		rp_lease_doubt(l);
	else
		l->told = d;			/* may never have run: belief only */
}

TimestampTz
rp_lease_own_until(const RpLease *l)
{
	/* The earlier: a release answered (expires_at long past) ends both. */
	if (l->own != 0 && l->own < l->expires_at)
		return l->own;
	return l->expires_at;
}

/*
 * Believed until: its own deadline, or an earlier one told or asked for by
 * its own extend not answered, or long past once a release of it was asked
 * for with an outcome not known (doubted).  Belief
 * (re-entry, the guards, rp_leases) goes by this; the duty to release goes
 * by expires_at alone, so that a telling whose call never reached Redis
 * costs belief, never a lease left in Redis.
 */
TimestampTz
rp_lease_believed_until(const RpLease *l)
{
	TimestampTz until = rp_lease_own_until(l);

	if (l->doubted)
		return RP_LOCKS_REVOKED;
	if (l->told != 0 && l->told < until)
		until = l->told;
	if (l->unanswered_min != 0 && l->unanswered_min < until)
		until = l->unanswered_min;
	return until;
}

void
rp_lease_doubt(RpLease *l)
{
	l->doubted = true;
}

/* The session's leases of this kind on name (NULL: none), oldest first. */
static RpHeldName *
rp_held_name(const char *name, size_t namelen, RpLeaseKind kind)
{
	RpNameKey	k = {name, namelen, kind};

	if (rp_held == NULL)
		return NULL;
	return hash_search(rp_held, &k, HASH_FIND, NULL);
}

RpLease *
rp_lease_find(const char *name, size_t namelen, RpLeaseKind kind)
{
	RpHeldName *h = rp_held_name(name, namelen, kind);
	RpLease    *newest = NULL;
	RpLease    *live = NULL;
	TimestampTz now = GetCurrentTimestamp();
	dlist_iter	it;

	if (h == NULL)
		return NULL;
	dlist_foreach(it, &h->leases)
	{
		RpLease    *l = dlist_container(RpLease, node, it.cur);

		rp_lease_truth(l);
		newest = l;
		if (l->expires_at > now)
			live = l;
	}
	return live != NULL ? live : newest;
}

RpLease *
rp_lease_find_token(const char *name, size_t namelen, RpLeaseKind kind,
					const char *token)
{
	RpHeldName *h = rp_held_name(name, namelen, kind);
	dlist_iter	it;

	if (h == NULL)
		return NULL;
	dlist_foreach(it, &h->leases)
	{
		RpLease    *l = dlist_container(RpLease, node, it.cur);

		if (strcmp(l->token, token) == 0)
		{
			rp_lease_truth(l);
			return l;
		}
	}
	return NULL;
}

RpLease *
rp_lease_of_this_xact(const char *name, size_t namelen, RpLeaseKind kind,
					  TimestampTz now)
{
	RpHeldName *h = rp_held_name(name, namelen, kind);
	dlist_iter	it;

	if (h == NULL)
		return NULL;
	dlist_foreach(it, &h->leases)
	{
		RpLease    *l = dlist_container(RpLease, node, it.cur);

		rp_lease_truth(l);
		if (rp_lease_this_xact(l) && rp_lease_believed_until(l) > now)
			return l;
	}
	return NULL;
}

static void rp_registry_forget_lost(RpLease *held);

RpLease *
rp_lease_reenter(const char *name, size_t namelen, RpLeaseKind kind,
				 TimestampTz now, int64 ttl_ms, int margin_ms)
{
	RpLease    *held = rp_lease_of_this_xact(name, namelen, kind, now);

	/*
	 * Hand back only a lease the lock-bound guard would accept: inside its
	 * last margin_ms it is extended by the ttl asked for (same token and
	 * fence); if Redis no longer holds it, it is forgotten here (a lost
	 * verify_at_commit lease leaving its check behind) and the caller takes
	 * a new one as any caller would.  Forgotten here, not at the new grant:
	 * a permit's grant forgets none of the name's live permits, and the
	 * lost one, still the transaction's oldest, would be re-entered, fail
	 * its extend and have another permit taken at every call.
	 */
	if (held == NULL)
		return NULL;
	if (TimestampTzPlusMilliseconds(rp_lease_believed_until(held), -(int64) margin_ms) > now ||
		rp_lease_extend_held(held, ttl_ms, NULL))
		return held;
	rp_registry_forget_lost(held);
	return NULL;
}

static void rp_registry_sweep(void);
static bool rp_lease_has_key(const RpLease *l, const char *key, size_t keylen);

/*
 * The one way into the registry: a granted lease, the unsettled entry u
 * itself, moved from the unsettled list to its name's leases.  For a kind
 * of which a name has one lease at a time, any entry for the name under the
 * same key must be gone already; one under another key (key_prefix changed
 * since it was taken) stays, as live in Redis as this one.
 */
static RpLease *
rp_registry_add(RpLease *u, int64 fence, bool xact, bool verify)
{
	RpLease    *l = u;
	RpHeldName *h;
	bool		found;

	if (rp_ngranted >= rp_sweep_at)
		rp_registry_sweep();
	h = hash_search(rp_held, &u->hkey, HASH_ENTER, &found);
	if (!found)
	{
		/* The key outlives any one of the name's leases: its own copy. */
		h->hkey.data = MemoryContextAlloc(rp_lease_cxt, u->namelen + 1);
		memcpy((char *) h->hkey.data, u->name, u->namelen + 1);
		dlist_init(&h->leases);
	}
#ifdef USE_ASSERT_CHECKING
	if (rp_lease_kind(u->kind)->exclusive)
	{
		dlist_iter	ai;

		dlist_foreach(ai, &h->leases)
			Assert(!rp_lease_has_key(dlist_container(RpLease, node, ai.cur), u->key, u->keylen));
	}
#endif
	dlist_delete(&u->node);
	rp_nunsettled--;
	l->fence = fence;
	l->xact = xact;
	l->verify = xact && verify;
	l->subid = xact ? GetCurrentSubTransactionId() : InvalidSubTransactionId;
	l->seq = ++rp_seq;
	l->xact_gen = rp_xact_gen;
	l->tries = 0;
	dlist_push_tail(&h->leases, &l->node);
	dlist_push_tail(&rp_granted, &l->all);
	rp_ngranted++;
	if (l->xact)
		rp_nxact++;
	if (l->verify)
		rp_nverify++;
	rp_locks_publish(l, l->name, l->namelen, l->fence, l->expires_at, l->xact);
	rp_locks_bind_token(l, l->key, l->keylen, l->token);
	return l;
}

/* The one way out of the registry (l is freed). */
static void
rp_registry_remove(RpLease *l)
{
	RpHeldName *h = hash_search(rp_held, &l->hkey, HASH_FIND, NULL);

	Assert(h != NULL);
	if (l->xact)
		rp_nxact--;
	if (l->verify)
		rp_nverify--;
	rp_locks_unpublish(l);
	dlist_delete(&l->node);
	dlist_delete(&l->all);
	rp_ngranted--;
	if (dlist_is_empty(&h->leases))
	{
		/* The hash key points at its copy: free it once the entry is out. */
		RpNameKey	k = h->hkey;

		hash_search(rp_held, &k, HASH_REMOVE, NULL);
		pfree((char *) k.data);
	}
	rp_lease_free_strings(l);
	pfree(l);
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
	dlist_mutable_iter it;
	TimestampTz now = GetCurrentTimestamp();

	if (rp_held == NULL)
		return;
	dlist_foreach_modify(it, &rp_granted)
	{
		RpLease    *l = dlist_container(RpLease, all, it.cur);

		if (l->expires_at > now || l->verify)
			continue;
		/* An extend by token elsewhere may have moved its deadline. */
		rp_lease_truth(l);
		if (l->expires_at <= now)
			rp_registry_remove(l);
	}
	rp_sweep_at = Max(64, 2 * rp_ngranted);
}

static void rp_unsettled_push(RpLease *u);
static void rp_unsettled_trim(void);

/* Record an acquire about to be sent: unsettled until its answer is known. */
static RpLease *
rp_unsettled_add(const char *name, size_t namelen, RpLeaseKind kind, RpArg key,
				 const char *token, TimestampTz expires_at)
{
	RpLease    *u = MemoryContextAllocZero(rp_lease_cxt, sizeof(RpLease));

	rp_lease_fill(u, name, namelen, kind, key, token, expires_at);
	rp_unsettled_push(u);
	return u;
}

/*
 * Keep at most RP_MAX_UNSETTLED: the oldest go to the background worker.
 * Only at a transaction's end (rp_unsettled_release), never while a call
 * runs: an acquire holds pointers to its own entries (rp_lease_pending)
 * across its round trip, and a reply owed, read on the way, may add more.
 */
static void
rp_unsettled_trim(void)
{
	TimestampTz now = GetCurrentTimestamp();

	while (rp_nunsettled > RP_MAX_UNSETTLED)
	{
		RpLease    *old = dlist_container(RpLease, node,
										  dlist_pop_head_node(&rp_unsettled));

		rp_nunsettled--;

		/*
		 * Handed over before or not, this session lets go of it now: the
		 * worker's copy, if it has one, was backed by this one.
		 */
		if (old->expires_at > now)
			(void) rp_orphans_handoff(old->key, old->keylen, old->token,
									  old->expires_at, false);
		rp_lease_free_strings(old);
		pfree(old);
	}
}

/* An acquire about to be sent, or a release lost (rp_release_settle). */
static void
rp_unsettled_push(RpLease *u)
{
	u->tries = 0;
	u->handed = false;
	u->in_flight = false;
	u->uid = ++rp_unsettled_uid;
	dlist_push_tail(&rp_unsettled, &u->node);
	rp_nunsettled++;
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
	return rp_lease_lookup_ex(name, namelen, false, fence, expires_at);
}

bool
rp_lease_this_xact(const RpLease *l)
{
	return l->xact_gen == rp_xact_gen;
}

/*
 * The lease of name with the latest deadline among those this session holds
 * under the key the name has now; with this_xact, only those the current
 * top-level transaction took; with want_fence, only the one with that fence.
 */
static RpLease *
rp_lease_best(const char *name, size_t namelen, bool this_xact,
			  const int64 *want_fence)
{
	RpLease    *best = NULL;

	for (RpLeaseKind kind = RP_LEASE_LOCK; kind <= RP_LEASE_PERMIT; kind++)
	{
		RpHeldName *h = rp_held_name(name, namelen, kind);
		dlist_iter	it;
		RpArg		key;

		if (h == NULL)
			continue;
		/*
		 * Only a lease under the key the name has now: one taken under
		 * another key_prefix is another resource, its fence from another
		 * counter.
		 */
		key = rp_key(name, namelen, RP_KIND_SUFFIX(kind));
		dlist_foreach(it, &h->leases)
		{
			RpLease    *l = dlist_container(RpLease, node, it.cur);

			if (!rp_lease_has_key(l, key.data, key.len))
				continue;
			rp_lease_truth(l);
			if (this_xact && !rp_lease_this_xact(l))
				continue;
			if (want_fence && l->fence != *want_fence)
				continue;
			if (best == NULL || rp_lease_believed_until(l) > rp_lease_believed_until(best))
				best = l;
		}
	}
	return best;
}

bool
rp_lease_lookup_ex(const char *name, size_t namelen, bool this_xact,
				   int64 *fence, TimestampTz *expires_at)
{
	RpLease    *best = rp_lease_best(name, namelen, this_xact, NULL);

	if (best == NULL)
		return false;
	*fence = best->fence;
	*expires_at = rp_lease_believed_until(best);
	return true;
}

bool
rp_lease_lookup_fence(const char *name, size_t namelen, int64 fence,
					  TimestampTz *expires_at)
{
	RpLease    *l = rp_lease_best(name, namelen, false, &fence);

	if (l == NULL)
		return false;
	*expires_at = rp_lease_believed_until(l);
	return true;
}

/* rp_eval for leases: a lease call answered means Redis answers again. */
RpReply *
rp_lease_eval(const RpScript *script, int nkeys, const RpArg *keys,
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
 * A release sent without waiting (release_at_commit = send): copies of the
 * leases it names, in rp_lease_cxt, until its reply is read.
 */
typedef struct RpSentRelease
{
	int			n;
	RpLease    *leases[FLEXIBLE_ARRAY_MEMBER];
} RpSentRelease;

/*
 * The reply of a release sent at transaction end, read by a later call on
 * the connection (RpSettleFn: runs inside that call's exchange, never
 * throws).  Answered: done, whatever each count says (0: the lease was gone
 * already).  A Redis error or no answer (the connection went first): each
 * lease still live is unsettled, released again at the end of the
 * transaction that read the reply or at backend exit (then, unanswered, by
 * the background worker).  A copy that retries an unsettled entry
 * (retry_of) only tells that entry, if the list still has it, that its
 * release is no longer in flight and whether it was answered: the entry
 * itself stays until rp_unsettled_release forgets it (this frees none).
 */
static void
rp_release_settle(void *arg, RpReply *reply)
{
	RpSentRelease *sent = arg;
	TimestampTz now = GetCurrentTimestamp();
	bool		answered = reply != NULL && reply->type == RP_REPLY_ARRAY;
	bool		refused = reply != NULL && reply->type == RP_REPLY_ERROR;

	/*
	 * An answer says Redis answers again (a session whose acquire was cut
	 * short releases its unsettled leases itself from then on), except one
	 * read on the way of an acquire: it says nothing of the acquire's own,
	 * and if that is cut short the abort must not wait on a Redis that
	 * hangs.
	 */
	if (reply != NULL && !rp_acquire_waiting)
		rp_redis_answered = true;
	for (int i = 0; i < sent->n; i++)
	{
		RpLease    *l = sent->leases[i];

		if (l->retry_of != 0)
		{
			dlist_iter	it;

			dlist_foreach(it, &rp_unsettled)
			{
				RpLease    *u = dlist_container(RpLease, node, it.cur);

				if (u->uid == l->retry_of)
				{
					u->in_flight = false;
					if (answered)
						u->tries++;
					if (refused)
						u->refused = true;
					break;
				}
			}
			rp_lease_free_strings(l);
			pfree(l);
		}
		else if (!answered && l->expires_at > now)
		{
			l->refused = refused;
			rp_unsettled_push(l);	/* released at this call's transaction end */
		}
		else
		{
			rp_lease_free_strings(l);
			pfree(l);
		}
	}
	pfree(sent);
}

/* Send the release of gn leases (one slot) without waiting: see above. */
static bool
rp_release_send(RpLease **leases, int gn, const int *which, const RpScript *script,
				const RpArg *gkeys, const RpArg *gargv, int timeout_ms, RpStatus *st)
{
	RpSentRelease *sent = MemoryContextAlloc(rp_lease_cxt,
											 offsetof(RpSentRelease, leases) +
											 sizeof(RpLease *) * gn);

	sent->n = gn;
	for (int k = 0; k < gn; k++)
	{
		RpLease    *l = leases[which[k]];
		RpArg		key = {l->key, l->keylen};

		sent->leases[k] = MemoryContextAllocZero(rp_lease_cxt, sizeof(RpLease));
		rp_lease_fill(sent->leases[k], l->name, l->namelen, l->kind, key,
					  l->token, l->expires_at);
		sent->leases[k]->retry_of = l->in_flight ? l->uid : 0;
	}
	if (rp_eval_send_quiet(script, gn, gkeys, gn, gargv, timeout_ms,
						   rp_release_settle, sent, st))
		return true;
	/* Not sent (or its fate unknown): the caller hands the leases on. */
	for (int k = 0; k < gn; k++)
	{
		rp_lease_free_strings(sent->leases[k]);
		pfree(sent->leases[k]);
	}
	pfree(sent);
	return false;
}

/*
 * Release n leases of one kind by compare-and-delete under the keys they
 * were taken with.  released[i] is set when Redis still held leases[i] with
 * our token.  quiet: the cleanup face, never ereports, all of it within
 * RP_CLEANUP_TIMEOUT_MS; answered[i] tells which got an answer.  Returns how
 * many were released.
 */
static int
rp_release_kind(RpLease **leases, int n, const RpScript *script, bool quiet,
				bool send, TimestampTz deadline, bool *answered)
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
		RpReply    *r = NULL;

		for (int k = 0; k < gn; k++)
		{
			gkeys[k] = keys[order[start[g] + k]];
			gargv[k] = argv[order[start[g] + k]];
		}
		if (quiet)
		{
			RpStatus	st;
			long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

			if (send)
			{
				/* Sent: settled when its reply is read (rp_release_settle). */
				if (rp_release_send(leases, gn, order + start[g], script, gkeys,
									gargv, (int) Max(left, 1), &st))
				{
					for (int k = 0; k < gn; k++)
						if (answered)
							answered[order[start[g] + k]] = true;
					continue;
				}
			}
			else if (rp_eval_quiet(script, gn, gkeys, gn, gargv,
								   (int) Max(left, 1), &r, &st))
				st.sqlstate = 0;
			if (st.sqlstate != 0)
			{
				ereport(WARNING,
						(errcode(st.sqlstate),
						 errmsg("could not release %d Redis lease(s)", gn),
						 errdetail_internal("%s", rp_status_text(&st)),
						 errhint("They are released once Redis answers again, by the background worker when the library is in shared_preload_libraries; otherwise they expire by their TTL.")));
				continue;
			}
		}
		else
			r = rp_lease_eval(script, gn, gkeys, gn, gargv);
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
rp_release_leases(RpLease **leases, int n, bool quiet, bool send, bool *answered)
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
	released = rp_release_kind(locks, nl, rp_lease_kind(RP_LEASE_LOCK)->release,
							   quiet, send, deadline, la);
	released += rp_release_kind(permits, np, rp_lease_kind(RP_LEASE_PERMIT)->release,
								quiet, send, deadline, pa);
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
 * cleanup face, never throws, and hands what Redis did not answer to the
 * background worker; otherwise a failure raises and leaves the leases in
 * the registry, doubted (rp_lease_doubt).  Returns how many Redis still
 * held.
 */
static int
rp_release_where(RpTake which, SubTransactionId subid, bool quiet)
{
	dlist_iter	it;
	RpLease    *l;
	RpLease   **take;
	int			n = 0;
	int			released;

	if (rp_held == NULL || rp_ngranted == 0 ||
		(which == RP_TAKE_XACT && rp_nxact == 0))
		return 0;
	take = palloc(sizeof(RpLease *) * rp_ngranted);
	dlist_foreach(it, &rp_granted)
	{
		l = dlist_container(RpLease, all, it.cur);
		if (which == RP_TAKE_ALL ||
			(which == RP_TAKE_SESSION && !l->xact) ||
			(which == RP_TAKE_XACT && l->xact &&
			 (subid == InvalidSubTransactionId || l->subid == subid)))
		{
			/* Its deadline, should the release go unanswered: see truth. */
			rp_lease_truth(l);
			take[n++] = l;
		}
	}
	if (quiet && n > 0)
	{
		bool	   *answered = palloc0(sizeof(bool) * n);
		TimestampTz now = GetCurrentTimestamp();

		/*
		 * At the top-level transaction's end, release_at_commit = send sends
		 * the release and leaves its reply to the next call on the
		 * connection (rp_release_settle).
		 */
		bool		send = which == RP_TAKE_XACT &&
			subid == InvalidSubTransactionId &&
			rp_release_at_commit == RP_RELEASE_SEND && rp_conn_can_defer();

		released = rp_release_leases(take, n, true, send, answered);

		/*
		 * What Redis did not answer in time (hung, or the release was lost
		 * on the way) goes to the background worker, as at backend exit:
		 * forgotten here, it would otherwise live out its TTL.
		 */
		for (int i = 0; i < n; i++)
			if (!answered[i] && take[i]->expires_at > now)
				(void) rp_orphans_handoff(take[i]->key, take[i]->keylen,
										  take[i]->token, take[i]->expires_at,
										  false);
		pfree(answered);
	}
	else
	{
		/*
		 * rp_release_all(): should Redis not answer, the leases stay in the
		 * registry (released at their end) but are no longer believed: the
		 * release may have run.
		 */
		for (int i = 0; i < n; i++)
			rp_lease_doubt(take[i]);
		released = rp_release_leases(take, n, quiet, false, NULL);
	}
	for (int i = 0; i < n; i++)
		rp_registry_remove(take[i]);
	pfree(take);
	return released;
}

/*
 * Drop the lost-lease checks owed by subid (all of them with all), keeping
 * the order of the others.
 */
static void
rp_lost_forget(SubTransactionId subid, bool all)
{
	int			kept = 0;

	for (int i = 0; i < rp_nlost; i++)
	{
		if (all || rp_lost[i].subid == subid)
			pfree(rp_lost[i].name);
		else
			rp_lost[kept++] = rp_lost[i];
	}
	rp_nlost = kept;
}

/*
 * PRE_COMMIT: with verify set, every such lease must still be ours in Redis,
 * checked in one round trip (per hash slot, by its kind's verify script:
 * only a lock is ever verified); otherwise the commit is aborted with RP002.
 * A lost lease replaced by re-acquiring its name fails at once.
 */
static void
rp_verify_at_commit(void)
{
	dlist_iter	it;
	RpLease    *l;
	RpLease   **check;
	RpArg	   *keys;
	RpArg	   *argv;
	int		   *order;
	int		   *start;
	const RpScript *script;
	int			n;
	int			ngroups;

	if (rp_nlost > 0)
		ereport(ERROR,
				(errcode(ERRCODE_RP_LEASE_LOST),
				 errmsg("lease on \"%s\" was lost before commit", rp_lost[0].name),
				 errdetail("The lease with fence token " INT64_FORMAT
						   " expired and its name was acquired again in this transaction.",
						   rp_lost[0].fence),
				 errhint("The transaction was rolled back.  Take a longer lease or extend it while working.")));
	if (rp_nverify == 0)
		return;
	check = palloc(sizeof(RpLease *) * rp_nverify);
	keys = palloc(sizeof(RpArg) * rp_nverify);
	argv = palloc(sizeof(RpArg) * rp_nverify);
	order = palloc(sizeof(int) * rp_nverify);
	start = palloc(sizeof(int) * (rp_nverify + 1));
	for (RpLeaseKind kind = RP_LEASE_LOCK; kind <= RP_LEASE_PERMIT; kind++)
	{
		n = 0;
		dlist_foreach(it, &rp_granted)
		{
			l = dlist_container(RpLease, all, it.cur);
			if (l->verify && l->kind == kind)
			{
				check[n] = l;
				keys[n].data = l->key;
				keys[n].len = l->keylen;
				argv[n] = rp_arg_str(l->token);
				n++;
			}
		}
		if (n == 0)
			continue;
		script = rp_lease_kind(kind)->verify;
		if (script == NULL)
			elog(ERROR, "lease kind %d cannot be verified at commit", (int) kind);
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
			bad = rp_reply_int(rp_lease_eval(script, gn, gkeys, gn, gargv),
							   script->name);
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
}

/*
 * Release unsettled acquires (see rp_unsettled) at a transaction end, once
 * Redis has answered a lock call since they were recorded.  Until then (a
 * cancel or statement_timeout landed in the middle of a round trip, or Redis
 * did not answer) the transaction does not wait on Redis: each live entry is
 * handed to the background worker, which releases it by compare-and-delete
 * in its own time (a semaphore waiter's place leaves the queue then, not a
 * heartbeat later).  The entry stays here too, for the first transaction
 * end after Redis answers: the command in flight may run after the worker's
 * release.  So the worker's copy is backed by this one (orphans.h), and may
 * give its place to a lease nobody else will release: until then a
 * transaction end offers it again when the queue did not take it, or gave
 * its place away (looked up only when the queue has given backed places
 * away since the last look, rp_handed_gen).  send (release_at_commit =
 * send, at a top-level transaction's end): the release is sent, not waited
 * for, as the transaction's own leases' (rp_release_send); each entry is in
 * flight until its reply is read, not sent again meanwhile, and counts an
 * answered attempt then.  Never throws.
 */
static void
rp_unsettled_release(bool send)
{
	RpLease   **live;
	bool	   *answered;
	int			n = 0;
	dlist_mutable_iter it;
	TimestampTz now = GetCurrentTimestamp();

	if (rp_nunsettled == 0)
		return;

	if (!rp_redis_answered)
	{
		uint32		gen = rp_orphans_displaced();

		dlist_foreach_modify(it, &rp_unsettled)
		{
			RpLease    *u = dlist_container(RpLease, node, it.cur);

			if (u->expires_at > now &&
				(!u->handed ||
				 (gen != rp_handed_gen && rp_orphans_was_displaced(u->token))))
				u->handed = rp_orphans_handoff(u->key, u->keylen, u->token,
											   u->expires_at, true);
		}
		rp_handed_gen = gen;
		rp_unsettled_trim();
		return;
	}
	/*
	 * The replies of the releases sent at earlier transaction ends have
	 * most likely arrived: read them, without waiting, so that an entry's
	 * second release is sent now, as wait would make it, and not only
	 * after the session's next Redis call.
	 */
	if (send)
		rp_settle_arrived_quiet();
	live = palloc(sizeof(RpLease *) * rp_nunsettled);
	answered = palloc0(sizeof(bool) * rp_nunsettled);
	dlist_foreach_modify(it, &rp_unsettled)
	{
		RpLease    *u = dlist_container(RpLease, node, it.cur);

		/* A release in flight is settled by its reply (rp_release_settle). */
		if (u->in_flight)
			continue;
		if (u->expires_at > now && u->tries < 2)
			live[n++] = u;
		else
			rp_unsettled_forget(u);
	}

	if (send)
	{
		int			nsend = 0;

		/*
		 * One Redis refused when sent is released with a wait, through
		 * EVALSHA as every waited call: whatever refused it, it is not sent
		 * the same way again.  (A user allowed EVALSHA only, the case this
		 * was for, now has later releases sent as EVALSHA: transport.c's
		 * rp_sent_evalsha.)  Those go last in live.
		 */
		for (int i = 0; i < n; i++)
			if (!live[i]->refused)
			{
				RpLease    *t = live[nsend];

				live[nsend++] = live[i];
				live[i] = t;
			}
		/* Marked first: rp_release_send copies the mark into its copies. */
		for (int i = 0; i < nsend; i++)
			live[i]->in_flight = true;
		(void) rp_release_leases(live, nsend, true, true, answered);
		for (int i = 0; i < nsend; i++)
			if (!answered[i])
				live[i]->in_flight = false;
		if (nsend == n)
		{
			rp_unsettled_trim();
			return;
		}
		live += nsend;
		answered += nsend;
		n -= nsend;
	}

	/*
	 * A reply owed, read on the way (a release sent at this COMMIT), may
	 * report a release lost: it joins the list, which frees nothing until
	 * the trim below.
	 */
	(void) rp_release_leases(live, n, true, false, answered);
	for (int i = 0; i < n; i++)
		if (answered[i] && ++live[i]->tries >= 2)
			rp_unsettled_forget(live[i]);
	rp_unsettled_trim();
}

/*
 * A session lease asked for verify_at_commit (rp_acquire_xact re-entering
 * it) owed the check to that transaction only: at its end the session lease
 * goes on unchecked.  (The xact leases are gone by then.)
 */
static void
rp_session_verify_end(void)
{
	dlist_iter	it;

	if (rp_nverify == 0 || rp_held == NULL)
		return;
	dlist_foreach(it, &rp_granted)
	{
		RpLease    *l = dlist_container(RpLease, all, it.cur);

		if (l->verify && !l->xact)
		{
			l->verify = false;
			rp_nverify--;
		}
	}
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
			 * does for its remote transactions: a check owed (a lease to
			 * verify, xact or session, or one already lost) as well as an
			 * xact lease.
			 */
			if (rp_nverify > 0 || rp_nlost > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that asked for verify_at_commit"),
						 errdetail("COMMIT PREPARED runs no verify_at_commit check."),
						 errhint("Commit it, or take its leases without verify_at_commit.")));
			if (rp_nxact > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that holds a lease from rp_acquire_xact"),
						 errhint("Release the lease first, or take it with rp_acquire.")));
			break;
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			/* The next transaction re-enters none of this one's leases. */
			rp_xact_gen++;
			/* An acquire cut short is over with its transaction. */
			rp_acquire_waiting = false;
			rp_session_verify_end();
			rp_lost_forget(InvalidSubTransactionId, true);
			/* Prepared: it held no xact lease and owed no check (refused above). */
			if (event == XACT_EVENT_PREPARE)
				break;
			/* As pgfdw_abort_cleanup: no more work when errors recurse. */
			if (in_error_recursion_trouble() || rp_exited)
				break;
			(void) rp_release_where(RP_TAKE_XACT, InvalidSubTransactionId, true);
			rp_unsettled_release(rp_release_at_commit == RP_RELEASE_SEND &&
								 rp_conn_can_defer());
			rp_orphans_report();
			break;
		default:
			break;
	}
}

static void
rp_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	dlist_iter	it;

	/* An acquire cut short is over with its subtransaction. */
	if (event == SUBXACT_EVENT_ABORT_SUB)
		rp_acquire_waiting = false;

	/* A lost lease's check goes with its subtransaction, or to its parent. */
	if (event == SUBXACT_EVENT_ABORT_SUB)
		rp_lost_forget(mySubid, false);
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		for (int i = 0; i < rp_nlost; i++)
			if (rp_lost[i].subid == mySubid)
				rp_lost[i].subid = parentSubid;
	if (rp_nxact == 0)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		if (!in_error_recursion_trouble() && !rp_exited)
			(void) rp_release_where(RP_TAKE_XACT, mySubid, true);
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		dlist_foreach(it, &rp_granted)
		{
			RpLease    *l = dlist_container(RpLease, all, it.cur);

			if (l->xact && l->subid == mySubid)
				l->subid = parentSubid;
		}
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
	RpLease    *l;
	RpLease   **all;
	bool	   *answered;
	int			n = 0;
	long		max;
	dlist_iter	it;
	TimestampTz now;

	/*
	 * A release sent at the last transaction end (release_at_commit = send)
	 * is answered first; one not answered joins the unsettled below.
	 */
	rp_settle_pending_quiet(Min(rp_command_timeout_ms, RP_CLEANUP_TIMEOUT_MS));
	now = GetCurrentTimestamp();
	max = rp_nunsettled;
	max += rp_ngranted;
	if (max > 0)
	{
		/* One round trip (per slot) for the held and the unsettled alike. */
		all = palloc(sizeof(RpLease *) * max);
		answered = palloc0(sizeof(bool) * max);
		dlist_foreach(it, &rp_granted)
		{
			l = dlist_container(RpLease, all, it.cur);
			/* What other backends told: its rows are cleared after this. */
			rp_lease_truth(l);
			if (l->expires_at > now)
				all[n++] = l;
		}
		dlist_foreach(it, &rp_unsettled)
		{
			l = dlist_container(RpLease, node, it.cur);
			if (l->expires_at > now)
				all[n++] = l;
		}
		(void) rp_release_leases(all, n, true, false, answered);
		for (int i = 0; i < n; i++)
			if (!answered[i])
				rp_orphans_handoff(all[i]->key, all[i]->keylen, all[i]->token,
								   all[i]->expires_at, false);
	}
	rp_orphans_report();
	rp_conn_reset();
	rp_exited = true;
}

/*
 * Transaction callbacks run last-registered-first.  postgres_fdw registers
 * its own (which commits the remote transactions at PRE_COMMIT) on its
 * first use in the session, which may come after ours: then a remote write
 * would commit before verify_at_commit could refuse the commit.  While a
 * verify lease exists, every statement's end moves our callback to the
 * front (unregister, register again: it is a list of a few entries).
 * module.c's ExecutorEnd and ProcessUtility hooks call this.
 */
void
rp_lease_callback_to_front(void)
{
	if (!rp_callbacks_registered || rp_nverify == 0)
		return;
	UnregisterXactCallback(rp_xact_callback, NULL);
	RegisterXactCallback(rp_xact_callback, NULL);
}

/* Callbacks are registered on first use: _PG_init may run in the postmaster. */
void
rp_lease_setup(void)
{
	rp_registry_setup();
	if (rp_callbacks_registered)
		return;
	RegisterXactCallback(rp_xact_callback, NULL);
	RegisterSubXactCallback(rp_subxact_callback, NULL);
	/* Registered first, the lease table's callback runs after this one's. */
	rp_locks_register_exit();
	before_shmem_exit(rp_exit_callback, (Datum) 0);
	rp_callbacks_registered = true;
}

/* ------------------------------------------------------------------------
 * Recording an acquire, settling it; the face of the registry for the
 * primitives (lock.c, semaphore.c) and the lease functions (leasefuncs.c).
 * ------------------------------------------------------------------------
 */

/*
 * A name granted anew while the registry still remembers a lease on it: that
 * lease was lost.  Note it for verify_at_commit, then forget it.
 */
static void
rp_registry_forget_lost(RpLease *held)
{
	if (held->verify)
	{
		if (rp_nlost == rp_maxlost)
		{
			rp_maxlost = Max(4, 2 * rp_maxlost);
			rp_lost = rp_lost == NULL ?
				MemoryContextAlloc(TopMemoryContext, sizeof(RpLostCheck) * rp_maxlost) :
				repalloc(rp_lost, sizeof(RpLostCheck) * rp_maxlost);
		}
		rp_lost[rp_nlost].name = MemoryContextStrdup(TopMemoryContext, held->name);
		rp_lost[rp_nlost].fence = held->fence;
		rp_lost[rp_nlost].subid = held->xact ? held->subid : InvalidSubTransactionId;
		rp_nlost++;
	}
	rp_registry_remove(held);
}

/* l was taken under key: a lock's one lease per key (rp_registry_add). */
static bool
rp_lease_has_key(const RpLease *l, const char *key, size_t keylen)
{
	return l->keylen == keylen && memcmp(l->key, key, keylen) == 0;
}

/*
 * Redis just granted the key of the unsettled entry u to a new token.  Of
 * an exclusive kind (a lock), any lease the session still remembers under
 * that key was lost: forgotten, a lost lease that had to be verified at
 * commit leaving its obligation behind.  A lease of the name under another
 * key (taken before key_prefix changed) says nothing of this grant: it is
 * kept, and released under its own key.  Of a kind a name has several of (a
 * permit), a grant says nothing of the session's others, which may be other
 * requests' behind a pool: only those past their deadline are forgotten.
 */
static void
rp_registry_forget_ended(const RpLease *u)
{
	bool		exclusive = rp_lease_kind(u->kind)->exclusive;
	TimestampTz now = GetCurrentTimestamp();

	/* One at a time: the last one out frees the name's entry. */
	for (;;)
	{
		RpHeldName *h = rp_held_name(u->name, u->namelen, u->kind);
		RpLease    *gone = NULL;
		dlist_iter	it;

		if (h == NULL)
			return;
		dlist_foreach(it, &h->leases)
		{
			RpLease    *l = dlist_container(RpLease, node, it.cur);

			rp_lease_truth(l);
			if (exclusive ? rp_lease_has_key(l, u->key, u->keylen) :
				(l->expires_at <= now && !l->verify))
			{
				gone = l;
				break;
			}
		}
		if (gone == NULL)
			return;
		if (exclusive)
			rp_registry_forget_lost(gone);
		else
			rp_registry_remove(gone);
	}
}

RpLease *
rp_lease_pending(const char *name, size_t namelen, RpLeaseKind kind,
				 const char *token, TimestampTz expires_at)
{
	RpLease    *u;

	rp_lease_setup();
	u = rp_unsettled_add(name, namelen, kind,
						 rp_key(name, namelen, RP_KIND_SUFFIX(kind)),
						 token, expires_at);

	/*
	 * Until Redis answers, it may be hung: a cancel or timeout from here on
	 * leaves the flag down, so the abort does not wait on Redis to release.
	 */
	rp_redis_answered = false;
	rp_acquire_waiting = true;
	return u;
}

void
rp_lease_pending_deadline(RpLease *pending, TimestampTz expires_at)
{
	pending->expires_at = expires_at;
}

void
rp_lease_pending_forget(RpLease *pending)
{
	rp_unsettled_forget(pending);
}

void
rp_lease_redis_answered(bool answered)
{
	rp_redis_answered = answered;
	rp_acquire_waiting = false;
}

void
rp_lease_attempt_failed(RpLease **pending, int n, bool keep, const RpStatus *st)
{
	if (!keep && (!st->sent || st->answered))
		for (int i = 0; i < n; i++)
			rp_unsettled_forget(pending[i]);
	rp_redis_answered = st->answered;
	rp_acquire_waiting = false;
	rp_status_raise(st);
}

RpLease *
rp_lease_settle(RpLease *pending, int64 fence, bool xact, bool verify)
{
	rp_redis_answered = true;
	rp_acquire_waiting = false;
	if (fence <= 0)
	{
		rp_unsettled_forget(pending);
		return NULL;
	}

	rp_registry_forget_ended(pending);
	return rp_registry_add(pending, fence, xact, verify);
}

void
rp_lease_verify_at_commit(RpLease *l)
{
	/* Whatever its scope: a check asked for is never dropped silently. */
	if (!l->verify)
	{
		l->verify = true;
		rp_nverify++;
	}
}

bool
rp_lease_extend_script(const RpLease *l, int64 ttl_ms, int64 *counter)
{
	const RpLeaseKindDef *kind = rp_lease_kind(l->kind);
	RpArg		keys[2];
	RpArg		argv[2];
	RpReply    *r;

	keys[0].data = l->key;
	keys[0].len = l->keylen;
	argv[0] = rp_arg_str(l->token);
	argv[1] = rp_arg_int(ttl_ms);
	if (counter == NULL || kind->extend_counter == NULL)
		return rp_reply_int(rp_lease_eval(kind->extend, 1, keys, 2, argv),
							kind->extend->name) == 1;
	/* The same hash tag as the lock key, so the same slot. */
	keys[1] = rp_key(l->name, l->namelen, "fence");
	r = rp_lease_eval(kind->extend_counter, 2, keys, 2, argv);
	if (rp_reply_is_nil(r))
		return false;
	if (r->type != RP_REPLY_STRING)
		elog(ERROR, "unexpected Redis reply for %s: expected a decimal string",
			 kind->extend_counter->name);
	*counter = pg_strtoint64(r->str);
	return true;
}

bool
rp_lease_extend_held(RpLease *l, int64 ttl_ms, int64 *counter)
{
	TimestampTz asked = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ttl_ms);
	TimestampTz was_min = l->unanswered_min;
	TimestampTz was_max = l->unanswered_max;
	TimestampTz d;
	uint32		seq;

	(void) rp_locks_override_of(l, &d, &seq, NULL);

	/*
	 * Until Redis answers, this extend may run at any time, even after a
	 * later one (a command already in Redis's socket runs after its client
	 * gave up): believed no later than it, released no earlier, for the
	 * lease's life should the answer never come.
	 */
	if (was_min == 0 || asked < was_min)
		l->unanswered_min = asked;
	if (asked > was_max)
		l->unanswered_max = asked;
	if (asked > l->expires_at)
	{
		if (l->own == 0)
			l->own = l->expires_at;
		l->expires_at = asked;
	}
	if (!rp_lease_extend_script(l, ttl_ms, counter))
		return false;

	/* It ran, now: only the earlier unanswered ones may still run. */
	l->unanswered_min = was_min;
	l->unanswered_max = was_max;
	l->own = 0;
	l->expires_at = asked;
	if (was_max > asked)
	{
		l->own = asked;
		l->expires_at = was_max;
	}
	rp_locks_publish(l, l->name, l->namelen, l->fence, asked, l->xact);
	rp_locks_override_clear(l, seq);
	return true;
}

void
rp_lease_forget(RpLease *l)
{
	rp_registry_remove(l);
}

int
rp_lease_release(RpLease **leases, int n, bool quiet, bool *answered)
{
	return rp_release_leases(leases, n, quiet, false, answered);
}

int
rp_lease_release_all(void)
{
	return rp_release_where(RP_TAKE_ALL, InvalidSubTransactionId, false);
}

/*
 * Release every session-scoped lease this backend holds, for DISCARD ALL
 * (module.c's ProcessUtility hook, once the command succeeded: pool.c
 * says why).  Never throws: a lease that cannot be released expires by its TTL.
 * Returns how many Redis still held.
 */
int
rp_lease_discard_all(void)
{
	return rp_release_where(RP_TAKE_SESSION, InvalidSubTransactionId, true);
}

RpLease **
rp_lease_list(int *n)
{
	dlist_iter	it;
	RpLease   **all;

	*n = 0;
	if (rp_held == NULL)
		return NULL;
	/* What other backends told first: a release Redis answered is swept. */
	dlist_foreach(it, &rp_granted)
		rp_lease_truth(dlist_container(RpLease, all, it.cur));
	rp_registry_sweep();
	/* In the order they entered the registry: oldest first. */
	all = palloc(sizeof(RpLease *) * Max(rp_ngranted, 1));
	dlist_foreach(it, &rp_granted)
		all[(*n)++] = dlist_container(RpLease, all, it.cur);
	return all;
}

Datum
rp_lease_datum(FunctionCallInfo fcinfo, const RpLease *l, bool fence_known)
{
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, !fence_known, false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = PointerGetDatum(cstring_to_text_with_len(l->name, l->namelen));
	values[1] = CStringGetTextDatum(l->token);
	values[2] = Int64GetDatum(l->fence);
	/* Never a later deadline an extend elsewhere, or unanswered, gave it. */
	values[3] = TimestampTzGetDatum(rp_lease_own_until(l));
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}
