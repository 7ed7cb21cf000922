/*-------------------------------------------------------------------------
 *
 * elector.h
 *		The background elector: one worker that campaigns for every election
 *		in redis_primitives.elections, and the shared memory in which it
 *		publishes what it believes.
 *
 * Before editing, know this: a backend never trusts the elector's flag on
 * its own.  It trusts a deadline, valid_until = (time the successful renewal
 * was sent) + lease - margin, on a clock every process of the machine
 * shares; so a stalled elector stops being believed on time even though it
 * cannot run to say so.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_ELECTOR_H
#define RP_ELECTOR_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "conn.h"

#define RP_MAX_ELECTIONS		32
#define RP_ELECTION_NAME_MAX	128		/* bytes, including the NUL */
#define RP_NODE_ID_MAX			128		/* bytes, including the NUL */
#define RP_ELECTION_ERROR_MAX	256

/* Settings, defined in elector.c (PGC_SIGHUP). */
extern char *rp_node_id;
extern char *rp_election_list;
extern int	rp_election_lease_ms;
extern int	rp_election_renew_ms;
extern int	rp_election_margin_ms;

/* A copy of one election's state, as the elector last published it. */
typedef struct RpElectionState
{
	char		name[RP_ELECTION_NAME_MAX];
	char		node_id[RP_NODE_ID_MAX];
	bool		leading;		/* the elector's own flag: no deadline */
	int64		epoch;			/* the term it holds while leading, else 0 */
	int64		valid_until_us; /* on rp_elector_clock_us(); 0 = not leader */
	TimestampTz leader_since;	/* 0 when not leading */
	TimestampTz valid_until;	/* wall-clock copy of valid_until_us */
	TimestampTz last_renewal;	/* when the last successful campaign was sent */
	char		last_error[RP_ELECTION_ERROR_MAX];
	bool		standby;		/* the server is in recovery: not campaigning */
} RpElectionState;

/* Settings always; the worker only when preloaded. */
extern void rp_elector_init(void);

/* Shared memory, when preloaded: module.c's shmem hooks call these. */
extern void rp_elector_shmem_request(void);
extern void rp_elector_shmem_startup(void);

/*
 * Called in the elector on each change of belief (elected, stepped down,
 * re-elected under a new epoch); notify.c sets it.  It must never block or
 * throw: a renewal or a step-down must not wait for it.
 */
typedef void (*rp_elector_leadership_hook_type) (const char *name,
												 const char *node_id,
												 int64 epoch, bool is_leader);

extern PGDLLIMPORT rp_elector_leadership_hook_type rp_elector_leadership_hook;

/* Microseconds on a clock shared by every process of this machine. */
extern int64 rp_elector_clock_us(void);

/* Is the elector's shared memory there (library in shared_preload_libraries)? */
extern bool rp_elector_available(void);

/* Copy the state of one election; false when the elector does not run it. */
extern bool rp_elector_lookup(const char *name, size_t namelen,
							  RpElectionState *out);

/*
 * Is name in redis_primitives.elections (as this process read it last)?  The
 * elector may not run it yet: it publishes once started or reloaded.
 */
extern bool rp_elector_configured(const char *name, size_t namelen);

/* Copy every election's state into out[RP_MAX_ELECTIONS]; returns how many. */
extern int	rp_elector_snapshot(RpElectionState *out);

/*
 * The key "<prefix>{name}:suffix" of an election.  Elections live under the
 * server-wide key_prefix (the value in the server's configuration, which the
 * postmaster and the elector publish in shared memory), never a per-database
 * or per-role one, so that the elector and SQL in every database of this
 * server name the same keys.  Without the elector's shared memory (library
 * not preloaded) it is the session's key_prefix.
 */
extern RpArg rp_election_key(const char *name, size_t namelen, const char *suffix);

/*
 * The highest epoch this server has seen for an election (0 when none), and
 * noting one.  Shared memory: survives elector restarts, not a server
 * restart.  An election the elector runs is never forgotten; other names
 * share the room left, the lowest epoch forgotten first.  No-ops without
 * the elector's shared memory.
 */
extern int64 rp_elector_seen_epoch(const char *name, size_t namelen);
extern void rp_elector_note_epoch(const char *name, size_t namelen, int64 epoch);

/* Split and check a value of redis_primitives.elections (GUC check hook). */
extern bool rp_elector_parse_list(const char *value, List **names,
								  char **why);

PGDLLEXPORT void rp_elector_main(Datum main_arg);

#endif							/* RP_ELECTOR_H */
