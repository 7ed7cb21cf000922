/*-------------------------------------------------------------------------
 *
 * args.h
 *		Argument checks shared by the SQL functions of every primitive.
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

#endif							/* RP_ARGS_H */
