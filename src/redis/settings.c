/*-------------------------------------------------------------------------
 *
 * settings.c
 *		The Redis layer's settings: where Redis is (host and port, unix
 *		socket, Sentinels, Cluster), how to log in, how long to wait, the key
 *		prefix; rp_conn_init defines them, and rp_conn_target_signature names
 *		the server they point at.
 *
 * Before editing, know this: every setting is PGC_SUSET, so a plain user
 * cannot redirect the server; the password is a secret (secret.c).  Any
 * change that names another server sets rp_config_changed, and the next
 * call (conn.c's rp_check_config) drops every connection before it sends
 * anything.  Nothing here opens a connection.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <limits.h>

#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "utils/guc.h"

#include "conn.h"
#include "conn_int.h"
#include "secret.h"

/* Settings.  All PGC_SUSET: a plain user must not redirect the server. */
char	   *rp_host = NULL;
int			rp_port = 6379;
char	   *rp_unix_socket = NULL;
int			rp_database = 0;
char	   *rp_username = NULL;
char	   *rp_password = NULL;
char	   *rp_password_file = NULL;
static int	rp_connect_timeout_ms = 2000;

/*
 * A cleanup path (rp_eval_quiet) caps how long a connect may take, so a
 * ROLLBACK or a backend exit is never held up for a whole connect_timeout.
 */
int			rp_connect_cap_ms = 0;	/* 0: no cap */

int
rp_connect_budget_ms(void)
{
	if (rp_connect_cap_ms > 0)
		return Min(rp_connect_timeout_ms, rp_connect_cap_ms);
	return rp_connect_timeout_ms;
}

int			rp_command_timeout_ms = 2000;
char	   *rp_key_prefix = NULL;
char	   *rp_sentinels = NULL;
char	   *rp_sentinel_master = NULL;
int			rp_sentinel_idle_recheck_ms = 1000;
bool		rp_cluster = false;

/* A setting that names another server changed: drop the connections. */
bool		rp_config_changed = false;

bool
rp_sentinel_mode(void)
{
	return rp_sentinels != NULL && rp_sentinels[0] != '\0';
}

/*
 * Split "host:port,host:port" into its next entry.  *pos walks the string.
 * Returns false at the end; an entry without a valid port sets *port = 0.
 */
bool
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

RpArg
rp_key(const char *name, size_t namelen, const char *suffix)
{
	return rp_key_with_prefix(rp_key_prefix, name, namelen, suffix);
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
