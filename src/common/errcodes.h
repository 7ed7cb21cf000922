/*-------------------------------------------------------------------------
 *
 * errcodes.h
 *		The extension's own SQLSTATEs, class RP, defined once.
 *
 * Before editing, know this: these codes are part of the SQL contract
 * (README.md's error table and each primitive's page in docs/):
 * applications catch them by value.  Never renumber one; add the next free
 * code instead.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_ERRCODES_H
#define RP_ERRCODES_H

#include "utils/elog.h"

/* A write carries a fence token lower than the one already stored. */
#define ERRCODE_RP_STALE_FENCE		MAKE_SQLSTATE('R', 'P', '0', '0', '1')
/* A verify_at_commit lease was lost before COMMIT. */
#define ERRCODE_RP_LEASE_LOST		MAKE_SQLSTATE('R', 'P', '0', '0', '2')
/* fence_replicas: too few replicas acknowledged a new fence token. */
#define ERRCODE_RP_NOT_REPLICATED	MAKE_SQLSTATE('R', 'P', '0', '0', '3')
/* A lease-bound fence guard found no (live) lease or leadership to write under. */
#define ERRCODE_RP_NO_LEASE			MAKE_SQLSTATE('R', 'P', '0', '0', '4')

#endif							/* RP_ERRCODES_H */
