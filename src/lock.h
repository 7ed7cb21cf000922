/*-------------------------------------------------------------------------
 *
 * lock.h
 *		The lease lock: acquire, release, extend, and the session's registry
 *		of leases.
 *
 * Before editing, know this: the registry is keyed by name and every entry
 * remembers the full Redis key it was taken under, so a later change of
 * key_prefix never misdirects a release, extend or commit-time check.
 * Entries enter through rp_registry_add and leave through
 * rp_registry_remove, nowhere else.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_LOCK_H
#define RP_LOCK_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "fmgr.h"

#include "args.h"				/* rp_arg_text, rp_arg_int8, RP_MAX_TTL_MS */

extern void rp_lock_init(void);

/*
 * The session's live lease on name: true with its fence and local deadline
 * (expires_at = time the acquire was sent + ttl); false if it holds none, or
 * only one whose deadline has passed.  No Redis round trip.
 */
extern bool rp_lease_lookup(const char *name, size_t namelen, int64 *fence,
							TimestampTz *expires_at);

#endif							/* RP_LOCK_H */
