/*-------------------------------------------------------------------------
 *
 * module.c
 *		Module entry point: _PG_init, every PostgreSQL hook the library
 *		installs (shared memory, ExecutorEnd, ProcessUtility, emit_log), and
 *		the diagnostics functions rp_ping and rp_key_slot.
 *
 * _PG_init is a table of contents: one Init call per subsystem, each of
 * which defines its own settings, then every hook, installed once, in one
 * block.  Nothing here may open a connection: when the library is
 * preloaded, _PG_init runs in the postmaster (so the lease layer registers
 * its transaction and exit callbacks on first use, in the backend: lease.c).
 * This is the top of the module graph (scripts/check-layers.py): where a
 * lower module must reach a higher one, the call is chained here (shared
 * memory, the rate limiter's observer) or through a hook the higher module
 * sets in its Init (the elector's leadership hook).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "funcapi.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"

#include "args.h"
#include "compat.h"
#include "conn.h"
#include "elector.h"
#include "fence_commit.h"
#include "lease.h"
#include "lock.h"
#include "notify.h"
#include "orphans.h"
#include "pool.h"
#include "ratecache.h"
#include "ratelimit.h"
#include "replicas.h"
#include "semaphore.h"
#include "stats.h"
#include "sentinel_auth.h"
#include "tls.h"
#include "waitevents.h"

PG_MODULE_MAGIC_EXT(.name = "redis_primitives", .version = RP_VERSION);

void		_PG_init(void);

static emit_log_hook_type rp_prev_emit_log_hook = NULL;
static shmem_request_hook_type rp_prev_shmem_request_hook = NULL;
static shmem_startup_hook_type rp_prev_shmem_startup_hook = NULL;
static ExecutorEnd_hook_type rp_prev_executor_end = NULL;
static ProcessUtility_hook_type rp_prev_process_utility = NULL;

/*
 * Shared memory, the pg_stat_statements way, for every module that has
 * some: each requests its space (and LWLock tranche) here, and sets up its
 * struct under AddinShmemInitLock, initialising it only when not found.
 * Installed only while preloading.
 */
static void
rp_shmem_request(void)
{
	if (rp_prev_shmem_request_hook)
		rp_prev_shmem_request_hook();
	rp_stats_shmem_request();
	rp_notify_shmem_request();
	rp_orphans_shmem_request();
	rp_elector_shmem_request();
	rp_ratecache_shmem_request();
}

static void
rp_shmem_startup(void)
{
	if (rp_prev_shmem_startup_hook)
		rp_prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	rp_stats_shmem_startup();
	rp_notify_shmem_startup();
	rp_orphans_shmem_startup();
	rp_elector_shmem_startup();
	rp_ratecache_shmem_startup();
	rp_wait_events_startup();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * While a verify_at_commit lease exists, the lease layer's transaction
 * callback goes back to the front of the list, ahead of one postgres_fdw
 * may have registered meanwhile (lease.c says why); so does the commit
 * check of lease-bound fenced writes while the transaction made one
 * (fence_commit.c).
 */
static void
rp_callbacks_to_front(void)
{
	rp_lease_callback_to_front();
	rp_fence_callback_to_front();
}

/* Every statement's end: the callbacks to the front. */
static void
rp_executor_end(QueryDesc *queryDesc)
{
	if (rp_prev_executor_end)
		rp_prev_executor_end(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
	rp_callbacks_to_front();
}

/*
 * Every utility command: the same move of the transaction callbacks, before
 * the command too (a COMMIT runs the callbacks itself).  Then DISCARD ALL,
 * once it succeeded (it refuses to run in a transaction), ends the
 * session's leases as it ends its advisory locks: it is how a connection
 * pool (PgBouncer's server_reset_query) declares a session over (pool.c).
 * That release never throws: the DISCARD has already run.
 */
static void
rp_process_utility(PlannedStmt *pstmt, const char *queryString,
				   bool readOnlyTree, ProcessUtilityContext context,
				   ParamListInfo params, QueryEnvironment *queryEnv,
				   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	bool		discard_all = IsA(stmt, DiscardStmt) &&
		((DiscardStmt *) stmt)->target == DISCARD_ALL;

	rp_callbacks_to_front();
	if (rp_prev_process_utility)
		rp_prev_process_utility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
	rp_callbacks_to_front();
	if (discard_all)
		(void) rp_lease_discard_all();
}

/*
 * On a configuration reload PostgreSQL logs "parameter \"X\" changed to
 * \"value\"" for every changed setting, whatever its flags: for the
 * password that would put the secret in the server log.  Keep the fact that
 * it changed, drop the value.  Only effective where the library is loaded,
 * which for the postmaster means shared_preload_libraries (documented).
 */
static void
rp_emit_log_hook(ErrorData *edata)
{
	/*
	 * Match the untranslated format (message_id), not the message, which
	 * lc_messages may have translated; the parameter name is an argument and
	 * stays as it is in every language.
	 */
	if (edata->message_id != NULL && edata->message != NULL &&
		strcmp(edata->message_id, "parameter \"%s\" changed to \"%s\"") == 0)
	{
		static const char *const secrets[] = {
			"redis_primitives.password",
			"redis_primitives.sentinel_password"
		};

		for (size_t i = 0; i < lengthof(secrets); i++)
		{
			char	   *quoted = psprintf("\"%s\"", secrets[i]);

			if (strstr(edata->message, quoted) != NULL)
				edata->message = psprintf("parameter %s changed", quoted);
			pfree(quoted);
		}
	}
	if (rp_prev_emit_log_hook)
		rp_prev_emit_log_hook(edata);
}

void
_PG_init(void)
{
	rp_conn_init();
	rp_replicas_init();
	rp_tls_init();
	rp_sentinel_auth_init();
	rp_lock_init();
	rp_semaphore_init();
	rp_ratelimit_init();
	rp_ratecache_init();
	rp_elector_init();
	rp_stats_init();
	rp_notify_init();
	rp_fence_commit_init();
	rp_pool_init();
	rp_lease_init();

	/* Statistics count the rate limiter's shadow refusals. */
	rp_ratelimit_observer_hook = rp_stats_ratelimit_observed;

	MarkGUCPrefixReserved("redis_primitives");

	/* Every hook, installed once, each chained to the one before it. */
	if (process_shared_preload_libraries_in_progress)
	{
		rp_prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = rp_shmem_request;
		rp_prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = rp_shmem_startup;
	}
	rp_prev_executor_end = ExecutorEnd_hook;
	ExecutorEnd_hook = rp_executor_end;
	rp_prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = rp_process_utility;
	rp_prev_emit_log_hook = emit_log_hook;
	emit_log_hook = rp_emit_log_hook;
}

/*
 * rp_ping() -> (rtt_ms double precision, redis_version text)
 */
PG_FUNCTION_INFO_V1(rp_ping);
Datum
rp_ping(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	int64		rtt_us;
	char	   *version;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	rp_conn_ping(&rtt_us, &version);
	values[0] = Float8GetDatum(rtt_us / 1000.0);
	if (version)
		values[1] = CStringGetTextDatum(version);
	else
		nulls[1] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}

/*
 * rp_key_slot(key text) -> int: the Redis Cluster hash slot the connection
 * layer routes a key to; must equal CLUSTER KEYSLOT (tested).
 */
PG_FUNCTION_INFO_V1(rp_key_slot_sql);
Datum
rp_key_slot_sql(PG_FUNCTION_ARGS)
{
	text	   *key = rp_arg_text(fcinfo, 0, "key");

	PG_RETURN_INT32(rp_key_slot(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key)));
}
