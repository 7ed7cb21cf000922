/*-------------------------------------------------------------------------
 *
 * tls.h
 *		TLS to Redis: the settings, a non-blocking handshake on a connected
 *		socket, and the two I/O functions that replace hiredis' own socket
 *		reads and writes while hiredis stays the RESP writer and reader.
 *
 * The one thing to know: a TLS session belongs to a redisContext and must be
 * released with rp_tls_close(c) BEFORE redisFree(c) closes the socket, on
 * every path.  transport.c calls these at its hook points (connect, write, read,
 * idle check, drop); nothing else does.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_TLS_H
#define RP_TLS_H

#include "postgres.h"

#include <hiredis/hiredis.h>

#include "utils/timestamp.h"

#include "reply.h"

/* Wait for WL_SOCKET_READABLE/WRITEABLE on c's socket; false on deadline. */
typedef bool (*RpTlsWaitFn) (int events, TimestampTz deadline);

extern void rp_tls_init(void);

/* redis_primitives.tls is not off: every TCP connection speaks TLS. */
extern bool rp_tls_enabled(void);

/* A TLS setting changed since the last call (the connections must go). */
extern bool rp_tls_take_changed(void);

/*
 * Run the TLS handshake on c's connected, non-blocking socket.  host is the
 * address connected to (the name verified and sent as SNI unless
 * redis_primitives.tls_server_name is set); target names the server in
 * messages.  Waits through wait() only, and throws only what wait() throws
 * (cancel, statement_timeout).  Returns false with *st saying what failed
 * (08001 mostly; sqlstate, message, detail, hint are set, the rest left
 * alone); the caller must then drop c (rp_tls_close, redisFree).
 */
extern bool rp_tls_handshake(redisContext *c, const char *host,
							 const char *target, RpTlsWaitFn wait,
							 TimestampTz deadline, RpStatus *st);

/* c has a TLS session: use rp_tls_write/rp_tls_read instead of hiredis'. */
extern bool rp_tls_active(const redisContext *c);

/*
 * Like redisBufferWrite: send c->obuf, consuming what was sent.  Returns
 * REDIS_OK (with *done when everything went) or REDIS_ERR (c->errstr says
 * why).  When not done, *want is the socket event to wait for.
 */
extern int	rp_tls_write(redisContext *c, int *done, int *want);

/*
 * Like redisBufferRead, but without waiting first: feed c->reader what can
 * be read now.  Returns 1 when bytes were fed, 0 when the socket must first
 * be waited on for *want, -1 on error or EOF (c->errstr says why).
 */
extern int	rp_tls_read(redisContext *c, int *want);

/* An idle TLS connection the server closed, or one out of step. */
extern bool rp_tls_is_stale(redisContext *c);

/* Free c's TLS session, if any.  Never throws. */
extern void rp_tls_close(redisContext *c);

/*
 * For a plain connection that failed before its first reply: a clause saying
 * the server may be a TLS port (when c->errstr is a reset, a broken pipe or
 * an EOF and TLS is off), or NULL.
 */
extern const char *rp_tls_plain_hint(const redisContext *c);

#endif							/* RP_TLS_H */
