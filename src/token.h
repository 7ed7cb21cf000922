/*-------------------------------------------------------------------------
 *
 * token.h
 *		Random bytes for lease tokens, from a per-process pool of
 *		cryptographically strong bytes.
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

/* n strong random bytes into out; false when the strong source failed. */
extern bool rp_token_random(uint8 *out, size_t n);

#endif							/* RP_TOKEN_H */
