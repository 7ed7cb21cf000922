/*-------------------------------------------------------------------------
 *
 * notify.c
 *		Leadership notifications.  The elector calls its leadership hook
 *		(elector.h), which rp_notify_init sets to rp_notify_leadership, on
 *		every change of belief (elected, stepped down, re-elected under a new
 *		epoch); the event goes into a ring in shared memory and the notifier
 *		worker is woken.  The notifier runs one transaction per batch that
 *		NOTIFYs redis_primitives.leader_channel with a JSON payload:
 *		{"name", "node_id", "epoch", "is_leader", "at"}.
 *
 * Before editing, know this: a notification must never delay a renewal or
 * a step-down, so the elector only copies the event and sets a latch.  The
 * notifier may block (the NOTIFY queue lock, a slow commit) or fail (no such
 * database): that is why it is a separate process.  When the ring overflows
 * the oldest events are dropped and counted in the log; a listener that
 * must not miss a change reads rp_elections() after each notification.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "elector.h"
#include "notify.h"
#include "stats.h"
#include "waitevents.h"

#define RP_NOTIFY_RING	64

typedef struct RpNotifyEvent
{
	char		name[RP_ELECTION_NAME_MAX];
	char		node_id[RP_NODE_ID_MAX];
	int64		epoch;
	bool		is_leader;
	TimestampTz at;
} RpNotifyEvent;

typedef struct RpNotifyShared
{
	slock_t		mutex;			/* guards everything below */
	bool		enabled;		/* the notifier is registered */
	Latch	   *latch;			/* the notifier's, NULL while it is not running */
	uint64		head;			/* next event written */
	uint64		tail;			/* next event read */
	uint64		dropped;		/* overwritten before they were read */
	RpNotifyEvent ring[RP_NOTIFY_RING];
} RpNotifyShared;

static RpNotifyShared *rp_notify_shared = NULL;

static char *rp_leader_channel = NULL;
static char *rp_elector_database = NULL;

static bool
rp_check_channel(char **newval, void **extra, GucSource source)
{
	if (*newval && strlen(*newval) >= NAMEDATALEN)
	{
		GUC_check_errdetail("A channel name is at most %d bytes.", NAMEDATALEN - 1);
		return false;
	}
	return true;
}

static void rp_notify_leadership(const char *name, const char *node_id,
								 int64 epoch, bool is_leader);

void
rp_notify_init(void)
{
	BackgroundWorker worker;

	rp_elector_leadership_hook = rp_notify_leadership;

	DefineCustomStringVariable("redis_primitives.leader_channel",
							   "Channel on which the background elector's changes of leadership are NOTIFYed.",
							   "Empty (the default) sends nothing.  The payload is JSON: name, node_id, epoch, is_leader, at.  Needs redis_primitives.elector_database.",
							   &rp_leader_channel, "", PGC_SIGHUP, 0,
							   rp_check_channel, NULL, NULL);
	/* PGC_POSTMASTER: definable only while preloading (see stats.c). */
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomStringVariable("redis_primitives.elector_database",
							   "Database in which leadership notifications are sent.",
							   "Empty (the default) starts no notifier.  LISTEN in this database.",
							   &rp_elector_database, "", PGC_POSTMASTER, 0,
							   NULL, NULL, NULL);
	if (rp_elector_database == NULL || rp_elector_database[0] == '\0')
		return;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	/* A missing database makes it exit: try again, slowly, and log it. */
	worker.bgw_restart_time = 10;
	strlcpy(worker.bgw_library_name, "redis_primitives", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "rp_notifier_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "redis_primitives notifier", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "redis_primitives notifier", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

void
rp_notify_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(RpNotifyShared)));
}

/* Called under AddinShmemInitLock. */
void
rp_notify_shmem_startup(void)
{
	bool		found;

	rp_notify_shared = ShmemInitStruct("redis_primitives notify",
									   sizeof(RpNotifyShared), &found);
	if (!found)
	{
		memset(rp_notify_shared, 0, sizeof(RpNotifyShared));
		SpinLockInit(&rp_notify_shared->mutex);
		rp_notify_shared->enabled =
			rp_elector_database != NULL && rp_elector_database[0] != '\0';
	}
}

/* The elector's side: copy, wake, return. */
static void
rp_notify_leadership(const char *name, const char *node_id, int64 epoch,
					 bool is_leader)
{
	RpNotifyEvent *ev;
	Latch	   *latch;
	TimestampTz at = GetCurrentTimestamp();

	if (rp_notify_shared == NULL || !rp_notify_shared->enabled ||
		rp_leader_channel == NULL || rp_leader_channel[0] == '\0')
		return;
	SpinLockAcquire(&rp_notify_shared->mutex);
	/* Full: drop the oldest (the notifier logs the loss). */
	if (rp_notify_shared->head - rp_notify_shared->tail >= RP_NOTIFY_RING)
	{
		rp_notify_shared->tail++;
		rp_notify_shared->dropped++;
	}
	ev = &rp_notify_shared->ring[rp_notify_shared->head % RP_NOTIFY_RING];
	strlcpy(ev->name, name, RP_ELECTION_NAME_MAX);
	strlcpy(ev->node_id, node_id, RP_NODE_ID_MAX);
	ev->epoch = epoch;
	ev->is_leader = is_leader;
	ev->at = at;
	rp_notify_shared->head++;
	latch = rp_notify_shared->latch;
	SpinLockRelease(&rp_notify_shared->mutex);
	if (latch)
		SetLatch(latch);
}

static char *
rp_notify_payload(const RpNotifyEvent *ev)
{
	StringInfoData buf;
	char		at[MAXDATELEN + 1];

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"name\": ");
	escape_json(&buf, ev->name);
	appendStringInfoString(&buf, ", \"node_id\": ");
	escape_json(&buf, ev->node_id);
	appendStringInfo(&buf, ", \"epoch\": " INT64_FORMAT ", \"is_leader\": %s, \"at\": \"%s\"}",
					 ev->epoch, ev->is_leader ? "true" : "false",
					 JsonEncodeDateTime(at, TimestampTzGetDatum(ev->at),
										TIMESTAMPTZOID, NULL));
	return buf.data;
}

static void
rp_notifier_detach(int code, Datum arg)
{
	SpinLockAcquire(&rp_notify_shared->mutex);
	rp_notify_shared->latch = NULL;
	SpinLockRelease(&rp_notify_shared->mutex);
}

/*
 * Send what the ring holds, in order, in one transaction.  Returns whether
 * it took anything from the ring.
 */
static bool
rp_notifier_drain(MemoryContext cxt)
{
	RpNotifyEvent batch[RP_NOTIFY_RING];
	int			n = 0;
	uint64		lost;

	SpinLockAcquire(&rp_notify_shared->mutex);
	lost = rp_notify_shared->dropped;
	rp_notify_shared->dropped = 0;
	while (rp_notify_shared->tail < rp_notify_shared->head)
		batch[n++] = rp_notify_shared->ring[rp_notify_shared->tail++ % RP_NOTIFY_RING];
	SpinLockRelease(&rp_notify_shared->mutex);

	if (lost > 0)
		ereport(WARNING,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("redis_primitives notifier: " UINT64_FORMAT " leadership notification(s) were dropped", lost),
				 errdetail("More than %d changes of leadership were queued before they could be sent.",
						   RP_NOTIFY_RING)));
	if (n == 0 || rp_leader_channel[0] == '\0')
		return n > 0;

	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		pgstat_report_activity(STATE_RUNNING, "NOTIFY redis_primitives.leader_channel");
		for (int i = 0; i < n; i++)
			Async_Notify(rp_leader_channel, rp_notify_payload(&batch[i]));
		CommitTransactionCommand();
		pgstat_report_activity(STATE_IDLE, NULL);
	}
	PG_CATCH();
	{
		/* Log, forget this batch, go on: the elector never waits for us. */
		HOLD_INTERRUPTS();
		EmitErrorReport();
		AbortCurrentTransaction();
		FlushErrorState();
		MemoryContextSwitchTo(cxt);
		RESUME_INTERRUPTS();
		ereport(WARNING,
				(errcode(ERRCODE_WARNING),
				 errmsg("redis_primitives notifier: %d leadership notification(s) could not be sent", n)));
		pgstat_report_activity(STATE_IDLE, NULL);
	}
	PG_END_TRY();
	return true;
}

void
rp_notifier_main(Datum main_arg)
{
	MemoryContext cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* FATAL if the database does not exist: logged, retried in 10 s. */
	BackgroundWorkerInitializeConnection(rp_elector_database, NULL, 0);
	/* Its transactions carry nothing worth waiting for a standby for. */
	SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);

	cxt = AllocSetContextCreate(TopMemoryContext, "redis_primitives notifier",
								ALLOCSET_DEFAULT_SIZES);
	SpinLockAcquire(&rp_notify_shared->mutex);
	rp_notify_shared->latch = MyLatch;
	SpinLockRelease(&rp_notify_shared->mutex);
	before_shmem_exit(rp_notifier_detach, (Datum) 0);

	for (;;)
	{
		int			rc;

		/*
		 * Until the ring is empty: a change queued while a batch waited
		 * (for NOTIFY's lock, a slow commit) set the latch, but a lock wait
		 * resets the latch each time it wakes, so that wake-up may be gone.
		 * Only an empty ring lets the notifier sleep; a change queued after
		 * that last look sets the latch, which nothing resets before the
		 * wait.
		 */
		for (;;)
		{
			bool		took;

			MemoryContextSwitchTo(cxt);
			took = rp_notifier_drain(cxt);
			MemoryContextReset(cxt);
			if (!took)
				break;
			CHECK_FOR_INTERRUPTS();
		}

		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L,
					   rp_wait_event(RP_WAIT_NOTIFIER));
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
	}
}
