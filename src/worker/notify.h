/*-------------------------------------------------------------------------
 *
 * notify.h
 *		Leadership notifications: the background elector queues each change
 *		of belief in shared memory; the notifier, a worker connected to
 *		redis_primitives.elector_database, NOTIFYs them on
 *		redis_primitives.leader_channel.
 *
 * Before editing, know this: the elector must never wait for the database.
 * Queueing is a spinlock-protected copy and a SetLatch; everything that can
 * block or fail (a transaction, the NOTIFY queue, a missing database) happens
 * in the notifier's own process.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_NOTIFY_H
#define RP_NOTIFY_H

#include "postgres.h"

/* Settings, the elector's leadership hook and the worker; called by _PG_init. */
extern void rp_notify_init(void);

/* Shared memory, when preloaded: module.c's shmem hooks call these. */
extern void rp_notify_shmem_request(void);
extern void rp_notify_shmem_startup(void);

PGDLLEXPORT void rp_notifier_main(Datum main_arg);

#endif							/* RP_NOTIFY_H */
