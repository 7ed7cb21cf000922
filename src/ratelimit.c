/*-------------------------------------------------------------------------
 *
 * ratelimit.c
 *		Rate limiting: sliding_log, sliding_window and gcra (issue 4).
 *
 * Not built yet: only the Init hook exists so _PG_init is complete.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "redis_primitives.h"

void
rp_ratelimit_init(void)
{
}
