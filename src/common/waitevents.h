/*-------------------------------------------------------------------------
 *
 * waitevents.h
 *		What a backend or worker of the extension waits on, as the
 *		wait_event pg_stat_activity shows.
 *
 * Before editing, know this: on PostgreSQL 17 and later each wait here has
 * its own name (wait_event_type Extension, wait_event RedisPrimitives...);
 * on 15 and 16 every one is the single event "Extension".  The names are
 * part of what users monitor (docs/monitoring.md): never rename one.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_WAITEVENTS_H
#define RP_WAITEVENTS_H

#include "postgres.h"

/* Every wait: enum suffix and the name pg_stat_activity shows on 17+. */
#define RP_WAIT_EVENTS(X) \
	X(CONNECT, "RedisPrimitivesConnect") \
	X(REPLY, "RedisPrimitivesReply") \
	X(LEASE_WAIT, "RedisPrimitivesLeaseWait") \
	X(CLUSTER_RETRY, "RedisPrimitivesClusterRetry") \
	X(NOTIFIER, "RedisPrimitivesNotifier") \
	X(ELECTOR, "RedisPrimitivesElector")

typedef enum RpWaitEvent
{
#define RP_WAIT_EVENT_ENUM(id, name) RP_WAIT_##id,
	RP_WAIT_EVENTS(RP_WAIT_EVENT_ENUM)
#undef RP_WAIT_EVENT_ENUM
	RP_NUM_WAIT_EVENTS
} RpWaitEvent;

/*
 * The wait_event_info to report for a wait (WaitLatch's last argument).
 * The first call in a process registers every name at once (a shared
 * lock and a lookup); when the library is preloaded, rp_wait_events_startup
 * did that in the postmaster and every process inherits the numbers.
 */
extern uint32 rp_wait_event(RpWaitEvent e);

/* From the shmem startup hook (module.c). */
extern void rp_wait_events_startup(void);

#endif							/* RP_WAITEVENTS_H */
