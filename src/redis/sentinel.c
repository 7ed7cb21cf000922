/*-------------------------------------------------------------------------
 *
 * sentinel.c
 *		Redis Sentinel discovery: ask the sentinels in turn where the master
 *		is, connect to it and check with ROLE that it is one (docs/topology.md).
 *
 * Before editing, know this: a sentinel is asked over a short-lived rp_ctx
 * that is dropped before the master's is opened, so there is still one
 * connection at a time.  The whole search shares one connect_timeout; a
 * failure at one sentinel or at the master it named is noted in the message
 * and the next sentinel is asked.  The sentinels' own credentials come from
 * sentinel_auth.c, never from redis_primitives.password.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/timestamp.h"

#include "conn.h"
#include "conn_int.h"
#include "sentinel_auth.h"

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
 * Sentinel mode: ask the sentinels in turn for the master, connect to it and
 * check it is one.  The whole search shares one connect_timeout; a sentinel
 * that does not answer gets a fair share of what is left, not all of it.
 * The sentinel that answered is asked first next time.
 */
bool
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
