/*-------------------------------------------------------------------------
 *
 * replicas.h
 *		redis_primitives.fence_replicas: how many Redis replicas must hold a
 *		new fence token or epoch before it is handed out or believed, and
 *		the WAIT that asks them.
 *
 * Before editing, know this: WAIT counts the replicas that acknowledged
 * every write made so far *on this connection*, so it must follow the
 * script whose writes it vouches for on the same connection, with nothing
 * in between that could reconnect (conn.c never drops a connection between
 * two exchanges except for a failure or a changed setting, which fail the
 * WAIT too).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_REPLICAS_H
#define RP_REPLICAS_H

#include "postgres.h"

extern int	rp_fence_replicas;
extern int	rp_fence_replicas_timeout_ms;

extern void rp_replicas_init(void);

/*
 * WAIT for fence_replicas replicas, at most fence_replicas_timeout (and
 * half of command_timeout, and cap_ms when > 0).  *timeout_ms is the
 * timeout sent.  The SQL face returns the count acknowledged and raises
 * when Redis cannot be asked; the quiet face returns -1 with *err set
 * instead.
 */
extern int64 rp_replicas_wait(int cap_ms, int *timeout_ms);
extern int64 rp_replicas_wait_quiet(int cap_ms, int *timeout_ms, char **err);

#endif							/* RP_REPLICAS_H */
