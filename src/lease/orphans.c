/*-------------------------------------------------------------------------
 *
 * orphans.c
 *		A small shared-memory queue of (lock key, token) pairs that exiting
 *		backends could not release, drained by the background worker.
 *
 * A backend that exits while Redis is hung (or unreachable) cannot wait for
 * it: its exit release has a deadline of half a second.  The leases it held,
 * and the acquires it may have been granted, would then live out their whole
 * TTL.  The backend copies them here instead, and the worker (which outlives
 * it) releases them by compare-and-delete as soon as Redis answers again,
 * retrying every RP_ORPHAN_RETRY_MS until each is released or past its TTL.
 *
 * Keys are as long as lock names are (any length): they live end to end in
 * one byte array beside the entries, in the entries' order, and a release
 * closes the gap it leaves, so the space is never fragmented.
 *
 * Before editing, know this: rp_orphans_handoff runs inside a backend's exit
 * callback, so it must never throw or wait: when the entries or the key
 * space are full of live leases (expired ones make room first, and for a
 * lease nobody else will release, those whose backends will), the lease is
 * dropped with a WARNING, and the TTL is the safety net.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "conn.h"
#include "orphans.h"
#include "token.h"
#include "rp_scripts.h"

#define RP_ORPHAN_SLOTS		128
#define RP_ORPHAN_KEY_SPACE	(256 * 1024)	/* bytes, every queued key */
#define RP_ORPHAN_TOKEN_MAX	64
#define RP_ORPHAN_TIMEOUT_MS 500	/* one release attempt */
StaticAssertDecl(RP_TOKEN_LEN < RP_ORPHAN_TOKEN_MAX, "a token fits an entry");

typedef struct RpOrphan
{
	uint32		keyoff;			/* in RpOrphanQueue.keys */
	uint32		keylen;
	char		token[RP_ORPHAN_TOKEN_MAX];
	TimestampTz expires_at;
	bool		backed;			/* its backend releases it too (orphans.h) */
} RpOrphan;

typedef struct RpOrphanQueue
{
	LWLock	   *lock;
	ProcNumber	worker;			/* INVALID_PROC_NUMBER while no worker runs */
	pg_atomic_uint32 displaced;	/* backed entries given away so far */
	/* the tokens of the last RP_ORPHAN_SLOTS given away, a ring */
	char		gone[RP_ORPHAN_SLOTS][RP_ORPHAN_TOKEN_MAX];
	int			n;				/* entries[0 .. n) are queued */
	uint32		keyused;		/* keys[0 .. keyused) are theirs, in order */
	RpOrphan	entries[RP_ORPHAN_SLOTS];
	char		keys[RP_ORPHAN_KEY_SPACE];
} RpOrphanQueue;

static RpOrphanQueue *rp_queue = NULL;

void
rp_orphans_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(RpOrphanQueue)));
	RequestNamedLWLockTranche("redis_primitives orphans", 1);
}

/* Called under AddinShmemInitLock. */
void
rp_orphans_shmem_startup(void)
{
	bool		found;

	rp_queue = ShmemInitStruct("redis_primitives orphans",
							   sizeof(RpOrphanQueue), &found);
	if (!found)
	{
		memset(rp_queue, 0, sizeof(RpOrphanQueue));
		rp_queue->lock = &(GetNamedLWLockTranche("redis_primitives orphans"))->lock;
		rp_queue->worker = INVALID_PROC_NUMBER;
		pg_atomic_init_u32(&rp_queue->displaced, 0);
	}
}

/* This backend's leases not handed since its last queue-full WARNING. */
static int	rp_handoff_unwarned = 0;
static size_t rp_handoff_last_keylen = 0;
static TimestampTz rp_handoff_warned_at = 0;

/*
 * The queue-full WARNING for the leases not handed since the last one, if
 * any: at the first refusal of a burst, then (rp_orphans_handoff) once a
 * second, and for the rest of the burst at the transaction's end or exit
 * (lease.c), so that every lease left to its TTL is counted once.
 */
void
rp_orphans_report(void)
{
	int			queued_n = 0;
	uint32		queued_bytes = 0;

	if (rp_handoff_unwarned == 0 || rp_queue == NULL)
		return;
	LWLockAcquire(rp_queue->lock, LW_SHARED);
	queued_n = rp_queue->n;
	queued_bytes = rp_queue->keyused;
	LWLockRelease(rp_queue->lock);
	ereport(WARNING,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("could not hand %d Redis lease(s) to the background worker: its queue is full",
					rp_handoff_unwarned),
			 errdetail("The queue holds at most %d leases and %d bytes of keys; %d leases and %u bytes are queued, and the last lease's key is %zu bytes.  The leases will expire by their TTL.",
					   RP_ORPHAN_SLOTS, RP_ORPHAN_KEY_SPACE, queued_n,
					   queued_bytes, rp_handoff_last_keylen)));
	rp_handoff_warned_at = GetCurrentTimestamp();
	rp_handoff_unwarned = 0;
}

/* Whether a key of keylen bytes has a place.  Caller holds the lock. */
static bool
rp_orphans_fits(size_t keylen)
{
	return rp_queue->n < RP_ORPHAN_SLOTS &&
		keylen <= RP_ORPHAN_KEY_SPACE - rp_queue->keyused;
}

/*
 * Remove the entries marked in drop, in one pass that keeps the rest in
 * order, their keys end to end (no memmove per entry under the lock in an
 * exit callback).  Caller holds the lock exclusively.
 */
static void
rp_orphans_compact(const bool *drop)
{
	int			kept = 0;
	uint32		used = 0;

	for (int i = 0; i < rp_queue->n; i++)
	{
		RpOrphan	o = rp_queue->entries[i];

		if (drop[i])
			continue;
		/* Keys lie in entry order: this one never moves up. */
		if (o.keyoff != used)
			memmove(rp_queue->keys + used, rp_queue->keys + o.keyoff, o.keylen);
		o.keyoff = used;
		used += o.keylen;
		rp_queue->entries[kept++] = o;
	}
	rp_queue->n = kept;
	rp_queue->keyused = used;
}

/*
 * Make room for a key of keylen bytes in a full queue; true when there is
 * room now.  First the entries past their deadline go: Redis has let those
 * leases go.  The worker drops them too, but in queue order, and stops at
 * the first lease Redis does not answer: while Redis is down, a live lease
 * at the head would keep every expired one behind it in its place.  Then,
 * for a lease nobody else will release (!backed), backed entries go, the
 * nearest their end first: their backends release those themselves once
 * Redis answers (or hand them over again, unbacked, at exit).  A backed
 * entry never displaces another.  Caller holds the lock exclusively.
 */
static bool
rp_orphans_make_room(size_t keylen, bool backed)
{
	bool		drop[RP_ORPHAN_SLOTS];
	TimestampTz now = GetCurrentTimestamp();
	int			slots = RP_ORPHAN_SLOTS - rp_queue->n;
	uint64		bytes = RP_ORPHAN_KEY_SPACE - rp_queue->keyused;
	int			nbacked = 0;
	uint64		backed_bytes = 0;
	bool		any = false;

	for (int i = 0; i < rp_queue->n; i++)
	{
		RpOrphan   *o = &rp_queue->entries[i];

		drop[i] = o->expires_at <= now;
		if (drop[i])
		{
			any = true;
			slots++;
			bytes += o->keylen;
		}
		else if (o->backed)
		{
			nbacked++;
			backed_bytes += o->keylen;
		}
	}
	/* Displace only when that makes room: never in vain. */
	if (!backed && !(slots >= 1 && bytes >= keylen) &&
		slots + nbacked >= 1 && bytes + backed_bytes >= keylen)
	{
		while (!(slots >= 1 && bytes >= keylen))
		{
			int			first = -1;

			for (int i = 0; i < rp_queue->n; i++)
			{
				RpOrphan   *o = &rp_queue->entries[i];

				if (!drop[i] && o->backed &&
					(first < 0 || o->expires_at < rp_queue->entries[first].expires_at))
					first = i;
			}
			if (first < 0)
				break;			/* cannot happen: checked above */
			drop[first] = any = true;
			strlcpy(rp_queue->gone[pg_atomic_read_u32(&rp_queue->displaced) % RP_ORPHAN_SLOTS],
					rp_queue->entries[first].token, RP_ORPHAN_TOKEN_MAX);
			pg_atomic_fetch_add_u32(&rp_queue->displaced, 1);
			slots++;
			bytes += rp_queue->entries[first].keylen;
		}
	}
	/* Nothing to drop: a full queue refuses at the cost of one scan. */
	if (any)
		rp_orphans_compact(drop);
	return rp_orphans_fits(keylen);
}

/*
 * The lease handed over is queued already (its backend handed it over,
 * backed, at an earlier transaction end): true, and it is no longer backed
 * unless this hand-off is too.  Caller holds the lock exclusively.
 */
static bool
rp_orphans_requeue(const char *key, size_t keylen, const char *token, bool backed)
{
	for (int i = 0; i < rp_queue->n; i++)
	{
		RpOrphan   *o = &rp_queue->entries[i];

		if (strcmp(o->token, token) == 0 && o->keylen == keylen &&
			memcmp(rp_queue->keys + o->keyoff, key, keylen) == 0)
		{
			o->backed = o->backed && backed;
			return true;
		}
	}
	return false;
}

bool
rp_orphans_handoff(const char *key, size_t keylen, const char *token,
				   TimestampTz expires_at, bool backed)
{
	ProcNumber	worker = INVALID_PROC_NUMBER;
	bool		queued = false;

	if (rp_queue == NULL)
		return false;			/* not preloaded: no worker (orphans.h) */
	LWLockAcquire(rp_queue->lock, LW_EXCLUSIVE);
	queued = rp_orphans_requeue(key, keylen, token, backed);
	if (!queued && (rp_orphans_fits(keylen) || rp_orphans_make_room(keylen, backed)))
	{
		RpOrphan   *o = &rp_queue->entries[rp_queue->n++];

		o->keyoff = rp_queue->keyused;
		o->keylen = (uint32) keylen;
		memcpy(rp_queue->keys + o->keyoff, key, keylen);
		rp_queue->keyused += (uint32) keylen;
		strlcpy(o->token, token, sizeof(o->token));
		o->expires_at = expires_at;
		o->backed = backed;
		queued = true;
	}
	worker = rp_queue->worker;
	LWLockRelease(rp_queue->lock);
	if (!queued)
	{
		/*
		 * One WARNING a second at most, counting the leases it stands for:
		 * a transaction end or an exit may hand hundreds, and a client that
		 * is not reading (an idle pooled connection, terminated) would hold
		 * the backend in ClientWrite with a WARNING per lease.
		 */
		TimestampTz now = GetCurrentTimestamp();

		rp_handoff_unwarned++;
		rp_handoff_last_keylen = keylen;
		if (TimestampDifferenceExceeds(rp_handoff_warned_at, now, 1000))
			rp_orphans_report();
	}
	else if (worker != INVALID_PROC_NUMBER)
		SetLatch(&GetPGProcByNumber(worker)->procLatch);
	return queued;
}

uint32
rp_orphans_displaced(void)
{
	return rp_queue == NULL ? 0 : pg_atomic_read_u32(&rp_queue->displaced);
}

bool
rp_orphans_was_displaced(const char *token)
{
	bool		found = false;

	if (rp_queue == NULL)
		return false;
	LWLockAcquire(rp_queue->lock, LW_SHARED);
	for (int i = 0; i < RP_ORPHAN_SLOTS && !found; i++)
		found = strcmp(rp_queue->gone[i], token) == 0;
	LWLockRelease(rp_queue->lock);
	return found;
}

/* Remove entry i, closing the gap its key leaves.  Caller holds the lock. */
static void
rp_orphans_remove(int i)
{
	RpOrphan   *o = &rp_queue->entries[i];
	uint32		off = o->keyoff;
	uint32		len = o->keylen;

	memmove(rp_queue->keys + off, rp_queue->keys + off + len,
			rp_queue->keyused - off - len);
	rp_queue->keyused -= len;
	for (int j = i + 1; j < rp_queue->n; j++)
		rp_queue->entries[j].keyoff -= len;
	memmove(&rp_queue->entries[i], &rp_queue->entries[i + 1],
			sizeof(RpOrphan) * (rp_queue->n - i - 1));
	rp_queue->n--;
}

void
rp_orphans_set_worker(void)
{
	if (rp_queue == NULL)
		return;
	LWLockAcquire(rp_queue->lock, LW_EXCLUSIVE);
	rp_queue->worker = MyProcNumber;
	LWLockRelease(rp_queue->lock);
}

bool
rp_orphans_drain(void)
{
	RpOrphan   *batch;
	char	   *keys;
	int			n;
	int			i;
	bool		left;
	TimestampTz now = GetCurrentTimestamp();

	if (rp_queue == NULL)
		return false;
	LWLockAcquire(rp_queue->lock, LW_SHARED);
	n = rp_queue->n;
	LWLockRelease(rp_queue->lock);
	if (n == 0)
		return false;
	/* A copy: backends keep queueing while Redis is asked. */
	batch = palloc(sizeof(RpOrphan) * RP_ORPHAN_SLOTS);
	keys = palloc(RP_ORPHAN_KEY_SPACE);
	LWLockAcquire(rp_queue->lock, LW_SHARED);
	n = rp_queue->n;
	memcpy(batch, rp_queue->entries, sizeof(RpOrphan) * n);
	memcpy(keys, rp_queue->keys, rp_queue->keyused);
	LWLockRelease(rp_queue->lock);

	for (i = 0; i < n; i++)
	{
		RpOrphan   *o = &batch[i];
		bool		done = (o->expires_at <= now);

		if (!done)
		{
			RpArg		key = {keys + o->keyoff, o->keylen};
			RpArg		token = rp_arg_str(o->token);
			RpReply    *r;
			RpStatus	st;

			/* Any answer settles it: released, or no longer ours. */
			done = rp_eval_quiet(rp_token_kind(o->token) == RP_LEASE_PERMIT ?
								 &rp_script_semaphore_release : &rp_script_lock_release,
								 1, &key, 1, &token,
								 RP_ORPHAN_TIMEOUT_MS, &r, &st);
		}
		if (!done)
			break;				/* Redis does not answer: try again later */
		/*
		 * Entries may have moved down, and this one may be gone: a
		 * hand-off that found the queue full dropped it (expired, or
		 * backed and given away).
		 */
		LWLockAcquire(rp_queue->lock, LW_EXCLUSIVE);
		for (int j = 0; j < rp_queue->n; j++)
		{
			RpOrphan   *s = &rp_queue->entries[j];

			if (strcmp(s->token, o->token) == 0 && s->keylen == o->keylen &&
				memcmp(rp_queue->keys + s->keyoff, keys + o->keyoff, o->keylen) == 0)
			{
				rp_orphans_remove(j);
				break;
			}
		}
		LWLockRelease(rp_queue->lock);
	}
	pfree(keys);
	pfree(batch);

	/*
	 * A lease handed off while Redis was being asked is not in this batch,
	 * and its wakeup is gone: the wait inside that exchange (transport.c's
	 * rp_wait) reset the latch.  Whatever is queued now is tried again soon.
	 */
	LWLockAcquire(rp_queue->lock, LW_SHARED);
	left = rp_queue->n > 0;
	LWLockRelease(rp_queue->lock);
	return left;
}
