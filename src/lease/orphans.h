/*-------------------------------------------------------------------------
 *
 * orphans.h
 *		Leases a backend could not release before it exited, handed to the
 *		background worker through a small shared-memory queue.
 *
 * Before editing, know this: the queue exists only when the library is in
 * shared_preload_libraries; without it a hand-off does nothing and the lease
 * expires by its TTL (docs/failures.md).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_ORPHANS_H
#define RP_ORPHANS_H

#include "postgres.h"

#include "datatype/timestamp.h"

/* Shared memory, when preloaded: module.c's shmem hooks call these. */
extern void rp_orphans_shmem_request(void);
extern void rp_orphans_shmem_startup(void);

/*
 * Queue (key, token) for release by the worker; false when there is no
 * queue, or it is full (128 leases, or 256 kB of keys: then a WARNING says
 * so).  A key of any length fits while there is room.  backed: the caller
 * keeps the lease too, and releases it itself once Redis answers (an
 * unsettled acquire at a transaction end); in a full queue such an entry
 * gives its place to a lease handed over by a caller that keeps nothing
 * (an exit, a release at transaction end).  Never throws.
 */
extern bool rp_orphans_handoff(const char *key, size_t keylen,
							   const char *token, TimestampTz expires_at,
							   bool backed);

/*
 * How many backed entries the queue has given away so far (0 without a
 * queue): a backend whose backed hand-off was taken need look again only
 * once this has moved.  Lock-free.
 */
extern uint32 rp_orphans_displaced(void);

/*
 * Whether the entry of token is among the last 128 backed entries the
 * queue gave away: its backend offers it again.  Never throws.
 */
extern bool rp_orphans_was_displaced(const char *token);

/*
 * The queue-full WARNING still owed for refused hand-offs (never throws
 * but for the WARNING itself): at transaction end and exit.
 */
extern void rp_orphans_report(void);

/* The worker: it is the one to wake on a hand-off. */
extern void rp_orphans_set_worker(void);

/*
 * The worker: try to release everything queued (quietly, bounded).  Returns
 * true when entries are queued still (one Redis did not answer, or one
 * handed off meanwhile), to be tried again soon.
 */
extern bool rp_orphans_drain(void);

#endif							/* RP_ORPHANS_H */
