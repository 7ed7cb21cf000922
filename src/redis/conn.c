/*-------------------------------------------------------------------------
 *
 * conn.c
 *		The Redis connection of one backend: settings, connect, AUTH and
 *		SELECT, non-blocking I/O waited on with WaitLatchOrSocket, EVALSHA
 *		with a NOSCRIPT fallback, and Redis replies turned into palloc'd
 *		RpReply trees or ereports.  The master is found directly, through
 *		Redis Sentinel, or per hash slot in a Redis Cluster (docs/topology.md).
 *
 * Before editing, know this: every step returns a status (false, with
 * rp_failure filled in) and never ereports for what Redis or the network
 * does; only the SQL face (rp_eval, rp_command) turns a failure into an
 * ERROR, and the cleanup face (rp_eval_quiet) into a message.  An exchange
 * that did not finish (timeout, I/O error, or an interrupt thrown from the
 * latch wait) must drop the connection, because its reply may still arrive
 * and would be read as the answer to the next command: a failure drops it
 * at once, and rp_in_exchange makes the next call drop one an interrupt
 * left behind.  No hiredis reply is ever held across a wait.  The socket is
 * written in one place and read in one place (rp_exchange).  Nothing in this
 * file knows what a lock is.
 *
 * There is always at most one connection in use, rp_ctx with its wait set.
 * In Cluster mode the other nodes' connections are parked in rp_nodes[] and
 * swapped in by rp_use_node; sentinels are asked over a short-lived rp_ctx
 * that is dropped before the master's is opened.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <limits.h>
#include <sys/socket.h>

#include <hiredis/hiredis.h>

#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "lib/stringinfo.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "conn.h"
#include "stats.h"
#include "secret.h"
#include "sentinel_auth.h"
#include "tls.h"

/* Settings.  All PGC_SUSET: a plain user must not redirect the server. */
static char *rp_host = NULL;
static int	rp_port = 6379;
static char *rp_unix_socket = NULL;
static int	rp_database = 0;
static char *rp_username = NULL;
static char *rp_password = NULL;
static char *rp_password_file = NULL;
static int	rp_connect_timeout_ms = 2000;

/*
 * A cleanup path (rp_eval_quiet) caps how long a connect may take, so a
 * ROLLBACK or a backend exit is never held up for a whole connect_timeout.
 */
static int	rp_connect_cap_ms = 0;	/* 0: no cap */

static int
rp_connect_budget_ms(void)
{
	if (rp_connect_cap_ms > 0)
		return Min(rp_connect_timeout_ms, rp_connect_cap_ms);
	return rp_connect_timeout_ms;
}

/*
 * True from the first byte of an exchange until its last reply was read.
 * An exchange cut short by FATAL (pg_terminate_backend) or postmaster death
 * never reaches rp_exchange's PG_CATCH; the flag still marks the connection
 * as out of step, and the next call (say, the release at backend exit)
 * drops it instead of reading the old reply as its own.
 */
static bool rp_in_exchange = false;

/*
 * When the connection was last used: connected, or an exchange on it ended
 * (Sentinel mode's idle check, rp_ensure_connected).  Counted from the end
 * of an exchange, so a long one (a WAIT) is never followed by a reconnect
 * before the next command: that command may be the WAIT for its writes.
 */
static TimestampTz rp_last_used = 0;

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
static RpStatus rp_failure;

/* Record a failure that is not about a connection to drop; returns false. */
static bool
rp_set_failure(int sqlstate, const char *message, const char *detail,
			   const char *hint)
{
	rp_failure.sqlstate = sqlstate;
	rp_failure.message = message;
	rp_failure.detail = detail;
	rp_failure.hint = hint;
	return false;
}

/*
 * Record an ERROR just caught (and not re-thrown) as the failure.  errfinish
 * zeroed the interrupt hold-off counts for the error handler it expected to
 * run; they are put back to what they were when the PG_TRY began, so that a
 * caller's HOLD_INTERRUPTS (the cleanup face's, AbortTransaction's) is not
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

int			rp_command_timeout_ms = 2000;
char	   *rp_key_prefix = NULL;
static char *rp_sentinels = NULL;
static char *rp_sentinel_master = NULL;
static int	rp_sentinel_idle_recheck_ms = 1000;
static bool rp_cluster = false;

/* The connection, and whether the settings changed since it was opened. */
static redisContext *rp_ctx = NULL;
static WaitEventSet *rp_waitset = NULL;
static int	rp_waitset_socket;		/* position of the socket in rp_waitset */
static int	rp_waitset_events;		/* what it is waited for now */
static bool rp_config_changed = false;

/*
 * In Sentinel mode: the master the sentinels named last (what messages
 * name), or the sentinel being asked while discovery runs.
 */
static char rp_peer_host[256] = "";
static int	rp_peer_port = 0;
static const char *rp_peer_role = NULL;	/* "master", "sentinel" */

static bool
rp_sentinel_mode(void)
{
	return rp_sentinels != NULL && rp_sentinels[0] != '\0';
}

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

/*
 * Split "host:port,host:port" into its next entry.  *pos walks the string.
 * Returns false at the end; an entry without a valid port sets *port = 0.
 */
static bool
rp_next_hostport(const char **pos, char *host, size_t hostsize, int *port)
{
	const char *p = *pos;
	const char *end;
	const char *colon = NULL;
	size_t		hlen;
	char	   *endp;
	long		v;

	while (*p == ' ' || *p == ',')
		p++;
	if (*p == '\0')
		return false;
	end = p + strcspn(p, ",");
	*pos = end;
	for (const char *q = p; q < end; q++)
		if (*q == ':')
			colon = q;
	*port = 0;
	host[0] = '\0';
	if (colon == NULL || colon == p)
		return true;
	hlen = Min((size_t) (colon - p), hostsize - 1);
	memcpy(host, p, hlen);
	host[hlen] = '\0';
	errno = 0;
	v = strtol(colon + 1, &endp, 10);
	while (endp < end && *endp == ' ')
		endp++;
	if (errno == 0 && endp == end && v >= 1 && v <= 65535)
		*port = (int) v;
	return true;
}

static bool
rp_check_sentinels(char **newval, void **extra, GucSource source)
{
	const char *pos = *newval;
	char		host[256];
	int			port;

	if (pos == NULL)
		return true;
	while (rp_next_hostport(&pos, host, sizeof(host), &port))
	{
		if (port == 0 || host[0] == '\0')
		{
			GUC_check_errdetail("Each entry must be host:port, entries separated by commas.");
			return false;
		}
	}
	return true;
}

/* rp_conn_target_signature's memo (end of file); any setting may change it. */
static bool rp_target_sig_valid = false;

static void
rp_mark_changed(const char *newval, void *extra)
{
	rp_config_changed = true;
	rp_target_sig_valid = false;
}

static void
rp_mark_changed_int(int newval, void *extra)
{
	rp_config_changed = true;
	rp_target_sig_valid = false;
}

static void
rp_mark_changed_bool(bool newval, void *extra)
{
	rp_config_changed = true;
	rp_target_sig_valid = false;
}

/* A secret: see secret.c. */
static bool
rp_check_password(char **newval, void **extra, GucSource source)
{
	return rp_secret_check("redis_primitives.password",
						   "redis_primitives.password_file", newval, source);
}

static const char *
rp_show_password(void)
{
	return rp_secret_show(rp_password);
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
							   rp_check_password, rp_mark_changed, rp_show_password);
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
	DefineCustomStringVariable("redis_primitives.sentinels",
							   "Redis Sentinels to ask for the master, as host:port entries separated by commas; when set, host, port and unix_socket are not used.",
							   "The sentinels are asked in turn on every new connection; a lost connection or a READONLY reply makes the next call ask again.",
							   &rp_sentinels, "", PGC_SUSET, 0,
							   rp_check_sentinels, rp_mark_changed, NULL);
	DefineCustomStringVariable("redis_primitives.sentinel_master",
							   "Name of the master the sentinels monitor (their \"sentinel monitor\" name).",
							   NULL, &rp_sentinel_master, "mymaster", PGC_SUSET, 0,
							   NULL, rp_mark_changed, NULL);
	DefineCustomIntVariable("redis_primitives.sentinel_idle_recheck",
							"In Sentinel mode, a connection idle longer than this asks the sentinels for the master again before it is used.",
							"A failover cannot complete within the sentinels' down-after-milliseconds of the master's last answer, so a value at or below it catches every failover an idle connection slept through; 0 never asks again while the connection lives.",
							&rp_sentinel_idle_recheck_ms, 1000, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomBoolVariable("redis_primitives.cluster",
							 "Talk to a Redis Cluster: host and port name any node of it; each call goes to the node serving its keys' hash slot.",
							 "The slot map is read with CLUSTER SLOTS and kept per process; MOVED and ASK redirections are followed, at most two per call.",
							 &rp_cluster, false, PGC_SUSET, 0,
							 NULL, rp_mark_changed_bool, NULL);
	DefineCustomStringVariable("redis_primitives.key_prefix",
							   "Prefix of every Redis key this extension writes.",
							   NULL, &rp_key_prefix, "rp:", PGC_SUSET, 0,
							   NULL, NULL, NULL);
}

/* ------------------------------------------------------------------------
 * The connection itself.
 * ------------------------------------------------------------------------
 */

/* Drop the current connection (in Cluster mode: to the current node). */
static void
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
}

/* ------------------------------------------------------------------------
 * Redis Cluster: the slot map and one connection per node.
 *
 * The connection in use is always rp_ctx/rp_waitset, so everything below
 * (waits, exchanges, failures) works unchanged; switching nodes parks the
 * current connection in its node's entry and takes out the other's.
 * ------------------------------------------------------------------------
 */
#define RP_CLUSTER_SLOTS	16384
#define RP_MAX_NODES		64
#define RP_MAX_REDIRECTS	2

typedef struct RpNode
{
	char		host[256];
	int			port;
	redisContext *ctx;			/* parked connection; NULL while current */
	WaitEventSet *waitset;
	int			waitset_socket;
	int			waitset_events;
} RpNode;

static RpNode rp_nodes[RP_MAX_NODES];
static int	rp_nnodes = 0;
static int	rp_cur_node = -1;	/* whose connection rp_ctx is */
static int16 rp_slot_node[RP_CLUSTER_SLOTS];
static bool rp_slots_valid = false;

/* CRC16-CCITT (XMODEM), as Redis' crc16.c: polynomial 0x1021, init 0. */
static uint16
rp_crc16(const char *buf, size_t len)
{
	uint16		crc = 0;

	for (size_t i = 0; i < len; i++)
	{
		crc ^= (uint16) ((unsigned char) buf[i]) << 8;
		for (int b = 0; b < 8; b++)
			crc = (crc & 0x8000) ? (uint16) ((crc << 1) ^ 0x1021) : (uint16) (crc << 1);
	}
	return crc;
}

/* The slot of a key, as Redis computes it (the hash tag rule included). */
int
rp_key_slot(const char *key, size_t len)
{
	size_t		s,
				e;

	for (s = 0; s < len; s++)
		if (key[s] == '{')
			break;
	if (s < len)
	{
		for (e = s + 1; e < len; e++)
			if (key[e] == '}')
				break;
		if (e < len && e != s + 1)
			return rp_crc16(key + s + 1, e - s - 1) & (RP_CLUSTER_SLOTS - 1);
	}
	return rp_crc16(key, len) & (RP_CLUSTER_SLOTS - 1);
}

bool
rp_cluster_mode(void)
{
	return rp_cluster;
}

/* Make node i's connection the current one. */
static void
rp_use_node(int i)
{
	if (i == rp_cur_node)
		return;
	if (rp_cur_node >= 0)
	{
		RpNode	   *cur = &rp_nodes[rp_cur_node];

		cur->ctx = rp_ctx;
		cur->waitset = rp_waitset;
		cur->waitset_socket = rp_waitset_socket;
		cur->waitset_events = rp_waitset_events;
	}
	else
		rp_conn_drop();			/* a connection of no node: not kept */
	rp_ctx = rp_nodes[i].ctx;
	rp_waitset = rp_nodes[i].waitset;
	rp_waitset_socket = rp_nodes[i].waitset_socket;
	rp_waitset_events = rp_nodes[i].waitset_events;
	rp_nodes[i].ctx = NULL;
	rp_nodes[i].waitset = NULL;
	rp_cur_node = i;
	strlcpy(rp_peer_host, rp_nodes[i].host, sizeof(rp_peer_host));
	rp_peer_port = rp_nodes[i].port;
	rp_peer_role = "cluster node";
}

/* The node entry for host:port, added if new; -1 (failure recorded) if full. */
static int
rp_node_find_or_add(const char *host, int port)
{
	for (int i = 0; i < rp_nnodes; i++)
		if (rp_nodes[i].port == port && strcmp(rp_nodes[i].host, host) == 0)
			return i;
	if (rp_nnodes == RP_MAX_NODES)
	{
		(void) rp_set_failure(ERRCODE_PROGRAM_LIMIT_EXCEEDED,
								 psprintf("Redis Cluster has more than %d nodes", RP_MAX_NODES),
								 NULL,
								 NULL);
		return -1;
	}
	memset(&rp_nodes[rp_nnodes], 0, sizeof(RpNode));
	strlcpy(rp_nodes[rp_nnodes].host, host, sizeof(rp_nodes[rp_nnodes].host));
	rp_nodes[rp_nnodes].port = port;
	return rp_nnodes++;
}

/* Drop every connection and forget the cluster's shape. */
void
rp_conn_reset(void)
{
	for (int i = 0; i < rp_nnodes; i++)
	{
		if (i == rp_cur_node)
			continue;
		if (rp_nodes[i].waitset != NULL)
			FreeWaitEventSet(rp_nodes[i].waitset);
		if (rp_nodes[i].ctx != NULL)
		{
			rp_tls_close(rp_nodes[i].ctx);
			redisFree(rp_nodes[i].ctx);
			ReleaseExternalFD();
		}
		rp_nodes[i].waitset = NULL;
		rp_nodes[i].ctx = NULL;
	}
	rp_conn_drop();
	rp_nnodes = 0;
	rp_cur_node = -1;
	rp_slots_valid = false;
}

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
static bool
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

static bool rp_exchange(int ncmds, TimestampTz deadline, RpReply **out);
static int	rp_error_sqlstate(const char *msg);

/* rp_wait as a connection's: the TLS handshake's wait (RpTlsWaitFn). */
static bool
rp_wait_connect(int events, TimestampTz deadline)
{
	return rp_wait(events, deadline, RP_WAIT_CONNECT);
}

/*
 * TLS hook: the handshake, for masters, sentinels and cluster nodes alike
 * (not unix sockets).  tls.c ereports what failed; that becomes the recorded
 * failure here, so the core keeps returning a status (and the cleanup face
 * never throws).  A cancel or timeout thrown by rp_wait is thrown on: rp_open
 * has set rp_in_exchange, so the half-open connection is dropped by the next
 * call.
 */
static bool
rp_tls_connect(redisContext *c, TimestampTz deadline)
{
	MemoryContext cxt = CurrentMemoryContext;
	uint32		holdoff = InterruptHoldoffCount;
	uint32		cancel_holdoff = QueryCancelHoldoffCount;
	volatile bool failed = false;

	PG_TRY();
	{
		rp_tls_handshake(c, c->tcp.host, rp_conn_target(), rp_wait_connect, deadline);
	}
	PG_CATCH();
	{
		int			sqlstate = geterrcode();

		if (sqlstate == ERRCODE_QUERY_CANCELED ||
			sqlstate == ERRCODE_LOCK_NOT_AVAILABLE)
			PG_RE_THROW();
		(void) rp_set_failure_caught(cxt, holdoff, cancel_holdoff);
		failed = true;
	}
	PG_END_TRY();
	if (!failed)
		return true;
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
static bool
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
static void
rp_note_failure(StringInfo why, const char *who)
{
	rp_conn_drop();
	appendStringInfo(why, "%s%s: %s", why->len ? "; " : "", who,
					 rp_failure.detail ? rp_failure.detail : rp_failure.message);
}

/* Append one command; false (failure recorded) if hiredis is out of memory. */
static bool
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
 * Ask one sentinel where the master is.  Returns true with *port set and
 * host filled in; false, saying why in why, when this sentinel could not
 * answer (down, timed out, does not know the master).
 */
static bool
rp_sentinel_ask(const char *shost, int sport, TimestampTz deadline,
				char *host, size_t hostsize, int *port, StringInfo why)
{
	const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", rp_sentinel_master};
	char	   *who = psprintf("sentinel %s:%d", shost, sport);
	const char *auth[3];
	char	   *auth_error;
	int			nauth = rp_sentinel_auth_argv(auth, &auth_error);
	RpReply    *replies[2];
	RpReply    *r;

	if (nauth < 0)
	{
		appendStringInfo(why, "%s%s: %s", why->len ? "; " : "", who, auth_error);
		return false;
	}
	strlcpy(rp_peer_host, shost, sizeof(rp_peer_host));
	rp_peer_port = sport;
	rp_peer_role = "sentinel";
	/* AUTH (sentinel_password) and the question, in one round trip. */
	if (!rp_open(shost, sport, NULL, deadline) ||
		(nauth > 0 && !rp_append(nauth, auth, NULL)) ||
		!rp_append(3, argv, NULL) ||
		!rp_exchange(nauth > 0 ? 2 : 1, deadline, replies))
	{
		rp_note_failure(why, who);
		return false;
	}
	rp_conn_drop();
	r = replies[nauth > 0 ? 1 : 0];
	if (nauth > 0 && replies[0]->type == RP_REPLY_ERROR)
	{
		appendStringInfo(why, "%s%s refused AUTH (redis_primitives.sentinel_password): %s",
						 why->len ? "; " : "", who, replies[0]->str);
		return false;
	}
	if (r->type == RP_REPLY_ARRAY && r->nelem == 2 &&
		r->elem[0]->type == RP_REPLY_STRING &&
		r->elem[1]->type == RP_REPLY_STRING && atoi(r->elem[1]->str) > 0)
	{
		strlcpy(host, r->elem[0]->str, hostsize);
		*port = atoi(r->elem[1]->str);
		return true;
	}
	if (r->type == RP_REPLY_ERROR)
		appendStringInfo(why, "%s%s said: %s", why->len ? "; " : "", who, r->str);
	else
		appendStringInfo(why, "%s%s does not know master \"%s\"",
						 why->len ? "; " : "", who, rp_sentinel_master);
	return false;
}

/*
 * AUTH, SELECT and (against a master the sentinels named) ROLE, pipelined:
 * one round trip.  A replica fails like an unreachable server: the
 * sentinels may be mid-failover, and the caller asks the next one.
 */
static bool
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

			if (auth)
				(void) rp_set_failure(rp_error_sqlstate(replies[i]->str),
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

/*
 * Sentinel mode: ask the sentinels in turn for the master, connect to it and
 * check it is one.  The whole search shares one connect_timeout; a sentinel
 * that does not answer gets a fair share of what is left, not all of it.
 * The sentinel that answered is asked first next time.
 */
static bool
rp_connect_sentinel(TimestampTz deadline)
{
	static int	first = 0;
	int			n = 0;
	char		shost[256];
	int			sport;
	const char *pos;
	StringInfoData why;

	initStringInfo(&why);
	pos = rp_sentinels;
	while (rp_next_hostport(&pos, shost, sizeof(shost), &sport))
		n++;

	for (int k = 0; k < n; k++)
	{
		int			idx = (first + k) % n;
		int			j = 0;
		char		mhost[256];
		int			mport;
		long		left;
		TimestampTz until;

		pos = rp_sentinels;
		while (rp_next_hostport(&pos, shost, sizeof(shost), &sport) && j++ < idx)
			;
		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (left <= 0)
			break;
		until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											Max(left / (n - k), Min(left, 100)));
		if (!rp_sentinel_ask(shost, sport, until, mhost, sizeof(mhost), &mport,
							 &why))
			continue;

		/* Connect to the master it named; a failure there asks the next. */
		strlcpy(rp_peer_host, mhost, sizeof(rp_peer_host));
		rp_peer_port = mport;
		rp_peer_role = "master";
		if (rp_open(mhost, mport, NULL, deadline) && rp_handshake(deadline, true))
		{
			first = idx;
			return true;
		}
		rp_note_failure(&why, psprintf("master %s:%d named by sentinel %s:%d",
									   mhost, mport, shost, sport));
	}

	rp_peer_host[0] = '\0';
	if (why.len == 0)
		appendStringInfo(&why, "no time left within %d ms (redis_primitives.connect_timeout)",
						 rp_connect_budget_ms());
	return rp_set_failure(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
							 psprintf("could not connect to the Redis master \"%s\" through its sentinels",
								  rp_sentinel_master),
							 psprintf("%s.", why.data),
							 NULL);
}

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
static bool
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
 * Send what has been appended to rp_ctx and read ncmds replies into out[]
 * (Redis error replies as RP_REPLY_ERROR).  The only place that writes to
 * and reads from the socket.  Any failure drops the connection.  Each hiredis
 * reply is copied and freed before the next wait, so an interrupt thrown
 * inside rp_wait never leaves one allocated; rp_in_exchange then tells the
 * next call that the stream is out of step.
 */
static bool
rp_exchange(int ncmds, TimestampTz deadline, RpReply **out)
{
	int			done = 0;
	long		budget_ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

	rp_in_exchange = true;
	rp_failure.sent = true;
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

	for (int i = 0; i < ncmds; i++)
	{
		void	   *r = NULL;
		int			want = WL_SOCKET_READABLE;

		for (;;)
		{
			if (redisGetReplyFromReader(rp_ctx, &r) == REDIS_ERR)
				return rp_fail(ERRCODE_CONNECTION_FAILURE,
							   "lost the connection to Redis", pstrdup(rp_ctx->errstr));
			if (r != NULL)
				break;
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
		out[i] = rp_take_reply(r);
		if (rp_ctx == rp_fresh_ctx)
			rp_fresh_ctx = NULL;
	}
	rp_in_exchange = false;
	rp_last_used = GetCurrentTimestamp();
	return true;
}

/* A changed setting drops every connection before the next command. */
static bool rp_cluster_load_slots(void);
static bool rp_cluster_connect_node(int i, TimestampTz deadline);

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
	if (rp_ctx != NULL && rp_conn_is_stale())
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

static bool
rp_is_noscript(const RpReply *r)
{
	return r->type == RP_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

static bool
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

	if (strcmp(verb, "EVAL") == 0)
		rp_stats_conn_event(RP_EVENT_NOSCRIPT);	/* only sent after NOSCRIPT */
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

/* Make node i current and connected (AUTH, no SELECT: Cluster has db 0). */
static bool
rp_cluster_connect_node(int i, TimestampTz deadline)
{
	rp_use_node(i);
	if (rp_ctx != NULL && rp_conn_is_stale())
		rp_conn_drop();
	if (rp_ctx == NULL)
		return rp_open(rp_nodes[i].host, rp_nodes[i].port, NULL, deadline) &&
			rp_handshake(deadline, false);
	return true;
}

/* Fill the slot map from a CLUSTER SLOTS reply got from node asked. */
static bool
rp_cluster_parse_slots(const RpReply *r, int asked)
{
	int			covered = 0;

	if (r->type != RP_REPLY_ARRAY)
		return false;
	for (int s = 0; s < RP_CLUSTER_SLOTS; s++)
		rp_slot_node[s] = -1;
	for (size_t k = 0; k < r->nelem; k++)
	{
		const RpReply *e = r->elem[k];
		const RpReply *m;
		const char *host;
		int			n;

		if (e->type != RP_REPLY_ARRAY || e->nelem < 3 ||
			e->elem[0]->type != RP_REPLY_INTEGER ||
			e->elem[1]->type != RP_REPLY_INTEGER ||
			e->elem[2]->type != RP_REPLY_ARRAY || e->elem[2]->nelem < 2 ||
			e->elem[2]->elem[0]->type != RP_REPLY_STRING ||
			e->elem[2]->elem[1]->type != RP_REPLY_INTEGER)
			continue;
		m = e->elem[2];
		/* An empty host means "the address you reached me at". */
		host = m->elem[0]->len > 0 ? m->elem[0]->str : rp_nodes[asked].host;
		n = rp_node_find_or_add(host, (int) m->elem[1]->integer);
		if (n < 0)
			continue;
		for (long long s = Max(e->elem[0]->integer, 0);
			 s <= Min(e->elem[1]->integer, RP_CLUSTER_SLOTS - 1); s++)
		{
			rp_slot_node[s] = (int16) n;
			covered++;
		}
	}
	return covered > 0;
}

/* Ask node i for the slot map; false (with why) if it could not answer. */
static bool
rp_cluster_try_slots(int i, TimestampTz deadline, StringInfo why)
{
	const char *argv[2] = {"CLUSTER", "SLOTS"};
	char	   *who = psprintf("node %s:%d", rp_nodes[i].host, rp_nodes[i].port);
	RpReply    *r;

	if (!rp_cluster_connect_node(i, deadline) ||
		!rp_append(2, argv, NULL) ||
		!rp_exchange(1, deadline, &r))
	{
		rp_note_failure(why, who);
		return false;
	}
	if (r->type == RP_REPLY_ERROR)
		appendStringInfo(why, "%s%s said: %s", why->len ? "; " : "", who, r->str);
	else if (rp_cluster_parse_slots(r, i))
		return true;
	else
		appendStringInfo(why, "%s%s: no slots in its CLUSTER SLOTS reply",
						 why->len ? "; " : "", who);
	return false;
}

/*
 * Load the slot map: ask the configured host:port first (any node of the
 * cluster will do), then every node known from an earlier map.  The node
 * that answered stays current.
 */
static bool
rp_cluster_load_slots(void)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   rp_connect_budget_ms());
	int			seed = rp_node_find_or_add(rp_host, rp_port);
	int			n = rp_nnodes;
	StringInfoData why;

	initStringInfo(&why);
	rp_slots_valid = false;
	if (seed < 0)
		return false;
	for (int k = -1; k < n; k++)
	{
		int			i = (k < 0) ? seed : k;

		if (k >= 0 && k == seed)
			continue;
		if (rp_cluster_try_slots(i, deadline, &why))
		{
			rp_slots_valid = true;
			return true;
		}
	}
	return rp_set_failure(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
							 "could not read the Redis Cluster slot map",
							 psprintf("%s.", why.data),
							 NULL);
}

/* "MOVED 3999 127.0.0.1:6381" or "ASK ...": the node to go to, or -1. */
static int
rp_cluster_redirect(const char *msg, int *slot)
{
	const char *p = strchr(msg, ' ');
	const char *colon;
	char		host[256];
	int			port;

	if (p == NULL)
		return -1;
	*slot = atoi(p + 1);
	p = strchr(p + 1, ' ');
	if (p == NULL)
		return -1;
	p++;
	colon = strrchr(p, ':');
	if (colon == NULL)
		return -1;
	strlcpy(host, p, Min((size_t) (colon - p) + 1, sizeof(host)));
	port = atoi(colon + 1);
	if (port <= 0 || port > 65535 || *slot < 0 || *slot >= RP_CLUSTER_SLOTS)
		return -1;
	if (host[0] == '\0' && rp_cur_node >= 0)
		strlcpy(host, rp_nodes[rp_cur_node].host, sizeof(host));
	return rp_node_find_or_add(host, port);
}

/*
 * Cluster mode: run the script on the node that serves its keys' slot.
 * Every call's keys share one hash tag, so that is one node, one round trip
 * in steady state.  MOVED updates the map and retries there; ASK (a slot
 * being migrated) sends ASKING and the script to the target, pipelined, and
 * leaves the map alone.  At most RP_MAX_REDIRECTS of either per call.
 *
 * TRYAGAIN is what a node answers a multi-key script during a slot
 * migration when some of its keys have moved and some have not (or do not
 * exist yet, like a free lock's key): the script was not run, so it is sent
 * again after a short pause (5 ms doubling to 50 ms, interruptible), until
 * the command's own timeout is spent.
 */
static bool
rp_eval_cluster(const RpScript *script, int nkeys, const RpArg *keys,
				int nargs, const RpArg *argv, int timeout_ms, RpReply **out)
{
	int			slot = nkeys > 0 ? rp_key_slot(keys[0].data, keys[0].len) : 0;
	int			node;
	bool		asking = false;
	RpReply    *replies[2];
	RpReply    *reply = NULL;
	TimestampTz call_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															timeout_ms);
	long		pause = 5;
	int			redirects = 0;

	if ((!rp_slots_valid || rp_slot_node[slot] < 0) && !rp_cluster_load_slots())
		return false;
	node = rp_slot_node[slot];
	if (node < 0)
	{
		return rp_set_failure(ERRCODE_CANNOT_CONNECT_NOW,
								 psprintf("no Redis Cluster node serves hash slot %d", slot),
								 NULL,
								 "The cluster is being reconfigured or has lost a master.");
	}

	for (;;)
	{
		TimestampTz deadline;
		int			to;
		int			s;

		if (!rp_cluster_connect_node(node,
									 TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
																 rp_connect_budget_ms())))
			return false;
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
		for (int pass = 0; pass < 2; pass++)
		{
			int			n = 0;

			if (asking)
			{
				const char *av[1] = {"ASKING"};

				if (!rp_append(1, av, NULL))
					return false;
				n++;
			}
			/* Flushed or restarted: EVAL runs it and caches it again. */
			if (!rp_append_script(pass ? "EVAL" : "EVALSHA",
								  pass ? script->text : script->sha1,
								  nkeys, keys, nargs, argv))
				return false;
			n++;
			if (!rp_exchange(n, deadline, replies))
				return false;
			reply = replies[n - 1];
			if (!rp_is_noscript(reply))
				break;
		}
		if (reply->type != RP_REPLY_ERROR)
		{
			*out = reply;
			return true;
		}
		if (redirects < RP_MAX_REDIRECTS &&
			(strncmp(reply->str, "MOVED ", 6) == 0 ||
			 strncmp(reply->str, "ASK ", 4) == 0) &&
			(to = rp_cluster_redirect(reply->str, &s)) >= 0)
		{
			asking = (reply->str[0] == 'A');
			if (!asking)
				rp_slot_node[s] = (int16) to;
			node = to;
			redirects++;
			continue;
		}
		if (strncmp(reply->str, "TRYAGAIN", 8) == 0 &&
			TimestampDifferenceMilliseconds(GetCurrentTimestamp(), call_deadline) > pause)
		{
			rp_latch_sleep(pause, RP_WAIT_CLUSTER_RETRY);
			pause = Min(pause * 2, 50);
			asking = false;
			redirects = 0;		/* a new attempt from the top */
			node = rp_slot_node[slot] >= 0 ? rp_slot_node[slot] : node;
			continue;
		}
		return rp_fail_reply(reply->str);
	}
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

void
rp_status_raise(const RpStatus *st)
{
	ereport(ERROR,
			(errcode(st->sqlstate ? st->sqlstate : ERRCODE_INTERNAL_ERROR),
			 errmsg("%s", st->message ? st->message : "Redis call failed"),
			 st->detail ? errdetail_internal("%s", st->detail) : 0,
			 st->hint ? errhint("%s", st->hint) : 0));
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
rp_eval_quiet(const RpScript *script, int nkeys, const RpArg *keys,
			  int nargs, const RpArg *argv, int timeout_ms, char **errmsg_out)
{
	RpReply    *volatile reply = NULL;
	RpStatus	st;
	int			saved_cap = rp_connect_cap_ms;
	MemoryContext cxt = CurrentMemoryContext;
	uint32		holdoff;
	uint32		cancel_holdoff;
	volatile bool ok;

	*errmsg_out = NULL;
	HOLD_INTERRUPTS();
	holdoff = InterruptHoldoffCount;
	cancel_holdoff = QueryCancelHoldoffCount;
	rp_connect_cap_ms = timeout_ms;

	/*
	 * The core reports what Redis and the network do as a status, but below
	 * it PostgreSQL itself may still raise (a password file that cannot be
	 * read, no file descriptor for the wait set, out of memory).  Here that
	 * must not escape: thrown from a COMMIT callback it is a PANIC.  It
	 * becomes this call's failure, and the connection, in whatever state
	 * the ERROR left it, is dropped.
	 */
	PG_TRY();
	{
		RpReply    *r;

		ok = rp_eval_try(script, nkeys, keys, nargs, argv, timeout_ms, &r, &st);
		reply = r;
	}
	PG_CATCH();
	{
		ok = rp_set_failure_caught(cxt, holdoff, cancel_holdoff);
		st = rp_failure;
		rp_conn_reset();
		rp_in_exchange = false;
	}
	PG_END_TRY();
	rp_connect_cap_ms = saved_cap;
	RESUME_INTERRUPTS();
	if (ok)
		return reply;
	rp_stats_quiet_error(st.sqlstate);
	*errmsg_out = st.detail ? psprintf("%s: %s", st.message, st.detail)
		: pstrdup(st.message ? st.message : "Redis call failed");
	return NULL;
}

RpReply *
rp_command(int argc, const RpArg *argv)
{
	const char **av = palloc(sizeof(char *) * argc);
	size_t	   *al = palloc(sizeof(size_t) * argc);
	RpReply    *reply;

	memset(&rp_failure, 0, sizeof(rp_failure));
	for (int i = 0; i < argc; i++)
	{
		av[i] = argv[i].data;
		al[i] = argv[i].len;
	}
	if (!rp_ensure_connected() ||
		!rp_append(argc, av, al) ||
		!rp_exchange(1, TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													rp_command_timeout_ms),
					 &reply) ||
		(reply->type == RP_REPLY_ERROR && !rp_fail_reply(reply->str)))
		rp_status_raise(&rp_failure);
	return reply;
}

/*
 * rp_command's cleanup face, for the background worker: interrupts held,
 * connect capped at timeout_ms, a deadline of timeout_ms for the reply,
 * never ereports.  NULL with *errmsg_out (palloc'd) when the call failed;
 * a Redis error reply is a failure.
 */
RpReply *
rp_command_quiet(int argc, const RpArg *argv, int timeout_ms, char **errmsg_out)
{
	RpReply    *volatile reply = NULL;
	int			saved_cap = rp_connect_cap_ms;
	MemoryContext cxt = CurrentMemoryContext;
	uint32		holdoff;
	uint32		cancel_holdoff;
	volatile bool ok;

	*errmsg_out = NULL;
	HOLD_INTERRUPTS();
	holdoff = InterruptHoldoffCount;
	cancel_holdoff = QueryCancelHoldoffCount;
	rp_connect_cap_ms = timeout_ms;
	memset(&rp_failure, 0, sizeof(rp_failure));
	/* As in rp_eval_quiet: what PostgreSQL itself raises becomes a status. */
	PG_TRY();
	{
		const char **av = palloc(sizeof(char *) * argc);
		size_t	   *al = palloc(sizeof(size_t) * argc);
		RpReply    *r = NULL;

		for (int i = 0; i < argc; i++)
		{
			av[i] = argv[i].data;
			al[i] = argv[i].len;
		}
		/* In Cluster mode it goes to the node used last, as rp_command. */
		ok = rp_ensure_connected() &&
			rp_append(argc, av, al) &&
			rp_exchange(1, TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms), &r) &&
			(r->type != RP_REPLY_ERROR || rp_fail_reply(r->str));
		if (ok)
			reply = r;
	}
	PG_CATCH();
	{
		ok = rp_set_failure_caught(cxt, holdoff, cancel_holdoff);
		rp_conn_reset();
		rp_in_exchange = false;
	}
	PG_END_TRY();
	rp_connect_cap_ms = saved_cap;
	RESUME_INTERRUPTS();
	if (ok)
		return reply;
	rp_stats_quiet_error(rp_failure.sqlstate);
	*errmsg_out = rp_failure.detail ? psprintf("%s: %s", rp_failure.message, rp_failure.detail)
		: pstrdup(rp_failure.message ? rp_failure.message : "Redis call failed");
	return NULL;
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

/* ------------------------------------------------------------------------
 * Small helpers shared by the primitives.
 * ------------------------------------------------------------------------
 */

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

RpArg
rp_arg_int(int64 v)
{
	char	   *s = psprintf(INT64_FORMAT, v);
	RpArg		a = {s, strlen(s)};

	return a;
}

RpArg
rp_key_with_prefix(const char *prefix, const char *name, size_t namelen,
				   const char *suffix)
{
	size_t		plen = strlen(prefix);
	size_t		slen = strlen(suffix);
	/* A name starting with '}' would give an empty hash tag: see conn.h. */
	bool		tagless = (namelen > 0 && name[0] == '}');
	size_t		len = plen + (tagless ? 3 : 1) + namelen + (tagless ? 1 : 2) + slen;
	char	   *k = palloc(len + 1);
	char	   *p = k;
	RpArg		a;

	memcpy(p, prefix, plen);
	p += plen;
	*p++ = '{';
	if (tagless)
	{
		*p++ = '\0';
		*p++ = '}';
	}
	memcpy(p, name, namelen);
	p += namelen;
	if (!tagless)
		*p++ = '}';
	*p++ = ':';
	memcpy(p, suffix, slen);
	p += slen;
	*p = '\0';
	a.data = k;
	a.len = len;
	return a;
}

RpArg
rp_key(const char *name, size_t namelen, const char *suffix)
{
	return rp_key_with_prefix(rp_key_prefix, name, namelen, suffix);
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

/*
 * Order n keys so that keys of one Redis Cluster hash slot are adjacent:
 * fills order[] (a permutation of 0..n-1) and returns the number of groups;
 * group g is order[start[g] .. start[g + 1] - 1].  A script runs on one
 * node, so a many-key script (release, verify) is sent once per group.
 * Outside Cluster mode everything is one group: one round trip.
 */
int
rp_slot_groups(int n, const RpArg *keys, int *order, int *start)
{
	int		   *slot;
	int			ngroups = 0;

	for (int i = 0; i < n; i++)
		order[i] = i;
	if (!rp_cluster_mode())
	{
		start[0] = 0;
		start[1] = n;
		return 1;
	}
	slot = palloc(sizeof(int) * n);
	for (int i = 0; i < n; i++)
		slot[i] = rp_key_slot(keys[i].data, keys[i].len);
	/* Insertion sort by slot, stable: a session holds a handful of leases. */
	for (int i = 1; i < n; i++)
	{
		int			v = order[i];
		int			j = i - 1;

		while (j >= 0 && slot[order[j]] > slot[v])
		{
			order[j + 1] = order[j];
			j--;
		}
		order[j + 1] = v;
	}
	for (int i = 0; i < n; i++)
		if (i == 0 || slot[order[i]] != slot[order[i - 1]])
			start[ngroups++] = i;
	start[ngroups] = n;
	pfree(slot);
	return ngroups;
}

/* ------------------------------------------------------------------------
 * Which Redis the settings point at (the rate-limit cache, ratecache.c).
 * ------------------------------------------------------------------------
 */

/*
 * A 64-bit signature of the Redis server (or Sentinel master, or Cluster)
 * and database the current settings name, so that state cached in shared
 * memory about one server is never taken for another's: databases of one
 * PostgreSQL server may point at different Redis servers.
 */
uint64
rp_conn_target_signature(void)
{
	static uint64 sig;
	StringInfoData buf;

	if (rp_target_sig_valid)
		return sig;
	initStringInfo(&buf);
	appendStringInfo(&buf, "%s|%d|%s|%d|%s|%s|%d",
					 rp_host ? rp_host : "", rp_port,
					 rp_unix_socket ? rp_unix_socket : "", rp_database,
					 rp_sentinels ? rp_sentinels : "",
					 rp_sentinel_master ? rp_sentinel_master : "",
					 (int) rp_cluster);
	sig = hash_bytes_extended((const unsigned char *) buf.data, buf.len, 0);
	pfree(buf.data);
	rp_target_sig_valid = true;
	return sig;
}
