/*-------------------------------------------------------------------------
 *
 * lease.h
 *		The session's leases, of every kind (a lock, a semaphore permit): the
 *		registry of the granted ones, the acquires not yet settled, releasing
 *		many in one round trip per hash slot, and their end at transaction
 *		end, subtransaction abort, DISCARD ALL and backend exit.
 *
 * Before editing, know this: the registry is keyed by (name, kind), and a
 * key holds every lease of that name and kind the session has: a lock's
 * name one at a time, a semaphore's several permits (one per transaction
 * that took one: re-entry is per transaction).  Every entry remembers the
 * full Redis key it was taken under, so a later change of key_prefix never
 * misdirects a release, extend or commit-time check.
 * An acquire is recorded (rp_lease_pending) before it is sent and settled
 * (rp_lease_settle) once its answer is known; entries enter the registry
 * only there and leave it through rp_lease_forget (or this module's own
 * release paths), nowhere else.  What differs per kind (its key's suffix,
 * its scripts) is data the primitive hands over at _PG_init
 * (rp_lease_define_kind): this module never calls up into a primitive.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_LEASE_H
#define RP_LEASE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "lib/ilist.h"

#include "conn.h"
#include "token.h"				/* RP_TOKEN_LEN, RpLeaseKind */

/* At most this many unsettled acquires are remembered; the oldest go first. */
#define RP_MAX_UNSETTLED		256

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

/*
 * One lease the session believes it holds, or may have been granted
 * (unsettled).  Read its fields freely; change them only through this
 * module.
 */
typedef struct RpLease
{
	RpNameKey	hkey;			/* its registry key; hkey.data == name */
	char	   *name;			/* in the registry's own memory context */
	size_t		namelen;
	RpLeaseKind kind;
	char	   *key;			/* the full key it was taken under */
	size_t		keylen;
	char		token[RP_TOKEN_LEN + 1];
	int64		fence;
	TimestampTz expires_at;		/* time the acquire was sent + ttl, or the
								 * later deadline of an extend since, here
								 * or by token elsewhere, that may have
								 * run: until then it is released at its
								 * end */
	TimestampTz told;			/* 0, or the earlier deadline another
								 * backend's extend by token told: belief
								 * only (rp_lease_believed_until) */
	TimestampTz unanswered_min; /* 0, or the earliest and latest deadline
								 * of this session's own extends not
								 * answered (they may still run): belief
								 * ends by the first, */
	TimestampTz unanswered_max; /* duty lasts until the second */
	TimestampTz own;			/* 0, or its own deadline (taken or
								 * extended with here, answered) once
								 * expires_at was moved past it by an
								 * extend that may have run, by token
								 * elsewhere or its own unanswered: belief
								 * ends at own (rp_lease_own_until) */
	bool		xact;			/* released at top-level transaction end */
	bool		verify;			/* checked at this transaction's PRE_COMMIT */
	bool		doubted;		/* a release of it was asked for and its
								 * outcome is unknown (the reply lost): no
								 * longer believed (re-entry, the guards,
								 * rp_leases), still released at its end */
	SubTransactionId subid;		/* subtransaction that took it (xact only) */
	uint64		xact_gen;		/* top-level transaction that took it
								 * (rp_lease_this_xact) */
	uint64		seq;			/* order of acquisition, for rp_leases() */
	int			tries;			/* unsettled only: answered release attempts */
	bool		in_flight;		/* unsettled only: a release of it was sent
								 * (release_at_commit = send), its reply not
								 * read yet */
	bool		refused;		/* unsettled only: Redis answered a sent
								 * release with an error: the next one waits
								 * (EVALSHA, as every waited call) */
	uint64		uid;			/* unsettled only: names it to that reply */
	uint64		retry_of;		/* a sent release's copy: the uid of the
								 * unsettled entry it releases, or 0 */
	bool		handed;			/* unsettled only: taken, backed, by the
								 * background worker's queue (as of
								 * rp_handed_gen: rp_unsettled_release) */
	dlist_node	node;			/* unsettled: in the unsettled list; granted:
								 * among its name's leases */
	dlist_node	all;			/* granted: among all, oldest first */
} RpLease;

/*
 * What a kind of lease is in Redis, handed over by its primitive at
 * _PG_init (the lock: lock.c; a permit: semaphore.c).  Each script's KEYS
 * and ARGV are named in its src/lua/ header.
 */
typedef struct RpLeaseKindDef
{
	const char *suffix;			/* the lease's key is <prefix>{name}:<suffix> */
	const RpScript *release;	/* compare-and-delete of n (key, token) */
	const RpScript *extend;		/* compare-and-extend of one (key, token, ttl) */
	const RpScript *extend_counter; /* or NULL: extend that also reads
									 * <prefix>{name}:fence (KEYS[2]) */
	const RpScript *verify;		/* or NULL: the first of n (key, token) lost */
	bool		exclusive;		/* a key has one lease of this kind at a time
								 * (a lock): a new grant means the session's
								 * earlier one under that key was lost (one
								 * under an older key_prefix is kept).  false
								 * (a permit): a session may hold several of
								 * one name */
} RpLeaseKindDef;

extern void rp_lease_define_kind(RpLeaseKind kind, const RpLeaseKindDef *def);
extern const RpLeaseKindDef *rp_lease_kind(RpLeaseKind kind);

/*
 * Set up the registry and register the transaction, subtransaction and exit
 * callbacks, once per backend, on first use (never from _PG_init, which may
 * run in the postmaster).  Call it before any lease is recorded.
 */
extern void rp_lease_setup(void);
/* _PG_init: the lease layer's settings (release_at_commit). */
extern void rp_lease_init(void);

/* rp_eval that also tells the registry Redis answers (unsettled go then). */
extern RpReply *rp_lease_eval(const RpScript *script, int nkeys, const RpArg *keys,
							  int nargs, const RpArg *argv);
/* Redis answered (or, false: may not have) the last lease call. */
extern void rp_lease_redis_answered(bool answered);

/*
 * The session's lease of this kind on name: of several (permits), the newest
 * live one, else the newest even past its deadline.  NULL when none.
 */
extern RpLease *rp_lease_find(const char *name, size_t namelen, RpLeaseKind kind);
/* The session's lease of this kind on name with this token, or NULL. */
extern RpLease *rp_lease_find_token(const char *name, size_t namelen, RpLeaseKind kind,
									const char *token);
/* The believed lease of this kind on name the current transaction took, or NULL. */
extern RpLease *rp_lease_of_this_xact(const char *name, size_t namelen, RpLeaseKind kind,
									  TimestampTz now);

/*
 * Re-entry, for every kind: the lease of this kind on name the current
 * transaction took, live, handed back only as the lock-bound guard would
 * accept it (inside its last margin_ms it is extended by ttl_ms first);
 * NULL when there is none (or Redis no longer holds it: that one is
 * forgotten, as a lost lease is): the caller takes one as any caller would.  A lease an earlier transaction of the session
 * took is never re-entered: behind a pool it may be another request's.
 */
extern RpLease *rp_lease_reenter(const char *name, size_t namelen, RpLeaseKind kind,
								 TimestampTz now, int64 ttl_ms, int margin_ms);

/*
 * Record an acquire about to be sent (before sending it): until settled it
 * is released at transaction end or backend exit.  Sets up the registry and
 * marks Redis as not having answered yet.  Settle it with the fence granted
 * (it enters the registry; of an exclusive kind, a lease the registry still
 * remembers on that name was lost, and a lost verify_at_commit lease leaves
 * its check behind; of another kind, those past their deadline are
 * forgotten) or with 0 (not granted: forgotten); returns the registry entry,
 * or NULL.  rp_lease_pending_forget: the command cannot have run.  An
 * acquire that threw stays recorded.
 */
extern RpLease *rp_lease_pending(const char *name, size_t namelen, RpLeaseKind kind,
								 const char *token, TimestampTz expires_at);
extern RpLease *rp_lease_settle(RpLease *pending, int64 fence, bool xact, bool verify);
extern void rp_lease_pending_forget(RpLease *pending);
/*
 * An acquire's command failed (st, from rp_eval_try): its n pending entries
 * are forgotten when it cannot have run (never sent, or answered with an
 * error by Redis) unless keep (an earlier attempt's effect, a waiter's place,
 * may still be in Redis for the abort to undo); otherwise they stay for the
 * transaction end or the exit to release.  Then the failure is raised.
 */
pg_noreturn extern void rp_lease_attempt_failed(RpLease **pending, int n, bool keep,
												const RpStatus *st);
/* The deadline a pending entry will be settled with (its grant's). */
extern void rp_lease_pending_deadline(RpLease *pending, TimestampTz expires_at);

/*
 * Check a held lease at this transaction's PRE_COMMIT too (rp_acquire_xact
 * re-entered it with verify_at_commit), whatever its scope: a session
 * lease owes the check to this transaction only.
 */
extern void rp_lease_verify_at_commit(RpLease *l);

/*
 * Run l's kind's compare-and-extend script for ttl_ms, and nothing else:
 * true when Redis held l's token and moved its TTL.  With counter, a kind
 * that has one (a lock: lock_extend_token) is extended by its
 * extend_counter script, which also reads the name's fence counter into
 * *counter (see that script); a permit leaves *counter alone.
 */
extern bool rp_lease_extend_script(const RpLease *l, int64 ttl_ms,
								   int64 *counter);

/*
 * Compare-and-extend a registry entry by ttl_ms (counted from now), with
 * rp_lease_extend_script: true with its deadline moved and published,
 * false when Redis no longer holds its token.  From before the round trip
 * until Redis answers (for the lease's life, on a Redis failure, which
 * raises), the extend may run at any time: the lease is believed no later
 * than its deadline and released no earlier.
 */
extern bool rp_lease_extend_held(RpLease *l, int64 ttl_ms, int64 *counter);

/* Take a registry entry out of the registry (it is freed). */
extern void rp_lease_forget(RpLease *l);

/*
 * A release of a registry entry is about to be asked for: from here on it
 * is not believed (re-entry passes it by, the guards refuse it, rp_leases
 * leaves it out), and if the release fails with its outcome unknown it
 * stays in the registry, released again at its end.
 */
extern void rp_lease_doubt(RpLease *l);

/*
 * Until when l is believed: long past when doubted, else the earliest of
 * its own deadline (rp_lease_own_until), one told by another backend's
 * extend by token and those its own unanswered extends asked for.
 */
extern TimestampTz rp_lease_believed_until(const RpLease *l);

/*
 * The deadline l was taken or last extended with by this session (never a
 * later one an extend that may not have run gave it, nor past a release
 * Redis answered): what the composite an rp_* call returns shows.
 */
extern TimestampTz rp_lease_own_until(const RpLease *l);

/*
 * Release n leases (registry entries, unsettled or transient) by
 * compare-and-delete under the keys they were taken with, each kind by its
 * own script, one round trip per hash slot.  quiet: the cleanup face, never
 * ereports, all within the cleanup deadline; answered[i] (if given) is set
 * for those that got an answer.  Returns how many Redis still held with our
 * token.  Nothing leaves the registry here.
 */
extern int	rp_lease_release(RpLease **leases, int n, bool quiet, bool *answered);

/* rp_release_all(): release and forget every lease; raises on failure. */
extern int	rp_lease_release_all(void);

/*
 * DISCARD ALL, once it succeeded: release and forget every session-scoped
 * lease of this backend.  Never throws.  Returns how many Redis still held.
 */
extern int	rp_lease_discard_all(void);

/* Every registry entry live or not, oldest first (expired ones swept). */
extern RpLease **rp_lease_list(int *n);

/*
 * At every statement's end, and before a utility command: while a
 * verify_at_commit lease exists, move the transaction callback to the front
 * of the list (see lease.c).  Called by module.c's ExecutorEnd and
 * ProcessUtility hooks.
 */
extern void rp_lease_callback_to_front(void);

/* An rp_lease datum for fcinfo's result type; fence NULL unless fence_known. */
extern Datum rp_lease_datum(FunctionCallInfo fcinfo, const RpLease *l, bool fence_known);

/*
 * The session's live lease on a name, from its own registry (no round trip):
 * true with the lease's fence and expires_at (the time the acquire was sent
 * + ttl); false when the session holds none under the key the name has now
 * (one under another key_prefix is another resource).  Used by the lock-bound fence
 * guard (fence.c) and its commit check (fence_commit.c), which apply
 * redis_primitives.lease_margin themselves.
 */
extern bool rp_lease_lookup(const char *name, size_t namelen, int64 *fence,
							TimestampTz *expires_at);

/*
 * The same, with this_xact: only a lease the current top-level transaction
 * took counts (a guard with the 'xact' option: a table written through a
 * pool, where the backend's earlier transactions were other clients').
 */
extern bool rp_lease_lookup_ex(const char *name, size_t namelen, bool this_xact,
							   int64 *fence, TimestampTz *expires_at);

/*
 * The session's lease on name with that fence, held under the key the name
 * has now: true with its expires_at.  The commit check of a fenced write
 * (fence_commit.c) asks for the lease the write was made under, not for the
 * name's latest one: a session may hold several permits of a name, and a
 * later one does not end the one the write was made under.
 */
extern bool rp_lease_lookup_fence(const char *name, size_t namelen, int64 fence,
								  TimestampTz *expires_at);

/*
 * Whether the current top-level transaction took l.  Re-entry is confined to
 * it: behind a pool, a backend's earlier transactions may have been another
 * client's, and no pool interleaves two clients inside one transaction.
 */
extern bool rp_lease_this_xact(const RpLease *l);

#endif							/* RP_LEASE_H */
