/*-------------------------------------------------------------------------
 *
 * ratecache.h
 *		The rate limiter's refusal cache: a refusal Redis gave is answered
 *		from shared memory, with no round trip, until the moment Redis said a
 *		retry could succeed.
 *
 * Before editing, know this: the cache must never refuse what Redis would
 * admit.  An entry is exact for its (Redis key, max_requests, window_ms,
 * cost, pinned clock, Redis server); anything that can make a refusal
 * obsolete early (an admission with other parameters, a reset) goes through
 * rp_ratecache_admitted / rp_ratecache_flight_settle, and a fill that raced with
 * one of them is dropped (the set's epoch, sampled before the call was
 * sent).  It exists only when the library is preloaded; elsewhere every
 * function here is a no-op that answers "not cached".
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_RATECACHE_H
#define RP_RATECACHE_H

#include "postgres.h"

/* What one rate-limit request is, for the cache. */
typedef struct RpRcRequest
{
	const char *key;			/* the algorithm's full Redis key */
	size_t		keylen;
	int64		max_requests;
	int64		window_ms;
	int64		cost;
	int64		clock_ms;		/* redis_primitives.ratelimit_clock_ms, 0 = TIME */
	uint64		target;			/* which Redis (rp_conn_target_signature) */
} RpRcRequest;

extern void rp_ratecache_init(void);

/* Shared memory, when preloaded: module.c's shmem hooks call these. */
extern void rp_ratecache_shmem_request(void);
extern void rp_ratecache_shmem_startup(void);

/* Shared memory exists and redis_primitives.ratelimit_cache is on. */
extern bool rp_ratecache_usable(void);

/* Monotonic microseconds (CLOCK_MONOTONIC: one clock for every process). */
extern int64 rp_ratecache_now_us(void);

/*
 * With answer: is a refusal of req cached and still live (counted as a
 * hit)?  Always: *epoch receives the epoch of req's set, to be handed to
 * rp_ratecache_store if the call goes to Redis.
 */
extern bool rp_ratecache_lookup(const RpRcRequest *req, bool answer, uint32 *epoch);

/*
 * Redis refused req; the call was sent at sent_us (rp_ratecache_now_us) and
 * Redis says a retry of the same cost can succeed in retry_ms, and the key
 * lives pttl_ms more (-1: no TTL).  Stored unless the set's epoch moved
 * since the call was sent.
 */
extern void rp_ratecache_store(const RpRcRequest *req, uint32 epoch,
							   int64 sent_us, int64 retry_ms, int64 pttl_ms);

/*
 * Redis admitted a consuming call of req: refusals of the same key cached
 * under other parameters may now be wrong, and go.  Runs whether or not the
 * session uses the cache.
 */
extern void rp_ratecache_admitted(const RpRcRequest *req);

/*
 * A call in flight that may empty keys once Redis runs it, for a backend
 * that exits before its exchange ends (pg_terminate_backend, any FATAL: no
 * error handler of the call runs, and Redis may run the call all the same).
 * rp_ratecache_flight_admitting: a consuming call of req is about to be
 * sent; rp_ratecache_flight_forgetting: a reset of key is (once per key,
 * at most three: every entry of the key goes, whatever its parameters).
 * The call ends with rp_ratecache_flight_settle when Redis did or may have
 * run it (an error, a cancel, a reset answered): it drops what the call may
 * have emptied, as rp_ratecache_admitted would for an admission; or with
 * rp_ratecache_flight_end when nothing is owed (an answered consuming call
 * leaves the rest to its reply).  Until then, a backend exit settles it.
 */
#define RP_RC_FLIGHT_KEYS	3		/* a reset's: one key per algorithm */

extern void rp_ratecache_flight_admitting(const RpRcRequest *req);
extern void rp_ratecache_flight_forgetting(const char *key, size_t keylen,
										   uint64 target);
extern void rp_ratecache_flight_settle(void);
extern void rp_ratecache_flight_end(void);

#endif							/* RP_RATECACHE_H */
