/*-------------------------------------------------------------------------
 *
 * ratecache.c
 *		The rate limiter's refusal cache (redis_primitives.ratelimit_cache):
 *		a fixed-size, set-associative table in shared memory of refusals
 *		Redis gave, each live until the moment Redis said a retry of the
 *		same cost could succeed.  A flood of refused callers on this server
 *		is then answered here, with no round trip.  See docs/ratelimit.md.
 *
 * Before editing, know this: an entry must never outlive its truth.  It is
 * exact for one (Redis key, max_requests, window_ms, cost, pinned clock,
 * Redis server), and with those fixed, the only traffic Redis can see is
 * admissions of the same limit, which make a key fuller, never emptier, so a
 * refusal stays a refusal until its retry_after.  What can empty a key early
 * is handled explicitly: this server's admissions under other parameters
 * and its resets drop the key's entries (and bump the set's epoch, so a fill
 * that was in flight meanwhile is not stored); the key's own TTL bounds every
 * entry; and the lifetime is counted from when the call was *sent*, on the
 * monotonic clock, less a millisecond for Redis' rounding and 0.1% for clock
 * rates.  What another server does to the key is not seen here: documented.
 *
 * All of a key's entries live in one set (the set is chosen by key and
 * server alone), so a reset or an admission finds them by scanning one set
 * of RP_RC_WAYS entries.  Locks are LWLocks, one per RP_RC_LOCKS sets:
 * lookups take them shared.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "access/htup_details.h"
#include "common/hashfn.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "ratecache.h"

#define RP_RC_WAYS			8		/* entries per set */
#define RP_RC_LOCKS			16		/* LWLocks, each guarding every 16th set */
#define RP_RC_KEY_MAX		192		/* longer Redis keys are not cached */
#define RP_RC_COUNTER_SHARDS 16		/* hit counters, one cache line each */

typedef struct RpRcEntry
{
	int64		expires_us;		/* monotonic; 0 = empty */
	uint64		target;
	int64		max_requests;
	int64		window_ms;
	int64		cost;
	int64		clock_ms;
	uint16		keylen;
	char		key[RP_RC_KEY_MAX];
} RpRcEntry;

typedef union RpRcCounter
{
	pg_atomic_uint64 value;
	char		pad[PG_CACHE_LINE_SIZE];
} RpRcCounter;

typedef struct RpRcShared
{
	int			nsets;
	LWLockPadded *locks;
	pg_atomic_uint64 fills;
	pg_atomic_uint64 evictions;
	pg_atomic_uint64 invalidations;
	pg_atomic_uint64 skipped;	/* fills dropped: the set's epoch moved */
	RpRcCounter hits[RP_RC_COUNTER_SHARDS];
	/* then pg_atomic_uint32 epoch[nsets], then RpRcEntry entries[nsets][WAYS] */
} RpRcShared;

static RpRcShared *rp_rc = NULL;
static pg_atomic_uint32 *rp_rc_epochs = NULL;
static RpRcEntry *rp_rc_entries = NULL;

/* Settings. */
static bool rp_rc_enabled = true;
static int	rp_rc_capacity = 4096;

static int
rp_rc_nsets(void)
{
	return (rp_rc_capacity + RP_RC_WAYS - 1) / RP_RC_WAYS;
}

static Size
rp_rc_shmem_size(void)
{
	Size		size = MAXALIGN(sizeof(RpRcShared));

	size = add_size(size, MAXALIGN(mul_size(rp_rc_nsets(), sizeof(pg_atomic_uint32))));
	size = add_size(size, mul_size(mul_size(rp_rc_nsets(), RP_RC_WAYS), sizeof(RpRcEntry)));
	return size;
}

void
rp_ratecache_shmem_request(void)
{
	if (rp_rc_capacity == 0)
		return;
	RequestAddinShmemSpace(rp_rc_shmem_size());
	RequestNamedLWLockTranche("redis_primitives ratelimit cache", RP_RC_LOCKS);
}

/* Called under AddinShmemInitLock. */
void
rp_ratecache_shmem_startup(void)
{
	bool		found;
	char	   *p;

	if (rp_rc_capacity == 0)
		return;
	rp_rc = ShmemInitStruct("redis_primitives ratelimit cache",
							rp_rc_shmem_size(), &found);
	p = (char *) rp_rc + MAXALIGN(sizeof(RpRcShared));
	rp_rc_epochs = (pg_atomic_uint32 *) p;
	p += MAXALIGN(mul_size(rp_rc_nsets(), sizeof(pg_atomic_uint32)));
	rp_rc_entries = (RpRcEntry *) p;
	if (!found)
	{
		memset(rp_rc, 0, rp_rc_shmem_size());
		rp_rc->nsets = rp_rc_nsets();
		rp_rc->locks = GetNamedLWLockTranche("redis_primitives ratelimit cache");
		pg_atomic_init_u64(&rp_rc->fills, 0);
		pg_atomic_init_u64(&rp_rc->evictions, 0);
		pg_atomic_init_u64(&rp_rc->invalidations, 0);
		pg_atomic_init_u64(&rp_rc->skipped, 0);
		for (int i = 0; i < RP_RC_COUNTER_SHARDS; i++)
			pg_atomic_init_u64(&rp_rc->hits[i].value, 0);
		for (int i = 0; i < rp_rc->nsets; i++)
			pg_atomic_init_u32(&rp_rc_epochs[i], 0);
	}
}

void
rp_ratecache_init(void)
{
	DefineCustomBoolVariable("redis_primitives.ratelimit_cache",
							 "Answers a rate-limit request Redis refused from shared memory, with no round trip, until Redis said a retry could succeed.",
							 "Only rp_ratelimit is answered from the cache, and only when the library is preloaded; "
							 "see docs/ratelimit.md for what it guarantees.",
							 &rp_rc_enabled, true, PGC_SUSET, 0,
							 NULL, NULL, NULL);
	/* As redis_primitives.max_tracked_leases: PGC_POSTMASTER only while preloading. */
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomIntVariable("redis_primitives.ratelimit_cache_entries",
							"Number of refusals the rate-limit cache can hold at once, across all backends.",
							"Each takes about 256 bytes of shared memory; when full, the entry closest to expiring is replaced.  0 turns the cache off.",
							&rp_rc_capacity, 4096, 0, 1000000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
}

/* ------------------------------------------------------------------------
 * The table.
 * ------------------------------------------------------------------------
 */

int64
rp_ratecache_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

bool
rp_ratecache_usable(void)
{
	return rp_rc != NULL && rp_rc_enabled;
}

/* The set of a key on a server: every entry of the key lives there. */
static int
rp_rc_set(const char *key, size_t keylen, uint64 target)
{
	uint64		h = hash_bytes_extended((const unsigned char *) key, (int) keylen, target);

	return (int) (h % (uint64) rp_rc->nsets);
}

static inline LWLock *
rp_rc_lock(int set)
{
	return &rp_rc->locks[set % RP_RC_LOCKS].lock;
}

static inline bool
rp_rc_same_key(const RpRcEntry *e, const char *key, size_t keylen, uint64 target)
{
	return e->expires_us != 0 && e->target == target && e->keylen == keylen &&
		memcmp(e->key, key, keylen) == 0;
}

static inline bool
rp_rc_same_limit(const RpRcEntry *e, const RpRcRequest *req)
{
	return e->max_requests == req->max_requests &&
		e->window_ms == req->window_ms && e->clock_ms == req->clock_ms;
}

bool
rp_ratecache_lookup(const RpRcRequest *req, bool answer, uint32 *epoch)
{
	int			set;
	RpRcEntry  *e;
	bool		hit = false;
	int64		now;

	*epoch = 0;
	if (rp_rc == NULL || req->keylen > RP_RC_KEY_MAX)
		return false;
	set = rp_rc_set(req->key, req->keylen, req->target);
	/* Sampled before the call is sent: see rp_ratecache_store. */
	*epoch = pg_atomic_read_u32(&rp_rc_epochs[set]);
	if (!rp_rc_enabled || !answer)
		return false;
	now = rp_ratecache_now_us();
	e = &rp_rc_entries[set * RP_RC_WAYS];
	LWLockAcquire(rp_rc_lock(set), LW_SHARED);
	for (int w = 0; w < RP_RC_WAYS; w++, e++)
		if (e->expires_us > now && e->cost == req->cost &&
			rp_rc_same_limit(e, req) &&
			rp_rc_same_key(e, req->key, req->keylen, req->target))
		{
			hit = true;
			break;
		}
	LWLockRelease(rp_rc_lock(set));
	if (hit)
		pg_atomic_fetch_add_u64(&rp_rc->hits[MyProcPid % RP_RC_COUNTER_SHARDS].value, 1);
	return hit;
}

void
rp_ratecache_store(const RpRcRequest *req, uint32 epoch, int64 sent_us,
				   int64 retry_ms, int64 pttl_ms)
{
	int			set;
	int64		life_ms;
	int64		expires;
	RpRcEntry  *e;
	RpRcEntry  *victim = NULL;

	if (!rp_ratecache_usable() || req->keylen > RP_RC_KEY_MAX)
		return;
	/* The key's own TTL bounds the refusal (-2: no key, nothing to cache). */
	if (pttl_ms == -2 || retry_ms <= 0)
		return;
	life_ms = (pttl_ms >= 0) ? Min(retry_ms, pttl_ms) : retry_ms;
	/* Redis counts whole ms (-1 ms) and clocks run at slightly different rates (-0.1%). */
	expires = sent_us + life_ms * 1000 - 1000 - life_ms;
	if (expires <= rp_ratecache_now_us())
		return;

	set = rp_rc_set(req->key, req->keylen, req->target);
	e = &rp_rc_entries[set * RP_RC_WAYS];
	LWLockAcquire(rp_rc_lock(set), LW_EXCLUSIVE);
	/* An admission under other parameters, or a reset, ran meanwhile. */
	if (pg_atomic_read_u32(&rp_rc_epochs[set]) != epoch)
	{
		LWLockRelease(rp_rc_lock(set));
		pg_atomic_fetch_add_u64(&rp_rc->skipped, 1);
		return;
	}
	for (int w = 0; w < RP_RC_WAYS; w++)
	{
		RpRcEntry  *c = &e[w];

		if (c->cost == req->cost && rp_rc_same_limit(c, req) &&
			rp_rc_same_key(c, req->key, req->keylen, req->target))
		{
			victim = c;
			break;
		}
		/* Otherwise the empty or the soonest to expire. */
		if (victim == NULL || c->expires_us < victim->expires_us)
			victim = c;
	}
	if (victim->expires_us > rp_ratecache_now_us() &&
		!(victim->cost == req->cost && rp_rc_same_limit(victim, req) &&
		  rp_rc_same_key(victim, req->key, req->keylen, req->target)))
		pg_atomic_fetch_add_u64(&rp_rc->evictions, 1);
	victim->target = req->target;
	victim->max_requests = req->max_requests;
	victim->window_ms = req->window_ms;
	victim->cost = req->cost;
	victim->clock_ms = req->clock_ms;
	victim->keylen = (uint16) req->keylen;
	memcpy(victim->key, req->key, req->keylen);
	victim->expires_us = expires;
	LWLockRelease(rp_rc_lock(set));
	pg_atomic_fetch_add_u64(&rp_rc->fills, 1);
}

/*
 * Drop the entries of key (all of them, or those of other limits than keep's)
 * after bumping the set's epoch, so that a fill racing with this either
 * lands before the scan (and is dropped by it) or sees the new epoch.
 */
static void
rp_rc_drop(const char *key, size_t keylen, uint64 target, const RpRcRequest *keep)
{
	int			set;
	RpRcEntry  *e;
	bool		found = false;

	if (rp_rc == NULL || keylen > RP_RC_KEY_MAX)
		return;
	set = rp_rc_set(key, keylen, target);
	pg_atomic_fetch_add_u32(&rp_rc_epochs[set], 1);
	e = &rp_rc_entries[set * RP_RC_WAYS];
	LWLockAcquire(rp_rc_lock(set), keep ? LW_SHARED : LW_EXCLUSIVE);
	for (int w = 0; w < RP_RC_WAYS && !found; w++)
		found = rp_rc_same_key(&e[w], key, keylen, target) &&
			!(keep && rp_rc_same_limit(&e[w], keep));
	if (found && keep)
	{
		/* Rare: a key used under two limits at once.  Relock to write. */
		LWLockRelease(rp_rc_lock(set));
		LWLockAcquire(rp_rc_lock(set), LW_EXCLUSIVE);
	}
	if (found)
		for (int w = 0; w < RP_RC_WAYS; w++)
			if (rp_rc_same_key(&e[w], key, keylen, target) &&
				!(keep && rp_rc_same_limit(&e[w], keep)))
			{
				e[w].expires_us = 0;
				pg_atomic_fetch_add_u64(&rp_rc->invalidations, 1);
			}
	LWLockRelease(rp_rc_lock(set));
}

void
rp_ratecache_admitted(const RpRcRequest *req)
{
	rp_rc_drop(req->key, req->keylen, req->target, req);
}

/* ------------------------------------------------------------------------
 * A call in flight when the backend exits.
 * ------------------------------------------------------------------------
 */

/* What rp_rc_flight_exit drops: copies, the caller's memory may be gone. */
static struct
{
	int			nkeys;			/* 0: nothing in flight */
	bool		admitting;		/* else a reset: every entry of the keys */
	RpRcRequest req;			/* admitting: the limit kept (key unused) */
	uint64		target;
	uint16		keylen[RP_RC_FLIGHT_KEYS];
	char		key[RP_RC_FLIGHT_KEYS][RP_RC_KEY_MAX];
}			rp_rc_flight;

void
rp_ratecache_flight_settle(void)
{
	for (int i = 0; i < rp_rc_flight.nkeys; i++)
		rp_rc_drop(rp_rc_flight.key[i], rp_rc_flight.keylen[i], rp_rc_flight.target,
				   rp_rc_flight.admitting ? &rp_rc_flight.req : NULL);
	rp_rc_flight.nkeys = 0;
}

static void
rp_rc_flight_exit(int code, Datum arg)
{
	rp_ratecache_flight_settle();
}

static void
rp_rc_flight_add(const char *key, size_t keylen, uint64 target, bool admitting)
{
	static bool registered = false;

	if (rp_rc == NULL || keylen > RP_RC_KEY_MAX ||
		rp_rc_flight.nkeys >= RP_RC_FLIGHT_KEYS)
		return;
	if (!registered)
	{
		before_shmem_exit(rp_rc_flight_exit, (Datum) 0);
		registered = true;
	}
	memcpy(rp_rc_flight.key[rp_rc_flight.nkeys], key, keylen);
	rp_rc_flight.keylen[rp_rc_flight.nkeys] = (uint16) keylen;
	rp_rc_flight.target = target;
	rp_rc_flight.admitting = admitting;
	rp_rc_flight.nkeys++;
}

void
rp_ratecache_flight_admitting(const RpRcRequest *req)
{
	rp_rc_flight.nkeys = 0;
	rp_rc_flight.req = *req;
	rp_rc_flight.req.key = NULL;
	rp_rc_flight_add(req->key, req->keylen, req->target, true);
}

void
rp_ratecache_flight_forgetting(const char *key, size_t keylen, uint64 target)
{
	rp_rc_flight_add(key, keylen, target, false);
}

void
rp_ratecache_flight_end(void)
{
	rp_rc_flight.nkeys = 0;
}

/* ------------------------------------------------------------------------
 * rp_ratelimit_cache_info()
 * ------------------------------------------------------------------------
 */

/*
 * rp_ratelimit_cache_info() -> (enabled, capacity, live, hits, fills,
 * evictions, invalidations, skipped_fills)
 */
PG_FUNCTION_INFO_V1(rp_ratelimit_cache_info);
Datum
rp_ratelimit_cache_info(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[8];
	bool		nulls[8] = {false, false, false, false, false, false, false, false};
	int			live = 0;
	uint64		hits = 0;
	int64		now = rp_ratecache_now_us();

	if (rp_rc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the rate-limit refusal cache is not available"),
				 errdetail("It lives in shared memory, which exists only when the library is preloaded and redis_primitives.ratelimit_cache_entries is above 0."),
				 errhint("Add redis_primitives to shared_preload_libraries and restart the server.")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	for (int s = 0; s < rp_rc->nsets; s++)
	{
		LWLockAcquire(rp_rc_lock(s), LW_SHARED);
		for (int w = 0; w < RP_RC_WAYS; w++)
			if (rp_rc_entries[s * RP_RC_WAYS + w].expires_us > now)
				live++;
		LWLockRelease(rp_rc_lock(s));
	}
	for (int i = 0; i < RP_RC_COUNTER_SHARDS; i++)
		hits += pg_atomic_read_u64(&rp_rc->hits[i].value);
	values[0] = BoolGetDatum(rp_rc_enabled);
	values[1] = Int32GetDatum(rp_rc->nsets * RP_RC_WAYS);
	values[2] = Int32GetDatum(live);
	values[3] = Int64GetDatum((int64) hits);
	values[4] = Int64GetDatum((int64) pg_atomic_read_u64(&rp_rc->fills));
	values[5] = Int64GetDatum((int64) pg_atomic_read_u64(&rp_rc->evictions));
	values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&rp_rc->invalidations));
	values[7] = Int64GetDatum((int64) pg_atomic_read_u64(&rp_rc->skipped));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}
