/*-------------------------------------------------------------------------
 *
 * tls.c
 *		TLS to Redis with OpenSSL: the settings, one SSL_CTX built from them,
 *		a non-blocking handshake waited on through the caller's latch wait,
 *		and the write/read functions that move hiredis' output buffer and
 *		feed hiredis' reader through the TLS session.
 *
 * Before editing, know this: the TLS session of a connection lives in a
 * small table keyed by its redisContext, and transport.c calls rp_tls_close(c)
 * before every redisFree(c).  Nothing here waits except through the wait
 * function the caller passes (a latch wait with a deadline), nothing here
 * blocks in OpenSSL (the socket is non-blocking, WANT_READ/WANT_WRITE are
 * waited on), and no message carries a key, a password or file contents:
 * OpenSSL's own text goes into a status's detail.  What fails here is
 * returned as a status (RpStatus), never raised: the handshake runs inside
 * the cleanup face too, which must not throw; only cancel and
 * statement_timeout, thrown by the caller's wait, pass through.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <sys/socket.h>

#include <hiredis/hiredis.h>
#include <hiredis/sds.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "lib/stringinfo.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "compat.h"
#include "reply.h"
#include "tls.h"

/* redis_primitives.tls: libpq's sslmode words. */
typedef enum RpTlsMode
{
	RP_TLS_OFF,
	RP_TLS_REQUIRE,
	RP_TLS_VERIFY_CA,
	RP_TLS_VERIFY_FULL
} RpTlsMode;

static const struct config_enum_entry rp_tls_modes[] = {
	{"off", RP_TLS_OFF, false},
	{"require", RP_TLS_REQUIRE, false},
	{"verify-ca", RP_TLS_VERIFY_CA, false},
	{"verify-full", RP_TLS_VERIFY_FULL, false},
	{"disable", RP_TLS_OFF, true},
	{NULL, 0, false}
};

static int	rp_tls_mode = RP_TLS_OFF;
static char *rp_tls_ca_file = NULL;
static char *rp_tls_cert_file = NULL;
static char *rp_tls_key_file = NULL;
static char *rp_tls_server_name = NULL;

/*
 * A changed setting: conn.c drops its connections (rp_tls_take_changed) and
 * the SSL_CTX is rebuilt before the next handshake.
 */
static bool rp_tls_conn_changed = false;
static bool rp_tls_ctx_stale = true;
static SSL_CTX *rp_tls_ctx = NULL;

/* One TLS session per open connection (the current one and parked nodes). */
typedef struct RpTlsConn
{
	const redisContext *c;
	SSL		   *ssl;
	bool		cert_requested; /* the server sent a CertificateRequest */
	bool		sent;			/* a write finished; no read tried since */
} RpTlsConn;

#define RP_TLS_MAX_CONNS	80	/* conn.c: 64 cluster nodes + the current */

static RpTlsConn rp_tls_conns[RP_TLS_MAX_CONNS];
static int	rp_tls_nconns = 0;

static void
rp_tls_mark_changed(const char *newval, void *extra)
{
	rp_tls_conn_changed = true;
	rp_tls_ctx_stale = true;
}

static void
rp_tls_mark_changed_enum(int newval, void *extra)
{
	rp_tls_conn_changed = true;
	rp_tls_ctx_stale = true;
}

void
rp_tls_init(void)
{
	DefineCustomEnumVariable("redis_primitives.tls",
							 "Whether connections to Redis (servers, sentinels, cluster nodes) use TLS, and what is verified.",
							 "off: plain TCP. require: TLS, the certificate is not checked (unless tls_ca_file is set, as with libpq). "
							 "verify-ca: the certificate must be signed by tls_ca_file (or the system's trusted CAs). "
							 "verify-full: verify-ca, and the certificate must name the host (or tls_server_name).",
							 &rp_tls_mode, RP_TLS_OFF, rp_tls_modes,
							 PGC_SUSET, 0, NULL, rp_tls_mark_changed_enum, NULL);
	DefineCustomStringVariable("redis_primitives.tls_ca_file",
							   "PEM file of the certificate authorities trusted to sign the Redis server's certificate.",
							   "Empty means the operating system's trusted certificate authorities.",
							   &rp_tls_ca_file, "", PGC_SUSET, 0,
							   NULL, rp_tls_mark_changed, NULL);
	DefineCustomStringVariable("redis_primitives.tls_cert_file",
							   "PEM file of the client certificate (chain) presented to Redis, for mutual TLS.",
							   NULL, &rp_tls_cert_file, "", PGC_SUSET, 0,
							   NULL, rp_tls_mark_changed, NULL);
	DefineCustomStringVariable("redis_primitives.tls_key_file",
							   "PEM file of the client certificate's private key; it must not be encrypted.",
							   "The file must be readable by the database server's operating system user only.",
							   &rp_tls_key_file, "", PGC_SUSET, GUC_SUPERUSER_ONLY,
							   NULL, rp_tls_mark_changed, NULL);
	DefineCustomStringVariable("redis_primitives.tls_server_name",
							   "Name sent as SNI and verified under tls = verify-full; empty means the host connected to.",
							   "When set, it is used for every server: the master, the sentinels and each cluster node.",
							   &rp_tls_server_name, "", PGC_SUSET, 0,
							   NULL, rp_tls_mark_changed, NULL);
}

bool
rp_tls_enabled(void)
{
	return rp_tls_mode != RP_TLS_OFF;
}

bool
rp_tls_take_changed(void)
{
	bool		changed = rp_tls_conn_changed;

	rp_tls_conn_changed = false;
	return changed;
}

/* ------------------------------------------------------------------------
 * The SSL_CTX.
 * ------------------------------------------------------------------------
 */

/* OpenSSL's queued errors as one line (and the queue emptied). */
static char *
rp_tls_errors(void)
{
	StringInfoData s;
	unsigned long e;

	initStringInfo(&s);
	while ((e = ERR_get_error()) != 0)
	{
		char		buf[256];

		ERR_error_string_n(e, buf, sizeof(buf));
		appendStringInfo(&s, "%s%s", s.len ? "; " : "", buf);
	}
	if (s.len == 0)
		appendStringInfoString(&s, "no OpenSSL error reported");
	return s.data;
}

/* An encrypted key must fail, never prompt on the postmaster's terminal. */
static int
rp_tls_no_passphrase(char *buf, int size, int rwflag, void *userdata)
{
	return 0;
}

/* Remember that the server asked for a client certificate. */
static void
rp_tls_msg_cb(int write_p, int version, int content_type, const void *buf,
			  size_t len, SSL *ssl, void *arg)
{
	if (!write_p && content_type == SSL3_RT_HANDSHAKE && len > 0 &&
		((const unsigned char *) buf)[0] == SSL3_MT_CERTIFICATE_REQUEST)
	{
		/* By SSL, not by a pointer: rp_tls_close moves table entries. */
		for (int i = 0; i < rp_tls_nconns; i++)
			if (rp_tls_conns[i].ssl == ssl)
				rp_tls_conns[i].cert_requested = true;
	}
}

/* Record a failure in *st; returns false. */
static bool
rp_tls_fail(RpStatus *st, int sqlstate, const char *message, const char *detail)
{
	st->sqlstate = sqlstate;
	st->message = message;
	st->detail = detail;
	st->hint = NULL;
	return false;
}

/* A file named by a setting could not be loaded; returns NULL. */
static SSL_CTX *
rp_tls_ctx_fail(const char *setting, const char *path, RpStatus *st)
{
	char	   *why = rp_tls_errors();

	SSL_CTX_free(rp_tls_ctx);
	rp_tls_ctx = NULL;
	(void) rp_tls_fail(st, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
					   psprintf("could not load redis_primitives.%s \"%s\"",
								setting, path),
					   why);
	return NULL;
}

/*
 * The SSL_CTX for the current settings; built on first use after a change.
 * NULL with *st filled in when the settings cannot make one.
 */
static SSL_CTX *
rp_tls_get_ctx(RpStatus *st)
{
	bool		have_cert = rp_tls_cert_file && rp_tls_cert_file[0];
	bool		have_key = rp_tls_key_file && rp_tls_key_file[0];
	bool		have_ca = rp_tls_ca_file && rp_tls_ca_file[0];

	if (rp_tls_ctx != NULL && !rp_tls_ctx_stale)
		return rp_tls_ctx;
	if (rp_tls_ctx != NULL)
	{
		/* Live sessions hold their own reference: freeing here is safe. */
		SSL_CTX_free(rp_tls_ctx);
		rp_tls_ctx = NULL;
	}
	if (have_cert != have_key)
	{
		(void) rp_tls_fail(st, ERRCODE_INVALID_PARAMETER_VALUE,
						   "redis_primitives.tls_cert_file and redis_primitives.tls_key_file must be set together",
						   NULL);
		return NULL;
	}

	ERR_clear_error();
	rp_tls_ctx = SSL_CTX_new(TLS_client_method());
	if (rp_tls_ctx == NULL)
	{
		(void) rp_tls_fail(st, ERRCODE_OUT_OF_MEMORY,
						   "could not create a TLS context", rp_tls_errors());
		return NULL;
	}
	SSL_CTX_set_min_proto_version(rp_tls_ctx, TLS1_2_VERSION);
	/* hiredis' output buffer moves as it is consumed: allow partial writes. */
	SSL_CTX_set_mode(rp_tls_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
					 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/*
	 * Read whole records and what follows them in one recv: as many system
	 * calls per reply as plain TCP.  Bytes read ahead sit in OpenSSL, not in
	 * the socket, which is why rp_tls_read asks SSL_has_pending first.
	 */
	SSL_CTX_set_read_ahead(rp_tls_ctx, 1);
	SSL_CTX_set_default_passwd_cb(rp_tls_ctx, rp_tls_no_passphrase);

	if (have_ca)
	{
		if (SSL_CTX_load_verify_locations(rp_tls_ctx, rp_tls_ca_file, NULL) != 1)
			return rp_tls_ctx_fail("tls_ca_file", rp_tls_ca_file, st);
	}
	else if (rp_tls_mode >= RP_TLS_VERIFY_CA &&
			 SSL_CTX_set_default_verify_paths(rp_tls_ctx) != 1)
		return rp_tls_ctx_fail("tls_ca_file", "(system default)", st);

	/* libpq: require with a CA file given verifies like verify-ca. */
	if (rp_tls_mode >= RP_TLS_VERIFY_CA || have_ca)
		SSL_CTX_set_verify(rp_tls_ctx, SSL_VERIFY_PEER, NULL);
	else
		SSL_CTX_set_verify(rp_tls_ctx, SSL_VERIFY_NONE, NULL);

	if (have_cert)
	{
		if (SSL_CTX_use_certificate_chain_file(rp_tls_ctx, rp_tls_cert_file) != 1)
			return rp_tls_ctx_fail("tls_cert_file", rp_tls_cert_file, st);
		if (SSL_CTX_use_PrivateKey_file(rp_tls_ctx, rp_tls_key_file, SSL_FILETYPE_PEM) != 1)
			return rp_tls_ctx_fail("tls_key_file", rp_tls_key_file, st);
		if (SSL_CTX_check_private_key(rp_tls_ctx) != 1)
			return rp_tls_ctx_fail("tls_key_file", rp_tls_key_file, st);
	}
	rp_tls_ctx_stale = false;
	return rp_tls_ctx;
}

/* ------------------------------------------------------------------------
 * Sessions.
 * ------------------------------------------------------------------------
 */

static RpTlsConn *
rp_tls_find(const redisContext *c)
{
	for (int i = 0; i < rp_tls_nconns; i++)
		if (rp_tls_conns[i].c == c)
			return &rp_tls_conns[i];
	return NULL;
}

bool
rp_tls_active(const redisContext *c)
{
	/* Cheap for plain connections: the table is empty. */
	return rp_tls_nconns > 0 && c != NULL && rp_tls_find(c) != NULL;
}

void
rp_tls_close(redisContext *c)
{
	RpTlsConn  *tc = (c != NULL && rp_tls_nconns > 0) ? rp_tls_find(c) : NULL;

	if (tc == NULL)
		return;
	/* No close_notify: the stream may be out of step or the peer gone. */
	SSL_set_quiet_shutdown(tc->ssl, 1);
	SSL_free(tc->ssl);
	ERR_clear_error();
	*tc = rp_tls_conns[--rp_tls_nconns];
}

static bool
rp_tls_is_ip(const char *host)
{
	unsigned char buf[16];

	return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

/* Why a handshake failed, as a sentence (OpenSSL's text included). */
static char *
rp_tls_explain(RpTlsConn *tc, int sslerr, const char *name, bool after_handshake)
{
	int			saved_errno = errno;
	long		vr = SSL_get_verify_result(tc->ssl);
	unsigned long e = ERR_peek_last_error();
	int			reason = ERR_GET_REASON(e);
	char	   *errors = rp_tls_errors();	/* empties the queue */

	/* With SSL_VERIFY_NONE the result is computed but not enforced. */
	if (vr != X509_V_OK && ERR_GET_LIB(e) == ERR_LIB_SSL &&
		reason == SSL_R_CERTIFICATE_VERIFY_FAILED)
	{
		const char *what = X509_verify_cert_error_string(vr);

		switch (vr)
		{
			case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
			case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
			case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
			case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
			case X509_V_ERR_CERT_UNTRUSTED:
			case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
				return psprintf("the server's certificate is not signed by a trusted certificate authority (%s); check redis_primitives.tls_ca_file", what);
			case X509_V_ERR_CERT_HAS_EXPIRED:
				return psprintf("the server's certificate has expired (%s)", what);
			case X509_V_ERR_CERT_NOT_YET_VALID:
				return psprintf("the server's certificate is not yet valid (%s)", what);
			case X509_V_ERR_HOSTNAME_MISMATCH:
			case X509_V_ERR_IP_ADDRESS_MISMATCH:
				return psprintf("the server's certificate does not match the name \"%s\" (%s); check redis_primitives.tls_server_name", name, what);
			default:
				return psprintf("the server's certificate was refused: %s", what);
		}
	}
	/*
	 * The probe after a CertificateRequest failed: the server judged the
	 * certificate (or its absence) and closed.  Its alert may be lost to the
	 * reset that follows, so the closing itself is the answer.
	 */
	if (after_handshake && !(rp_tls_cert_file && rp_tls_cert_file[0]))
		return psprintf("the server requires a client certificate, and redis_primitives.tls_cert_file is not set (%s)", errors);
	if (after_handshake)
		return psprintf("the server refused the client certificate redis_primitives.tls_cert_file (%s)",
						reason ? errors : (saved_errno ? strerror(saved_errno) : "it closed the connection"));
	if (tc->cert_requested &&
		!(rp_tls_cert_file && rp_tls_cert_file[0]) &&
		(reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
		 reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE ||
		 sslerr == SSL_ERROR_SYSCALL || sslerr == SSL_ERROR_ZERO_RETURN))
		return psprintf("the server requires a client certificate, and redis_primitives.tls_cert_file is not set (%s)", errors);
	if (tc->cert_requested && (rp_tls_cert_file && rp_tls_cert_file[0]) &&
		ERR_GET_LIB(e) == ERR_LIB_SSL &&
		(reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
		 reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
		 reason == SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED ||
		 reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE ||
		 reason == SSL_R_TLSV1_ALERT_DECRYPT_ERROR))
		return psprintf("the server refused the client certificate redis_primitives.tls_cert_file (%s)", errors);
	if (ERR_GET_LIB(e) == ERR_LIB_SSL &&
		(reason == SSL_R_WRONG_VERSION_NUMBER ||
		 reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
		 reason == SSL_R_RECORD_LENGTH_MISMATCH ||
		 reason == SSL_R_UNKNOWN_PROTOCOL ||
		 reason == SSL_R_UNEXPECTED_EOF_WHILE_READING))
		return psprintf("the server is not speaking TLS (is this its plain-text port?) (%s)", errors);
	if (sslerr == SSL_ERROR_SYSCALL || sslerr == SSL_ERROR_ZERO_RETURN)
		return psprintf("the server closed the connection during the TLS handshake: it may not be speaking TLS (%s)",
						saved_errno != 0 ? strerror(saved_errno) : "end of file");
	return psprintf("TLS handshake failed: %s", errors);
}

/*
 * An SSL call returned n <= 0: if it wants the socket readable or writable,
 * wait for that (a latch wait, to the deadline) and return true to call it
 * again.  false for any other error (*sslerr says which), or with *sslerr
 * = -1 when the deadline passed.
 */
static bool
rp_tls_want(SSL *ssl, int n, int *sslerr, RpTlsWaitFn wait, TimestampTz deadline)
{
	*sslerr = SSL_get_error(ssl, n);
	if (*sslerr != SSL_ERROR_WANT_READ && *sslerr != SSL_ERROR_WANT_WRITE)
		return false;
	if (!wait(*sslerr == SSL_ERROR_WANT_READ ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE,
			  deadline))
	{
		*sslerr = -1;
		return false;
	}
	return true;
}

/*
 * After a handshake in which the server asked for a client certificate: in
 * TLS 1.3 the server judges it only after the client finished, and says so
 * with an alert in place of the first reply.  A PING here, answered or
 * refused, turns "refused" into a connect error naming the cause rather than
 * a lost connection on the first command.  Redis answers PING even before
 * AUTH (with NOAUTH): any reply line will do.
 */
static bool
rp_tls_probe(RpTlsConn *tc, RpTlsWaitFn wait, TimestampTz deadline, int *sslerr)
{
	static const char ping[] = "*1\r\n$4\r\nPING\r\n";
	size_t		sent = 0;
	char		line[256];
	size_t		got = 0;

	while (sent < sizeof(ping) - 1)
	{
		int			n;

		ERR_clear_error();
		n = SSL_write(tc->ssl, ping + sent, sizeof(ping) - 1 - sent);
		if (n > 0)
		{
			sent += n;
			continue;
		}
		if (!rp_tls_want(tc->ssl, n, sslerr, wait, deadline))
			return false;
	}
	while (got == 0 || line[got - 1] != '\n')
	{
		int			n;

		ERR_clear_error();
		n = SSL_read(tc->ssl, line + got, 1);	/* stop at the line's end */
		if (n > 0)
		{
			if (++got == sizeof(line))
				got = 1;		/* a long error line: keep its end only */
			continue;
		}
		if (!rp_tls_want(tc->ssl, n, sslerr, wait, deadline))
			return false;
	}
	return true;
}

bool
rp_tls_handshake(redisContext *c, const char *host, const char *target,
				 RpTlsWaitFn wait, TimestampTz deadline, RpStatus *st)
{
	SSL_CTX    *ctx = rp_tls_get_ctx(st);
	const char *name = (rp_tls_server_name && rp_tls_server_name[0]) ?
		rp_tls_server_name : host;
	RpTlsConn  *tc;
	SSL		   *ssl;
	int			sslerr = SSL_ERROR_NONE;
	bool		ok = false;
	bool		probing = false;

	if (ctx == NULL)
		return false;
	if (rp_tls_nconns == RP_TLS_MAX_CONNS)
		return rp_tls_fail(st, ERRCODE_INTERNAL_ERROR,
						   "too many TLS connections to Redis", NULL);
	ERR_clear_error();
	ssl = SSL_new(ctx);
	if (ssl == NULL)
		return rp_tls_fail(st, ERRCODE_OUT_OF_MEMORY,
						   "could not create a TLS session", rp_tls_errors());
	/* Registered at once: the caller's drop frees it whatever happens. */
	tc = &rp_tls_conns[rp_tls_nconns++];
	tc->c = c;
	tc->ssl = ssl;
	tc->cert_requested = false;
	tc->sent = false;
	/* Watched during the handshake only: not a call per record later. */
	SSL_set_msg_callback(ssl, rp_tls_msg_cb);

	if (SSL_set_fd(ssl, c->fd) != 1)
		return rp_tls_fail(st, ERRCODE_INTERNAL_ERROR,
						   psprintf("could not attach the TLS session to the socket: %s",
									rp_tls_errors()),
						   NULL);
	if (name != NULL && name[0] != '\0' && !rp_tls_is_ip(name))
		SSL_set_tlsext_host_name(ssl, name);
	if (rp_tls_mode == RP_TLS_VERIFY_FULL)
	{
		X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
		int			rc;

		X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		if (rp_tls_is_ip(name))
			rc = X509_VERIFY_PARAM_set1_ip_asc(param, name);
		else
			rc = X509_VERIFY_PARAM_set1_host(param, name, 0);
		if (rc != 1)
			return rp_tls_fail(st, ERRCODE_INTERNAL_ERROR,
							   "could not set the TLS host name to verify", NULL);
	}

	for (;;)
	{
		int			rc;

		ERR_clear_error();
		errno = 0;
		rc = SSL_connect(ssl);
		if (rc == 1)
		{
			ok = true;
			break;
		}
		if (!rp_tls_want(ssl, rc, &sslerr, wait, deadline))
			break;
	}
	if (ok && tc->cert_requested)
	{
		probing = true;
		ok = rp_tls_probe(tc, wait, deadline, &sslerr);
	}
	if (ok)
	{
		SSL_set_msg_callback(ssl, NULL);
		return true;
	}

	/* The session stays registered: the caller's drop frees it. */
	if (sslerr == -1 && BIO_number_read(SSL_get_rbio(ssl)) == 0)
		return rp_tls_fail(st, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						   "could not connect to Redis",
						   psprintf("Redis server %s: no answer to the TLS handshake within redis_primitives.connect_timeout; the server is not speaking TLS (a plain-text Redis port waits silently) or does not answer.",
									target));
	if (sslerr == -1)
		return rp_tls_fail(st, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						   "could not connect to Redis",
						   psprintf("Redis server %s: the TLS handshake did not finish within redis_primitives.connect_timeout.",
									target));
	return rp_tls_fail(st, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
					   "could not connect to Redis",
					   psprintf("Redis server %s: %s.", target,
								rp_tls_explain(tc, sslerr, name, probing)));
}

/* ------------------------------------------------------------------------
 * I/O.
 * ------------------------------------------------------------------------
 */

/*
 * Empty OpenSSL's error queue before an I/O call, as SSL_get_error needs.
 * ERR_clear_error walks every slot of the queue (about 800 instructions in
 * OpenSSL 3.0, four times a call); the queue is almost always empty already,
 * and ERR_peek_error is exactly the test SSL_get_error applies.
 */
static inline void
rp_tls_clear_errors(void)
{
	if (ERR_peek_error() != 0)
		ERR_clear_error();
}

static void
rp_tls_set_error(redisContext *c, RpTlsConn *tc, int rc, int sslerr)
{
	const char *why;
	int			saved_errno = errno;

	if (sslerr == SSL_ERROR_ZERO_RETURN ||
		(sslerr == SSL_ERROR_SYSCALL && rc == 0 && ERR_peek_error() == 0 && saved_errno == 0))
		why = "Server closed the connection";
	else if (sslerr == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
		why = strerror(saved_errno);
	else
	{
		unsigned long e = ERR_peek_last_error();

		if (tc->cert_requested && ERR_GET_LIB(e) == ERR_LIB_SSL &&
			ERR_GET_REASON(e) == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED)
			why = "the server requires a client certificate (redis_primitives.tls_cert_file)";
		else
			why = ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "TLS error";
	}
	c->err = REDIS_ERR_IO;
	snprintf(c->errstr, sizeof(c->errstr), "TLS: %s", why);
	ERR_clear_error();
}

int
rp_tls_write(redisContext *c, int *done, int *want)
{
	RpTlsConn  *tc = rp_tls_find(c);

	*done = 0;
	*want = WL_SOCKET_WRITEABLE;
	while (sdslen(c->obuf) > 0)
	{
		int			n;
		int			sslerr;

		rp_tls_clear_errors();
		errno = 0;
		n = SSL_write(tc->ssl, c->obuf, (int) Min(sdslen(c->obuf), INT_MAX));
		if (n > 0)
		{
			sdsrange(c->obuf, n, -1);
			continue;
		}
		sslerr = SSL_get_error(tc->ssl, n);
		if (sslerr == SSL_ERROR_WANT_WRITE)
			return REDIS_OK;
		if (sslerr == SSL_ERROR_WANT_READ)
		{
			*want = WL_SOCKET_READABLE;
			return REDIS_OK;
		}
		rp_tls_set_error(c, tc, n, sslerr);
		return REDIS_ERR;
	}
	*done = 1;
	tc->sent = true;
	return REDIS_OK;
}

int
rp_tls_read(redisContext *c, int *want)
{
	RpTlsConn  *tc = rp_tls_find(c);
	char		buf[16 * 1024];
	int			n;
	int			sslerr;

	*want = WL_SOCKET_READABLE;

	/*
	 * Right after a request went out its reply cannot be there yet unless
	 * OpenSSL already holds it: wait first rather than spend a recv on
	 * EAGAIN.  After that wait, and whenever OpenSSL holds bytes, read.
	 */
	if (tc->sent && !SSL_has_pending(tc->ssl))
	{
		tc->sent = false;
		return 0;
	}
	tc->sent = false;
	rp_tls_clear_errors();
	errno = 0;
	n = SSL_read(tc->ssl, buf, sizeof(buf));
	if (n > 0)
	{
		if (redisReaderFeed(c->reader, buf, n) != REDIS_OK)
		{
			c->err = c->reader->err;
			strlcpy(c->errstr, c->reader->errstr, sizeof(c->errstr));
			return -1;
		}
		return 1;
	}
	sslerr = SSL_get_error(tc->ssl, n);
	if (sslerr == SSL_ERROR_WANT_READ)
		return 0;
	if (sslerr == SSL_ERROR_WANT_WRITE)
	{
		*want = WL_SOCKET_WRITEABLE;
		return 0;
	}
	rp_tls_set_error(c, tc, n, sslerr);
	return -1;
}

/*
 * Idle: the server closed (close_notify, EOF, an error) or sent application
 * data nobody asked for.  Handshake records that arrive after the handshake
 * (TLS 1.3 session tickets) are consumed by the peek and are not a sign of
 * anything.  Checked before every call, so the common case -- nothing held
 * by OpenSSL, nothing in the socket -- is answered by one recv, as for a
 * plain connection, without entering OpenSSL (SSL_peek costs about 3,000
 * instructions even when it finds nothing).
 */
bool
rp_tls_is_stale(redisContext *c)
{
	RpTlsConn  *tc = rp_tls_find(c);
	char		b;
	int			n;
	int			sslerr;

	if (!SSL_has_pending(tc->ssl))
	{
		ssize_t		r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return false;
		/* Bytes, EOF or an error: let OpenSSL say what they are. */
	}
	rp_tls_clear_errors();
	n = SSL_peek(tc->ssl, &b, 1);
	if (n > 0)
		return true;
	sslerr = SSL_get_error(tc->ssl, n);
	ERR_clear_error();
	return !(sslerr == SSL_ERROR_WANT_READ || sslerr == SSL_ERROR_WANT_WRITE);
}

const char *
rp_tls_plain_hint(const redisContext *c)
{
	if (rp_tls_enabled() || c == NULL || c->connection_type != REDIS_CONN_TCP)
		return NULL;
	/* hiredis' words for ECONNRESET and EPIPE, and for EOF. */
	if (strstr(c->errstr, "reset by peer") == NULL &&
		strstr(c->errstr, "Broken pipe") == NULL &&
		strstr(c->errstr, "Server closed the connection") == NULL)
		return NULL;
	return "the server may be speaking TLS (a Redis TLS port closes the connection of a client that does not)";
}
