/*-------------------------------------------------------------------------
 *
 * retry.h
 *		The wait of a waiting acquire (rp_acquire, rp_acquire_all,
 *		rp_semaphore_acquire): its two deadlines, wait_ms and lock_timeout,
 *		and the full-jitter exponential backoff between attempts.
 *
 * Before editing, know this: a pause never runs past either deadline, so
 * the last attempt is made at the deadline, and every pause is a latch wait
 * (rp_latch_sleep): cancel and statement_timeout end it.  What an expired
 * deadline means (NULL, or lock_timeout's 55P03) is the caller's to say.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_RETRY_H
#define RP_RETRY_H

#include "postgres.h"

#include "datatype/timestamp.h"

typedef struct RpRetry
{
	TimestampTz deadline;		/* start + wait_ms */
	TimestampTz lock_deadline;	/* start + lock_timeout when shorter, else 0 */
	long		backoff;		/* ms, the next pause's ceiling */
	long		max_backoff;	/* ms */
} RpRetry;

/* A wait of wait_ms that began at start; pauses double from 5 ms. */
extern void rp_retry_start(RpRetry *r, TimestampTz start, int64 wait_ms,
						   long max_backoff);

/* Has lock_timeout (when it is the shorter deadline) passed at now? */
extern bool rp_retry_lock_timeout(const RpRetry *r, TimestampTz now);

/*
 * Sleep a full-jitter pause in [backoff/2, backoff], never past either
 * deadline, then double the backoff up to max_backoff.
 */
extern void rp_retry_sleep(RpRetry *r, TimestampTz now);

#endif							/* RP_RETRY_H */
