/*-------------------------------------------------------------------------
 *
 * args.h
 *		Argument checks shared by the SQL functions of every primitive, and
 *		the arguments and keys of the Redis commands they send.
 *
 * Before editing, know this: NULL where a value is required is 22004 and a
 * value out of range 22023, never a NULL result: a NULL must not mean both
 * "bad input" and "not acquired".
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_ARGS_H
#define RP_ARGS_H

#include "postgres.h"

#include "fmgr.h"

#include "compat.h"				/* VARDATA_ANY for the text handed out */

/* Longest lease or wait we accept, in ms (Redis rejects PX past int64 time). */
#define RP_MAX_TTL_MS	INT64CONST(1000000000000)

/* A non-NULL, non-empty text argument. */
extern text *rp_arg_text(FunctionCallInfo fcinfo, int argno, const char *what);

/* A non-NULL bigint argument within [min, max]. */
extern int64 rp_arg_int8(FunctionCallInfo fcinfo, int argno, const char *what,
						 int64 min, int64 max);

/* One argument for a script: KEYS and ARGV are both lists of these. */
typedef struct RpArg
{
	const char *data;
	size_t		len;
} RpArg;

/* Building a Redis command's arguments. */
static inline RpArg
rp_arg_str(const char *s)
{
	RpArg		a = {s, strlen(s)};

	return a;
}

extern RpArg rp_arg_int(int64 v);	/* palloc'd decimal text */

/*
 * "<prefix>{<name>}:<suffix>", palloc'd (rp_key in conn.h passes the
 * current key_prefix).  A name whose hash tag would be empty (it starts
 * with '}') gets the tag "{\0}" instead, which no other name can produce
 * (text never contains NUL), so every key of one name shares a slot.
 */
extern RpArg rp_key_with_prefix(const char *prefix, const char *name,
								size_t namelen, const char *suffix);

#endif							/* RP_ARGS_H */
