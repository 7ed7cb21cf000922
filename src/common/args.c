/*-------------------------------------------------------------------------
 *
 * args.c
 *		Argument checks shared by the SQL functions of every primitive, and
 *		the arguments and keys of the Redis commands they send.
 *
 * Before editing, know this: every primitive's messages come from here, so
 * a change of wording changes every test's expected output at once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "args.h"

text *
rp_arg_text(FunctionCallInfo fcinfo, int argno, const char *what)
{
	text	   *t;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", what)));
	t = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(t) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	return t;
}

int64
rp_arg_int8(FunctionCallInfo fcinfo, int argno, const char *what,
			int64 min, int64 max)
{
	int64		v;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", what)));
	v = PG_GETARG_INT64(argno);
	if (v < min || v > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be between " INT64_FORMAT " and " INT64_FORMAT
						", got " INT64_FORMAT, what, min, max, v)));
	return v;
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
	/* A name starting with '}' would give an empty hash tag: see args.h. */
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
