/*-------------------------------------------------------------------------
 *
 * conn_int.h
 *		What the pieces of the Redis connection share among themselves:
 *		settings.c, transport.c, sentinel.c, cluster.c and conn.c.  Nothing
 *		outside src/redis/ includes it; the rest of the extension has conn.h.
 *
 * Before editing, know this: the calls go one way, settings <- transport
 * <- sentinel, cluster <- conn (scripts/check-layers.py forbids a circle),
 * so nothing declared here for a lower file may call a higher one.  This
 * header must not include conn.h: conn.c includes both.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_CONN_INT_H
#define RP_CONN_INT_H

#include "postgres.h"

#include <hiredis/hiredis.h>

#include "lib/stringinfo.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "args.h"
#include "reply.h"

/* settings.c: the settings, and whether one changed since the last connect. */
extern char *rp_host;
extern int	rp_port;
extern char *rp_unix_socket;
extern int	rp_database;
extern char *rp_username;
extern char *rp_password;
extern char *rp_password_file;
extern char *rp_sentinels;
extern char *rp_sentinel_master;
extern int	rp_sentinel_idle_recheck_ms;
extern bool rp_cluster;
extern bool rp_config_changed;
extern int	rp_connect_cap_ms;

extern int	rp_connect_budget_ms(void);
extern bool rp_sentinel_mode(void);
extern bool rp_next_hostport(const char **pos, char *host, size_t hostsize,
							 int *port);

/* transport.c: the connection in use, what failed, and the steps. */
extern redisContext *rp_ctx;
extern WaitEventSet *rp_waitset;
extern int	rp_waitset_socket;
extern int	rp_waitset_events;
extern bool rp_in_exchange;
extern TimestampTz rp_last_used;
extern RpStatus rp_failure;
extern char rp_peer_host[256];
extern int	rp_peer_port;
extern const char *rp_peer_role;
extern bool rp_slots_valid;

extern bool rp_set_failure(int sqlstate, const char *message,
						   const char *detail, const char *hint);
extern void rp_conn_drop(void);
extern bool rp_conn_is_stale(void);
extern bool rp_open(const char *host, int port, const char *unix_socket,
					TimestampTz deadline);
extern bool rp_handshake(TimestampTz deadline, bool check_role);
extern void rp_note_failure(StringInfo why, const char *who);
extern bool rp_append(int argc, const char **argv, const size_t *argvlen);
extern bool rp_append_script(const char *verb, const char *body, int nkeys,
							 const RpArg *keys, int nargs, const RpArg *argv);
extern bool rp_exchange(int ncmds, TimestampTz deadline, RpReply **out);
/* How a command sent without waiting for its reply was sent. */
typedef enum RpSentAs
{
	RP_SENT_EVAL,				/* a script, as EVAL (its text) */
	RP_SENT_EVALSHA				/* a script, as EVALSHA (its SHA1) */
} RpSentAs;

extern bool rp_send_only(TimestampTz deadline, RpSentAs as, RpSettleFn settle, void *arg);
extern bool rp_send_as_evalsha(void);
extern void rp_send_as_evalsha_forget(void);
extern bool rp_settle_pending(TimestampTz deadline);
extern bool rp_settle_arrived(void);
extern bool rp_take_owed_demoted(void);
extern int	rp_pending_count(void);
extern bool rp_fail_reply(const char *msg);
extern bool rp_is_noscript(const RpReply *r);

/* sentinel.c */
extern bool rp_connect_sentinel(TimestampTz deadline);

/* cluster.c: the node rp_ctx belongs to (-1: none), and the routing. */
extern int	rp_cur_node;
extern bool rp_cluster_load_slots(void);
extern bool rp_cluster_connect_node(int i, TimestampTz deadline);
extern bool rp_eval_cluster(const RpScript *script, int nkeys,
							const RpArg *keys, int nargs, const RpArg *argv,
							int timeout_ms, RpReply **out);

#endif							/* RP_CONN_INT_H */
