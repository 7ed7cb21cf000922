/*-------------------------------------------------------------------------
 *
 * election.h
 *		What the leader election's SQL side offers other modules: this
 *		server's belief in its own leadership, read from the elector's shared
 *		memory with no round trip.
 *
 * Before editing, know this: the belief is bounded by a deadline computed
 * from when the elector's renewal was sent (elector.h); a caller trusts the
 * epoch it returns, never a flag.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_ELECTION_H
#define RP_ELECTION_H

#include "postgres.h"

/*
 * Does this server lead the election now (rp_is_leader(name))?  true with
 * the epoch it holds; false when not leading, past the deadline, not run by
 * the elector, or the elector is not available.
 */
extern bool rp_election_believed(const char *name, size_t namelen,
								 int64 *epoch);

#endif							/* RP_ELECTION_H */
