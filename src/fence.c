/*-------------------------------------------------------------------------
 *
 * fence.c
 *		The resource side of fencing: the trigger rp_fence_guard.
 *
 * The fenced store (rp_fenced_write / rp_fenced_read over rp_fenced_store)
 * is plain SQL in src/sql/30_fence.sql, guarded by this same trigger in
 * 'skip' mode, so there is one definition of "stale" in the project: a new
 * token strictly lower than the stored one.  Equal tokens pass (the same
 * holder may write twice).
 *
 * Before editing, know this: the trigger runs as the writing user.  It
 * reveals the stored token in a message only to a user allowed to SELECT
 * that column.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "errcodes.h"

static void rp_fence_misuse(const char *msg) pg_attribute_noreturn();

static void
rp_fence_misuse(const char *msg)
{
	ereport(ERROR,
			(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			 errmsg("rp_fence_guard: %s", msg)));
}

/* The token in attnum of tuple, as int64; *isnull set for NULL. */
static int64
rp_fence_value(HeapTuple tuple, TupleDesc desc, int attnum, Oid typid,
			   bool *isnull)
{
	Datum		d = heap_getattr(tuple, attnum, desc, isnull);

	if (*isnull)
		return 0;
	switch (typid)
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		default:
			return DatumGetInt64(d);
	}
}

PG_FUNCTION_INFO_V1(rp_fence_guard);
Datum
rp_fence_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Trigger    *trigger;
	Relation	rel;
	TupleDesc	desc;
	const char *column;
	bool		skip = false;
	int			attnum;
	Oid			typid;
	HeapTuple	newtuple;
	int64		newfence;
	int64		oldfence;
	bool		isnull;

	if (!CALLED_AS_TRIGGER(fcinfo))
		rp_fence_misuse("not called by trigger manager");
	if (!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		rp_fence_misuse("must be fired FOR EACH ROW");
	if (!TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		rp_fence_misuse("must be fired BEFORE INSERT OR UPDATE");
	if (!TRIGGER_FIRED_BY_INSERT(trigdata->tg_event) &&
		!TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		rp_fence_misuse("must be fired for INSERT or UPDATE only");

	trigger = trigdata->tg_trigger;
	rel = trigdata->tg_relation;
	desc = RelationGetDescr(rel);
	if (trigger->tgnargs < 1 || trigger->tgnargs > 2)
		rp_fence_misuse("takes a column name and an optional mode ('error' or 'skip')");
	column = trigger->tgargs[0];
	if (trigger->tgnargs == 2)
	{
		if (strcmp(trigger->tgargs[1], "skip") == 0)
			skip = true;
		else if (strcmp(trigger->tgargs[1], "error") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
					 errmsg("rp_fence_guard: unknown mode \"%s\"", trigger->tgargs[1]),
					 errhint("The mode is 'error' (the default) or 'skip'.")));
	}

	attnum = SPI_fnumber(desc, column);
	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("rp_fence_guard: column \"%s\" does not exist in table \"%s\"",
						column, RelationGetRelationName(rel))));
	typid = TupleDescAttr(desc, attnum - 1)->atttypid;
	if (typid != INT2OID && typid != INT4OID && typid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("rp_fence_guard: column \"%s\" of table \"%s\" must be smallint, integer or bigint, not %s",
						column, RelationGetRelationName(rel), format_type_be(typid))));

	newtuple = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ?
		trigdata->tg_newtuple : trigdata->tg_trigtuple;
	newfence = rp_fence_value(newtuple, desc, attnum, typid, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fence token in column \"%s\" of table \"%s\" must not be NULL",
						column, RelationGetRelationName(rel)),
				 errhint("Every write to a fenced table carries the fence token of the lease it was made under.")));

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		return PointerGetDatum(newtuple);

	oldfence = rp_fence_value(trigdata->tg_trigtuple, desc, attnum, typid, &isnull);
	if (isnull || newfence >= oldfence)
		return PointerGetDatum(newtuple);

	/* Stale: a newer holder has already written this row. */
	if (skip)
		return PointerGetDatum(NULL);
	if (pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), ACL_SELECT) == ACLCHECK_OK ||
		pg_attribute_aclcheck(RelationGetRelid(rel), attnum, GetUserId(),
							  ACL_SELECT) == ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_RP_STALE_FENCE),
				 errmsg("stale fence token for table \"%s\"", RelationGetRelationName(rel)),
				 errdetail("The row holds fence token " INT64_FORMAT
						   "; this write carries " INT64_FORMAT ".",
						   oldfence, newfence),
				 errhint("The lease this write was made under has expired and a newer holder has written since.  Stop and do not retry with the same token.")));
	ereport(ERROR,
			(errcode(ERRCODE_RP_STALE_FENCE),
			 errmsg("stale fence token for table \"%s\"", RelationGetRelationName(rel)),
			 errdetail("This write carries fence token " INT64_FORMAT
					   ", lower than the one the row holds.", newfence)));
	pg_unreachable();
}
