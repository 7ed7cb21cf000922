/*-------------------------------------------------------------------------
 *
 * cluster.c
 *		Redis Cluster routing: hash slots, the slot map read with CLUSTER
 *		SLOTS, one parked connection per node, and MOVED, ASK and TRYAGAIN
 *		followed for a script (docs/topology.md).
 *
 * Before editing, know this: the connection in use is always transport.c's
 * rp_ctx; switching nodes (rp_use_node) parks the current one in its node's
 * entry and takes out the other's, so transport's waits, exchanges and
 * failures work unchanged.  A failed exchange clears rp_slots_valid, and
 * the next call reads the map again.  rp_conn_reset is the one place that
 * frees the parked connections.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "lib/stringinfo.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "conn.h"
#include "conn_int.h"
#include "stats.h"
#include "tls.h"

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
int			rp_cur_node = -1;	/* whose connection rp_ctx is */
static int16 rp_slot_node[RP_CLUSTER_SLOTS];

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

/* Make node i current and connected (AUTH, no SELECT: Cluster has db 0). */
bool
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
bool
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
bool
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
			if (pass)
				rp_stats_conn_event(RP_EVENT_NOSCRIPT);
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
