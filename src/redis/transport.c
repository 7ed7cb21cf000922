/*-------------------------------------------------------------------------
 *
 * transport.c
 *		One Redis connection and the bytes on it: connect (with TLS through
 *		tls.c), AUTH, SELECT and ROLE, latch-waited non-blocking I/O, hiredis
 *		replies turned into palloc'd RpReply trees, and what failed recorded
 *		in rp_failure.
 *
 * Before editing, know this: every step returns a status (false, with
 * rp_failure filled in) and never ereports for what Redis or the network
 * does.  An exchange that did not finish (timeout, I/O error, or an
 * interrupt thrown from the latch wait) must drop the connection, because
 * its reply may still arrive and would be read as the answer to the next
 * command: a failure drops it at once, and rp_in_exchange makes the next
 * call drop one an interrupt left behind.  No hiredis reply is ever held
 * across a wait.  The socket is written in one place (rp_write_all) and
 * read in one place (rp_read_one), for rp_exchange and rp_send_only.
 *
 * There is always at most one connection in use, rp_ctx with its wait set;
 * cluster.c parks the other nodes' connections and swaps them in, sentinel.c
 * opens short-lived ones to the sentinels.  Nothing in this file knows what
 * a lock is, nor which server to ask: conn.c and the two above decide.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <sys/socket.h>

#include <hiredis/hiredis.h>

#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "lib/stringinfo.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "conn.h"
#include "conn_int.h"
#include "stats.h"
#include "secret.h"
#include "tls.h"

/*
 * True from the first byte of an exchange until its last reply was read.
 * An exchange cut short by FATAL (pg_terminate_backend) or postmaster death
 * never reaches rp_exchange's PG_CATCH; the flag still marks the connection
 * as out of step, and the next call (say, the release at backend exit)
 * drops it instead of reading the old reply as its own.
 */
bool		rp_in_exchange = false;

/*
 * When the connection was last used: connected, or an exchange on it ended
 * (Sentinel mode's idle check, rp_ensure_connected).  Counted from the end
 * of an exchange, so a long one (a WAIT) is never followed by a reconnect
 * before the next command: that command may be the WAIT for its writes.
 */
TimestampTz	rp_last_used = 0;

/*
 * The connection opened last, until a reply is read on it (a pointer, not a
 * flag: Cluster mode swaps parked connections in and out of rp_ctx).  A
 * plain connection that the server closes at its first command is how a
 * Redis TLS port answers a client that does not speak TLS: rp_fail_lost
 * calls that a connect failure.
 */
static const redisContext *rp_fresh_ctx = NULL;

/*
 * Why the exchange in progress failed.  Every step below returns false after
 * filling it in (rp_fail, rp_fail_reply); the faces read it.
 */
RpStatus	rp_failure;

/*
 * Replies owed on rp_ctx for commands sent without waiting for them
 * (rp_send_only), oldest first.  Each is read, in order, before the next
 * exchange's own replies and handed to its settle function; a connection
 * dropped while replies are owed hands each settle function NULL (the
 * command's fate is unknown).  Only outside Cluster mode, whose parked
 * connections are swapped in without a drop: so while any is owed, rp_ctx
 * is the connection they were sent on.
 */
typedef struct RpPending
{
	RpSettleFn	settle;
	void	   *arg;
	RpSentAs	as;
} RpPending;

static RpPending *rp_pending = NULL;	/* in TopMemoryContext */
static int	rp_npending = 0;
static int	rp_maxpending = 0;

/*
 * A reply owed was READONLY in Sentinel mode: the server was demoted by a
 * failover.  The connection is dropped before the next command is sent
 * (rp_take_owed_demoted), as rp_fail_reply does for a call's own reply.
 */
static bool rp_owed_demoted = false;

/*
 * Scripts sent without waiting go as EVALSHA: Redis refused one sent as
 * EVAL with NOPERM naming that command (a Redis user allowed EVALSHA only,
 * whose every EVAL would be refused).  Forgotten when one sent as EVALSHA
 * is answered NOSCRIPT (Redis lost its script cache: EVAL runs it there),
 * and by a settings change (another server or user).  For the backend's
 * life, not the connection's: a user is not given EVAL by a reconnect.
 */
static bool rp_sent_evalsha = false;

static int	rp_error_sqlstate(const char *msg);

/* Take the oldest reply owed off the list (there is one). */
static RpPending
rp_pending_pop(void)
{
	RpPending	p = rp_pending[0];

	memmove(rp_pending, rp_pending + 1, sizeof(RpPending) * --rp_npending);
	return p;
}

/*
 * Hand an owed reply to its settle function, noting what it says of the
 * connection: a demoted server, EVAL refused, a script cache lost.
 */
static void
rp_pending_settle(RpReply *reply)
{
	RpPending	p = rp_pending_pop();

	if (reply->type == RP_REPLY_ERROR)
	{
		int			sqlstate = rp_error_sqlstate(reply->str);

		if (rp_sentinel_mode() && sqlstate == ERRCODE_READ_ONLY_SQL_TRANSACTION)
			rp_owed_demoted = true;
		if (p.as == RP_SENT_EVAL && sqlstate == ERRCODE_INSUFFICIENT_PRIVILEGE &&
			strstr(reply->str, "'eval'") != NULL)
			rp_sent_evalsha = true;
		if (p.as == RP_SENT_EVALSHA && rp_is_noscript(reply))
			rp_sent_evalsha = false;
	}
	p.settle(p.arg, reply);
}

/* Whether a script sent without waiting goes as EVALSHA (see above). */
bool
rp_send_as_evalsha(void)
{
	return rp_sent_evalsha;
}

void
rp_send_as_evalsha_forget(void)
{
	rp_sent_evalsha = false;
}

/* Whether an owed reply said the server was demoted (and forget it). */
bool
rp_take_owed_demoted(void)
{
	bool		demoted = rp_owed_demoted;

	rp_owed_demoted = false;
	return demoted;
}

/* Hand every owed reply's settle function NULL: the connection is gone. */
static void
rp_pending_lost(void)
{
	while (rp_npending > 0)
	{
		RpPending	p = rp_pending_pop();

		p.settle(p.arg, NULL);
	}
}

/* Record a failure that is not about a connection to drop; returns false. */
bool
rp_set_failure(int sqlstate, const char *message, const char *detail,
			   const char *hint)
{
	rp_failure.sqlstate = sqlstate;
	rp_failure.message = message;
	rp_failure.detail = detail;
	rp_failure.hint = hint;
	return false;
}

/* The connection in use, and its wait set. */
redisContext *rp_ctx = NULL;
WaitEventSet *rp_waitset = NULL;
int			rp_waitset_socket;		/* position of the socket in rp_waitset */
int			rp_waitset_events;		/* what it is waited for now */

/*
 * In Sentinel mode: the master the sentinels named last (what messages
 * name), or the sentinel being asked while discovery runs.
 */
char		rp_peer_host[256] = "";
int			rp_peer_port = 0;
const char *rp_peer_role = NULL;	/* "master", "sentinel" */

/* What a failure message names: "host:port" or the socket path. */
static const char *
rp_conn_target(void)
{
	if (rp_sentinel_mode())
	{
		if (rp_peer_host[0] == '\0')
			return psprintf("of master \"%s\" (sentinels %s)",
							rp_sentinel_master, rp_sentinels);
		return psprintf("%s:%d (%s of \"%s\")", rp_peer_host, rp_peer_port,
						rp_peer_role ? rp_peer_role : "master",
						rp_sentinel_master);
	}
	if (rp_cluster && rp_peer_host[0] != '\0')
		return psprintf("%s:%d (cluster node)", rp_peer_host, rp_peer_port);
	if (rp_unix_socket && rp_unix_socket[0])
		return psprintf("unix socket \"%s\"", rp_unix_socket);
	return psprintf("%s:%d", rp_host ? rp_host : "", rp_port);
}

/* ------------------------------------------------------------------------
 * The connection itself.
 * ------------------------------------------------------------------------
 */

/* Drop the current connection (in Cluster mode: to the current node). */
void
rp_conn_drop(void)
{
	/* The wait set watches the socket: free it before the socket closes. */
	if (rp_waitset != NULL)
	{
		FreeWaitEventSet(rp_waitset);
		rp_waitset = NULL;
	}
	if (rp_ctx != NULL)
	{
		rp_tls_close(rp_ctx);	/* the TLS session goes before its socket */
		redisFree(rp_ctx);
		ReleaseExternalFD();
		rp_ctx = NULL;
	}
	rp_pending_lost();
	rp_owed_demoted = false;
}

/* Whether cluster.c's slot map may be used: a failed exchange clears it. */
bool		rp_slots_valid = false;

/*
 * Wait until the connection's socket is ready for events (one of
 * WL_SOCKET_READABLE or WL_SOCKET_WRITEABLE) or the deadline passes,
 * shown as the wait event what.  Returns false on timeout.  Cancel and statement_timeout arrive through the
 * latch and are thrown by CHECK_FOR_INTERRUPTS (which does nothing while the
 * cleanup face holds interrupts); no hiredis reply is held across this call.
 * The wait set lives as long as the connection: building an epoll set for
 * every wait cost more CPU than the rest of a call's own work.
 */
static bool
rp_wait(int events, TimestampTz deadline, RpWaitEvent what)
{
	if (rp_waitset == NULL)
	{
		rp_waitset = CreateWaitEventSet(NULL, 3);
		AddWaitEventToSet(rp_waitset, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		AddWaitEventToSet(rp_waitset, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
		rp_waitset_socket = AddWaitEventToSet(rp_waitset, events, rp_ctx->fd, NULL, NULL);
		rp_waitset_events = events;
	}
	else if (rp_waitset_events != events)
	{
		ModifyWaitEvent(rp_waitset, rp_waitset_socket, events, NULL);
		rp_waitset_events = events;
	}

	for (;;)
	{
		long		timeout_ms;
		WaitEvent	ev;

		CHECK_FOR_INTERRUPTS();
		timeout_ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (timeout_ms <= 0)
		{
			rp_stats_conn_event(RP_EVENT_TIMEOUT);
			return false;
		}
		if (WaitEventSetWait(rp_waitset, timeout_ms, &ev, 1, rp_wait_event(what)) == 0)
			continue;			/* timed out: the deadline check decides */
		if (ev.events & WL_LATCH_SET)
			ResetLatch(MyLatch);
		if (ev.events & events)
			return true;
	}
}

/* Record a failure, drop the connection; always returns false. */
static bool
rp_fail(int sqlstate, const char *msg, const char *why)
{
	(void) rp_set_failure(sqlstate,
							 msg,
							 psprintf("Redis server %s: %s.", rp_conn_target(), why),
							 NULL);
	rp_conn_drop();
	rp_in_exchange = false;
	/* The node may be gone or have lost its slots: ask for the map again. */
	rp_slots_valid = false;
	return false;
}

/* A socket that the server closed while idle is readable with EOF. */
bool
rp_conn_is_stale(void)
{
	char		c;
	ssize_t		n;

	if (rp_tls_active(rp_ctx))
		return rp_tls_is_stale(rp_ctx);
	n = recv(rp_ctx->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0)
		return true;
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		return true;
	/* n > 0 would be an unsolicited reply: the stream is out of step. */
	return n > 0;
}

/* The password file's first line, or NULL (failure recorded). */
static char *
rp_read_password_file(void)
{
	int			sqlstate;
	char	   *message;
	char	   *password = rp_secret_read_file("redis_primitives.password_file",
											   rp_password_file, &sqlstate,
											   &message);

	if (password == NULL)
		(void) rp_set_failure(sqlstate, message, NULL, NULL);
	return password;
}

/* rp_wait as a connection's: the TLS handshake's wait (RpTlsWaitFn). */
static bool
rp_wait_connect(int events, TimestampTz deadline)
{
	return rp_wait(events, deadline, RP_WAIT_CONNECT);
}

/*
 * TLS hook: the handshake, for masters, sentinels and cluster nodes alike
 * (not unix sockets).  tls.c returns what failed as a status, which becomes
 * the recorded failure.  A cancel or timeout thrown by rp_wait is thrown on:
 * rp_open has set rp_in_exchange, so the half-open connection is dropped by
 * the next call.
 */
static bool
rp_tls_connect(redisContext *c, TimestampTz deadline)
{
	RpStatus	st = {0};

	if (rp_tls_handshake(c, c->tcp.host, rp_conn_target(), rp_wait_connect,
						 deadline, &st))
		return true;
	(void) rp_set_failure(st.sqlstate, st.message, st.detail, st.hint);
	rp_conn_drop();
	rp_in_exchange = false;
	rp_slots_valid = false;
	return false;
}

/* Wait for a non-blocking connect to finish. */
static bool
rp_connect_wait(redisContext *c, TimestampTz deadline)
{
	int			err = 0;
	socklen_t	errlen = sizeof(err);

	if (!rp_wait(WL_SOCKET_WRITEABLE, deadline, RP_WAIT_CONNECT))
		return rp_fail(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
					   "could not connect to Redis",
					   psprintf("no connection within %d ms (redis_primitives.connect_timeout)",
								rp_connect_budget_ms()));
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &errlen) < 0)
		err = errno;
	if (err != 0)
		return rp_fail(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
					   "could not connect to Redis", pstrdup(strerror(err)));

	if (c->connection_type == REDIS_CONN_TCP && rp_tls_enabled())
		return rp_tls_connect(c, deadline);
	return true;
}

/*
 * Open a non-blocking TCP (or unix) connection as rp_ctx.  Its socket is
 * reserved with AcquireExternalFD, like postgres_fdw's, and given back by
 * rp_free_ctx.
 */
bool
rp_open(const char *host, int port, const char *unix_socket, TimestampTz deadline)
{
	redisContext *c;

	rp_conn_drop();
	rp_stats_conn_event(RP_EVENT_CONNECT);

	/*
	 * Not usable until connected and through the handshake: an interrupt
	 * thrown before then leaves it to be dropped by the next call.
	 */
	rp_in_exchange = true;
	if (!AcquireExternalFD())
	{
		return rp_set_failure(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
							  "could not connect to Redis",
							  "There are too many open files on the local server.",
							  "Raise the server's max_files_per_process setting.");
	}
	/* Name resolution inside hiredis is the one step not under the latch. */
	if (unix_socket && unix_socket[0])
		c = redisConnectUnixNonBlock(unix_socket);
	else
		c = redisConnectNonBlock(host, port);
	if (c == NULL)
	{
		ReleaseExternalFD();
		return rp_set_failure(ERRCODE_OUT_OF_MEMORY,
								 "out of memory while connecting to Redis",
								 NULL,
								 NULL);
	}
	rp_ctx = c;
	rp_fresh_ctx = c;
	if (c->err)
		return rp_fail(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
					   "could not connect to Redis", pstrdup(c->errstr));
	return rp_connect_wait(c, deadline);
}

/* Describe the failure just recorded in why, naming who failed. */
void
rp_note_failure(StringInfo why, const char *who)
{
	rp_conn_drop();
	appendStringInfo(why, "%s%s: %s", why->len ? "; " : "", who,
					 rp_failure.detail ? rp_failure.detail : rp_failure.message);
}

/* Append one command; false (failure recorded) if hiredis is out of memory. */
bool
rp_append(int argc, const char **argv, const size_t *argvlen)
{
	if (redisAppendCommandArgv(rp_ctx, argc, argv, argvlen) == REDIS_OK)
		return true;
	rp_conn_drop();
	return rp_set_failure(ERRCODE_OUT_OF_MEMORY,
							 "out of memory while building a Redis command",
							 NULL,
							 NULL);
}

/*
 * AUTH, SELECT and (against a master the sentinels named) ROLE, pipelined:
 * one round trip.  A replica fails like an unreachable server: the
 * sentinels may be mid-failover, and the caller asks the next one.
 */
bool
rp_handshake(TimestampTz deadline, bool check_role)
{
	const char *password;
	int			ncmds = 0;
	RpReply    *replies[3];
	bool		ok = true;

	password = rp_password;
	if ((password == NULL || password[0] == '\0') &&
		rp_password_file && rp_password_file[0])
	{
		password = rp_read_password_file();
		if (password == NULL)
		{
			rp_conn_drop();
			return false;
		}
	}
	if (password && password[0])
	{
		const char *argv[3] = {"AUTH", rp_username, password};

		if (rp_username && rp_username[0])
			ok = rp_append(3, argv, NULL);
		else
		{
			argv[1] = password;
			ok = rp_append(2, argv, NULL);
		}
		ncmds++;
	}
	if (ok && rp_database != 0)
	{
		char		db[16];
		const char *argv[2] = {"SELECT", db};

		snprintf(db, sizeof(db), "%d", rp_database);
		ok = rp_append(2, argv, NULL);
		ncmds++;
	}
	if (ok && check_role)
	{
		const char *argv[1] = {"ROLE"};

		ok = rp_append(1, argv, NULL);
		ncmds++;
	}
	if (!ok)
		return false;
	if (ncmds == 0)
	{
		rp_in_exchange = false;
		return true;
	}
	if (!rp_exchange(ncmds, deadline, replies))
		return false;
	for (int i = 0; i < ncmds; i++)
	{
		bool		is_role = (check_role && i == ncmds - 1);

		if (replies[i]->type == RP_REPLY_ERROR)
		{
			bool		auth = (i == 0 && password && password[0]);
			int			code = rp_error_sqlstate(replies[i]->str);

			if (auth)
				(void) rp_set_failure(code,
									  code == ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION ?
									  "could not connect to Redis" :
									  "could not authenticate to Redis", NULL, NULL);
			else
				(void) rp_set_failure(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
									  is_role ? "could not ask Redis for its role"
									  : "could not select the Redis database",
									  NULL, NULL);
			rp_failure.detail = psprintf("Redis server %s said: %s",
										 rp_conn_target(), replies[i]->str);
			rp_failure.answered = true;
			rp_conn_drop();
			return false;
		}
		if (is_role &&
			!(replies[i]->type == RP_REPLY_ARRAY && replies[i]->nelem > 0 &&
			  replies[i]->elem[0]->type == RP_REPLY_STRING &&
			  strcmp(replies[i]->elem[0]->str, "master") == 0))
			return rp_fail(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						   "could not connect to Redis",
						   "the server the sentinels named is not a master (a failover may be under way)");
	}
	return true;
}

/* ------------------------------------------------------------------------
 * Replies.
 * ------------------------------------------------------------------------
 */

/* Copy a hiredis reply into palloc'd memory. */
static RpReply *
rp_copy_reply(redisReply *r)
{
	RpReply    *out = palloc0(sizeof(RpReply));

	switch (r->type)
	{
		case REDIS_REPLY_INTEGER:
			out->type = RP_REPLY_INTEGER;
			out->integer = r->integer;
			break;
		case REDIS_REPLY_STRING:
		case REDIS_REPLY_STATUS:
		case REDIS_REPLY_ERROR:
			out->type = (r->type == REDIS_REPLY_ERROR) ? RP_REPLY_ERROR : RP_REPLY_STRING;
			out->len = r->len;
			out->str = palloc(r->len + 1);
			memcpy(out->str, r->str, r->len);
			out->str[r->len] = '\0';
			break;
		case REDIS_REPLY_ARRAY:
			out->type = RP_REPLY_ARRAY;
			out->nelem = r->elements;
			out->elem = palloc0(sizeof(RpReply *) * Max(r->elements, 1));
			for (size_t i = 0; i < r->elements; i++)
				out->elem[i] = rp_copy_reply(r->element[i]);
			break;
		default:
			out->type = RP_REPLY_NIL;
			break;
	}
	return out;
}

/* Copy a hiredis reply and free it, even when palloc throws. */
static RpReply *
rp_take_reply(void *r)
{
	RpReply    *volatile out = NULL;

	PG_TRY();
	{
		out = rp_copy_reply((redisReply *) r);
	}
	PG_CATCH();
	{
		freeReplyObject(r);
		PG_RE_THROW();
	}
	PG_END_TRY();
	freeReplyObject(r);
	return out;
}

/*
 * The SQLSTATE for a Redis error reply, by its first word.  Redis' own text
 * goes into the detail; it never contains the password.
 */
static int
rp_error_sqlstate(const char *msg)
{
	static const struct
	{
		const char *prefix;
		int			sqlstate;
	}			map[] =
	{
		{"OOM ", ERRCODE_OUT_OF_MEMORY},
		{"NOPERM ", ERRCODE_INSUFFICIENT_PRIVILEGE},
		{"WRONGPASS ", ERRCODE_INVALID_PASSWORD},
		{"NOAUTH ", ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION},
		{"READONLY ", ERRCODE_READ_ONLY_SQL_TRANSACTION},
		{"LOADING ", ERRCODE_CANNOT_CONNECT_NOW},
		{"BUSY ", ERRCODE_CANNOT_CONNECT_NOW},
		{"MASTERDOWN ", ERRCODE_CANNOT_CONNECT_NOW},
		{"TRYAGAIN ", ERRCODE_CANNOT_CONNECT_NOW},
		{"CLUSTERDOWN ", ERRCODE_CANNOT_CONNECT_NOW},
		/* sent for the first command of a connection over maxclients */
		{"ERR max number of clients reached", ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION},
	};

	for (size_t i = 0; i < lengthof(map); i++)
		if (strncmp(msg, map[i].prefix, strlen(map[i].prefix)) == 0)
			return map[i].sqlstate;
	return ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;
}

/*
 * Record a Redis error reply as the failure.  The command's fate is known
 * (it was refused or failed in Redis).  In Sentinel mode a READONLY reply
 * means the server we hold was demoted by a failover: drop it, so that the
 * next call asks the sentinels.  The command is not retried here.
 */
bool
rp_fail_reply(const char *msg)
{
	int			sqlstate = rp_error_sqlstate(msg);

	rp_failure.sqlstate = sqlstate;
	rp_failure.answered = true;
	rp_failure.message = "Redis returned an error";
	rp_failure.detail = psprintf("Redis server %s said: %s", rp_conn_target(), msg);
	rp_failure.hint = NULL;
	if (sqlstate == ERRCODE_READ_ONLY_SQL_TRANSACTION && rp_sentinel_mode())
	{
		rp_failure.hint = "The server is no longer the master; the next call asks the sentinels for the new one.";
		rp_conn_drop();
	}
	else if (sqlstate == ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION)
	{
		/*
		 * Over maxclients: Redis refused the connection at its first command
		 * and closes it.  Nothing ran; a Redis that cannot be reached.
		 */
		rp_failure.message = "could not connect to Redis";
		rp_failure.hint = "Redis has as many clients as its maxclients allows.";
		rp_conn_drop();
	}
	else if (sqlstate == ERRCODE_OUT_OF_MEMORY)
	{
		rp_failure.message = "Redis refused the command: out of memory";
		rp_failure.detail = psprintf("Redis said: %s", msg);
		rp_failure.hint = "Nothing was written.  Free memory in Redis or raise its maxmemory; keep maxmemory-policy noeviction.";
	}
	return false;
}

/*
 * The connection failed in the middle of an exchange (c->errstr says how).
 * On a plain connection that never carried a reply, a reset or close at the
 * first command is what a Redis TLS port does to a client that does not
 * speak TLS (tls.c recognises it): that is a connection that could not be
 * established (08001), the hint naming the setting.  The failure is still
 * recorded as sent: the fate of the command is not claimed to be known.
 */
static bool
rp_fail_lost(void)
{
	const char *why = (rp_ctx == rp_fresh_ctx) ? rp_tls_plain_hint(rp_ctx) : NULL;

	if (why == NULL)
		return rp_fail(ERRCODE_CONNECTION_FAILURE,
					   "lost the connection to Redis", pstrdup(rp_ctx->errstr));
	(void) rp_fail(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
				   "could not connect to Redis",
				   psprintf("%s before answering the first command; %s",
							rp_ctx->errstr, why));
	rp_failure.hint = "If the server requires TLS, set redis_primitives.tls (and redis_primitives.tls_ca_file).";
	return false;
}

/*
 * Read one reply from rp_ctx into *r (a hiredis reply, the caller's to take
 * at once), waiting until deadline.  Any failure drops the connection.  A
 * reply owed to a command sent earlier (rp_send_only) has most likely
 * arrived already: it is read before any wait, which saves the wait's
 * system call on the path of every release sent at a transaction's end.
 */
static bool
rp_read_one(TimestampTz deadline, long budget_ms, bool owed, void **r)
{
	int			want = WL_SOCKET_READABLE;
	bool		read_first = owed && !rp_tls_active(rp_ctx);

	*r = NULL;
	for (;;)
	{
		if (redisGetReplyFromReader(rp_ctx, r) == REDIS_ERR)
			return rp_fail(ERRCODE_CONNECTION_FAILURE,
						   "lost the connection to Redis", pstrdup(rp_ctx->errstr));
		if (*r != NULL)
			return true;
		if (read_first)
		{
			/* Non-blocking: nothing there yet is not an error. */
			read_first = false;
			if (redisBufferRead(rp_ctx) == REDIS_ERR)
				return rp_fail_lost();
			continue;
		}
		/* TLS: OpenSSL may hold bytes already; read before waiting. */
		if (rp_tls_active(rp_ctx))
		{
			int			rc = rp_tls_read(rp_ctx, &want);

			if (rc < 0)
				return rp_fail(ERRCODE_CONNECTION_FAILURE,
							   "lost the connection to Redis", pstrdup(rp_ctx->errstr));
			if (rc > 0)
				continue;
		}
		if (!rp_wait(want, deadline, RP_WAIT_REPLY))
		{
			rp_failure.timed_out = true;
			return rp_fail(ERRCODE_CONNECTION_FAILURE,
						   "Redis command timed out",
						   psprintf("no reply within %ld ms; the connection was dropped",
									budget_ms));
		}
		if (!rp_tls_active(rp_ctx) && redisBufferRead(rp_ctx) == REDIS_ERR)
			return rp_fail_lost();
	}
}

/* Write what has been appended to rp_ctx, waiting until deadline. */
static bool
rp_write_all(TimestampTz deadline)
{
	int			done = 0;

	while (!done)
	{
		int			want = WL_SOCKET_WRITEABLE;

		if ((rp_tls_active(rp_ctx) ? rp_tls_write(rp_ctx, &done, &want)
			 : redisBufferWrite(rp_ctx, &done)) == REDIS_ERR)
			return rp_fail_lost();
		if (!done && !rp_wait(want, deadline, RP_WAIT_REPLY))
		{
			rp_failure.timed_out = true;
			return rp_fail(ERRCODE_CONNECTION_FAILURE,
						   "Redis command timed out",
						   "the command could not be sent in time; the connection was dropped");
		}
	}
	return true;
}

/*
 * Send what has been appended to rp_ctx and read ncmds replies into out[]
 * (Redis error replies as RP_REPLY_ERROR), after the replies owed to
 * commands sent earlier without waiting (rp_send_only), each handed to its
 * settle function.  The only place that reads from the socket.  Any failure
 * drops the connection.  Each hiredis reply is copied and freed before the
 * next wait, so an interrupt thrown inside rp_wait never leaves one
 * allocated; rp_in_exchange then tells the next call that the stream is out
 * of step.
 */
bool
rp_exchange(int ncmds, TimestampTz deadline, RpReply **out)
{
	long		budget_ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
	void	   *r;

	rp_in_exchange = true;
	rp_failure.sent = true;
	if (!rp_write_all(deadline))
		return false;

	while (rp_npending > 0)
	{
		RpReply    *reply;

		if (!rp_read_one(deadline, budget_ms, true, &r))
			return false;
		reply = rp_take_reply(r);
		if (rp_ctx == rp_fresh_ctx)
			rp_fresh_ctx = NULL;
		rp_pending_settle(reply);
	}
	for (int i = 0; i < ncmds; i++)
	{
		if (!rp_read_one(deadline, budget_ms, false, &r))
			return false;
		out[i] = rp_take_reply(r);
		if (rp_ctx == rp_fresh_ctx)
			rp_fresh_ctx = NULL;
	}
	rp_in_exchange = false;
	rp_last_used = GetCurrentTimestamp();
	return true;
}

/*
 * Send what has been appended to rp_ctx (one command) and return without
 * its reply: the next exchange reads it first and hands it to settle (NULL
 * if the connection goes first).  False (failure recorded, connection
 * dropped, settle not called) if it could not be sent: its fate is unknown.
 */
bool
rp_send_only(TimestampTz deadline, RpSentAs as, RpSettleFn settle, void *arg)
{
	Assert(!rp_cluster);
	if (rp_npending == rp_maxpending)
	{
		int			n = Max(8, rp_maxpending * 2);

		rp_pending = rp_pending == NULL ?
			MemoryContextAlloc(TopMemoryContext, sizeof(RpPending) * n) :
			repalloc(rp_pending, sizeof(RpPending) * n);
		rp_maxpending = n;
	}
	rp_in_exchange = true;
	rp_failure.sent = true;
	if (!rp_write_all(deadline))
		return false;
	rp_pending[rp_npending].settle = settle;
	rp_pending[rp_npending].arg = arg;
	rp_pending[rp_npending].as = as;
	rp_npending++;
	rp_in_exchange = false;
	rp_last_used = GetCurrentTimestamp();
	return true;
}

/* How many replies are owed on rp_ctx (0 when there is no connection). */
int
rp_pending_count(void)
{
	return rp_ctx == NULL || rp_in_exchange ? 0 : rp_npending;
}

/* Read the replies owed on rp_ctx, if any (see rp_exchange). */
bool
rp_settle_pending(TimestampTz deadline)
{
	if (rp_ctx == NULL || rp_npending == 0)
		return true;
	if (rp_in_exchange)
	{
		/* Out of step (an exchange cut short): the replies cannot be told. */
		rp_conn_drop();
		rp_in_exchange = false;
		return true;
	}
	return rp_exchange(0, deadline, NULL);
}

/*
 * Settle the replies owed that have arrived already, oldest first, after
 * reads that do not wait; the rest stay owed.  A plain socket is read
 * once.  Under TLS, OpenSSL is asked a few times (rp_tls_read skips its
 * first read right after a send, and a reply may span records), each
 * returning at once when nothing is there.  A read error drops the
 * connection, each reply owed settled as lost.
 */
bool
rp_settle_arrived(void)
{
	void	   *r;
	bool		tls;
	int			reads = 0;		/* TLS: asked of OpenSSL, at most 8 */
	int			empty = 0;		/* TLS: of those, found nothing */

	if (rp_ctx == NULL || rp_npending == 0 || rp_in_exchange)
		return true;
	tls = rp_tls_active(rp_ctx);
	if (!tls && redisBufferRead(rp_ctx) == REDIS_ERR)
		return rp_fail_lost();
	while (rp_npending > 0)
	{
		RpReply    *reply;

		if (redisGetReplyFromReader(rp_ctx, &r) == REDIS_ERR)
			return rp_fail(ERRCODE_CONNECTION_FAILURE,
						   "lost the connection to Redis", pstrdup(rp_ctx->errstr));
		if (r == NULL && tls && reads++ < 8)
		{
			int			want;
			int			rc = rp_tls_read(rp_ctx, &want);

			if (rc < 0)
				return rp_fail(ERRCODE_CONNECTION_FAILURE,
							   "lost the connection to Redis", pstrdup(rp_ctx->errstr));
			/* Nothing there twice (the first may be the skip after a send). */
			if (rc == 0 && ++empty == 2)
				break;
			continue;
		}
		if (r == NULL)
			break;
		reply = rp_take_reply(r);
		if (rp_ctx == rp_fresh_ctx)
			rp_fresh_ctx = NULL;
		rp_pending_settle(reply);
	}
	return true;
}

bool
rp_is_noscript(const RpReply *r)
{
	return r->type == RP_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

bool
rp_append_script(const char *verb, const char *body, int nkeys,
				 const RpArg *keys, int nargs, const RpArg *argv)
{
	int			argc = 3 + nkeys + nargs;
	/* A single call's few arguments need no allocation. */
	const char *av_local[16];
	size_t		al_local[16];
	const char **av = argc <= 16 ? av_local : palloc(sizeof(char *) * argc);
	size_t	   *al = argc <= 16 ? al_local : palloc(sizeof(size_t) * argc);
	char		nk[16];
	int			n = 0;
	bool		ok;

	snprintf(nk, sizeof(nk), "%d", nkeys);
	av[n] = verb;
	al[n++] = strlen(verb);
	av[n] = body;
	al[n++] = strlen(body);
	av[n] = nk;
	al[n++] = strlen(nk);
	for (int i = 0; i < nkeys; i++)
	{
		av[n] = keys[i].data;
		al[n++] = keys[i].len;
	}
	for (int i = 0; i < nargs; i++)
	{
		av[n] = argv[i].data;
		al[n++] = argv[i].len;
	}
	ok = rp_append(argc, av, al);
	if (av != av_local)
	{
		pfree(av);
		pfree(al);
	}
	return ok;
}

void
rp_latch_sleep(long ms, RpWaitEvent what)
{
	int			rc;

	rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
				   Max(ms, 1), rp_wait_event(what));
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}
