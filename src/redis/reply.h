/*-------------------------------------------------------------------------
 *
 * reply.h
 *		What a Redis call is given and gives back: the script (RpScript), the
 *		reply (RpReply) and, when the call failed, why (RpStatus).
 *
 * Before editing, know this: an RpReply is palloc'd, never a hiredis
 * object, so whoever holds one may ereport.  conn.h includes this file;
 * the rest of the extension includes conn.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_REPLY_H
#define RP_REPLY_H

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
	RP_REPLY_ARRAY,
	RP_REPLY_ERROR				/* a Redis error reply; str holds its text */
} RpReplyType;

typedef struct RpReply
{
	RpReplyType type;
	long long	integer;
	char	   *str;			/* NUL-terminated copy; len excludes the NUL */
	size_t		len;
	size_t		nelem;
	struct RpReply **elem;
} RpReply;

/*
 * Why an exchange failed, as the core reports it.  The SQL face turns it into
 * an ERROR (rp_status_raise), the cleanup face into a WARNING's detail.
 * message is ours (translatable); detail may quote Redis and is internal.
 */
typedef struct RpStatus
{
	int			sqlstate;		/* 0: no failure */
	const char *message;
	const char *detail;
	const char *hint;
	bool		sent;			/* the command may have reached Redis */
	bool		answered;		/* Redis replied (with an error): its fate is known */
	bool		timed_out;		/* Redis did not answer in time (hung?) */
} RpStatus;

/* Reply accessors that ereport (XX000) on an unexpected shape. */
extern int64 rp_reply_int(const RpReply *r, const char *what);
extern bool rp_reply_is_nil(const RpReply *r);

#endif							/* RP_REPLY_H */
