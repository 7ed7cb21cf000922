/*-------------------------------------------------------------------------
 *
 * conn.h
 *		The one Redis connection of a backend (or of the background elector).
 *
 * Nothing outside src/redis/ touches hiredis.  Callers run a Lua script and get back
 * an RpReply: a copy of Redis' answer in palloc'd memory, so no hiredis object
 * is ever alive when the caller ereports.  The exchange is a core that
 * returns a status (rp_eval_try) with two thin faces: the SQL face raises
 * it (rp_eval), the cleanup face hands it back with interrupts held and
 * nothing thrown (rp_eval_quiet).  Every wait inside is a latch wait against
 * a deadline; an interrupted or timed-out exchange drops the
 * connection, so a late reply can never be read as the answer to the next
 * command.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_CONN_H
#define RP_CONN_H

#include "postgres.h"

#include "args.h"
#include "compat.h"				/* pg_noreturn */
#include "reply.h"
#include "waitevents.h"

/* Settings defined in settings.c, read by the primitives. */
extern char *rp_key_prefix;
extern int	rp_command_timeout_ms;

extern void rp_conn_init(void);

/*
 * The core: run one script with a deadline of timeout_ms.  Returns true with
 * a palloc'd reply (never RP_REPLY_ERROR), or false with *st filled in.  It
 * never ereports for anything Redis or the network does; cancel,
 * statement_timeout and FATAL interrupts are thrown by CHECK_FOR_INTERRUPTS
 * while no hiredis object is held, and leave the connection marked out of
 * step so the next call drops it.  NOSCRIPT, MOVED, ASK and TRYAGAIN are
 * handled here.
 */
extern bool rp_eval_try(const RpScript *script,
						int nkeys, const RpArg *keys,
						int nargs, const RpArg *argv,
						int timeout_ms, RpReply **reply, RpStatus *st);

/* The SQL face: rp_eval_try with command_timeout, raising on failure. */
extern RpReply *rp_eval(const RpScript *script,
						int nkeys, const RpArg *keys,
						int nargs, const RpArg *argv);
pg_noreturn extern void rp_status_raise(const RpStatus *st);

/*
 * Run a plain command (argv[0] is the command name), SQL face.  For
 * diagnostics such as PING or INFO, and WAIT.
 */
extern RpReply *rp_command(int argc, const RpArg *argv);

/*
 * The cleanup face (transaction end, backend exit, the background worker):
 * rp_eval_try with interrupts held and connect capped at timeout_ms, and
 * never ereports, not even for what PostgreSQL raises beneath it.  Returns
 * true with *reply, or false with *st filled in; a failure's st->sqlstate is
 * never 0, for the caller's WARNING.
 */
extern bool rp_eval_quiet(const RpScript *script,
						  int nkeys, const RpArg *keys,
						  int nargs, const RpArg *argv,
						  int timeout_ms, RpReply **reply, RpStatus *st);

/*
 * What becomes of a command sent without waiting for its reply: settle is
 * called with the reply (a Redis error as RP_REPLY_ERROR) when a later call
 * reads it, or with NULL when the connection goes first (the command's fate
 * unknown).  It runs inside that later call's exchange: it must not throw
 * nor use the connection.
 */
typedef void (*RpSettleFn) (void *arg, RpReply *reply);

/*
 * rp_eval_quiet that does not wait for the reply: the script is sent
 * (as EVAL, its text: no NOSCRIPT to retry on) and settle gets its reply
 * later (above).  True when it was sent;
 * false with *st when it could not be (settle is not called: its fate is
 * unknown), or when the connection cannot carry a reply owed
 * (rp_conn_can_defer is false: nothing was sent).
 */
extern bool rp_eval_send_quiet(const RpScript *script,
							   int nkeys, const RpArg *keys,
							   int nargs, const RpArg *argv, int timeout_ms,
							   RpSettleFn settle, void *arg, RpStatus *st);
/* Whether replies can be owed: not in Cluster mode (one connection per node). */
extern bool rp_conn_can_defer(void);
/* Read the replies owed now, within timeout_ms; cleanup face, never throws. */
extern void rp_settle_pending_quiet(int timeout_ms);
/* Settle the replies owed that have arrived, without waiting; never throws. */
extern void rp_settle_arrived_quiet(void);

/* rp_command's cleanup face, as rp_eval_quiet is rp_eval's. */
extern bool rp_command_quiet(int argc, const RpArg *argv, int timeout_ms,
							 RpReply **reply, RpStatus *st);

/* A failure as one line, "message: detail", palloc'd: for a WARNING's detail. */
extern char *rp_status_text(const RpStatus *st);

/* Drop every connection (if any) now; the next call reconnects. */
extern void rp_conn_reset(void);

/*
 * Redis Cluster.  A script runs on one node, so all its keys must hash to
 * one slot; callers with keys of many names (releasing every lease) group
 * them with rp_slot_groups.
 */
extern bool rp_cluster_mode(void);
extern int	rp_key_slot(const char *key, size_t len);
extern int	rp_slot_groups(int n, const RpArg *keys, int *order, int *start);

/* Which Redis (and database) the settings name: see settings.c. */
extern uint64 rp_conn_target_signature(void);

/* Round trip of PING in microseconds, and the server's redis_version. */
extern void rp_conn_ping(int64 *rtt_us, char **version);

/*
 * Sleep ms (at least 1) on the latch, as the wait event what: cancel,
 * statement_timeout and postmaster death end it.  For retry pauses.
 */
extern void rp_latch_sleep(long ms, RpWaitEvent what);

/*
 * "<prefix>{<name>}:<suffix>", palloc'd, with the current key_prefix: see
 * rp_key_with_prefix (args.h).
 */
extern RpArg rp_key(const char *name, size_t namelen, const char *suffix);

#endif							/* RP_CONN_H */
