/*-------------------------------------------------------------------------
 *
 * conn.c
 *		The Redis connection of one backend: settings, connect, AUTH and
 *		SELECT, non-blocking I/O waited on with WaitLatchOrSocket, EVALSHA
 *		with a NOSCRIPT fallback, and Redis replies turned into palloc'd
 *		RpReply trees or ereports.
 *
 * Before editing, know this: an exchange that did not finish (timeout,
 * cancel, statement_timeout, I/O error, an ereport from anywhere inside it)
 * must drop the connection, because its reply may still arrive and would be
 * read as the answer to the next command.  Every path below therefore runs
 * inside rp_exchange's PG_TRY, which frees the hiredis reply being held and
 * the context before re-throwing.  Nothing in this file knows what a lock is.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <limits.h>
#include <sys/socket.h>

#include <hiredis/hiredis.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "conn.h"

/* Settings.  All PGC_SUSET: a plain user must not redirect the server. */
static char *rp_host = NULL;
static int	rp_port = 6379;
static char *rp_unix_socket = NULL;
static int	rp_database = 0;
static char *rp_username = NULL;
static char *rp_password = NULL;
static char *rp_password_file = NULL;
static int	rp_connect_timeout_ms = 2000;
int			rp_command_timeout_ms = 2000;
char	   *rp_key_prefix = NULL;

/* The connection, and whether the settings changed since it was opened. */
static redisContext *rp_ctx = NULL;
static bool rp_config_changed = false;

/* What a failure message names: "host:port" or the socket path. */
static const char *
rp_conn_target(void)
{
	if (rp_unix_socket && rp_unix_socket[0])
		return psprintf("unix socket \"%s\"", rp_unix_socket);
	return psprintf("%s:%d", rp_host ? rp_host : "", rp_port);
}

static void
rp_mark_changed(const char *newval, void *extra)
{
	rp_config_changed = true;
}

static void
rp_mark_changed_int(int newval, void *extra)
{
	rp_config_changed = true;
}

/*
 * The password must not be stored where plain users can read it:
 * ALTER ROLE/DATABASE ... SET and CREATE FUNCTION ... SET write to
 * world-readable catalogs (they are validated with source PGC_S_TEST, and
 * applied at login with the DATABASE/USER sources).  postgresql.conf,
 * ALTER SYSTEM, a session SET by a superuser, or password_file are the
 * places for it.
 */
static bool
rp_check_password(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (source == PGC_S_TEST || source == PGC_S_DATABASE ||
		source == PGC_S_USER || source == PGC_S_DATABASE_USER)
	{
		GUC_check_errcode(ERRCODE_INSUFFICIENT_PRIVILEGE);
		GUC_check_errmsg("redis_primitives.password cannot be stored in a role, database or function setting");
		GUC_check_errdetail("Those settings are readable by every user in pg_db_role_setting and pg_proc.");
		GUC_check_errhint("Set it in postgresql.conf or with ALTER SYSTEM, or use redis_primitives.password_file.");
		return false;
	}
	return true;
}

void
rp_conn_init(void)
{
	DefineCustomStringVariable("redis_primitives.host",
							   "Host name or address of the Redis server.",
							   "Ignored when redis_primitives.unix_socket is set.",
							   &rp_host, "127.0.0.1", PGC_SUSET, 0,
							   NULL, rp_mark_changed, NULL);
	DefineCustomIntVariable("redis_primitives.port",
							"TCP port of the Redis server.",
							NULL, &rp_port, 6379, 1, 65535, PGC_SUSET, 0,
							NULL, rp_mark_changed_int, NULL);
	DefineCustomStringVariable("redis_primitives.unix_socket",
							   "Path of the Redis server's unix socket; when set, it is used instead of host and port.",
							   NULL, &rp_unix_socket, "", PGC_SUSET, 0,
							   NULL, rp_mark_changed, NULL);
	DefineCustomIntVariable("redis_primitives.database",
							"Redis logical database number selected after connecting.",
							NULL, &rp_database, 0, 0, INT_MAX, PGC_SUSET, 0,
							NULL, rp_mark_changed_int, NULL);
	DefineCustomStringVariable("redis_primitives.username",
							   "Redis ACL user name; empty means the default user.",
							   NULL, &rp_username, "", PGC_SUSET, 0,
							   NULL, rp_mark_changed, NULL);
	DefineCustomStringVariable("redis_primitives.password",
							   "Password sent with AUTH; visible only to superusers.",
							   "Cannot be stored with ALTER ROLE, ALTER DATABASE or CREATE FUNCTION ... SET.",
							   &rp_password, "", PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   rp_check_password, rp_mark_changed, NULL);
	DefineCustomStringVariable("redis_primitives.password_file",
							   "File whose first line is the Redis password, read at connect time when redis_primitives.password is empty.",
							   "The file must be readable by the database server's operating system user only.",
							   &rp_password_file, "", PGC_SUSET, GUC_SUPERUSER_ONLY,
							   NULL, rp_mark_changed, NULL);
	DefineCustomIntVariable("redis_primitives.connect_timeout",
							"Time allowed to connect to Redis and authenticate.",
							NULL, &rp_connect_timeout_ms, 2000, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("redis_primitives.command_timeout",
							"Time allowed for one Redis command's round trip; on expiry the connection is dropped.",
							NULL, &rp_command_timeout_ms, 2000, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomStringVariable("redis_primitives.key_prefix",
							   "Prefix of every Redis key this extension writes.",
							   NULL, &rp_key_prefix, "rp:", PGC_SUSET, 0,
							   NULL, NULL, NULL);
}

/* ------------------------------------------------------------------------
 * The connection itself.
 * ------------------------------------------------------------------------
 */

void
rp_conn_reset(void)
{
	if (rp_ctx != NULL)
	{
		redisFree(rp_ctx);
		rp_ctx = NULL;
	}
}

/*
 * Wait until fd is ready for events or the deadline passes.  Returns false on
 * timeout.  Cancel and statement_timeout arrive through the latch and are
 * thrown by CHECK_FOR_INTERRUPTS (which does nothing while a quiet cleanup
 * holds interrupts).
 */
static bool
rp_wait(int fd, int events, TimestampTz deadline)
{
	for (;;)
	{
		long		timeout_ms;
		int			rc;

		CHECK_FOR_INTERRUPTS();
		timeout_ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (timeout_ms <= 0)
			return false;
		rc = WaitLatchOrSocket(MyLatch,
							   WL_LATCH_SET | events | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							   fd, timeout_ms, PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
		if (rc & events)
			return true;
	}
}

static void rp_fail(int sqlstate, const char *msg, const char *why) pg_attribute_noreturn();

static void
rp_fail(int sqlstate, const char *msg, const char *why)
{
	const char *target = rp_conn_target();

	rp_conn_reset();
	ereport(ERROR,
			(errcode(sqlstate),
			 errmsg("%s", msg),
			 errdetail("Redis server %s: %s.", target, why)));
}

/* A socket that the server closed while idle is readable with EOF. */
static bool
rp_conn_is_stale(void)
{
	char		c;
	ssize_t		n;

	n = recv(rp_ctx->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0)
		return true;
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		return true;
	/* n > 0 would be an unsolicited reply: the stream is out of step. */
	return n > 0;
}

static char *
rp_read_password_file(void)
{
	FILE	   *f;
	char		buf[1024];
	size_t		len;

	f = AllocateFile(rp_password_file, "r");
	if (f == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open redis_primitives.password_file \"%s\": %m",
						rp_password_file)));
	if (fgets(buf, sizeof(buf), f) == NULL)
		buf[0] = '\0';
	FreeFile(f);
	len = strlen(buf);
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		buf[--len] = '\0';
	return pstrdup(buf);
}

static void rp_exchange(int ncmds, TimestampTz deadline, RpReply **out,
						bool raise_errors);
static int	rp_error_sqlstate(const char *msg);

/* Wait for a non-blocking connect to finish; 08001 if it fails. */
static void
rp_connect_wait(redisContext *c, TimestampTz deadline)
{
	int			err = 0;
	socklen_t	errlen = sizeof(err);

	PG_TRY();
	{
		if (!rp_wait(c->fd, WL_SOCKET_WRITEABLE, deadline))
			rp_fail(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
					"could not connect to Redis",
					psprintf("no connection within redis_primitives.connect_timeout (%d ms)",
							 rp_connect_timeout_ms));
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &errlen) < 0)
			err = errno;
		if (err != 0)
			rp_fail(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
					"could not connect to Redis", pstrdup(strerror(err)));
	}
	PG_CATCH();
	{
		rp_conn_reset();
		PG_RE_THROW();
	}
	PG_END_TRY();
}

static void
rp_connect(void)
{
	TimestampTz deadline;
	redisContext *c;
	const char *password;
	int			ncmds = 0;
	RpReply    *replies[2];

	rp_conn_reset();
	rp_config_changed = false;

	/*
	 * The password first: an error reading password_file must not leave a
	 * connected but unauthenticated context behind, which every later call
	 * would reuse (NOAUTH) even after the file is fixed.
	 */
	password = rp_password;
	if ((password == NULL || password[0] == '\0') &&
		rp_password_file && rp_password_file[0])
		password = rp_read_password_file();

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   rp_connect_timeout_ms);

	/* Name resolution inside hiredis is the one step not under the latch. */
	if (rp_unix_socket && rp_unix_socket[0])
		c = redisConnectUnixNonBlock(rp_unix_socket);
	else
		c = redisConnectNonBlock(rp_host, rp_port);
	if (c == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory while connecting to Redis")));
	rp_ctx = c;
	if (c->err)
		rp_fail(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
				"could not connect to Redis", pstrdup(c->errstr));

	rp_connect_wait(c, deadline);

	/* AUTH and SELECT, pipelined: one round trip. */
	if (password && password[0])
	{
		if (rp_username && rp_username[0])
		{
			const char *argv[3] = {"AUTH", rp_username, password};

			redisAppendCommandArgv(c, 3, argv, NULL);
		}
		else
		{
			const char *argv[2] = {"AUTH", password};

			redisAppendCommandArgv(c, 2, argv, NULL);
		}
		ncmds++;
	}
	if (rp_database != 0)
	{
		char		db[16];
		const char *argv[2] = {"SELECT", db};

		snprintf(db, sizeof(db), "%d", rp_database);
		redisAppendCommandArgv(c, 2, argv, NULL);
		ncmds++;
	}
	if (ncmds > 0)
	{
		rp_exchange(ncmds, deadline, replies, false);
		for (int i = 0; i < ncmds; i++)
		{
			if (replies[i]->integer == -1 && replies[i]->type == RP_REPLY_STRING)
			{
				bool		auth = (i == 0 && password && password[0]);

				rp_conn_reset();
				ereport(ERROR,
						(errcode(auth ? rp_error_sqlstate(replies[i]->str)
								 : ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
						 errmsg(auth ? "could not authenticate to Redis"
								: "could not select the Redis database"),
						 errdetail("Redis server %s said: %s",
								   rp_conn_target(), replies[i]->str)));
			}
		}
	}
}

/* ------------------------------------------------------------------------
 * Replies.
 * ------------------------------------------------------------------------
 */

/* Copy a hiredis reply into palloc'd memory.  Errors were handled before. */
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
			out->type = RP_REPLY_STRING;
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
	};

	for (size_t i = 0; i < lengthof(map); i++)
		if (strncmp(msg, map[i].prefix, strlen(map[i].prefix)) == 0)
			return map[i].sqlstate;
	return ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;
}

static void rp_raise_redis_error(const char *msg) pg_attribute_noreturn();

static void
rp_raise_redis_error(const char *msg)
{
	int			sqlstate = rp_error_sqlstate(msg);

	if (sqlstate == ERRCODE_OUT_OF_MEMORY)
		ereport(ERROR,
				(errcode(sqlstate),
				 errmsg("Redis refused the command: out of memory"),
				 errdetail("Redis said: %s", msg),
				 errhint("Nothing was written.  Free memory in Redis or raise its maxmemory; keep maxmemory-policy noeviction.")));
	ereport(ERROR,
			(errcode(sqlstate),
			 errmsg("Redis returned an error"),
			 errdetail("Redis server %s said: %s", rp_conn_target(), msg)));
}

/*
 * Send what has been appended to rp_ctx and read ncmds replies into out[].
 * Any failure drops the connection before it propagates.  When raise_errors
 * is false, Redis error replies are returned as RP_REPLY_STRING with
 * integer = -1 (the caller decides, e.g. NOSCRIPT); otherwise the first one
 * is raised after every reply has been read, so the stream stays in step.
 */
static void
rp_exchange(int ncmds, TimestampTz deadline, RpReply **out, bool raise_errors)
{
	redisReply *volatile held = NULL;
	char	   *volatile first_error = NULL;

	PG_TRY();
	{
		int			done = 0;

		while (!done)
		{
			if (redisBufferWrite(rp_ctx, &done) == REDIS_ERR)
				rp_fail(ERRCODE_CONNECTION_FAILURE,
						"lost the connection to Redis", pstrdup(rp_ctx->errstr));
			if (!done && !rp_wait(rp_ctx->fd, WL_SOCKET_WRITEABLE, deadline))
				rp_fail(ERRCODE_CONNECTION_FAILURE,
						"Redis command timed out",
						"the command could not be sent in time; the connection was dropped");
		}

		for (int i = 0; i < ncmds; i++)
		{
			void	   *r = NULL;

			for (;;)
			{
				if (redisGetReplyFromReader(rp_ctx, &r) == REDIS_ERR)
					rp_fail(ERRCODE_CONNECTION_FAILURE,
							"lost the connection to Redis", pstrdup(rp_ctx->errstr));
				if (r != NULL)
					break;
				if (!rp_wait(rp_ctx->fd, WL_SOCKET_READABLE, deadline))
					rp_fail(ERRCODE_CONNECTION_FAILURE,
							"Redis command timed out",
							psprintf("no reply within %d ms; the connection was dropped",
									 rp_command_timeout_ms));
				if (redisBufferRead(rp_ctx) == REDIS_ERR)
					rp_fail(ERRCODE_CONNECTION_FAILURE,
							"lost the connection to Redis", pstrdup(rp_ctx->errstr));
			}
			held = r;
			if (held->type == REDIS_REPLY_ERROR)
			{
				char	   *msg = pnstrdup(held->str, held->len);

				if (raise_errors)
				{
					if (first_error == NULL)
						first_error = msg;
					out[i] = NULL;
				}
				else
				{
					out[i] = palloc0(sizeof(RpReply));
					out[i]->type = RP_REPLY_STRING;
					out[i]->integer = -1;
					out[i]->str = msg;
					out[i]->len = strlen(msg);
				}
			}
			else
				out[i] = rp_copy_reply(held);
			freeReplyObject(held);
			held = NULL;
		}
	}
	PG_CATCH();
	{
		if (held != NULL)
			freeReplyObject(held);
		rp_conn_reset();
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (first_error != NULL)
		rp_raise_redis_error(first_error);
}

/* Open the connection if needed; drop one the server closed while idle. */
static void
rp_ensure_connected(void)
{
	if (rp_ctx != NULL && (rp_config_changed || rp_conn_is_stale()))
		rp_conn_reset();
	if (rp_ctx == NULL)
		rp_connect();
}

static bool
rp_is_noscript(const RpReply *r)
{
	return r->integer == -1 && r->type == RP_REPLY_STRING &&
		strncmp(r->str, "NOSCRIPT", 8) == 0;
}

static void
rp_append_script(const char *verb, const char *body, int nkeys,
				 const RpArg *keys, int nargs, const RpArg *argv)
{
	int			argc = 3 + nkeys + nargs;
	const char **av = palloc(sizeof(char *) * argc);
	size_t	   *al = palloc(sizeof(size_t) * argc);
	char		nk[16];
	int			n = 0;

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
	if (redisAppendCommandArgv(rp_ctx, argc, av, al) != REDIS_OK)
	{
		rp_conn_reset();
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory while building a Redis command")));
	}
	pfree(av);
	pfree(al);
}

static RpReply *
rp_eval_internal(const RpScript *script, int nkeys, const RpArg *keys,
				 int nargs, const RpArg *argv, int timeout_ms)
{
	TimestampTz deadline;
	RpReply    *reply;

	rp_ensure_connected();
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	rp_append_script("EVALSHA", script->sha1, nkeys, keys, nargs, argv);
	rp_exchange(1, deadline, &reply, false);
	if (rp_is_noscript(reply))
	{
		/* Flushed or restarted: EVAL runs it and caches it again. */
		rp_append_script("EVAL", script->text, nkeys, keys, nargs, argv);
		rp_exchange(1, deadline, &reply, false);
	}
	if (reply->integer == -1 && reply->type == RP_REPLY_STRING)
		rp_raise_redis_error(reply->str);
	return reply;
}

RpReply *
rp_eval(const RpScript *script, int nkeys, const RpArg *keys,
		int nargs, const RpArg *argv)
{
	return rp_eval_internal(script, nkeys, keys, nargs, argv,
							rp_command_timeout_ms);
}

RpReply *
rp_eval_quiet(const RpScript *script, int nkeys, const RpArg *keys,
			  int nargs, const RpArg *argv, int timeout_ms, char **errmsg_out)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	RpReply    *volatile reply = NULL;
	uint32		holdoff;

	*errmsg_out = NULL;
	HOLD_INTERRUPTS();
	holdoff = InterruptHoldoffCount;
	PG_TRY();
	{
		reply = rp_eval_internal(script, nkeys, keys, nargs, argv, timeout_ms);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/* errfinish() zeroed the holdoff count: put ours back. */
		InterruptHoldoffCount = holdoff;
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		*errmsg_out = edata->detail ?
			psprintf("%s: %s", edata->message, edata->detail) :
			pstrdup(edata->message);
		FreeErrorData(edata);
		reply = NULL;
	}
	PG_END_TRY();
	RESUME_INTERRUPTS();
	return reply;
}

RpReply *
rp_command(int argc, const RpArg *argv)
{
	const char **av = palloc(sizeof(char *) * argc);
	size_t	   *al = palloc(sizeof(size_t) * argc);
	RpReply    *reply;

	rp_ensure_connected();
	for (int i = 0; i < argc; i++)
	{
		av[i] = argv[i].data;
		al[i] = argv[i].len;
	}
	if (redisAppendCommandArgv(rp_ctx, argc, av, al) != REDIS_OK)
	{
		rp_conn_reset();
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY),
						errmsg("out of memory while building a Redis command")));
	}
	rp_exchange(1, TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   rp_command_timeout_ms),
				&reply, true);
	return reply;
}

void
rp_conn_ping(int64 *rtt_us, char **version)
{
	RpArg		ping[1] = {rp_arg_str("PING")};
	RpArg		info[2] = {rp_arg_str("INFO"), rp_arg_str("server")};
	TimestampTz start;
	RpReply    *r;
	char	   *p;

	rp_ensure_connected();
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

/* ------------------------------------------------------------------------
 * Small helpers shared by the primitives.
 * ------------------------------------------------------------------------
 */

RpArg
rp_arg_int(int64 v)
{
	char	   *s = psprintf(INT64_FORMAT, v);
	RpArg		a = {s, strlen(s)};

	return a;
}

RpArg
rp_key(const char *name, size_t namelen, const char *suffix)
{
	size_t		plen = strlen(rp_key_prefix);
	size_t		slen = strlen(suffix);
	size_t		len = plen + 1 + namelen + 2 + slen;
	char	   *k = palloc(len + 1);
	char	   *p = k;
	RpArg		a;

	memcpy(p, rp_key_prefix, plen);
	p += plen;
	*p++ = '{';
	memcpy(p, name, namelen);
	p += namelen;
	*p++ = '}';
	*p++ = ':';
	memcpy(p, suffix, slen);
	p += slen;
	*p = '\0';
	a.data = k;
	a.len = len;
	return a;
}

int64
rp_reply_int(const RpReply *r, const char *what)
{
	if (r == NULL || r->type != RP_REPLY_INTEGER)
		elog(ERROR, "unexpected Redis reply for %s: expected an integer", what);
	return r->integer;
}

bool
rp_reply_is_nil(const RpReply *r)
{
	return r == NULL || r->type == RP_REPLY_NIL;
}
