/*-------------------------------------------------------------------------
 *
 * retry.c
 *		The wait of a waiting acquire: deadlines and jittered backoff,
 *		shared by the lease lock and the semaphore.
 *
 * Before editing, know this: lock_deadline is set only when lock_timeout is
 * shorter than wait_ms, so when both are set it always comes first; the
 * callers rely on that to tell lock_timeout's error from wait_ms' NULL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/pg_prng.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

#include "conn.h"
#include "retry.h"

void
rp_retry_start(RpRetry *r, TimestampTz start, int64 wait_ms, long max_backoff)
{
	r->deadline = TimestampTzPlusMilliseconds(start, wait_ms);
	r->lock_deadline = 0;
	if (LockTimeout > 0 && wait_ms > LockTimeout)
		r->lock_deadline = TimestampTzPlusMilliseconds(start, LockTimeout);
	r->backoff = 5;
	r->max_backoff = max_backoff;
}

bool
rp_retry_lock_timeout(const RpRetry *r, TimestampTz now)
{
	return r->lock_deadline != 0 && now >= r->lock_deadline;
}

void
rp_retry_sleep(RpRetry *r, TimestampTz now)
{
	long		pause;

	pause = r->backoff / 2 + (long) pg_prng_uint64_range(&pg_global_prng_state, 0, r->backoff / 2);
	if (r->lock_deadline != 0)
		pause = Min(pause, TimestampDifferenceMilliseconds(now, r->lock_deadline));
	pause = Min(pause, TimestampDifferenceMilliseconds(now, r->deadline));
	rp_latch_sleep(pause, RP_WAIT_LEASE_WAIT);
	r->backoff = Min(r->backoff * 2, r->max_backoff);
}
