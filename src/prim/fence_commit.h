/*-------------------------------------------------------------------------
 *
 * fence_commit.h
 *		The commit-time check of lease- and leader-bound fenced writes, and
 *		redis_primitives.lease_margin, which it and the trigger both apply.
 *
 * Before editing, know this: the trigger (fence.c) remembers every lease it
 * accepted a write under; nothing here calls back into the trigger.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_FENCE_COMMIT_H
#define RP_FENCE_COMMIT_H

#include "postgres.h"

/* redis_primitives.lease_margin, ms */
extern int	rp_lease_margin_ms;

/* Defines redis_primitives.lease_margin; called by _PG_init. */
extern void rp_fence_commit_init(void);

/* Remember a write accepted under (name, fence) for the commit. */
extern void rp_commit_remember(bool leader, const char *name, int64 fence);

/*
 * Move the commit check's transaction callback in front of any registered
 * since (postgres_fdw's), while the transaction has writes to check: called
 * at every statement's end (module.c's hooks).
 */
extern void rp_fence_callback_to_front(void);

#endif							/* RP_FENCE_COMMIT_H */
