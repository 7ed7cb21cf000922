/*-------------------------------------------------------------------------
 *
 * conn.h
 *		The one Redis connection of a backend (or of the background elector).
 *
 * Nothing but conn.c touches hiredis.  Callers run a Lua script and get back
 * an RpReply: a copy of Redis' answer in palloc'd memory, so no hiredis object
 * is ever alive when the caller ereports.  Every wait inside is a latch wait
 * against a deadline; an interrupted or timed-out exchange drops the
 * connection, so a late reply can never be read as the answer to the next
 * command.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_CONN_H
#define RP_CONN_H

#include "postgres.h"

/* A Lua script embedded at build time (see scripts/embed-lua.sh). */
typedef struct RpScript
{
	const char *name;			/* file name without .lua, for messages */
	const char *text;			/* the exact script text */
	const char *sha1;			/* SHA1 of text, hex, as Redis computes it */
} RpScript;

typedef enum RpReplyType
{
	RP_REPLY_NIL,
	RP_REPLY_INTEGER,
	RP_REPLY_STRING,			/* bulk or status string */
	RP_REPLY_ARRAY
} RpReplyType;

/* Redis error replies never reach callers: they become ereport(ERROR). */
typedef struct RpReply
{
	RpReplyType type;
	long long	integer;
	char	   *str;			/* NUL-terminated copy; len excludes the NUL */
	size_t		len;
	size_t		nelem;
	struct RpReply **elem;
} RpReply;

/* One argument for a script: KEYS and ARGV are both lists of these. */
typedef struct RpArg
{
	const char *data;
	size_t		len;
} RpArg;

/* Settings defined in conn.c, read by the primitives. */
extern char *rp_key_prefix;
extern int	rp_command_timeout_ms;

extern void rp_conn_init(void);

/*
 * Run one script.  keys/argv are arrays of nkeys/nargs RpArg.  Returns a
 * palloc'd reply in CurrentMemoryContext; ereports on any failure (08001
 * cannot connect, 08006 lost or timed out, a mapped SQLSTATE for a Redis
 * error reply).  NOSCRIPT is handled here: the script is loaded and the call
 * retried once.
 */
extern RpReply *rp_eval(const RpScript *script,
						int nkeys, const RpArg *keys,
						int nargs, const RpArg *argv);

/*
 * Run a plain command (argv[0] is the command name).  For diagnostics such as
 * PING or INFO; primitives use rp_eval.
 */
extern RpReply *rp_command(int argc, const RpArg *argv);

/*
 * For cleanup paths (transaction end, backend exit): run a script with an
 * overall deadline of timeout_ms, never ereport(ERROR).  Returns NULL and
 * fills *errmsg_out (palloc'd) when the call failed.
 */
extern RpReply *rp_eval_quiet(const RpScript *script,
							  int nkeys, const RpArg *keys,
							  int nargs, const RpArg *argv,
							  int timeout_ms, char **errmsg_out);

/* Drop every connection (if any) now; the next call reconnects. */
extern void rp_conn_reset(void);

/*
 * Redis Cluster.  A script runs on one node, so all its keys must hash to
 * one slot; callers with keys of many names (releasing every lease) group
 * them by rp_key_slot when rp_cluster_mode() is on.
 */
extern bool rp_cluster_mode(void);
extern int	rp_key_slot(const char *key, size_t len);

/* Round trip of PING in microseconds, and the server's redis_version. */
extern void rp_conn_ping(int64 *rtt_us, char **version);

/* Helpers for building arguments and reading replies. */
static inline RpArg
rp_arg_str(const char *s)
{
	RpArg		a = {s, strlen(s)};

	return a;
}

extern RpArg rp_arg_int(int64 v);	/* palloc'd decimal text */

/* "<prefix>{<name>}:<suffix>", palloc'd; len in *len. */
extern RpArg rp_key(const char *name, size_t namelen, const char *suffix);

/* Reply accessors that ereport (XX000) on an unexpected shape. */
extern int64 rp_reply_int(const RpReply *r, const char *what);
extern bool rp_reply_is_nil(const RpReply *r);

#endif							/* RP_CONN_H */
