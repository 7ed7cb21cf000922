/*-------------------------------------------------------------------------
 *
 * token.c
 *		Lease tokens (rp_token_new) and their random bytes: a pool of
 *		RP_TOKEN_POOL bytes from pg_strong_random, handed out a few at a
 *		time.
 *
 * Each pg_strong_random call (OpenSSL's RAND_bytes) costs a fixed overhead
 * -- locking, fork and reseed checks -- that a 1.0 perf profile put at 5%
 * of an acquire's backend CPU for 16 bytes.  Asking for 4 KB at once costs
 * about the same, so the overhead is paid once per 256 tokens.  The bytes
 * are the strong source's own, not a seeded stream: a client that sees the
 * tokens of one session (a pooled connection is shared between users) can
 * predict nothing about the next.
 *
 * A token is RP_TOKEN_BYTES of them in hex; a permit's has 's' for its
 * first character (token.h).
 *
 * Before editing, know this: the pool belongs to one process.  It records
 * the pid that filled it and is dropped when another process (a backend
 * forked from a postmaster that had used it) finds it, so two processes
 * never hand out the same bytes; bytes handed out are zeroed in the pool.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port.h"

#include "token.h"

#define RP_TOKEN_POOL	4096

#define RP_TOKEN_BYTES	16
StaticAssertDecl(RP_TOKEN_LEN == RP_TOKEN_BYTES * 2, "a token is hex");

static uint8 rp_pool[RP_TOKEN_POOL];
static size_t rp_pool_left = 0;
static int	rp_pool_pid = 0;	/* the process that filled it */

bool
rp_token_random(uint8 *out, size_t n)
{
	uint8	   *p;

	if (rp_pool_pid != MyProcPid)
	{
		explicit_bzero(rp_pool, sizeof(rp_pool));
		rp_pool_left = 0;
		rp_pool_pid = MyProcPid;
	}
	if (n > RP_TOKEN_POOL)
		return pg_strong_random(out, n);
	if (rp_pool_left < n)
	{
		if (!pg_strong_random(rp_pool, RP_TOKEN_POOL))
		{
			rp_pool_left = 0;
			return false;
		}
		rp_pool_left = RP_TOKEN_POOL;
	}
	p = rp_pool + (RP_TOKEN_POOL - rp_pool_left);
	memcpy(out, p, n);
	explicit_bzero(p, n);
	rp_pool_left -= n;
	return true;
}

void
rp_token_new(char *out, RpLeaseKind kind)
{
	uint8		buf[RP_TOKEN_BYTES];
	static const char hex[] = "0123456789abcdef";

	if (!rp_token_random(buf, sizeof(buf)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random lease token")));
	for (int i = 0; i < RP_TOKEN_BYTES; i++)
	{
		out[2 * i] = hex[buf[i] >> 4];
		out[2 * i + 1] = hex[buf[i] & 0xf];
	}
	out[RP_TOKEN_LEN] = '\0';
	if (kind == RP_LEASE_PERMIT)
		out[0] = 's';
}
