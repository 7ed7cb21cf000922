/*-------------------------------------------------------------------------
 *
 * redis_primitives.h
 *		The Init function of each subsystem, called in order by _PG_init.
 *
 * Each Init defines the subsystem's settings and hooks and must not touch
 * Redis: it may run in the postmaster.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_PRIMITIVES_H
#define REDIS_PRIMITIVES_H

extern void rp_ratelimit_init(void);
extern void rp_election_init(void);
extern void rp_fence_init(void);
extern void rp_pool_init(void);

#endif							/* REDIS_PRIMITIVES_H */
