/*-------------------------------------------------------------------------
 *
 * elector.c
 *		The background elector and its shared memory.
 *
 * One background worker (no database connection) campaigns for every name
 * in redis_primitives.elections as redis_primitives.node_id, every
 * election_renew ms, with a lease of election_lease ms, through the same
 * latch-driven connection layer as the backends (conn.c keeps one connection
 * per process, so the worker has its own).  It publishes each election in a
 * slot of shared memory; rp_is_leader(name) reads the slot with no round
 * trip.
 *
 * Before editing, know this: the slot's deadline is the guarantee.
 * valid_until_us = (clock reading taken *before* the successful campaign was
 * sent) + lease - margin.  Redis started the lease no earlier than that send,
 * so the deadline passes before Redis can let another node in, whatever
 * happens to this process afterwards: paused, descheduled, stuck waiting for
 * a Redis that does not answer, reading its reply late (a reply is dated by
 * its send: test/t/011_election_late_reply.pl).  The elector's own flag
 * ("leading") is kept only for rp_elections(); it is what a plain isLeader
 * flag would say, and a stalled elector cannot clear it.  Nothing may ever
 * derive belief from it.
 *
 * Deadlines use CLOCK_BOOTTIME where the platform has it (CLOCK_MONOTONIC
 * otherwise): shared by every process of the machine, never stepped back by
 * NTP or an administrator, and on Linux still running while the machine is
 * suspended.  PostgreSQL 15 has no custom wait-event names: every wait here
 * shows as wait_event_type Extension, wait_event "Extension".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "conn.h"
#include "elector.h"
#include "orphans.h"
#include "replicas.h"
#include "rp_scripts.h"
#include "stats.h"
#include "waitevents.h"

/* How long a resignation may take at shutdown or on a reload. */
#define RP_RESIGN_TIMEOUT_MS	500

/* How often orphaned leases are tried again while Redis does not answer. */
#define RP_ORPHAN_RETRY_MS		250
/* Longest server-wide key_prefix published for elections' keys. */
#define RP_PREFIX_MAX			256
/*
 * Names whose highest epoch seen is remembered: the elector's own (at most
 * RP_MAX_ELECTIONS, never forgotten while it runs them) and any other name
 * an SQL rp_campaign on this server saw, while there is room.
 */
#define RP_MAX_SEEN				(RP_MAX_ELECTIONS * 4)

typedef struct RpEpochSeen
{
	char		name[RP_ELECTION_NAME_MAX];
	int64		epoch;
	bool		pinned;			/* run by the elector: never evicted */
} RpEpochSeen;

typedef struct RpElectorShared
{
	LWLock	   *lock;			/* guards everything below */
	pid_t		pid;			/* the elector's, 0 when not running */
	int			nslots;
	RpElectionState slots[RP_MAX_ELECTIONS];
	bool		prefix_ok;		/* prefix below is set (and was not too long) */
	char		prefix[RP_PREFIX_MAX];	/* server-wide key_prefix */
	int			nseen;
	RpEpochSeen seen[RP_MAX_SEEN];
} RpElectorShared;

static RpElectorShared *rp_shared = NULL;

rp_elector_leadership_hook_type rp_elector_leadership_hook = NULL;

/* ------------------------------------------------------------------------
 * Settings.  PGC_SIGHUP: only the elector reads them, at start and on a
 * reload; a session SET would be accepted and do nothing.
 * ------------------------------------------------------------------------
 */
char	   *rp_node_id = NULL;
char	   *rp_election_list = NULL;
int			rp_election_lease_ms = 10000;
int			rp_election_renew_ms = 3000;
int			rp_election_margin_ms = 1000;

static bool
rp_check_elections(char **newval, void **extra, GucSource source)
{
	List	   *names;
	char	   *why;

	if (!rp_elector_parse_list(*newval, &names, &why))
	{
		GUC_check_errdetail("%s", why);
		return false;
	}
	list_free_deep(names);
	return true;
}

static bool
rp_check_node_id(char **newval, void **extra, GucSource source)
{
	if (*newval && strlen(*newval) >= RP_NODE_ID_MAX)
	{
		GUC_check_errdetail("redis_primitives.node_id is limited to %d bytes.",
							RP_NODE_ID_MAX - 1);
		return false;
	}
	return true;
}

static void
rp_elector_define_settings(void)
{
	DefineCustomStringVariable("redis_primitives.node_id",
							   "Name under which this server's background elector campaigns.",
							   "Empty means cluster_name when it is set, else \"<host name>:<port>\".  Every server must use a different one.",
							   &rp_node_id, "", PGC_SIGHUP, 0,
							   rp_check_node_id, NULL, NULL);
	DefineCustomStringVariable("redis_primitives.elections",
							   "Comma-separated names of the elections the background elector campaigns for.",
							   "Needs redis_primitives in shared_preload_libraries; takes effect on reload.",
							   &rp_election_list, "", PGC_SIGHUP, GUC_LIST_INPUT,
							   rp_check_elections, NULL, NULL);
	DefineCustomIntVariable("redis_primitives.election_lease",
							"Lease the background elector takes or renews in Redis.",
							"Another node can take over this long after the last renewal reached Redis.",
							&rp_election_lease_ms, 10000, 10, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("redis_primitives.election_renew",
							"Interval between two campaigns (renewals) of the background elector.",
							"Keep it well under election_lease minus election_margin, about a third of the lease.",
							&rp_election_renew_ms, 3000, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("redis_primitives.election_margin",
							"Time by which this server stops believing it leads before its lease can expire in Redis.",
							"rp_is_leader(name) is true until (time the renewal was sent) + election_lease - election_margin.  The margin absorbs clock rate differences between this machine and Redis and the time a reader takes to act.",
							&rp_election_margin_ms, 1000, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
}

/* ------------------------------------------------------------------------
 * Clock, list parsing.
 * ------------------------------------------------------------------------
 */

int64
rp_elector_clock_us(void)
{
	struct timespec ts;

#ifdef CLOCK_BOOTTIME
	clock_gettime(CLOCK_BOOTTIME, &ts);
#else
	clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
	return (int64) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * Split "a, b, \"c,d\"" into a list of palloc'd names (no case folding;
 * double quotes for names with commas or spaces).  Returns false with *why
 * set when the list cannot be run: a name too long, a duplicate, too many.
 */
bool
rp_elector_parse_list(const char *value, List **names, char **why)
{
	char	   *raw = pstrdup(value ? value : "");
	List	   *list = NIL;
	ListCell   *lc;

	*names = NIL;
	*why = NULL;
	if (!SplitGUCList(raw, ',', &list))
	{
		*why = "the list is not a valid comma-separated list";
		return false;
	}
	if (list_length(list) > RP_MAX_ELECTIONS)
	{
		*why = psprintf("at most %d elections can be run", RP_MAX_ELECTIONS);
		return false;
	}
	foreach(lc, list)
	{
		char	   *name = lfirst(lc);
		ListCell   *lc2;

		if (name[0] == '\0')
		{
			*why = "an election name must not be empty";
			return false;
		}
		if (strlen(name) >= RP_ELECTION_NAME_MAX)
		{
			*why = psprintf("election name \"%s\" is longer than %d bytes",
							name, RP_ELECTION_NAME_MAX - 1);
			return false;
		}
		for (lc2 = list_head(list); lfirst(lc2) != name; lc2 = lnext(list, lc2))
			if (strcmp(lfirst(lc2), name) == 0)
			{
				*why = psprintf("election \"%s\" is listed twice", name);
				return false;
			}
	}
	foreach(lc, list)
		*names = lappend(*names, pstrdup(lfirst(lc)));
	list_free(list);
	pfree(raw);
	return true;
}

/* A decimal int64 reply; false when it is not one (the worker must not throw). */
static bool
rp_scan_int8(const char *str, int64 *out)
{
	char	   *end;
	long long	v;

	errno = 0;
	v = strtoll(str, &end, 10);
	if (errno != 0 || end == str || *end != '\0')
		return false;
	*out = (int64) v;
	return true;
}

/* ------------------------------------------------------------------------
 * Shared memory.
 * ------------------------------------------------------------------------
 */

void
rp_elector_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(RpElectorShared)));
	RequestNamedLWLockTranche("redis_primitives", 1);
}

/* Publish this process's key_prefix as the server-wide one. */
static void
rp_publish_prefix_locked(void)
{
	const char *p = rp_key_prefix ? rp_key_prefix : "";

	rp_shared->prefix_ok = strlen(p) < RP_PREFIX_MAX;
	strlcpy(rp_shared->prefix, rp_shared->prefix_ok ? p : "", RP_PREFIX_MAX);
}

/* Called under AddinShmemInitLock. */
void
rp_elector_shmem_startup(void)
{
	bool		found;

	rp_shared = ShmemInitStruct("redis_primitives elector",
								sizeof(RpElectorShared), &found);
	if (!found)
	{
		memset(rp_shared, 0, sizeof(RpElectorShared));
		rp_shared->lock = &(GetNamedLWLockTranche("redis_primitives"))->lock;
		/* The postmaster has read the configuration file, nothing else. */
		rp_publish_prefix_locked();
	}
}

void
rp_elector_init(void)
{
	BackgroundWorker worker;

	rp_elector_define_settings();
	if (!process_shared_preload_libraries_in_progress)
		return;

	/* Registered even with no elections: a reload can add some. */
	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	/*
	 * Started on a hot standby too: there it publishes its elections as
	 * "standby" (rp_is_leader(name) is false, not an unknown election) and
	 * campaigns from the moment the server is promoted.
	 */
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 1;
	strlcpy(worker.bgw_library_name, "redis_primitives", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "rp_elector_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "redis_primitives elector", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "redis_primitives elector", BGW_MAXLEN);
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&worker);
}

bool
rp_elector_available(void)
{
	return rp_shared != NULL;
}

bool
rp_elector_lookup(const char *name, size_t namelen, RpElectionState *out)
{
	bool		found = false;

	if (rp_shared == NULL)
		return false;
	LWLockAcquire(rp_shared->lock, LW_SHARED);
	for (int i = 0; i < rp_shared->nslots; i++)
	{
		RpElectionState *s = &rp_shared->slots[i];

		if (strlen(s->name) == namelen && memcmp(s->name, name, namelen) == 0)
		{
			memcpy(out, s, sizeof(RpElectionState));
			found = true;
			break;
		}
	}
	LWLockRelease(rp_shared->lock);
	return found;
}

/*
 * Is name in redis_primitives.elections as this process last read it?  The
 * elector publishes an election only once it runs: after the server accepts
 * connections, after the worker restarts, after it processed a reload.  A
 * configured name it does not run (yet) is one this server does not lead,
 * not a mistake of the caller's.
 */
bool
rp_elector_configured(const char *name, size_t namelen)
{
	List	   *names;
	char	   *why;
	ListCell   *lc;
	bool		found = false;

	if (!rp_elector_parse_list(rp_election_list, &names, &why))
		return false;
	foreach(lc, names)
		if (strlen(lfirst(lc)) == namelen && memcmp(lfirst(lc), name, namelen) == 0)
			found = true;
	list_free_deep(names);
	return found;
}

/*
 * The key_prefix the elections were campaigned under: a reload that changes
 * it resigns them there before campaigning under the new one.
 * Set in the elector only (rp_load_list).
 */
static char *rp_my_prefix = NULL;

RpArg
rp_election_key(const char *name, size_t namelen, const char *suffix)
{
	char		prefix[RP_PREFIX_MAX];
	bool		ok = false;

	if (rp_shared != NULL)
	{
		LWLockAcquire(rp_shared->lock, LW_SHARED);
		ok = rp_shared->prefix_ok;
		strlcpy(prefix, rp_shared->prefix, RP_PREFIX_MAX);
		LWLockRelease(rp_shared->lock);
	}
	/*
	 * Not published: without shared_preload_libraries there is no elector
	 * to share keys with, and the elector's own setting is the server-wide
	 * one.  A backend with a server-wide prefix too long to publish would
	 * key elections by its session's prefix, apart from the elector: it
	 * refuses instead.
	 */
	if (!ok && (rp_shared == NULL || rp_my_prefix != NULL))
		return rp_key(name, namelen, suffix);
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the server-wide redis_primitives.key_prefix is too long for elections"),
				 errdetail("Elections need a key_prefix of at most %d bytes in the server's configuration, so that every backend keys them as the elector does.",
						   RP_PREFIX_MAX - 1)));
	/* The same shape as every other key (a name starting with '}' too). */
	return rp_key_with_prefix(prefix, name, namelen, suffix);
}

static RpEpochSeen *
rp_seen_find_locked(const char *name, size_t namelen)
{
	for (int i = 0; i < rp_shared->nseen; i++)
		if (strlen(rp_shared->seen[i].name) == namelen &&
			memcmp(rp_shared->seen[i].name, name, namelen) == 0)
			return &rp_shared->seen[i];
	return NULL;
}

int64
rp_elector_seen_epoch(const char *name, size_t namelen)
{
	RpEpochSeen *e;
	int64		epoch = 0;

	if (rp_shared == NULL)
		return 0;
	LWLockAcquire(rp_shared->lock, LW_SHARED);
	e = rp_seen_find_locked(name, namelen);
	if (e)
		epoch = e->epoch;
	LWLockRelease(rp_shared->lock);
	return epoch;
}

/*
 * The entry of name, made when there is none.  Full: the entry of another
 * name with the lowest epoch (the least to lose) is forgotten, never one
 * the elector runs, so SQL campaigns on other names cannot push an
 * election's floor out.  At most RP_MAX_ELECTIONS of RP_MAX_SEEN are
 * pinned: there is always one to forget.
 */
static RpEpochSeen *
rp_seen_entry_locked(const char *name, size_t namelen)
{
	RpEpochSeen *e = rp_seen_find_locked(name, namelen);

	if (e != NULL)
		return e;
	if (rp_shared->nseen < RP_MAX_SEEN)
		e = &rp_shared->seen[rp_shared->nseen++];
	else
	{
		for (int i = 0; i < RP_MAX_SEEN; i++)
			if (!rp_shared->seen[i].pinned &&
				(e == NULL || rp_shared->seen[i].epoch < e->epoch))
				e = &rp_shared->seen[i];
		Assert(e != NULL);
	}
	memcpy(e->name, name, namelen);
	e->name[namelen] = '\0';
	e->epoch = 0;
	e->pinned = false;
	return e;
}

void
rp_elector_note_epoch(const char *name, size_t namelen, int64 epoch)
{
	RpEpochSeen *e;

	if (rp_shared == NULL || epoch <= 0 || namelen >= RP_ELECTION_NAME_MAX)
		return;
	LWLockAcquire(rp_shared->lock, LW_EXCLUSIVE);
	e = rp_seen_entry_locked(name, namelen);
	if (epoch > e->epoch)
		e->epoch = epoch;
	LWLockRelease(rp_shared->lock);
}

int
rp_elector_snapshot(RpElectionState *out)
{
	int			n;

	if (rp_shared == NULL)
		return 0;
	LWLockAcquire(rp_shared->lock, LW_SHARED);
	n = rp_shared->nslots;
	memcpy(out, rp_shared->slots, sizeof(RpElectionState) * n);
	LWLockRelease(rp_shared->lock);
	return n;
}

/* ------------------------------------------------------------------------
 * The worker.  Its private copy of the slots is the truth; shared memory is
 * a copy published under the lock after every change.
 * ------------------------------------------------------------------------
 */

static RpElectionState rp_mine[RP_MAX_ELECTIONS];
static int	rp_nmine = 0;
static char rp_my_node[RP_NODE_ID_MAX];

static void
rp_publish(void)
{
	LWLockAcquire(rp_shared->lock, LW_EXCLUSIVE);
	memcpy(rp_shared->slots, rp_mine, sizeof(RpElectionState) * rp_nmine);
	rp_shared->nslots = rp_nmine;
	LWLockRelease(rp_shared->lock);
}

/* node_id, else cluster_name, else "<host name>:<port>". */
static void
rp_resolve_node_id(char *out)
{
	if (rp_node_id && rp_node_id[0])
		strlcpy(out, rp_node_id, RP_NODE_ID_MAX);
	else if (cluster_name && cluster_name[0])
		strlcpy(out, cluster_name, RP_NODE_ID_MAX);
	else
	{
		char		host[256];

		if (gethostname(host, sizeof(host)) != 0)
			strlcpy(host, "localhost", sizeof(host));
		host[sizeof(host) - 1] = '\0';
		snprintf(out, RP_NODE_ID_MAX, "%s:%d", host, PostPortNumber);
	}
}

static void
rp_set_error(RpElectionState *s, const char *msg)
{
	strlcpy(s->last_error, msg ? msg : "", RP_ELECTION_ERROR_MAX);
}

/* Forget leadership: the deadline goes first, then the flag. */
static void
rp_step_down(RpElectionState *s, const char *reason)
{
	int64		epoch = s->epoch;
	char	   *why = pstrdup(reason);
	size_t		len = strlen(why);

	/* Reasons may quote a message that ends in a period: the detail adds one. */
	while (len > 0 && why[len - 1] == '.')
		why[--len] = '\0';
	s->valid_until_us = 0;
	s->valid_until = 0;
	s->leading = false;
	s->epoch = 0;
	s->leader_since = 0;
	if (rp_elector_leadership_hook)
		rp_elector_leadership_hook(s->name, s->node_id, epoch, false);
	ereport(LOG,
			(errcode(ERRCODE_SUCCESSFUL_COMPLETION),
			 errmsg("redis_primitives elector: stepped down from \"%s\" (epoch " INT64_FORMAT ")",
					s->name, epoch),
			 errdetail("Reason: %s.", why)));
}

/*
 * rp_eval_quiet, never throwing (a background worker has no error handler:
 * an ERROR would be FATAL), with a deadline no longer than command_timeout.
 * Holding interrupts there changes nothing here: SIGTERM and SIGHUP only set
 * flags that the main loop reads.
 */
static RpReply *
rp_elector_eval(const RpScript *script, int nkeys, const RpArg *keys,
				int nargs, const RpArg *argv, int timeout_ms, RpStatus *st)
{
	RpReply    *r;

	if (!rp_eval_quiet(script, nkeys, keys, nargs, argv,
					   Max(Min(timeout_ms, rp_command_timeout_ms), 1), &r, st))
		return NULL;
	return r;
}

/*
 * Who this elector is in Redis: node_id plus a tag drawn once per start.
 * node_id names the server for people; the tag makes the term this process
 * holds its own, so a second server configured with the same node_id (a
 * promoted copy of this one, say) or an SQL rp_campaign naming it can
 * neither renew nor resign it.
 */
static const char *
rp_owner(RpElectionState *s)
{
	static char tag[17] = "";

	if (tag[0] == '\0')
	{
		uint8		buf[8];

		if (!pg_strong_random(buf, sizeof(buf)))
			elog(ERROR, "could not generate a random elector tag");
		for (int i = 0; i < 8; i++)
			snprintf(tag + 2 * i, 3, "%02x", buf[i]);
	}
	return psprintf("%s#%s", s->node_id, tag);
}

/* Resign one held election in Redis; quiet, bounded, never throws. */
static void
rp_elector_resign(RpElectionState *s, const char *reason)
{
	RpArg		keys[2];
	RpArg		argv[3];
	RpStatus	st;
	RpReply    *r;

	if (!s->leading)
		return;
	/* Under the prefix it was campaigned under (a reload may have changed it). */
	keys[0] = rp_key_with_prefix(rp_my_prefix ? rp_my_prefix : rp_key_prefix,
								 s->name, strlen(s->name), "leader");
	keys[1] = rp_key_with_prefix(rp_my_prefix ? rp_my_prefix : rp_key_prefix,
								 s->name, strlen(s->name), "lock");
	argv[0] = rp_arg_str(s->node_id);
	argv[1] = rp_arg_int(s->epoch);
	argv[2] = rp_arg_str(rp_owner(s));
	/* Stop believing before asking Redis to let someone else in. */
	s->valid_until_us = 0;
	s->valid_until = 0;
	rp_publish();
	r = rp_elector_eval(&rp_script_election_resign, 2, keys, 3, argv,
						RP_RESIGN_TIMEOUT_MS, &st);
	if (r == NULL)
		ereport(WARNING,
				(errcode(st.sqlstate),
				 errmsg("redis_primitives elector: could not resign \"%s\"; the lease will expire by itself",
						s->name),
				 errdetail_internal("%s", rp_status_text(&st))));
	rp_step_down(s, reason);
}

/*
 * Pin the epochs seen of the elections this elector runs, and only those:
 * whatever other names note, these floors stay.  An entry is made for an
 * election nothing has seen yet, so that its first epoch is kept too.
 */
static void
rp_pin_seen(void)
{
	LWLockAcquire(rp_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < rp_shared->nseen; i++)
		rp_shared->seen[i].pinned = false;
	for (int i = 0; i < rp_nmine; i++)
	{
		RpEpochSeen *e = rp_seen_find_locked(rp_mine[i].name, strlen(rp_mine[i].name));

		if (e != NULL)
			e->pinned = true;
	}
	/* Then the new ones: made in place of another name, never of these. */
	for (int i = 0; i < rp_nmine; i++)
		rp_seen_entry_locked(rp_mine[i].name, strlen(rp_mine[i].name))->pinned = true;
	LWLockRelease(rp_shared->lock);
}

/*
 * Load redis_primitives.elections and node_id: keep the state of names that
 * stay, resign names that go (or all of them, when node_id changed).
 */
static void
rp_load_list(void)
{
	List	   *names;
	char	   *why;
	char		node[RP_NODE_ID_MAX];
	RpElectionState next[RP_MAX_ELECTIONS];
	int			nnext = 0;
	ListCell   *lc;

	if (!rp_elector_parse_list(rp_election_list, &names, &why))
	{
		/* The check hook makes this unreachable; keep running what we have. */
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("redis_primitives elector: ignoring redis_primitives.elections: %s", why)));
		return;
	}
	rp_resolve_node_id(node);
	if (strcmp(node, rp_my_node) != 0)
		for (int i = 0; i < rp_nmine; i++)
			rp_elector_resign(&rp_mine[i], "redis_primitives.node_id changed");
	strlcpy(rp_my_node, node, RP_NODE_ID_MAX);
	if (rp_my_prefix != NULL && strcmp(rp_my_prefix, rp_key_prefix) != 0)
		for (int i = 0; i < rp_nmine; i++)
			rp_elector_resign(&rp_mine[i], "redis_primitives.key_prefix changed");
	if (rp_my_prefix != NULL)
		pfree(rp_my_prefix);
	rp_my_prefix = MemoryContextStrdup(TopMemoryContext, rp_key_prefix);

	for (int i = 0; i < rp_nmine; i++)
	{
		bool		keep = false;

		foreach(lc, names)
			if (strcmp(lfirst(lc), rp_mine[i].name) == 0)
				keep = true;
		if (!keep)
			rp_elector_resign(&rp_mine[i], "removed from redis_primitives.elections");
	}

	foreach(lc, names)
	{
		const char *name = lfirst(lc);
		RpElectionState *s = &next[nnext++];
		bool		found = false;

		for (int i = 0; i < rp_nmine; i++)
			if (strcmp(rp_mine[i].name, name) == 0)
			{
				memcpy(s, &rp_mine[i], sizeof(RpElectionState));
				found = true;
			}
		if (!found)
		{
			memset(s, 0, sizeof(RpElectionState));
			strlcpy(s->name, name, RP_ELECTION_NAME_MAX);
		}
		strlcpy(s->node_id, rp_my_node, RP_NODE_ID_MAX);
	}
	memcpy(rp_mine, next, sizeof(RpElectionState) * nnext);
	rp_nmine = nnext;
	rp_publish();
	rp_pin_seen();

	if (rp_nmine > 0 && rp_election_renew_ms >= rp_election_lease_ms - rp_election_margin_ms)
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("redis_primitives elector: leadership will lapse between renewals"),
				 errdetail("election_renew (%d ms) is not shorter than election_lease (%d ms) minus election_margin (%d ms).",
						   rp_election_renew_ms, rp_election_lease_ms, rp_election_margin_ms),
				 errhint("Renew at most every third of the lease, with a margin of about a tenth of it.")));
}

/*
 * With fence_replicas > 0, after a campaign that returned epoch: WAIT until
 * that many replicas hold what it wrote (the epoch a new term drew, the
 * lease a renewal extended), within what is left of the belief it would
 * give.  true when they do (or fence_replicas is 0).  Otherwise the term is
 * not believed this round: a new one is not announced (it stays in Redis,
 * unbelieved, and the next round asks again), a renewal leaves the deadline
 * an earlier acknowledged renewal gave, so the belief never outlives what a
 * failover to one of those replicas keeps.  Two servers then cannot both
 * believe one epoch because the master that issued it to the first was
 * replaced by a replica that never saw it (docs/election.md).
 */
static bool
rp_campaign_replicated(RpElectionState *s, int64 epoch, int64 sent_us, int64 believe)
{
	int64		left_ms;
	int64		acked;
	int			timeout = 0;
	char	   *err = NULL;

	if (rp_fence_replicas <= 0)
		return true;
	left_ms = believe - (rp_elector_clock_us() - sent_us) / 1000;
	if (left_ms <= 0)
		acked = -1;
	else
		acked = rp_replicas_wait_quiet((int) Min(left_ms, (int64) INT_MAX), &timeout, &err);
	if (acked >= rp_fence_replicas)
		return true;
	rp_set_error(s, err != NULL ?
				 psprintf("epoch " INT64_FORMAT " is not believed: WAIT for redis_primitives.fence_replicas failed: %s",
						  epoch, err) :
				 acked < 0 ?
				 psprintf("epoch " INT64_FORMAT " is not believed: no time was left to WAIT for redis_primitives.fence_replicas",
						  epoch) :
				 psprintf("epoch " INT64_FORMAT " is not believed: " INT64_FORMAT " of %d replica(s) acknowledged it within %d ms (redis_primitives.fence_replicas)",
						  epoch, acked, rp_fence_replicas, timeout));
	return false;
}

/* One campaign (or renewal) for one election: one script, one round trip. */
static void
rp_campaign_once(RpElectionState *s)
{
	RpArg		keys[3];
	RpArg		argv[4];
	int64		lease = rp_election_lease_ms;
	int64		believe = lease - rp_election_margin_ms;
	int64		sent_us;
	TimestampTz sent;
	RpReply    *r;
	RpStatus	st;
	char	   *err;
	int64		epoch;
	int64		floor;

	keys[0] = rp_election_key(s->name, strlen(s->name), "leader");
	keys[1] = rp_election_key(s->name, strlen(s->name), "fence");
	keys[2] = rp_election_key(s->name, strlen(s->name), "lock");
	argv[0] = rp_arg_str(s->node_id);
	argv[1] = rp_arg_int(lease);
	argv[2] = rp_arg_str(rp_owner(s));
	/* Never an epoch below one this server has seen (Redis may not know it). */
	floor = rp_elector_seen_epoch(s->name, strlen(s->name));
	argv[3] = rp_arg_int(floor);

	/*
	 * Read the clocks before anything is sent.  A reply that arrives after
	 * sent + lease - margin is worthless, so wait no longer than that.
	 */
	sent_us = rp_elector_clock_us();
	sent = GetCurrentTimestamp();
	r = rp_elector_eval(&rp_script_election_campaign, 3, keys, 4, argv,
						(int) Max(Min(believe, (int64) INT_MAX), 1), &st);
	rp_stats_record(RP_PRIM_ELECTOR_RENEW, rp_elector_clock_us() - sent_us,
					r == NULL ? RP_OUTCOME_ERROR : r->type != RP_REPLY_STRING ?
					RP_OUTCOME_REFUSED : RP_OUTCOME_OK, rp_stats_quiet_sqlstate());
	if (r == NULL)
	{
		err = rp_status_text(&st);
		rp_set_error(s, err);
		if (s->leading)
			rp_step_down(s, psprintf("the renewal could not be confirmed: %s", err));
		return;
	}
	if (r->type != RP_REPLY_STRING)
	{
		/* Another node (or a lock holder) has the name; note its epoch. */
		if (r->type == RP_REPLY_ARRAY && r->nelem == 2 &&
			r->elem[1]->type == RP_REPLY_STRING)
		{
			int64		seen;

			if (rp_scan_int8(r->elem[1]->str, &seen))
				rp_elector_note_epoch(s->name, strlen(s->name), seen);
		}
		rp_set_error(s, NULL);
		if (s->leading)
			rp_step_down(s, "another node holds the leadership");
		return;
	}
	if (!rp_scan_int8(r->str, &epoch))
	{
		rp_set_error(s, "unexpected reply from election_campaign");
		if (s->leading)
			rp_step_down(s, "the renewal returned no epoch");
		return;
	}

	/*
	 * An epoch below one this server has seen is never believed: a term that
	 * stamps it would write after terms with higher epochs.  The script
	 * never returns one below the floor it was sent; a higher epoch noted
	 * meanwhile (an SQL rp_campaign on this server) can still pass it.  The
	 * next campaign sends that as its floor and begins a term above it.
	 */
	floor = Max(floor, rp_elector_seen_epoch(s->name, strlen(s->name)));
	if (epoch < floor)
	{
		err = psprintf("epoch " INT64_FORMAT " is below epoch " INT64_FORMAT " this server has seen for the election",
					   epoch, floor);
		rp_set_error(s, err);
		if (s->leading)
			rp_step_down(s, err);
		else
			ereport(LOG,
					(errcode(ERRCODE_SUCCESSFUL_COMPLETION),
					 errmsg("redis_primitives elector: not believing the term of \"%s\" with epoch " INT64_FORMAT,
							s->name, epoch),
					 errdetail("Reason: %s.", err)));
		return;
	}
	rp_elector_note_epoch(s->name, strlen(s->name), epoch);
	rp_set_error(s, NULL);
	if (s->leading && s->epoch != epoch)
		rp_step_down(s, "the leadership lapsed and was won again under a new epoch");
	if (!rp_campaign_replicated(s, epoch, sent_us, believe))
		return;
	if (believe > 0)
	{
		s->valid_until_us = sent_us + believe * 1000;
		s->valid_until = TimestampTzPlusMilliseconds(sent, believe);
	}
	else
	{
		/* margin >= lease: never believed (the reload warned about it). */
		s->valid_until_us = 0;
		s->valid_until = 0;
	}
	s->last_renewal = sent;
	if (!s->leading)
	{
		s->leading = true;
		s->epoch = epoch;
		s->leader_since = GetCurrentTimestamp();
		if (rp_elector_leadership_hook)
			rp_elector_leadership_hook(s->name, s->node_id, epoch, true);
		ereport(LOG,
				(errcode(ERRCODE_SUCCESSFUL_COMPLETION),
				 errmsg("redis_primitives elector: elected leader of \"%s\" as \"%s\" with epoch " INT64_FORMAT,
						s->name, s->node_id, epoch)));
	}
}

/*
 * A server in recovery never campaigns: it is a copy of a primary that may
 * lead under the same settings, and its tables cannot take a leader's writes
 * anyway.  Mark every election "standby", with the reason, and publish when
 * that changed; returns true while in recovery.  A promotion clears the mark
 * and the caller campaigns at once.
 */
static bool
rp_standby_check(void)
{
	bool		in_recovery = RecoveryInProgress();
	bool		changed = false;

	for (int i = 0; i < rp_nmine; i++)
	{
		RpElectionState *s = &rp_mine[i];

		if (s->standby == in_recovery)
			continue;
		s->standby = in_recovery;
		rp_set_error(s, in_recovery ?
					 "this server is a hot standby: the elector campaigns once it is promoted" : NULL);
		changed = true;
	}
	if (changed)
	{
		rp_publish();
		if (!in_recovery)
			ereport(LOG,
					(errcode(ERRCODE_SUCCESSFUL_COMPLETION),
					 errmsg("redis_primitives elector: the server left recovery, campaigning for %d election(s)",
							rp_nmine)));
	}
	return in_recovery;
}

static void
rp_elector_exit(int code, Datum arg)
{
	if (rp_shared == NULL)
		return;
	LWLockAcquire(rp_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < rp_shared->nslots; i++)
	{
		rp_shared->slots[i].valid_until_us = 0;
		rp_shared->slots[i].valid_until = 0;
	}
	rp_shared->pid = 0;
	LWLockRelease(rp_shared->lock);
}

void
rp_elector_main(Datum main_arg)
{
	MemoryContext loopcxt;
	int64		next_us;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	if (rp_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("redis_primitives elector: shared memory is not set up")));

	loopcxt = AllocSetContextCreate(TopMemoryContext, "redis_primitives elector",
									ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(loopcxt);

	LWLockAcquire(rp_shared->lock, LW_EXCLUSIVE);
	rp_shared->pid = MyProcPid;
	rp_shared->nslots = 0;
	rp_publish_prefix_locked();
	LWLockRelease(rp_shared->lock);
	before_shmem_exit(rp_elector_exit, (Datum) 0);
	rp_stats_set_default(RP_PRIM_ELECTOR_RENEW);

	rp_orphans_set_worker();
	rp_load_list();
	next_us = rp_elector_clock_us();

	while (!ShutdownRequestPending)
	{
		int64		now_us;
		long		wait_ms;
		bool		orphans_left;
		bool		standby;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			LWLockAcquire(rp_shared->lock, LW_EXCLUSIVE);
			rp_publish_prefix_locked();
			LWLockRelease(rp_shared->lock);
			rp_load_list();
			next_us = rp_elector_clock_us();
		}

		/*
		 * A hot standby does not campaign: it looks for its promotion every
		 * renew interval, and at least every second, and once promoted it
		 * campaigns at once.
		 */
		standby = rp_standby_check();
		now_us = rp_elector_clock_us();
		if (standby)
			next_us = now_us;
		else if (now_us >= next_us && rp_nmine > 0)
		{
			/* Ticks are counted from when they were due, not when done. */
			next_us += (int64) rp_election_renew_ms * 1000;
			if (next_us < now_us)
				next_us = now_us + (int64) rp_election_renew_ms * 1000;
			for (int i = 0; i < rp_nmine && !ShutdownRequestPending; i++)
			{
				rp_campaign_once(&rp_mine[i]);
				rp_publish();
			}
			MemoryContextReset(loopcxt);
			now_us = rp_elector_clock_us();
		}

		/*
		 * Leases exiting backends could not release (orphans.c), on a standby
		 * too: its sessions take leases like any other.
		 */
		orphans_left = rp_orphans_drain();
		MemoryContextReset(loopcxt);

		/*
		 * The wait inside every Redis exchange (conn.c's rp_wait) resets the
		 * latch: a SIGHUP or SIGTERM that arrived during the campaigns or the
		 * drain above lost its wakeup.  Its flag is still set: act on it now
		 * rather than sleep through it.
		 */
		if (ShutdownRequestPending || ConfigReloadPending)
			continue;

		/*
		 * A standby sleeps until its next look at recovery.  With no
		 * elections, sleep until a reload or a hand-off (wait_ms -1: no
		 * timeout).  Otherwise until the next tick; a round that overran it
		 * (Redis slow to answer) is followed by the next one at once.
		 * Orphans left are tried again soon.
		 */
		if (standby)
			wait_ms = Min(rp_election_renew_ms, 1000);
		else if (rp_nmine == 0)
			wait_ms = -1;
		else
			wait_ms = Max((long) ((next_us - now_us + 999) / 1000), 0);
		if (orphans_left)
			wait_ms = (wait_ms < 0) ? RP_ORPHAN_RETRY_MS : Min(wait_ms, RP_ORPHAN_RETRY_MS);
		if (wait_ms != 0)
		{
			int			rc;

			rc = WaitLatch(MyLatch,
						   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH |
						   (wait_ms >= 0 ? WL_TIMEOUT : 0),
						   wait_ms, rp_wait_event(RP_WAIT_ELECTOR));
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
		}
	}

	/* Clean shutdown: hand over now rather than a lease later. */
	for (int i = 0; i < rp_nmine; i++)
		rp_elector_resign(&rp_mine[i], "the server is shutting down");
	rp_publish();

	/*
	 * Exit code 1, as worker_spi: the postmaster never restarts a worker
	 * that exits with 0, so a SIGTERM sent to this process alone would end
	 * the elections and the orphans' release until the server restarts.
	 * When the whole server shuts down, nothing is restarted anyway.
	 */
	proc_exit(1);
}
