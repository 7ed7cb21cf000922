/*-------------------------------------------------------------------------
 *
 * stats.c
 *		rp_stats and rp_locks: per-primitive counters and the table of every
 *		lease any backend of this server holds, in one piece of shared memory
 *		(requested and set up from module.c's shmem hooks).
 *
 * Before editing, know this: writers never wait for each other.  Counters
 * live in one slot per backend (indexed by MyProcNumber, one writer each,
 * summed by the view); a process with no number below MaxBackends (none
 * of ours: background workers have one too) would share one extra slot
 * under a spinlock.  rp_stats_reset
 * only bumps a generation number: a slot from an older generation reads as
 * zero and its owner zeroes it before its next write, so a reset never races
 * a writer.  Lease rows are claimed by compare-and-swap on their owner pid
 * and written under a change counter (PgBackendStatus' protocol), so a
 * reader copies a row consistently without locking it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <signal.h>

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "portability/instr_time.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "stats.h"

/* Bytes of a lease name kept in rp_locks (longer names are truncated). */
#define RP_LOCKS_NAME_MAX	200

/* ------------------------------------------------------------------------
 * Shared memory layout.
 * ------------------------------------------------------------------------
 */

typedef enum RpCounter
{
	RP_C_CALLS,
	RP_C_OK,
	RP_C_REFUSED,
	RP_C_ERR_08,
	RP_C_ERR_53,
	RP_C_ERR_57,
	RP_C_ERR_RP,
	RP_C_ERR_OTHER,
	RP_C_TIMEOUTS,
	RP_C_RECONNECTS,
	RP_C_NOSCRIPT,
	RP_C_TOTAL_US,
	RP_C_MAX_US,
	RP_C_SHADOW_REFUSED,		/* admitted in shadow mode, refused by the limit */
	RP_NUM_COUNTERS
} RpCounter;

typedef struct RpStatSlot
{
	pg_atomic_uint32 gen;		/* reset generation these counters belong to */
	pg_atomic_uint64 c[RP_NUM_PRIMITIVES][RP_NUM_COUNTERS];
} RpStatSlot;

typedef struct RpLockEntry
{
	pg_atomic_uint32 owner;		/* pid of the backend holding it; 0 = free */
	volatile uint32 changecount;	/* odd while the owner writes */
	ProcNumber	procno;		/* its MyProcNumber, INVALID_PROC_NUMBER when free */
	int			pid;
	Oid			dbid;
	Oid			roleid;
	int64		fence;
	TimestampTz acquired_at;
	TimestampTz expires_at;
	bool		xact;
	char		name[RP_LOCKS_NAME_MAX];

	/*
	 * What other backends of this server learned of the lease: a release
	 * or extend by token, asked for or answered by Redis.  Under mutex:
	 * tokhash (a keyed hash of the lease's token and Redis key, never
	 * shown), and override (0: nothing;
	 * else the earliest deadline other backends told since the owner last
	 * cleared it, RP_LOCKS_REVOKED for a release, RP_LOCKS_DOUBTED for one
	 * whose outcome is not known) with override_seq counting
	 * the overrides.
	 */
	slock_t		mutex;
	uint64		tokhash;
	TimestampTz override;
	uint32		override_seq;
	uint32		pending;		/* extends by token told, not yet answered:
								 * while any, the owner keeps the override */
	TimestampTz latest;			/* 0, or the latest deadline an extend by
								 * token asked for (it may have run): the
								 * owner's duty to release lasts until then */
} RpLockEntry;

typedef struct RpStatsShared
{
	pg_atomic_uint32 gen;		/* bumped by rp_stats_reset */
	pg_atomic_uint64 reset_at;	/* TimestampTz of the last reset */
	slock_t		shared_mutex;	/* guards slots[nslots - 1] */
	int			nslots;			/* MaxBackends + 1 */
	int			nlocks;			/* redis_primitives.max_tracked_leases */
	pg_atomic_uint64 locks_not_shown;	/* leases held now but not in the table */
	pg_atomic_uint64 locks_not_shown_total;	/* since startup */
	uint64		tokhash_key;	/* random, keys the rows' token hashes */
	RpStatSlot *slots;
	RpLockEntry *locks;
} RpStatsShared;

static RpStatsShared *rp_stats_shared = NULL;
static RpStatSlot *rp_stats_slots = NULL;
static RpLockEntry *rp_lock_entries = NULL;

/* Settings. */
static bool rp_track = true;
static int	rp_max_tracked_leases = 1024;

/* This backend's state. */
static RpPrimitive rp_stats_current = RP_PRIM_OTHER;	/* for connection events */
static bool rp_stats_in_call = false;
static bool rp_stats_connected_once = false;
static int	rp_stats_last_quiet = 0;

#define RP_PRIM_NAME(id, name) name,
static const char *const rp_prim_names[RP_NUM_PRIMITIVES] = {
	RP_PRIMITIVES(RP_PRIM_NAME)
};
#undef RP_PRIM_NAME

static Size
rp_stats_shmem_size(void)
{
	Size		size = MAXALIGN(sizeof(RpStatsShared));

	size = add_size(size, mul_size(MaxBackends + 1, MAXALIGN(sizeof(RpStatSlot))));
	size = add_size(size, mul_size(rp_max_tracked_leases, MAXALIGN(sizeof(RpLockEntry))));
	return size;
}

void
rp_stats_shmem_request(void)
{
	RequestAddinShmemSpace(rp_stats_shmem_size());
}

/* Called under AddinShmemInitLock. */
void
rp_stats_shmem_startup(void)
{
	bool		found;
	char	   *p;

	rp_stats_shared = ShmemInitStruct("redis_primitives stats",
									  rp_stats_shmem_size(), &found);
	p = (char *) rp_stats_shared + MAXALIGN(sizeof(RpStatsShared));
	rp_stats_slots = (RpStatSlot *) p;
	p += mul_size(MaxBackends + 1, MAXALIGN(sizeof(RpStatSlot)));
	rp_lock_entries = (RpLockEntry *) p;
	if (!found)
	{
		memset(rp_stats_shared, 0, rp_stats_shmem_size());
		pg_atomic_init_u32(&rp_stats_shared->gen, 1);
		pg_atomic_init_u64(&rp_stats_shared->reset_at, (uint64) GetCurrentTimestamp());
		SpinLockInit(&rp_stats_shared->shared_mutex);
		rp_stats_shared->nslots = MaxBackends + 1;
		rp_stats_shared->nlocks = rp_max_tracked_leases;
		pg_atomic_init_u64(&rp_stats_shared->locks_not_shown, 0);
		pg_atomic_init_u64(&rp_stats_shared->locks_not_shown_total, 0);
		for (int i = 0; i < MaxBackends + 1; i++)
		{
			/* Generation 0 never matches: every slot starts as zero. */
			pg_atomic_init_u32(&rp_stats_slots[i].gen, 0);
			for (int k = 0; k < RP_NUM_PRIMITIVES; k++)
				for (int j = 0; j < RP_NUM_COUNTERS; j++)
					pg_atomic_init_u64(&rp_stats_slots[i].c[k][j], 0);
		}
		for (int i = 0; i < rp_max_tracked_leases; i++)
		{
			pg_atomic_init_u32(&rp_lock_entries[i].owner, 0);
			SpinLockInit(&rp_lock_entries[i].mutex);
			rp_lock_entries[i].procno = INVALID_PROC_NUMBER;
		}
		if (!pg_strong_random(&rp_stats_shared->tokhash_key, sizeof(uint64)))
			rp_stats_shared->tokhash_key = (uint64) GetCurrentTimestamp() ^ (uint64) MyProcPid;
	}
}

void
rp_stats_init(void)
{
	DefineCustomBoolVariable("redis_primitives.track",
							 "Counts every call of a primitive in rp_stats.",
							 "Costs two clock readings and a few counter updates in shared memory per call.",
							 &rp_track, true, PGC_SUSET, 0,
							 NULL, NULL, NULL);
	/*
	 * A PGC_POSTMASTER setting can only be defined while the postmaster
	 * preloads the library; a backend that loads it later (CREATE EXTENSION
	 * without shared_preload_libraries) would end with FATAL.  Without
	 * preloading there is no shared memory to size anyway.
	 */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("redis_primitives.max_tracked_leases",
							"Number of leases rp_locks can show at once, across all backends.",
							"Each takes 288 bytes of shared memory on 64-bit platforms.  Leases beyond it are held as usual but counted in rp_stats_info.locks_not_shown instead of shown.",
								&rp_max_tracked_leases, 1024, 0, 1000000,
								PGC_POSTMASTER, 0, NULL, NULL, NULL);
}

static void
rp_stats_require(void)
{
	if (rp_stats_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("redis_primitives statistics are not available"),
				 errdetail("rp_stats and rp_locks live in shared memory, which exists only when the library is preloaded."),
				 errhint("Add redis_primitives to shared_preload_libraries and restart the server.")));
}

/* ------------------------------------------------------------------------
 * Counting.
 * ------------------------------------------------------------------------
 */

/* This process's slot, or the shared one (then *shared is set). */
static RpStatSlot *
rp_stats_my_slot(bool *shared)
{
	*shared = !(MyProcNumber != INVALID_PROC_NUMBER && MyProcNumber >= 0 &&
				MyProcNumber < MaxBackends);
	return *shared ? &rp_stats_slots[rp_stats_shared->nslots - 1]
		: &rp_stats_slots[MyProcNumber];
}

/* Zero a slot left from an older generation (its writer holds it). */
static inline void
rp_stats_catch_up(RpStatSlot *slot)
{
	uint32		gen = pg_atomic_read_u32(&rp_stats_shared->gen);

	if (pg_atomic_read_u32(&slot->gen) == gen)
		return;
	for (int k = 0; k < RP_NUM_PRIMITIVES; k++)
		for (int j = 0; j < RP_NUM_COUNTERS; j++)
			pg_atomic_write_u64(&slot->c[k][j], 0);
	pg_write_barrier();
	pg_atomic_write_u32(&slot->gen, gen);
}

/* One writer per slot (or the spinlock): a plain read-modify-write. */
static inline void
rp_add(pg_atomic_uint64 *c, uint64 delta)
{
	pg_atomic_write_u64(c, pg_atomic_read_u64(c) + delta);
}

static int
rp_error_counter(int sqlerrcode)
{
	switch (ERRCODE_TO_CATEGORY(sqlerrcode))
	{
		case ERRCODE_CONNECTION_EXCEPTION:
			return RP_C_ERR_08;
		case ERRCODE_INSUFFICIENT_RESOURCES:
			return RP_C_ERR_53;
		case ERRCODE_OPERATOR_INTERVENTION:
			return RP_C_ERR_57;
		case MAKE_SQLSTATE('R', 'P', '0', '0', '0'):
			return RP_C_ERR_RP;
		default:
			return RP_C_ERR_OTHER;
	}
}

/* Add one to a counter of prim in this process's slot. */
static void
rp_stats_bump(RpPrimitive prim, int counter)
{
	bool		shared;
	RpStatSlot *slot = rp_stats_my_slot(&shared);

	if (shared)
		SpinLockAcquire(&rp_stats_shared->shared_mutex);
	rp_stats_catch_up(slot);
	rp_add(&slot->c[prim][counter], 1);
	if (shared)
		SpinLockRelease(&rp_stats_shared->shared_mutex);
}

static void
rp_stats_count(RpPrimitive prim, int64 elapsed_us, RpOutcome outcome,
			   int sqlerrcode)
{
	bool		shared;
	RpStatSlot *slot;
	pg_atomic_uint64 *c;
	/*
	 * Whole microseconds, and at least one: a call refused before any work
	 * (rp_extend(NULL, 10)) can take less, and rounded down it would be a
	 * call that took no time at all.
	 */
	uint64		us = (uint64) Max(elapsed_us, 1);

	if (rp_stats_shared == NULL)
		return;
	slot = rp_stats_my_slot(&shared);
	if (shared)
		SpinLockAcquire(&rp_stats_shared->shared_mutex);
	rp_stats_catch_up(slot);
	c = slot->c[prim];
	rp_add(&c[RP_C_CALLS], 1);
	if (outcome == RP_OUTCOME_OK)
		rp_add(&c[RP_C_OK], 1);
	else if (outcome == RP_OUTCOME_REFUSED)
		rp_add(&c[RP_C_REFUSED], 1);
	else
		rp_add(&c[rp_error_counter(sqlerrcode)], 1);
	rp_add(&c[RP_C_TOTAL_US], us);
	if (us > pg_atomic_read_u64(&c[RP_C_MAX_US]))
		pg_atomic_write_u64(&c[RP_C_MAX_US], us);
	if (shared)
		SpinLockRelease(&rp_stats_shared->shared_mutex);
}

/*
 * The rate limiter's observer (ratelimit.h; _PG_init sets the hook): a call
 * admitted in shadow mode that the limit would have refused.  The call
 * itself is counted by its wrapper as ok (it admitted); this adds it to
 * shadow_refused, a subset of ok, so calls = ok + refused + errors still
 * holds.
 */
void
rp_stats_ratelimit_observed(const char *algorithm, bool allowed,
							bool would_refuse, bool shadow)
{
	RpPrimitive prim = RP_PRIM_RATELIMIT_SLIDING_LOG;

	if (!shadow || !would_refuse || !rp_track || rp_stats_shared == NULL)
		return;
	for (int k = RP_PRIM_RATELIMIT_SLIDING_LOG; k <= RP_PRIM_RATELIMIT_GCRA; k++)
		if (strcmp(rp_prim_names[k] + strlen("ratelimit_"), algorithm) == 0)
			prim = (RpPrimitive) k;
	rp_stats_bump(prim, RP_C_SHADOW_REFUSED);
}

void
rp_stats_record(RpPrimitive prim, int64 elapsed_us, RpOutcome outcome,
				int sqlerrcode)
{
	if (rp_track)
		rp_stats_count(prim, elapsed_us, outcome, sqlerrcode);
}

void
rp_stats_set_default(RpPrimitive prim)
{
	rp_stats_current = prim;
}

void
rp_stats_conn_event(RpConnEvent event)
{
	int			counter;

	if (event == RP_EVENT_CONNECT)
	{
		/* A process's first connection is not a reconnect. */
		if (!rp_stats_connected_once)
		{
			rp_stats_connected_once = true;
			return;
		}
		counter = RP_C_RECONNECTS;
	}
	else if (event == RP_EVENT_TIMEOUT)
		counter = RP_C_TIMEOUTS;
	else
		counter = RP_C_NOSCRIPT;
	if (!rp_track || rp_stats_shared == NULL)
		return;
	rp_stats_bump(rp_stats_current, counter);
}

void
rp_stats_quiet_error(int sqlerrcode)
{
	rp_stats_last_quiet = sqlerrcode;
}

int
rp_stats_quiet_sqlstate(void)
{
	return rp_stats_last_quiet;
}

RpPrimitive
rp_stats_ratelimit_prim(FunctionCallInfo fcinfo, int argno)
{
	static const RpPrimitive algs[] = {
		RP_PRIM_RATELIMIT_SLIDING_LOG, RP_PRIM_RATELIMIT_SLIDING_WINDOW,
		RP_PRIM_RATELIMIT_GCRA
	};
	text	   *t;
	size_t		len;

	/* No valid algorithm: counted (as the error it is) under the default. */
	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return RP_PRIM_RATELIMIT_SLIDING_LOG;
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	for (size_t i = 0; i < lengthof(algs); i++)
	{
		const char *n = rp_prim_names[algs[i]] + strlen("ratelimit_");

		if (strlen(n) == len && memcmp(n, VARDATA_ANY(t), len) == 0)
			return algs[i];
	}
	return RP_PRIM_RATELIMIT_SLIDING_LOG;
}

static RpOutcome
rp_stats_outcome(RpOutcomeKind kind, FunctionCallInfo fcinfo, Datum result)
{
	switch (kind)
	{
		case RP_OUT_PLAIN:
			return RP_OUTCOME_OK;
		case RP_OUT_NULL_REFUSED:
			return fcinfo->isnull ? RP_OUTCOME_REFUSED : RP_OUTCOME_OK;
		case RP_OUT_FALSE_REFUSED:
			return !fcinfo->isnull && !DatumGetBool(result) ?
				RP_OUTCOME_REFUSED : RP_OUTCOME_OK;
		case RP_OUT_RECORD_REFUSED:
			{
				bool		isnull;
				Datum		first;

				if (fcinfo->isnull)
					return RP_OUTCOME_OK;
				first = GetAttributeByNum(DatumGetHeapTupleHeader(result), 1, &isnull);
				return !isnull && !DatumGetBool(first) ?
					RP_OUTCOME_REFUSED : RP_OUTCOME_OK;
			}
	}
	return RP_OUTCOME_OK;
}

Datum
rp_stats_call(RpPrimitive prim, RpOutcomeKind kind, PGFunction body,
			  FunctionCallInfo fcinfo)
{
	instr_time	start;
	instr_time	end;
	Datum		result = (Datum) 0;
	RpPrimitive saved_current = rp_stats_current;
	bool		saved_in_call = rp_stats_in_call;

	/* Not counted, or a primitive called from inside another one. */
	if (!rp_track || rp_stats_shared == NULL || rp_stats_in_call)
		return body(fcinfo);

	rp_stats_current = prim;
	rp_stats_in_call = true;
	INSTR_TIME_SET_CURRENT(start);
	PG_TRY();
	{
		result = body(fcinfo);
	}
	PG_CATCH();
	{
		rp_stats_current = saved_current;
		rp_stats_in_call = saved_in_call;
		INSTR_TIME_SET_CURRENT(end);
		INSTR_TIME_SUBTRACT(end, start);
		rp_stats_count(prim, INSTR_TIME_GET_MICROSEC(end), RP_OUTCOME_ERROR,
					   geterrcode());
		PG_RE_THROW();
	}
	PG_END_TRY();
	rp_stats_current = saved_current;
	rp_stats_in_call = saved_in_call;
	INSTR_TIME_SET_CURRENT(end);
	INSTR_TIME_SUBTRACT(end, start);
	rp_stats_count(prim, INSTR_TIME_GET_MICROSEC(end),
				   rp_stats_outcome(kind, fcinfo, result), 0);
	return result;
}

/* ------------------------------------------------------------------------
 * The lease table.
 * ------------------------------------------------------------------------
 */

/*
 * This backend's published leases: registry pointer -> entry (-1: not
 * shown), in an array the exit walks, and found by key through a hash of
 * their places in it.  A session may hold tens of thousands of leases, and
 * rp_leases(), rp_release_all() and the exit look up the row of each one:
 * a linear search made those quadratic (32,000 leases: 210 ms for
 * rp_leases()).
 */
typedef struct RpLocalLease
{
	const void *key;
	int			idx;
} RpLocalLease;

typedef struct RpLocalSlot
{
	const void *key;			/* hash key */
	int			li;				/* its place in rp_local */
} RpLocalSlot;

static RpLocalLease *rp_local = NULL;
static int	rp_nlocal = 0;
static int	rp_local_cap = 0;
static HTAB *rp_local_slots = NULL;

/*
 * rp_local_slots' allocator: NULL, not an error, when memory runs out, so
 * that HASH_ENTER_NULL can return NULL (PostgreSQL 15's default allocator
 * throws, and a debug build asserts it is not used with HASH_ENTER_NULL):
 * publishing a lease Redis granted must never throw.
 */
static void *
rp_local_slots_alloc(Size size)
{
	return MemoryContextAllocExtended(TopMemoryContext, size, MCXT_ALLOC_NO_OOM);
}
static bool rp_locks_exit_registered = false;
static int	rp_locks_rover = -1;

static inline void
rp_entry_begin_write(RpLockEntry *e)
{
	e->changecount++;
	pg_write_barrier();
}

static inline void
rp_entry_end_write(RpLockEntry *e)
{
	pg_write_barrier();
	e->changecount++;
}

static void
rp_locks_free_entry(int idx)
{
	RpLockEntry *e = &rp_lock_entries[idx];

	rp_entry_begin_write(e);
	e->pid = 0;
	e->procno = INVALID_PROC_NUMBER;	/* see rp_locks_first_use */
	rp_entry_end_write(e);
	SpinLockAcquire(&e->mutex);
	e->tokhash = 0;
	e->override = 0;
	e->pending = 0;
	e->latest = 0;
	SpinLockRelease(&e->mutex);
	pg_atomic_write_u32(&e->owner, 0);
}

/* Backend exit, FATAL included: nothing this process published survives. */
static void
rp_locks_exit(int code, Datum arg)
{
	for (int i = 0; i < rp_nlocal; i++)
	{
		if (rp_local[i].idx >= 0)
			rp_locks_free_entry(rp_local[i].idx);
		else
			pg_atomic_fetch_sub_u64(&rp_stats_shared->locks_not_shown, 1);
	}
	rp_nlocal = 0;
}

void
rp_locks_register_exit(void)
{
	if (rp_locks_exit_registered)
		return;
	before_shmem_exit(rp_locks_exit, (Datum) 0);
	rp_locks_exit_registered = true;
}

/*
 * First use in this process: register the exit callback, and free rows a
 * previous process with this process number left.  It can only have died
 * without its exit callbacks, which means a crash restart that reset this
 * memory anyway: this is a second line of defence, so it frees a row only
 * when its owner is certainly gone.  A row just claimed by a live backend
 * still carries INVALID_PROC_NUMBER from its last release, and its owner
 * answers kill(0).
 */
static void
rp_locks_first_use(void)
{
	MemoryContext old;
	HASHCTL		ctl;

	ctl.keysize = sizeof(const void *);
	ctl.entrysize = sizeof(RpLocalSlot);
	ctl.hcxt = TopMemoryContext;
	ctl.alloc = rp_local_slots_alloc;
	/*
	 * A directory of fixed size: dynahash grows one by reallocating it and
	 * pfree-ing the old, which it asserts only its own allocator may do.
	 * 1024 segments of 256 buckets: past 262,144 leases a session holds,
	 * the chains grow longer instead.
	 */
	ctl.dsize = ctl.max_dsize = 1024;
	rp_local_slots = hash_create("redis_primitives published leases", 64, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT | HASH_ALLOC |
								 HASH_DIRSIZE);
	old = MemoryContextSwitchTo(TopMemoryContext);
	rp_local_cap = 16;
	rp_local = palloc(sizeof(RpLocalLease) * rp_local_cap);
	MemoryContextSwitchTo(old);
	for (int i = 0; i < rp_stats_shared->nlocks; i++)
	{
		RpLockEntry *e = &rp_lock_entries[i];
		uint32		owner = pg_atomic_read_u32(&e->owner);

		if (owner != 0 && owner != (uint32) MyProcPid &&
			MyProcNumber != INVALID_PROC_NUMBER && e->procno == MyProcNumber &&
			kill((pid_t) owner, 0) != 0 && errno == ESRCH)
			pg_atomic_compare_exchange_u32(&e->owner, &owner, 0);
	}
	rp_locks_register_exit();
	/* Backends start their search in different places. */
	rp_locks_rover = rp_stats_shared->nlocks == 0 ? 0 :
		(int) (((int64) Max(MyProcNumber + 1, 0) * rp_stats_shared->nlocks) /
			   (MaxBackends + 1)) % rp_stats_shared->nlocks;
}

static int
rp_locks_claim(void)
{
	int			n = rp_stats_shared->nlocks;

	for (int k = 0; k < n; k++)
	{
		int			i = (rp_locks_rover + k) % n;
		RpLockEntry *e = &rp_lock_entries[i];
		uint32		expected = 0;

		if (pg_atomic_read_u32(&e->owner) != 0)
			continue;
		if (pg_atomic_compare_exchange_u32(&e->owner, &expected, (uint32) MyProcPid))
		{
			rp_locks_rover = (i + 1) % n;
			return i;
		}
	}
	return -1;
}

static int
rp_locks_find_local(const void *key)
{
	RpLocalSlot *slot;

	if (rp_nlocal == 0)
		return -1;
	slot = hash_search(rp_local_slots, &key, HASH_FIND, NULL);
	/* a place past the end: left by the exit, which empties the array */
	if (slot == NULL || slot->li >= rp_nlocal || rp_local[slot->li].key != key)
		return -1;
	return slot->li;
}

void
rp_locks_publish(const void *key, const char *name, size_t namelen,
				 int64 fence, TimestampTz expires_at, bool xact)
{
	int			li;
	int			idx;
	RpLockEntry *e;
	size_t		n;
	bool		is_new = false;

	if (rp_stats_shared == NULL)
		return;
	if (rp_local == NULL)
		rp_locks_first_use();

	li = rp_locks_find_local(key);
	if (li >= 0)
		idx = rp_local[li].idx;
	else
	{
		RpLocalSlot *slot;

		if (rp_nlocal == rp_local_cap)
		{
			int			cap = rp_local_cap * 2;
			RpLocalLease *grown = MemoryContextAllocExtended(TopMemoryContext,
															 sizeof(RpLocalLease) * cap,
															 MCXT_ALLOC_NO_OOM);

			if (grown == NULL)
				return;			/* not shown, not counted: never throw here */
			memcpy(grown, rp_local, sizeof(RpLocalLease) * rp_nlocal);
			pfree(rp_local);
			rp_local = grown;
			rp_local_cap = cap;
		}
		/* HASH_ENTER_NULL: NULL, not an error, when memory runs out */
		slot = hash_search(rp_local_slots, &key, HASH_ENTER_NULL, NULL);
		if (slot == NULL)
			return;				/* not shown, not counted, as above */
		idx = rp_locks_claim();
		is_new = true;
		li = rp_nlocal++;
		slot->li = li;
		rp_local[li].key = key;
		rp_local[li].idx = idx;
		if (idx < 0)
		{
			pg_atomic_fetch_add_u64(&rp_stats_shared->locks_not_shown, 1);
			pg_atomic_fetch_add_u64(&rp_stats_shared->locks_not_shown_total, 1);
		}
	}
	if (idx < 0)
		return;

	e = &rp_lock_entries[idx];
	/* Clipped on a character boundary, as pg_stat_activity clips queries. */
	n = namelen < RP_LOCKS_NAME_MAX ? namelen :
		(size_t) pg_mbcliplen(name, (int) namelen, RP_LOCKS_NAME_MAX - 1);
	rp_entry_begin_write(e);
	if (is_new)
	{
		/* A new row. */
		e->procno = MyProcNumber;
		e->pid = MyProcPid;
		e->dbid = MyDatabaseId;
		e->roleid = GetSessionUserId();
		e->acquired_at = GetCurrentTimestamp();
	}
	e->fence = fence;
	e->expires_at = expires_at;
	e->xact = xact;
	memcpy(e->name, name, n);
	e->name[n] = '\0';
	rp_entry_end_write(e);
}

/*
 * The keyed hash of a lease's token and the Redis key it is held under.  A
 * call by token acts on one key: one under another name or key_prefix
 * (Redis answers "not held") must not mark the lease it did not touch.  The
 * server is left out: one reached under other settings (another address,
 * a proxy) must still mark it.
 */
static uint64
rp_locks_tokhash(const char *rkey, size_t rkeylen, const char *token)
{
	uint64		h = hash_bytes_extended((const unsigned char *) token, (int) strlen(token),
										rp_stats_shared->tokhash_key);

	h = hash_bytes_extended((const unsigned char *) rkey, (int) rkeylen, h);
	return h == 0 ? 1 : h;		/* 0 means "no token" */
}

/* This backend's row of key, or NULL (not published, or not shown). */
static RpLockEntry *
rp_locks_own_row(const void *key)
{
	int			li;

	if (rp_stats_shared == NULL || rp_nlocal == 0)
		return NULL;
	li = rp_locks_find_local(key);
	if (li < 0 || rp_local[li].idx < 0)
		return NULL;
	return &rp_lock_entries[rp_local[li].idx];
}

void
rp_locks_bind_token(const void *key, const char *rkey, size_t rkeylen, const char *token)
{
	RpLockEntry *e = rp_locks_own_row(key);
	uint64		h;

	if (e == NULL)
		return;
	h = rp_locks_tokhash(rkey, rkeylen, token);
	SpinLockAcquire(&e->mutex);
	e->tokhash = h;
	e->override = 0;
	e->override_seq = 0;
	e->pending = 0;
	e->latest = 0;
	SpinLockRelease(&e->mutex);
}

bool
rp_locks_override_of(const void *key, TimestampTz *deadline, uint32 *seq,
					 TimestampTz *latest)
{
	RpLockEntry *e = rp_locks_own_row(key);
	TimestampTz o;

	if (latest != NULL)
		*latest = 0;
	if (e == NULL)
	{
		*seq = 0;
		return false;
	}
	SpinLockAcquire(&e->mutex);
	o = e->override;
	*seq = e->override_seq;
	if (latest != NULL)
		*latest = e->latest;
	SpinLockRelease(&e->mutex);
	if (o == 0)
		return false;
	*deadline = o;
	return true;
}

void
rp_locks_override_clear(const void *key, uint32 seq)
{
	RpLockEntry *e = rp_locks_own_row(key);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	if (e->override_seq == seq && e->override > RP_LOCKS_DOUBTED && e->pending == 0)
		e->override = 0;
	SpinLockRelease(&e->mutex);
}

int
rp_locks_override_token(const char *rkey, size_t rkeylen, const char *token,
						TimestampTz deadline, int pending)
{
	uint64		h;
	int			n = 0;

	if (rp_stats_shared == NULL)
		return 0;
	h = rp_locks_tokhash(rkey, rkeylen, token);
	for (int i = 0; i < rp_stats_shared->nlocks; i++)
	{
		RpLockEntry *e = &rp_lock_entries[i];

		if (pg_atomic_read_u32(&e->owner) == 0)
			continue;
		SpinLockAcquire(&e->mutex);
		if (e->tokhash == h)
		{
			/*
			 * The earliest deadline told since the owner's own last word:
			 * two tellers' extends may reach Redis in one order and be
			 * told here in the other, and only the earliest is sure.  A
			 * release (the earliest of all) is final.
			 */
			if (e->override == 0 || deadline < e->override)
				e->override = deadline;
			e->override_seq++;
			if (pending > 0)
				e->pending++;
			else if (pending < 0 && e->pending > 0)
				e->pending--;
			/* An extend that may have run: Redis may hold it until then. */
			if (pending != 0 && deadline > RP_LOCKS_DOUBTED && deadline > e->latest)
				e->latest = deadline;
			n++;
		}
		SpinLockRelease(&e->mutex);
	}
	return n;
}

void
rp_locks_unpublish(const void *key)
{
	int			li;

	if (rp_stats_shared == NULL || rp_nlocal == 0)
		return;
	li = rp_locks_find_local(key);
	if (li < 0)
		return;
	if (rp_local[li].idx >= 0)
		rp_locks_free_entry(rp_local[li].idx);
	else
		pg_atomic_fetch_sub_u64(&rp_stats_shared->locks_not_shown, 1);
	hash_search(rp_local_slots, &key, HASH_REMOVE, NULL);
	/* the last one takes its place */
	if (li != --rp_nlocal)
	{
		RpLocalSlot *moved;

		rp_local[li] = rp_local[rp_nlocal];
		moved = hash_search(rp_local_slots, &rp_local[li].key, HASH_FIND, NULL);
		Assert(moved != NULL);
		moved->li = li;
	}
}

/* ------------------------------------------------------------------------
 * SQL functions.
 * ------------------------------------------------------------------------
 */

/* rp_stats() -> one row per primitive, summed over every slot */
PG_FUNCTION_INFO_V1(rp_stats);
Datum
rp_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	uint64		sum[RP_NUM_PRIMITIVES][RP_NUM_COUNTERS];
	uint32		gen;

	rp_stats_require();
	InitMaterializedSRF(fcinfo, 0);
	memset(sum, 0, sizeof(sum));
	gen = pg_atomic_read_u32(&rp_stats_shared->gen);
	for (int s = 0; s < rp_stats_shared->nslots; s++)
	{
		RpStatSlot *slot = &rp_stats_slots[s];

		if (pg_atomic_read_u32(&slot->gen) != gen)
			continue;			/* zero since the reset */
		pg_read_barrier();
		for (int k = 0; k < RP_NUM_PRIMITIVES; k++)
			for (int j = 0; j < RP_NUM_COUNTERS; j++)
			{
				uint64		v = pg_atomic_read_u64(&slot->c[k][j]);

				if (j == RP_C_MAX_US)
					sum[k][j] = Max(sum[k][j], v);
				else
					sum[k][j] += v;
			}
	}
	for (int k = 0; k < RP_NUM_PRIMITIVES; k++)
	{
		Datum		values[16];
		bool		nulls[16];
		uint64	   *c = sum[k];
		int			i = 0;

		memset(nulls, 0, sizeof(nulls));
		values[i++] = CStringGetTextDatum(rp_prim_names[k]);
		values[i++] = Int64GetDatum((int64) c[RP_C_CALLS]);
		values[i++] = Int64GetDatum((int64) c[RP_C_OK]);
		values[i++] = Int64GetDatum((int64) c[RP_C_REFUSED]);
		values[i++] = Int64GetDatum((int64) (c[RP_C_ERR_08] + c[RP_C_ERR_53] +
											 c[RP_C_ERR_57] + c[RP_C_ERR_RP] +
											 c[RP_C_ERR_OTHER]));
		values[i++] = Int64GetDatum((int64) c[RP_C_ERR_08]);
		values[i++] = Int64GetDatum((int64) c[RP_C_ERR_53]);
		values[i++] = Int64GetDatum((int64) c[RP_C_ERR_57]);
		values[i++] = Int64GetDatum((int64) c[RP_C_ERR_RP]);
		values[i++] = Int64GetDatum((int64) c[RP_C_ERR_OTHER]);
		values[i++] = Int64GetDatum((int64) c[RP_C_TIMEOUTS]);
		values[i++] = Int64GetDatum((int64) c[RP_C_RECONNECTS]);
		values[i++] = Int64GetDatum((int64) c[RP_C_NOSCRIPT]);
		values[i++] = Float8GetDatum(c[RP_C_TOTAL_US] / 1000.0);
		values[i++] = Float8GetDatum(c[RP_C_MAX_US] / 1000.0);
		values[i++] = Int64GetDatum((int64) c[RP_C_SHADOW_REFUSED]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* rp_stats_reset() -> void: every counter reads zero from now on */
PG_FUNCTION_INFO_V1(rp_stats_reset);
Datum
rp_stats_reset(PG_FUNCTION_ARGS)
{
	rp_stats_require();
	pg_atomic_write_u64(&rp_stats_shared->reset_at, (uint64) GetCurrentTimestamp());
	pg_write_barrier();
	/* Skip 0: it marks a slot never written. */
	if (pg_atomic_add_fetch_u32(&rp_stats_shared->gen, 1) == 0)
		pg_atomic_add_fetch_u32(&rp_stats_shared->gen, 1);
	PG_RETURN_VOID();
}

/*
 * rp_stats_info() -> (stats_reset, track, locks_capacity, locks_shown,
 * locks_not_shown, locks_not_shown_total, shmem_bytes)
 */
PG_FUNCTION_INFO_V1(rp_stats_info);
Datum
rp_stats_info(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[7];
	bool		nulls[7] = {false, false, false, false, false, false, false};
	int			shown = 0;

	rp_stats_require();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	for (int i = 0; i < rp_stats_shared->nlocks; i++)
		if (pg_atomic_read_u32(&rp_lock_entries[i].owner) != 0)
			shown++;
	values[0] = TimestampTzGetDatum((TimestampTz) pg_atomic_read_u64(&rp_stats_shared->reset_at));
	values[1] = BoolGetDatum(rp_track);
	values[2] = Int32GetDatum(rp_stats_shared->nlocks);
	values[3] = Int32GetDatum(shown);
	values[4] = Int64GetDatum((int64) pg_atomic_read_u64(&rp_stats_shared->locks_not_shown));
	values[5] = Int64GetDatum((int64) pg_atomic_read_u64(&rp_stats_shared->locks_not_shown_total));
	values[6] = Int64GetDatum((int64) rp_stats_shmem_size());
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}

/*
 * rp_locks() -> every lease a backend of this server holds.  A role sees the
 * rows of roles whose privileges it has, or all of them with
 * pg_read_all_stats, as in pg_stat_activity.
 */
PG_FUNCTION_INFO_V1(rp_locks);
Datum
rp_locks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			me = GetUserId();
	bool		all = has_privs_of_role(me, ROLE_PG_READ_ALL_STATS);
	TimestampTz now = GetCurrentTimestamp();

	rp_stats_require();
	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < rp_stats_shared->nlocks; i++)
	{
		RpLockEntry *e = &rp_lock_entries[i];
		RpLockEntry copy;
		Datum		values[9];
		bool		nulls[9];

		if (pg_atomic_read_u32(&e->owner) == 0)
			continue;
		for (;;)
		{
			uint32		before = e->changecount;

			pg_read_barrier();
			memcpy(&copy, e, sizeof(RpLockEntry));
			pg_read_barrier();
			if (before == e->changecount && (before & 1) == 0)
				break;
			CHECK_FOR_INTERRUPTS();
		}
		if (copy.pid == 0)
			continue;
		if (!all && !has_privs_of_role(me, copy.roleid))
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(copy.pid);
		values[1] = ObjectIdGetDatum(copy.dbid);
		values[2] = ObjectIdGetDatum(copy.roleid);
		values[3] = CStringGetTextDatum(copy.name);
		values[4] = Int64GetDatum(copy.fence);
		values[5] = CStringGetTextDatum(copy.xact ? "xact" : "session");
		values[6] = TimestampTzGetDatum(copy.acquired_at);
		values[7] = TimestampTzGetDatum(copy.expires_at);
		values[8] = BoolGetDatum(now >= copy.expires_at);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
