/*-------------------------------------------------------------------------
 *
 * fence.c
 *		The resource side of fencing: the trigger rp_fence_guard and the
 *		setting redis_primitives.lease_margin.
 *
 * A guard is one of three kinds, chosen by its trigger arguments (the token
 * column first, then options in any order):
 *   token    ('col' [, 'error'|'skip'] [, 'strict']): the row carries the
 *            token the writer passes; a new token lower than the stored one
 *            is stale (RP001).  'strict': an UPDATE that does not assign the
 *            column is refused (RP004).  1.0's only kind.
 *   lock     ('col', 'lock=account-{id}' [, 'xact']): the session must hold
 *            a live lease on the rendered name in its own registry (RP004
 *            otherwise; with 'xact', one the writing transaction took); the
 *            column is stamped with that lease's fence; a row holding a
 *            higher token refuses the write or DELETE (RP001).
 *   leader   ('col', 'leader=nightly'): the same, with this server's
 *            background elector's belief and epoch in place of a lease.
 * The fenced store (src/sql/30_fence.sql) is a token guard in 'skip' mode, so
 * there is one definition of "stale": strictly lower than the stored token.
 *
 * Before editing, know this: a guard checks the row that will be written
 * only because it refuses to run unless it is the last BEFORE ROW trigger of
 * its events (triggers fire in name order); every check a guard makes of its
 * own definition lives in rp_guard_parse (fence_def.c), shared with
 * rp_fence_check; a bound guard's write is checked again at commit
 * (fence_commit.c).  The trigger runs as the writing user: it reveals the
 * stored token in a message only to a user allowed to SELECT that column.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/timestamp.h"

#include "elector.h"
#include "election.h"
#include "fence_commit.h"
#include "fence_def.h"
#include "lease.h"
#include "stats.h"

/* ------------------------------------------------------------------------
 * Reading and writing the token, rendering the lock name.
 * ------------------------------------------------------------------------
 */

/* The token in the guard's column of tuple, as int64; *isnull set for NULL. */
static int64
rp_fence_value(RpGuard *g, HeapTuple tuple, TupleDesc desc, bool *isnull)
{
	Datum		d = heap_getattr(tuple, g->attnum, desc, isnull);

	if (*isnull)
		return 0;
	switch (g->basetype)
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		default:
			return DatumGetInt64(d);
	}
}

/* tuple with the guard's column set to fence (a new tuple, or tuple itself). */
static HeapTuple
rp_stamp(RpGuard *g, Relation rel, HeapTuple tuple, int64 fence, MemoryContext cxt)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Datum		value;
	bool		isnull;
	bool		replace;
	Datum	   *values;
	bool	   *nulls;
	bool	   *repl;

	if (rp_fence_value(g, tuple, desc, &isnull) == fence && !isnull)
		return tuple;
	if ((g->basetype == INT2OID && (fence > PG_INT16_MAX || fence < PG_INT16_MIN)) ||
		(g->basetype == INT4OID && (fence > PG_INT32_MAX || fence < PG_INT32_MIN)))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("fence token " INT64_FORMAT " does not fit column \"%s\" of table \"%s\"",
						fence, g->column, RelationGetRelationName(rel)),
				 errhint("Make the column bigint.")));
	value = g->basetype == INT2OID ? Int16GetDatum((int16) fence) :
		g->basetype == INT4OID ? Int32GetDatum((int32) fence) : Int64GetDatum(fence);
	if (g->typid != g->basetype)
		domain_check(value, false, g->typid, &g->domain_extra, cxt);
	values = palloc0(sizeof(Datum) * desc->natts);
	nulls = palloc0(sizeof(bool) * desc->natts);
	repl = palloc0(sizeof(bool) * desc->natts);
	replace = true;
	repl[g->attnum - 1] = replace;
	values[g->attnum - 1] = value;
	return heap_modify_tuple(tuple, desc, values, nulls, repl);
}

/*
 * The lock name of tuple, rendered from the template the same way in every
 * session (fence_name.c).
 */
static char *
rp_row_name(RpGuard *g, Relation rel, HeapTuple tuple)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Datum	   *values = palloc0(sizeof(Datum) * g->nparts);
	bool	   *isnull = palloc0(sizeof(bool) * g->nparts);

	for (int i = 0; i < g->nparts; i++)
		if (!g->parts[i].text)
			values[i] = heap_getattr(tuple, g->parts[i].attnum, desc, &isnull[i]);
	return rp_name_render(g, RelationGetRelationName(rel), values, isnull);
}

/*
 * The lock names of the old and the new row (either may be NULL), the name
 * rendered once when the template's columns did not change (the usual
 * UPDATE): the same bytes render as the same text.
 */
static void
rp_row_names(RpGuard *g, Relation rel, HeapTuple oldtuple, HeapTuple newtuple,
			 char **oldname, char **newname)
{
	TupleDesc	desc = RelationGetDescr(rel);
	bool		same = oldtuple && newtuple;

	for (int i = 0; same && i < g->nparts; i++)
	{
		RpNamePart *p = &g->parts[i];
		Form_pg_attribute att;
		Datum		a;
		Datum		b;
		bool		anull;
		bool		bnull;

		if (p->text)
			continue;
		att = TupleDescAttr(desc, p->attnum - 1);
		a = heap_getattr(oldtuple, p->attnum, desc, &anull);
		b = heap_getattr(newtuple, p->attnum, desc, &bnull);
		same = anull == bnull &&
			(anull || datumIsEqual(a, b, att->attbyval, att->attlen));
	}
	*newname = newtuple ? rp_row_name(g, rel, newtuple) : NULL;
	*oldname = !oldtuple ? NULL : same ? *newname : rp_row_name(g, rel, oldtuple);
}

/*
 * Whether the user may read, through relation relid, the values of its
 * columns names (n of them) in a message: as PostgreSQL's own messages
 * (ExecBuildSlotValueDescription), not under row-level security (a policy
 * may hide the row: an UPDATE or DELETE without WHERE applies no SELECT
 * policy), and only with SELECT on the table or on each of the columns.
 */
static bool
rp_values_visible_in(Oid relid, char **names, int n)
{
	if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		return false;
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK)
		return true;
	for (int i = 0; i < n; i++)
	{
		AttrNumber	attnum = get_attnum(relid, names[i]);

		if (attnum == InvalidAttrNumber ||
			pg_attribute_aclcheck(relid, attnum, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
			return false;
	}
	return true;
}

/*
 * ... through relid or any table it inherits from (a partition's parents
 * included): the trigger fires on the partition or child, which needs no
 * grants of its own when written through its parent, and a writer who may
 * SELECT the parent reads the child's rows through it (PostgreSQL's own
 * messages judge a partition's row by the table the statement names).
 */
static bool
rp_values_visible_up(Oid relid, char **names, int n, int depth)
{
	Relation	inh;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *parents = NIL;
	ListCell   *lc;
	bool		visible = false;

	if (rp_values_visible_in(relid, names, n))
		return true;
	if (depth >= 64)
		return false;
	for (int i = 0; i < n; i++)
		if (get_attnum(relid, names[i]) == InvalidAttrNumber)
			return false;		/* nor in any parent */
	inh = table_open(InheritsRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_inherits_inhrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(inh, InheritsRelidSeqnoIndexId, true, NULL, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
		parents = lappend_oid(parents, ((Form_pg_inherits) GETSTRUCT(tup))->inhparent);
	systable_endscan(scan);
	table_close(inh, AccessShareLock);
	foreach(lc, parents)
		if ((visible = rp_values_visible_up(lfirst_oid(lc), names, n, depth + 1)))
			break;
	list_free(parents);
	return visible;
}

/* ... of rel's columns attnums (nattnums of them). */
static bool
rp_values_visible(Relation rel, const AttrNumber *attnums, int nattnums)
{
	Oid			relid = RelationGetRelid(rel);
	char	  **names = palloc(sizeof(char *) * Max(nattnums, 1));
	bool		visible;

	for (int i = 0; i < nattnums; i++)
	{
		names[i] = get_attname(relid, attnums[i], true);
		if (names[i] == NULL)
		{
			/* no such column (a token column not found): this table only */
			if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
				return false;
			return pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
		}
	}
	visible = rp_values_visible_up(relid, names, nattnums, 0);
	pfree(names);
	return visible;
}

/*
 * Whether the writing user may read the lock name of a row of rel.  The name
 * is made of the row's values of the template's columns, and a user with
 * UPDATE or DELETE but no SELECT on them must not read those values in a
 * message (an UPDATE or DELETE without WHERE needs no SELECT at all), as
 * PostgreSQL's own messages show only the columns the user may read.
 */
static bool
rp_name_visible(RpGuard *g, Relation rel)
{
	AttrNumber *attnums = palloc(sizeof(AttrNumber) * Max(g->nparts, 1));
	int			n = 0;
	bool		visible;

	for (int i = 0; i < g->nparts; i++)
		if (!g->parts[i].text)
			attnums[n++] = g->parts[i].attnum;
	visible = rp_values_visible(rel, attnums, n);
	pfree(attnums);
	return visible;
}

/*
 * The fence this session may write under: the fence of its live lease on
 * name (lock-bound), or this server's epoch for the election (leader-bound).
 * RP004 when there is none; the messages name the lock only to a user who
 * may read the row's values it is made of (rp_name_visible).
 */
static int64
rp_live_fence(RpGuard *g, Relation rel, const char *name)
{
	int64		fence;

	if (g->kind == RP_GUARD_LOCK)
	{
		TimestampTz expires_at;
		TimestampTz now = GetCurrentTimestamp();
		bool		found = rp_lease_lookup_ex(name, strlen(name), g->this_xact,
											   &fence, &expires_at);
		bool		visible;
		const char *shown;
		const char *unseen;

		if (found && expires_at > RP_LOCKS_DOUBTED && expires_at > now &&
			TimestampTzPlusMilliseconds(expires_at, -(int64) rp_lease_margin_ms) > now)
		{
			rp_commit_remember(false, name, fence);
			return fence;
		}
		visible = rp_name_visible(g, rel);
		shown = visible ? psprintf("\"%s\"", name) : "the row's lock";
		unseen = visible ? "" :
			"  The lock's name is not shown: it is made of columns of the row this role may not SELECT.";
		if (!found)
			ereport(ERROR,
					(errcode(ERRCODE_RP_NO_LEASE),
					 errmsg("no lease on %s for a write to table \"%s\"",
							shown, RelationGetRelationName(rel)),
					 errdetail("%s%s", g->this_xact ?
							   "This transaction took no lease on the lock the row is bound to (the guard's 'xact' option)." :
							   "This session holds no lease on the lock the row is bound to.", unseen),
					 visible ? errhint("Take it first: rp_acquire(%s, ttl_ms).", quote_literal_cstr(name)) :
					 errhint("Take it first: rp_acquire(rp_lock_name(%s, <the row>), ttl_ms).",
							 quote_literal_cstr(quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
																		  RelationGetRelationName(rel))))));
		/* Released, or doubted: no time to show (stats.h's marks). */
		if (expires_at <= RP_LOCKS_DOUBTED)
			ereport(ERROR,
					(errcode(ERRCODE_RP_NO_LEASE),
					 errmsg("lease on %s was released for a write to table \"%s\"",
							shown, RelationGetRelationName(rel)),
					 errdetail("The lease with fence token " INT64_FORMAT " was released, or a release of it was asked for and its outcome is not known (its reply was lost).%s",
							   fence, unseen),
					 errhint("Another holder may have the lock now.  Acquire it again and redo the work from a fresh read.")));
		if (expires_at <= now)
			ereport(ERROR,
					(errcode(ERRCODE_RP_NO_LEASE),
					 errmsg("lease on %s has expired for a write to table \"%s\"",
							shown, RelationGetRelationName(rel)),
					 errdetail("The lease with fence token " INT64_FORMAT " ran out at %s.%s",
							   fence, timestamptz_to_str(expires_at), unseen),
					 errhint("Another holder may have the lock now.  Acquire it again and redo the work from a fresh read.")));

		/*
		 * Still live, but within the margin of its end: said apart, since a
		 * lease taken with a TTL at or below the margin lands here on every
		 * write, and "another holder may have it" would send its user
		 * looking for a rival that does not exist.
		 */
		ereport(ERROR,
				(errcode(ERRCODE_RP_NO_LEASE),
				 errmsg("lease on %s is too close to its end for a write to table \"%s\"",
						shown, RelationGetRelationName(rel)),
				 errdetail("The lease with fence token " INT64_FORMAT " runs out at %s, within redis_primitives.lease_margin (%d ms) of now.%s",
						   fence, timestamptz_to_str(expires_at), rp_lease_margin_ms, unseen),
				 errhint("Extend it with rp_extend before writing, or take it with a TTL well above redis_primitives.lease_margin plus the time the work takes.")));
	}

	if (!rp_election_believed(g->target, strlen(g->target), &fence))
		ereport(ERROR,
				(errcode(ERRCODE_RP_NO_LEASE),
				 errmsg("this server does not lead \"%s\" for a write to table \"%s\"",
						g->target, RelationGetRelationName(rel)),
				 errdetail("%s", !rp_elector_available() ?
						   "The background elector is not running: redis_primitives is not in shared_preload_libraries." :
						   "rp_is_leader() is false for this election: another node leads, nobody does, the elector's deadline passed, or the election is not in redis_primitives.elections.")));
	rp_commit_remember(true, name, fence);
	return fence;
}

/* A row holding a higher token than fence refuses the change. */
static void
rp_fence_stale(RpGuard *g, Relation rel, int64 stored, int64 fence)
{
	AttrNumber	attnum = g->attnum;

	if (rp_values_visible(rel, &attnum, 1))
		ereport(ERROR,
				(errcode(ERRCODE_RP_STALE_FENCE),
				 errmsg("stale fence token for table \"%s\"", RelationGetRelationName(rel)),
				 errdetail("The row holds fence token " INT64_FORMAT
						   "; this write carries " INT64_FORMAT ".",
						   stored, fence),
				 errhint("The lease this write was made under has expired and a newer holder has written since.  Stop and do not retry with the same token.")));
	ereport(ERROR,
			(errcode(ERRCODE_RP_STALE_FENCE),
			 errmsg("stale fence token for table \"%s\"", RelationGetRelationName(rel)),
			 errdetail("This write carries fence token " INT64_FORMAT
					   ", lower than the one the row holds.", fence)));
}

/* ------------------------------------------------------------------------
 * The trigger.
 * ------------------------------------------------------------------------
 */

pg_noreturn static void rp_fence_misuse(const char *msg);

static void
rp_fence_misuse(const char *msg)
{
	ereport(ERROR,
			(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			 errmsg("rp_fence_guard: %s", msg)));
}

/* The parsed guard, once per trigger per statement. */
static RpGuard *
rp_guard_get(FunctionCallInfo fcinfo, TriggerData *trigdata)
{
	RpGuard    *g = fcinfo->flinfo->fn_extra;
	MemoryContext old;

	if (g == NULL)
	{
		old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		g = palloc0(sizeof(RpGuard));
		rp_guard_parse(trigdata->tg_relation, trigdata->tg_trigger, g);
		MemoryContextSwitchTo(old);
		fcinfo->flinfo->fn_extra = g;
	}
	if (g->problems != NIL)
	{
		RpProblem  *p = linitial(g->problems);

		ereport(ERROR,
				(errcode(p->code),
				 errmsg("rp_fence_guard: %s", p->msg),
				 errdetail("Trigger \"%s\" on table \"%s\" cannot guard it; rp_fence_check('%s') lists every problem.",
						   trigdata->tg_trigger->tgname,
						   RelationGetRelationName(trigdata->tg_relation),
						   quote_identifier(RelationGetRelationName(trigdata->tg_relation))),
				 p->hint ? errhint("%s", p->hint) : 0));
	}
	return g;
}

/* Token guard: the writer passes the token. */
static Datum
rp_guard_token(RpGuard *g, TriggerData *trigdata)
{
	Relation	rel = trigdata->tg_relation;
	TupleDesc	desc = RelationGetDescr(rel);
	bool		update = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event);
	HeapTuple	newtuple = update ? trigdata->tg_newtuple : trigdata->tg_trigtuple;
	int64		newfence;
	int64		oldfence;
	bool		isnull;

	newfence = rp_fence_value(g, newtuple, desc, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fence token in column \"%s\" of table \"%s\" must not be NULL",
						g->column, RelationGetRelationName(rel)),
				 errhint("Every write to a fenced table carries the fence token of the lease it was made under.")));
	if (!update)
		return PointerGetDatum(newtuple);

	if (g->strict &&
		!bms_is_member(g->attnum - FirstLowInvalidHeapAttributeNumber,
					   trigdata->tg_updatedcols))
		ereport(ERROR,
				(errcode(ERRCODE_RP_NO_LEASE),
				 errmsg("an UPDATE of table \"%s\" must set the fence token column \"%s\"",
						RelationGetRelationName(rel), g->column),
				 errdetail("The guard is strict: an UPDATE, or the UPDATE of an INSERT ... ON CONFLICT, that does not assign the column would carry the stored token."),
				 errhint("Add \"%s\" = <your lease's fence> to the SET list (for an upsert: = EXCLUDED.%s).",
						 g->column, g->column)));

	oldfence = rp_fence_value(g, trigdata->tg_trigtuple, desc, &isnull);
	if (isnull || newfence >= oldfence)
		return PointerGetDatum(newtuple);
	if (g->skip)
		return PointerGetDatum(NULL);
	rp_fence_stale(g, rel, oldfence, newfence);
	pg_unreachable();
}

/* Lock- and leader-bound guards: the lease is the token. */
static Datum
rp_guard_bound(RpGuard *g, TriggerData *trigdata, MemoryContext cxt)
{
	Relation	rel = trigdata->tg_relation;
	TupleDesc	desc = RelationGetDescr(rel);
	TriggerEvent ev = trigdata->tg_event;
	HeapTuple	oldtuple = NULL;
	HeapTuple	newtuple = NULL;
	char	   *newname = NULL;
	char	   *oldname = NULL;
	int64		newfence = 0;
	int64		oldfence = 0;
	int64		stored;
	bool		isnull;

	if (TRIGGER_FIRED_BY_INSERT(ev))
		newtuple = trigdata->tg_trigtuple;
	else if (TRIGGER_FIRED_BY_UPDATE(ev))
	{
		oldtuple = trigdata->tg_trigtuple;
		newtuple = trigdata->tg_newtuple;
	}
	else
		oldtuple = trigdata->tg_trigtuple;

	if (g->kind == RP_GUARD_LOCK)
		rp_row_names(g, rel, oldtuple, newtuple, &oldname, &newname);
	else
		newname = oldname = (char *) g->target;

	/* The old row's name first: a DELETE or a rename needs its lease. */
	if (oldtuple)
	{
		oldfence = rp_live_fence(g, rel, oldname);
		if (newtuple)
			newfence = strcmp(oldname, newname) == 0 ? oldfence :
				rp_live_fence(g, rel, newname);
		stored = rp_fence_value(g, oldtuple, desc, &isnull);
		if (!isnull && stored > oldfence)
		{
			if (g->skip)
				return PointerGetDatum(NULL);
			rp_fence_stale(g, rel, stored, oldfence);
		}
	}
	else
		newfence = rp_live_fence(g, rel, newname);

	if (newtuple == NULL)
		return PointerGetDatum(oldtuple);
	return PointerGetDatum(rp_stamp(g, rel, newtuple, newfence, cxt));
}

PG_FUNCTION_INFO_V1(rp_fence_guard);
Datum
rp_fence_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	RpGuard    *g;

	if (!CALLED_AS_TRIGGER(fcinfo))
		rp_fence_misuse("not called by trigger manager");
	g = rp_guard_get(fcinfo, trigdata);

	/* rp_guard_parse made sure of these; a cheap second look. */
	if (!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		rp_fence_misuse("must be fired BEFORE ... FOR EACH ROW");

	if (g->kind == RP_GUARD_TOKEN)
		return rp_guard_token(g, trigdata);
	return rp_guard_bound(g, trigdata, fcinfo->flinfo->fn_mcxt);
}
