/*-------------------------------------------------------------------------
 *
 * semaphore.h
 *		The counting semaphore whose permits are leases:
 *		rp_semaphore_acquire[_xact] and rp_semaphore_info (semaphore.c).
 *
 * Before editing, know this: a permit is a lease of the session's registry
 * (src/lease/lease.h, kind RP_LEASE_PERMIT); rp_semaphore_init must run at
 * _PG_init: it tells the lease layer what a permit is in Redis.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_SEMAPHORE_H
#define RP_SEMAPHORE_H

/* The permit kind of lease. */
extern void rp_semaphore_init(void);

#endif							/* RP_SEMAPHORE_H */
