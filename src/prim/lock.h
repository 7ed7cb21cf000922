/*-------------------------------------------------------------------------
 *
 * lock.h
 *		The lease lock: rp_acquire[_xact], rp_acquire_all[_xact] and
 *		rp_lock_info (lock.c).
 *
 * Before editing, know this: a lock is a lease of the session's registry
 * (src/lease/lease.h); what acts on any lease (release, extend, listing,
 * transaction and exit release, the fence guard's lookup) is declared
 * there, not here.  rp_lock_init must run at _PG_init: it tells the lease
 * layer what a lock is in Redis.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_LOCK_H
#define RP_LOCK_H

/* The settings redis_primitives.fence_replicas[_timeout], the lock kind. */
extern void rp_lock_init(void);

#endif							/* RP_LOCK_H */
