/*-------------------------------------------------------------------------
 *
 * conn.c
 *		The Redis connection of one backend, as the rest of the extension
 *		sees it: the status core (rp_eval_try) that runs a script on the
 *		right server, its raising face (rp_eval, rp_command) and its quiet
 *		face (rp_eval_quiet, rp_command_quiet).  The master is found
 *		directly, through Redis Sentinel (sentinel.c), or per hash slot in a
 *		Redis Cluster (cluster.c); the bytes are transport.c's, the settings
 *		settings.c's (docs/topology.md).
 *
 * Before editing, know this: the core never ereports for what Redis or the
 * network does; it returns a status (RpStatus).  Only the SQL face turns a
 * failure into an ERROR, and the cleanup face into a message.  A settings
 * change, or an exchange an interrupt cut short (rp_in_exchange), drops
 * every connection before the next command is sent (rp_check_config).
 * Nothing in this file knows what a lock is.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "lib/stringinfo.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "conn.h"
#include "conn_int.h"
#include "sentinel_auth.h"
#include "stats.h"
#include "tls.h"

static bool
rp_connect(void)
{
	TimestampTz deadline;

	rp_conn_drop();
	rp_config_changed = false;
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   rp_connect_budget_ms());
	if (rp_sentinel_mode())
		return rp_connect_sentinel(deadline);
	/* A connection that failed its handshake was dropped by it. */
	return rp_open(rp_host, rp_port, rp_unix_socket, deadline) &&
		rp_handshake(deadline, false);
}

/* A changed setting drops every connection before the next command. */
static bool
rp_check_config(void)
{
	if (rp_in_exchange)
	{
		rp_conn_reset();
		rp_in_exchange = false;
	}
	if (rp_tls_take_changed())
		rp_config_changed = true;
	if (rp_sentinel_auth_take_changed())
		rp_config_changed = true;
	if (rp_config_changed)
	{
		rp_conn_reset();
		rp_config_changed = false;
		rp_send_as_evalsha_forget();
	}
	if (rp_cluster && rp_sentinel_mode())
	{
		return rp_set_failure(ERRCODE_INVALID_PARAMETER_VALUE,
								 "redis_primitives.cluster and redis_primitives.sentinels cannot be used together",
								 NULL,
								 "Redis Cluster does its own failover: point redis_primitives.host and port at any of its nodes.");
	}
	return true;
}

/*
 * Open the connection if needed; drop one the server closed while idle.
 *
 * In Sentinel mode, also drop one idle for longer than
 * sentinel_idle_recheck, so that rp_connect asks the sentinels again: the
 * master it is connected to may have been replaced while it slept (frozen,
 * partitioned) and, until the sentinels reach it to demote it, it still
 * answers ROLE with "master" and takes writes that the new master never
 * sees.  A failover needs the master silent for down-after-milliseconds, so
 * a connection used within that of its last use has slept through none.
 */
static bool
rp_ensure_connected(void)
{
	TimestampTz now;

	if (!rp_check_config())
		return false;
	if (rp_cluster)
	{
		/* Commands without keys go to the node used last. */
		if (rp_cur_node < 0 && !rp_cluster_load_slots())
			return false;
		return rp_cluster_connect_node(rp_cur_node,
									   TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
																   rp_connect_budget_ms()));
	}
	/*
	 * Replies owed (a release sent at the last transaction end) are read
	 * first: they would look like the unsolicited bytes of a stale socket.
	 * A failure drops the connection, and each owed reply is settled as lost.
	 */
	(void) rp_settle_pending(TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 rp_connect_cap_ms > 0 ?
														 Min(rp_command_timeout_ms, rp_connect_cap_ms) :
														 rp_command_timeout_ms));
	memset(&rp_failure, 0, sizeof(rp_failure));	/* the drain's, not this call's */
	/* One of them READONLY (Sentinel): demoted, ask the sentinels again. */
	if (rp_take_owed_demoted() || (rp_ctx != NULL && rp_conn_is_stale()))
		rp_conn_drop();
	now = GetCurrentTimestamp();
	if (rp_ctx != NULL && rp_sentinel_mode() && rp_sentinel_idle_recheck_ms > 0 &&
		TimestampDifferenceExceeds(rp_last_used, now, rp_sentinel_idle_recheck_ms))
		rp_conn_drop();
	if (rp_ctx == NULL && !rp_connect())
		return false;
	rp_last_used = now;
	return true;
}

/* ------------------------------------------------------------------------
 * The core and its two faces.
 * ------------------------------------------------------------------------
 */

bool
rp_eval_try(const RpScript *script, int nkeys, const RpArg *keys,
			int nargs, const RpArg *argv, int timeout_ms, RpReply **out,
			RpStatus *st)
{
	TimestampTz deadline;
	RpReply    *reply;
	bool		ok;

	memset(&rp_failure, 0, sizeof(rp_failure));
	*out = NULL;
	if (!rp_check_config())
		ok = false;
	else if (rp_cluster)
		ok = rp_eval_cluster(script, nkeys, keys, nargs, argv, timeout_ms, out);
	else if (!rp_ensure_connected())
		ok = false;
	else
	{
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
		ok = rp_append_script("EVALSHA", script->sha1, nkeys, keys, nargs, argv) &&
			rp_exchange(1, deadline, &reply);
		if (ok && rp_is_noscript(reply))
		{
			/* Flushed or restarted: EVAL runs it and caches it again. */
			rp_stats_conn_event(RP_EVENT_NOSCRIPT);
			ok = rp_append_script("EVAL", script->text, nkeys, keys, nargs, argv) &&
				rp_exchange(1, deadline, &reply);
		}
		if (ok && reply->type == RP_REPLY_ERROR)
			ok = rp_fail_reply(reply->str);
		if (ok)
			*out = reply;
	}
	*st = rp_failure;
	return ok;
}

/*
 * A plain command's core, as rp_eval_try is a script's: argv[0] is the
 * command's name; a Redis error reply is a failure.  In Cluster mode it goes
 * to the node used last.
 */
static bool
rp_command_try(int argc, const RpArg *argv, int timeout_ms, RpReply **out,
			   RpStatus *st)
{
	const char **av = palloc(sizeof(char *) * argc);
	size_t	   *al = palloc(sizeof(size_t) * argc);
	RpReply    *reply;
	bool		ok;

	memset(&rp_failure, 0, sizeof(rp_failure));
	*out = NULL;
	for (int i = 0; i < argc; i++)
	{
		av[i] = argv[i].data;
		al[i] = argv[i].len;
	}
	ok = rp_ensure_connected() &&
		rp_append(argc, av, al) &&
		rp_exchange(1, TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms),
					&reply) &&
		(reply->type != RP_REPLY_ERROR || rp_fail_reply(reply->str));
	if (ok)
		*out = reply;
	*st = rp_failure;
	return ok;
}

/*
 * The deferred send's core: rp_eval_try up to the send.  EVAL, not EVALSHA:
 * no answer comes back to retry with, and a Redis that lost its script cache
 * (restarted, failed over, SCRIPT FLUSH) would answer every release with
 * NOSCRIPT.  Its text costs a few hundred bytes, and Redis a SHA1 of them.
 * EVALSHA once Redis refused EVAL itself (rp_send_as_evalsha).
 */
static bool
rp_eval_send_try(const RpScript *script, int nkeys, const RpArg *keys,
				 int nargs, const RpArg *argv, int timeout_ms,
				 RpSettleFn settle, void *arg, RpStatus *st)
{
	bool		ok;

	memset(&rp_failure, 0, sizeof(rp_failure));
	if (!rp_check_config())
		ok = false;
	else if (rp_cluster)
		ok = rp_set_failure(ERRCODE_FEATURE_NOT_SUPPORTED,
							"a reply cannot be owed in Redis Cluster mode", NULL, NULL);
	else
	{
		bool		eval = !rp_send_as_evalsha();

		/*
		 * With replies owed the connection is in step and in use: the send
		 * goes behind them (a lock's and a permit's release at one COMMIT),
		 * not after reading them, which would wait for Redis.
		 */
		ok = (rp_pending_count() > 0 || rp_ensure_connected()) &&
			rp_append_script(eval ? "EVAL" : "EVALSHA",
							 eval ? script->text : script->sha1,
							 nkeys, keys, nargs, argv) &&
			rp_send_only(TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms),
						 eval ? RP_SENT_EVAL : RP_SENT_EVALSHA, settle, arg);
	}
	*st = rp_failure;
	return ok;
}

bool
rp_conn_can_defer(void)
{
	return !rp_cluster;
}

void
rp_status_raise(const RpStatus *st)
{
	ereport(ERROR,
			(errcode(st->sqlstate ? st->sqlstate : ERRCODE_INTERNAL_ERROR),
			 errmsg("%s", st->message ? st->message : "Redis call failed"),
			 st->detail ? errdetail_internal("%s", st->detail) : 0,
			 st->hint ? errhint("%s", st->hint) : 0));
}

char *
rp_status_text(const RpStatus *st)
{
	const char *message = st->message ? st->message : "Redis call failed";

	return st->detail ? psprintf("%s: %s", message, st->detail) : pstrdup(message);
}

RpReply *
rp_eval(const RpScript *script, int nkeys, const RpArg *keys,
		int nargs, const RpArg *argv)
{
	RpReply    *reply;
	RpStatus	st;

	if (!rp_eval_try(script, nkeys, keys, nargs, argv, rp_command_timeout_ms,
					 &reply, &st))
		rp_status_raise(&st);
	return reply;
}

RpReply *
rp_command(int argc, const RpArg *argv)
{
	RpReply    *reply;
	RpStatus	st;

	if (!rp_command_try(argc, argv, rp_command_timeout_ms, &reply, &st))
		rp_status_raise(&st);
	return reply;
}

/*
 * Record an ERROR just caught (and not re-thrown) as the failure.  errfinish
 * zeroed the interrupt hold-off counts for the error handler it expected to
 * run; they are put back to what they were when the PG_TRY began, so that
 * the cleanup face's HOLD_INTERRUPTS (and AbortTransaction's) is not
 * RESUMEd below zero, which wraps the count and holds interrupts for good.
 * Returns false.
 */
static bool
rp_set_failure_caught(MemoryContext cxt, uint32 holdoff, uint32 cancel_holdoff)
{
	ErrorData  *edata;

	InterruptHoldoffCount = holdoff;
	QueryCancelHoldoffCount = cancel_holdoff;
	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	return rp_set_failure(edata->sqlerrcode, edata->message, edata->detail,
						  edata->hint);
}

/*
 * The cleanup face of both cores (script is NULL: the plain command
 * argv[0 .. nargs)): interrupts held, connect capped at timeout_ms, never
 * ereports.  A failed call's status always has a SQLSTATE.
 */
typedef enum RpQuietOp
{
	RP_QUIET_EVAL,				/* rp_eval_try */
	RP_QUIET_COMMAND,			/* rp_command_try (argv[0 .. nargs)) */
	RP_QUIET_SEND,				/* rp_eval_send_try */
	RP_QUIET_SETTLE,			/* read the replies owed */
	RP_QUIET_ARRIVED			/* settle those arrived, no wait */
} RpQuietOp;

static bool
rp_quiet(RpQuietOp op, const RpScript *script, int nkeys, const RpArg *keys,
		 int nargs, const RpArg *argv, int timeout_ms, RpReply **reply,
		 RpSettleFn settle, void *arg, RpStatus *st)
{
	RpReply    *volatile r = NULL;
	int			saved_cap = rp_connect_cap_ms;
	MemoryContext cxt = CurrentMemoryContext;
	uint32		holdoff;
	uint32		cancel_holdoff;
	volatile bool ok;

	HOLD_INTERRUPTS();
	holdoff = InterruptHoldoffCount;
	cancel_holdoff = QueryCancelHoldoffCount;
	rp_connect_cap_ms = timeout_ms;

	/*
	 * The last-resort net, the one PG_TRY in the Redis layer that does not
	 * re-throw.  The cores report what Redis and the network do as a status,
	 * but below them PostgreSQL itself may still raise (a password file that
	 * cannot be read, no file descriptor for the wait set, out of memory).
	 * Here that must not escape: thrown from a COMMIT callback it is a
	 * PANIC.  It becomes this call's failure, and the connection, in
	 * whatever state the ERROR left it, is dropped.
	 */
	PG_TRY();
	{
		RpReply    *got = NULL;

		switch (op)
		{
			case RP_QUIET_EVAL:
				ok = rp_eval_try(script, nkeys, keys, nargs, argv, timeout_ms,
								 &got, st);
				break;
			case RP_QUIET_COMMAND:
				ok = rp_command_try(nargs, argv, timeout_ms, &got, st);
				break;
			case RP_QUIET_SEND:
				ok = rp_eval_send_try(script, nkeys, keys, nargs, argv,
									  timeout_ms, settle, arg, st);
				break;
			case RP_QUIET_SETTLE:
				memset(&rp_failure, 0, sizeof(rp_failure));
				ok = rp_settle_pending(TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
																   timeout_ms));
				*st = rp_failure;
				break;
			case RP_QUIET_ARRIVED:
				memset(&rp_failure, 0, sizeof(rp_failure));
				ok = rp_settle_arrived();
				*st = rp_failure;
				break;
		}
		r = got;
	}
	PG_CATCH();
	{
		ok = rp_set_failure_caught(cxt, holdoff, cancel_holdoff);
		*st = rp_failure;
		rp_conn_reset();
		rp_in_exchange = false;
	}
	PG_END_TRY();
	rp_connect_cap_ms = saved_cap;
	RESUME_INTERRUPTS();
	if (reply != NULL)
		*reply = ok ? r : NULL;
	if (!ok)
	{
		if (st->sqlstate == 0)
			st->sqlstate = ERRCODE_INTERNAL_ERROR;
		rp_stats_quiet_error(st->sqlstate);
	}
	return ok;
}

bool
rp_eval_quiet(const RpScript *script, int nkeys, const RpArg *keys,
			  int nargs, const RpArg *argv, int timeout_ms, RpReply **reply,
			  RpStatus *st)
{
	return rp_quiet(RP_QUIET_EVAL, script, nkeys, keys, nargs, argv, timeout_ms,
					reply, NULL, NULL, st);
}

bool
rp_eval_send_quiet(const RpScript *script, int nkeys, const RpArg *keys,
				   int nargs, const RpArg *argv, int timeout_ms,
				   RpSettleFn settle, void *arg, RpStatus *st)
{
	return rp_quiet(RP_QUIET_SEND, script, nkeys, keys, nargs, argv, timeout_ms,
					NULL, settle, arg, st);
}

void
rp_settle_pending_quiet(int timeout_ms)
{
	RpStatus	st;

	(void) rp_quiet(RP_QUIET_SETTLE, NULL, 0, NULL, 0, NULL, timeout_ms, NULL,
					NULL, NULL, &st);
}

void
rp_settle_arrived_quiet(void)
{
	RpStatus	st;

	(void) rp_quiet(RP_QUIET_ARRIVED, NULL, 0, NULL, 0, NULL, 0, NULL,
					NULL, NULL, &st);
}

bool
rp_command_quiet(int argc, const RpArg *argv, int timeout_ms, RpReply **reply,
				 RpStatus *st)
{
	return rp_quiet(RP_QUIET_COMMAND, NULL, 0, NULL, argc, argv, timeout_ms,
					reply, NULL, NULL, st);
}

void
rp_conn_ping(int64 *rtt_us, char **version)
{
	RpArg		ping[1] = {rp_arg_str("PING")};
	RpArg		info[2] = {rp_arg_str("INFO"), rp_arg_str("server")};
	TimestampTz start;
	RpReply    *r;
	char	   *p;

	if (!rp_ensure_connected())
		rp_status_raise(&rp_failure);
	start = GetCurrentTimestamp();
	(void) rp_command(1, ping);
	*rtt_us = GetCurrentTimestamp() - start;

	r = rp_command(2, info);
	*version = NULL;
	if (r->type == RP_REPLY_STRING && (p = strstr(r->str, "redis_version:")) != NULL)
	{
		p += strlen("redis_version:");
		*version = pnstrdup(p, strcspn(p, "\r\n"));
	}
}
