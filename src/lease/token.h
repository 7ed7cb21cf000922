/*-------------------------------------------------------------------------
 *
 * token.h
 *		Lease tokens, and the random bytes they are made of, from a
 *		per-process pool of cryptographically strong bytes.
 *
 * Before editing, know this: a token is a secret (whoever knows it can
 * release or extend the lease, from any connection), so every byte comes
 * from pg_strong_random; the pool only amortises its cost, is refilled in
 * each process (never inherited across fork), and wipes what it hands out.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_TOKEN_H
#define RP_TOKEN_H

#include "postgres.h"

/*
 * A token is RP_TOKEN_LEN characters; its first says its kind (a permit's
 * begins with 's', which no hex lock token can), so a token alone says
 * which key and script release it.
 */
#define RP_TOKEN_LEN	32

typedef enum RpLeaseKind
{
	RP_LEASE_LOCK,				/* <prefix>{name}:lock, a string */
	RP_LEASE_PERMIT				/* a member of <prefix>{name}:sem, a sorted set */
} RpLeaseKind;

static inline RpLeaseKind
rp_token_kind(const char *token)
{
	return token[0] == 's' ? RP_LEASE_PERMIT : RP_LEASE_LOCK;
}

/*
 * Whether s has a token's shape: RP_TOKEN_LEN lowercase hex digits, a
 * permit's first one replaced by 's'.  Nothing else can be a lease's
 * token, and a by-token call (rp_release, rp_extend) must refuse anything
 * else: in particular an election's mark, "election:<owner>" in the name's
 * lock key, which a length check alone takes for a token when the owner is
 * 23 bytes (docs/election.md).
 */
static inline bool
rp_token_well_formed(const char *s)
{
	for (int i = 0; i < RP_TOKEN_LEN; i++)
	{
		char		c = s[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
			  (i == 0 && c == 's')))
			return false;
	}
	return s[RP_TOKEN_LEN] == '\0';
}

/* n strong random bytes into out; false when the strong source failed. */
extern bool rp_token_random(uint8 *out, size_t n);

/*
 * A new token of this kind into out (RP_TOKEN_LEN + 1 bytes, terminated);
 * ERROR when the strong source failed.
 */
extern void rp_token_new(char *out, RpLeaseKind kind);

#endif							/* RP_TOKEN_H */
