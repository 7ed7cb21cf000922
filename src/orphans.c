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
 * Before editing, know this: rp_orphans_handoff runs inside a backend's exit
 * callback, so it must never throw or wait: a full queue or a key too long
 * for a slot is dropped with a WARNING, and the TTL is the safety net.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "conn.h"
#include "orphans.h"
#include "token.h"
#include "rp_scripts.h"

#define RP_ORPHAN_SLOTS		128
#define RP_ORPHAN_KEY_MAX	512		/* bytes, key and its length */
#define RP_ORPHAN_TOKEN_MAX	64
#define RP_ORPHAN_TIMEOUT_MS 500	/* one release attempt */

typedef struct RpOrphan
{
	bool		used;
	uint16		keylen;
	char		key[RP_ORPHAN_KEY_MAX];
	char		token[RP_ORPHAN_TOKEN_MAX];
	TimestampTz expires_at;
} RpOrphan;

typedef struct RpOrphanQueue
{
	LWLock	   *lock;
	int			worker_pgprocno;	/* -1 while no worker runs */
	RpOrphan	slots[RP_ORPHAN_SLOTS];
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
		rp_queue->worker_pgprocno = -1;
	}
}

bool
rp_orphans_handoff(const char *key, size_t keylen, const char *token,
				   TimestampTz expires_at)
{
	int			worker = -1;
	bool		queued = false;

	if (rp_queue == NULL || keylen >= RP_ORPHAN_KEY_MAX ||
		strlen(token) >= RP_ORPHAN_TOKEN_MAX)
		return false;
	LWLockAcquire(rp_queue->lock, LW_EXCLUSIVE);
	for (int i = 0; i < RP_ORPHAN_SLOTS; i++)
	{
		RpOrphan   *o = &rp_queue->slots[i];

		if (o->used)
			continue;
		o->used = true;
		o->keylen = (uint16) keylen;
		memcpy(o->key, key, keylen);
		strlcpy(o->token, token, sizeof(o->token));
		o->expires_at = expires_at;
		queued = true;
		break;
	}
	worker = rp_queue->worker_pgprocno;
	LWLockRelease(rp_queue->lock);
	if (!queued)
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not hand a Redis lease to the background worker: its queue is full"),
				 errdetail("The lease will expire by its TTL.")));
	else if (worker >= 0)
		SetLatch(&ProcGlobal->allProcs[worker].procLatch);
	return queued;
}

void
rp_orphans_set_worker(void)
{
	if (rp_queue == NULL)
		return;
	LWLockAcquire(rp_queue->lock, LW_EXCLUSIVE);
	rp_queue->worker_pgprocno = MyProc->pgprocno;
	LWLockRelease(rp_queue->lock);
}

bool
rp_orphans_drain(void)
{
	RpOrphan   *batch;
	int			n = 0;
	bool		left = false;
	TimestampTz now = GetCurrentTimestamp();

	if (rp_queue == NULL)
		return false;
	batch = palloc(sizeof(RpOrphan) * RP_ORPHAN_SLOTS);
	LWLockAcquire(rp_queue->lock, LW_SHARED);
	for (int i = 0; i < RP_ORPHAN_SLOTS; i++)
		if (rp_queue->slots[i].used)
			batch[n++] = rp_queue->slots[i];
	LWLockRelease(rp_queue->lock);

	for (int i = 0; i < n; i++)
	{
		RpOrphan   *o = &batch[i];
		bool		done = (o->expires_at <= now);

		if (!done)
		{
			RpArg		key = {o->key, o->keylen};
			RpArg		token = rp_arg_str(o->token);
			char	   *err;

			/* Any answer settles it: released, or no longer ours. */
			done = rp_eval_quiet(rp_token_kind(o->token) == RP_LEASE_PERMIT ?
								 &rp_script_semaphore_release : &rp_script_lock_release,
								 1, &key, 1, &token,
								 RP_ORPHAN_TIMEOUT_MS, &err) != NULL;
		}
		if (!done)
		{
			left = true;
			break;				/* Redis does not answer: try again later */
		}
		LWLockAcquire(rp_queue->lock, LW_EXCLUSIVE);
		for (int j = 0; j < RP_ORPHAN_SLOTS; j++)
		{
			RpOrphan   *s = &rp_queue->slots[j];

			if (s->used && s->keylen == o->keylen &&
				memcmp(s->key, o->key, o->keylen) == 0 &&
				strcmp(s->token, o->token) == 0)
			{
				s->used = false;
				break;
			}
		}
		LWLockRelease(rp_queue->lock);
	}
	pfree(batch);
	return left;
}
