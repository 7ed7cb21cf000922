/*-------------------------------------------------------------------------
 *
 * election.c
 *		Leader election: SQL functions and the background elector (issue 5).
 *
 * Not built yet: only the Init hook exists so _PG_init is complete.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "redis_primitives.h"

void
rp_election_init(void)
{
}
