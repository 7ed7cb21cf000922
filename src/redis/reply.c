/*-------------------------------------------------------------------------
 *
 * reply.c
 *		Reading a Redis reply (RpReply) in the primitives.
 *
 * Before editing, know this: an RpReply is a palloc'd copy made by
 * transport.c; no hiredis object is behind it, so these may ereport.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "reply.h"

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
