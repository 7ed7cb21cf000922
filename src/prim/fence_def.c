/*-------------------------------------------------------------------------
 *
 * fence_def.c
 *		What a fence guard's trigger definition means, and everything that
 *		stops it from guarding: rp_guard_parse; the SQL function
 *		rp_fence_check(regclass) that reports it for a table, its partitions
 *		and its inheritance children; and the event trigger that refuses, at
 *		CREATE TRIGGER, a guard whose columns can never work.
 *
 * Before editing, know this: a guard with any problem listed here refuses
 * to run (fence.c raises the first one), so a check added here is a check
 * every existing guard must pass; keep each one something that really
 * leaves writes unguarded.  A problem marked at_create is refused at CREATE
 * TRIGGER too (unless check_function_bodies is off, as in a pg_dump
 * restore): only those no later DDL of another object can cure.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "elector.h"
#include "fence_def.h"

/* ------------------------------------------------------------------------
 * The guard's definition.
 * ------------------------------------------------------------------------
 */

void
rp_problem(RpGuard *g, int code, const char *hint, const char *fmt,...)
{
	RpProblem  *p = palloc0(sizeof(RpProblem));
	va_list		ap;
	char		buf[1024];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	p->code = code;
	p->msg = pstrdup(buf);
	p->hint = hint ? pstrdup(hint) : NULL;
	g->problems = lappend(g->problems, p);
}

/* The problem just added is one CREATE TRIGGER refuses too. */
static void
rp_problem_at_create(RpGuard *g)
{
	((RpProblem *) llast(g->problems))->at_create = true;
}

/*
 * Parse "account-{id}" into parts.  "{{" and "}}" are literal braces.
 */
static void
rp_parse_template(RpGuard *g, TupleDesc desc, const char *tmpl)
{
	StringInfoData lit;
	const char *p = tmpl;
	List	   *parts = NIL;
	ListCell   *lc;
	int			i = 0;

	initStringInfo(&lit);
	if (*tmpl == '\0')
	{
		rp_problem(g, RP_MISUSE, "Write it as 'lock=account-{id}': the lock name with each {column} replaced by the row's value.",
				   "lock name template is empty");
		return;
	}
	while (*p)
	{
		if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}'))
		{
			appendStringInfoChar(&lit, p[0]);
			p += 2;
		}
		else if (*p == '{')
		{
			const char *end = strchr(p + 1, '}');
			char	   *col;
			int			attnum;
			RpNamePart *part;

			if (end == NULL)
			{
				rp_problem(g, RP_MISUSE, "Write a literal brace as {{ or }}.",
						   "lock name template \"%s\" has an unclosed \"{\"", tmpl);
				return;
			}
			col = pnstrdup(p + 1, end - p - 1);
			attnum = SPI_fnumber(desc, col);
			if (attnum <= 0)
			{
				rp_problem(g, ERRCODE_UNDEFINED_COLUMN, NULL,
						   "lock name template \"%s\" names column \"%s\", which does not exist",
						   tmpl, col);
				return;
			}
			if (lit.len > 0)
			{
				part = palloc0(sizeof(RpNamePart));
				part->text = pstrdup(lit.data);
				parts = lappend(parts, part);
				resetStringInfo(&lit);
			}
			part = palloc0(sizeof(RpNamePart));
			part->attnum = attnum;
			part->column = col;
			{
				Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
				Oid			outfn;
				bool		varlena;
				Oid			refused = InvalidOid;

				getTypeOutputInfo(att->atttypid, &outfn, &varlena);
				fmgr_info_cxt(outfn, &part->out, CurrentMemoryContext);
				part->pins = rp_name_type_pins(att->atttypid, &refused);
				if (OidIsValid(refused))
				{
					rp_problem(g, RP_MISUSE,
							   "Template the name on a column that holds the value itself: an oid, or the object's name as text.",
							   "lock name template \"%s\" names column \"%s\" of type %s, whose text depends on search_path or on the catalog",
							   tmpl, col, format_type_be(att->atttypid));
					rp_problem_at_create(g);
				}
				if (att->attgenerated)
				{
					rp_problem(g, RP_MISUSE,
							   "Template the name on the columns the generated column is computed from.",
							   "lock name template \"%s\" names column \"%s\", a generated column: it is computed after BEFORE triggers, so the guard would see NULL on INSERT and the old value on UPDATE",
							   tmpl, col);
					rp_problem_at_create(g);
				}
			}
			parts = lappend(parts, part);
			p = end + 1;
		}
		else if (*p == '}')
		{
			rp_problem(g, RP_MISUSE, "Write a literal brace as {{ or }}.",
					   "lock name template \"%s\" has an unmatched \"}\"", tmpl);
			return;
		}
		else
			appendStringInfoChar(&lit, *p++);
	}
	if (lit.len > 0)
	{
		RpNamePart *part = palloc0(sizeof(RpNamePart));

		part->text = pstrdup(lit.data);
		parts = lappend(parts, part);
	}
	g->nparts = list_length(parts);
	g->parts = palloc0(sizeof(RpNamePart) * Max(g->nparts, 1));
	foreach(lc, parts)
		memcpy(&g->parts[i++], lfirst(lc), sizeof(RpNamePart));
}

/*
 * Everything that would stop trigger trig on rel from guarding it, in
 * g->problems; the parsed definition in the rest of g.  Allocates in
 * CurrentMemoryContext.
 */
void
rp_guard_parse(Relation rel, Trigger *trig, RpGuard *g)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int16		type = trig->tgtype;
	bool		mode_seen = false;

	memset(g, 0, sizeof(RpGuard));
	g->kind = RP_GUARD_TOKEN;

	/* Arguments: the column, then options in any order. */
	if (trig->tgnargs < 1)
		rp_problem(g, RP_MISUSE,
				   "Name the token column first, e.g. rp_fence_guard('fence_token') or rp_fence_guard('fence_token', 'lock=account-{id}').",
				   "takes the fence token column as its first argument");
	for (int i = 1; i < trig->tgnargs; i++)
	{
		const char *opt = trig->tgargs[i];

		if (strcmp(opt, "error") == 0 || strcmp(opt, "skip") == 0)
		{
			if (mode_seen)
				rp_problem(g, RP_MISUSE, NULL, "the mode ('error' or 'skip') is given twice");
			mode_seen = true;
			g->skip = (opt[0] == 's');
		}
		else if (strcmp(opt, "strict") == 0)
			g->strict = true;
		else if (strcmp(opt, "xact") == 0)
			g->this_xact = true;
		else if (strncmp(opt, "lock=", 5) == 0 || strncmp(opt, "leader=", 7) == 0)
		{
			if (g->kind != RP_GUARD_TOKEN)
				rp_problem(g, RP_MISUSE, "A guard is bound to one lock name template or one election.",
						   "more than one 'lock=' or 'leader=' option");
			g->kind = opt[1] == 'o' ? RP_GUARD_LOCK : RP_GUARD_LEADER;
			g->target = opt + (g->kind == RP_GUARD_LOCK ? 5 : 7);
		}
		else
			rp_problem(g, RP_MISUSE,
					   "Options are 'error' (the default) or 'skip', 'strict', 'xact', 'lock=<name template>' and 'leader=<election>'.",
					   "unknown option \"%s\"", opt);
	}
	if (g->strict && g->kind != RP_GUARD_TOKEN)
		rp_problem(g, RP_MISUSE,
				   "A lock- or leader-bound guard sets the column itself; 'strict' is for guards whose writers pass the token.",
				   "'strict' cannot be combined with '%s'", g->kind == RP_GUARD_LOCK ? "lock=" : "leader=");
	if (g->this_xact && g->kind != RP_GUARD_LOCK)
		rp_problem(g, RP_MISUSE,
				   "'xact' makes a lock-bound guard accept only a lease the writing transaction took; add 'lock=<name template>'.",
				   "'xact' needs 'lock='");
	if (g->kind == RP_GUARD_LEADER &&
		(g->target[0] == '\0' || strlen(g->target) >= RP_ELECTION_NAME_MAX))
		rp_problem(g, RP_MISUSE, NULL, "the election name after 'leader=' must be 1 to %d bytes",
				   RP_ELECTION_NAME_MAX - 1);

	/* The column. */
	if (trig->tgnargs >= 1)
	{
		g->column = trig->tgargs[0];
		g->attnum = SPI_fnumber(desc, g->column);
		if (g->attnum <= 0)
		{
			g->attnum = 0;
			rp_problem(g, ERRCODE_UNDEFINED_COLUMN, NULL,
					   "column \"%s\" does not exist in table \"%s\"",
					   g->column, RelationGetRelationName(rel));
		}
		else
		{
			Form_pg_attribute att = TupleDescAttr(desc, g->attnum - 1);

			g->typid = att->atttypid;
			g->basetype = getBaseType(g->typid);
			if (g->basetype != INT2OID && g->basetype != INT4OID &&
				g->basetype != INT8OID)
				rp_problem(g, ERRCODE_DATATYPE_MISMATCH, NULL,
						   "column \"%s\" of table \"%s\" must be smallint, integer or bigint (or a domain over one), not %s",
						   g->column, RelationGetRelationName(rel),
						   format_type_be(g->typid));
			if (att->attgenerated)
			{
				rp_problem(g, RP_MISUSE, NULL,
						   "column \"%s\" of table \"%s\" is a generated column: it is computed after BEFORE triggers and would not be the token the guard checked",
						   g->column, RelationGetRelationName(rel));
				rp_problem_at_create(g);
			}
		}
	}
	if (g->kind == RP_GUARD_LOCK)
		rp_parse_template(g, desc, g->target);

	/*
	 * One guard per token column.  Each compares the column with the fences
	 * of its own lease (or the token its writer passes) and a bound one
	 * stamps them, so the guard that fires last overwrites what another
	 * checks: a row lease's stale holder whose fence is above the table
	 * lease's fence the row now holds would get in.  Not refused at CREATE
	 * TRIGGER: a migration may create a guard and then drop the one it
	 * replaces.
	 */
	for (int i = 0; g->attnum > 0 && rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *t = &rel->trigdesc->triggers[i];

		if (t->tgoid == trig->tgoid || t->tgfoid != trig->tgfoid ||
			t->tgenabled == TRIGGER_DISABLED || t->tgnargs < 1)
			continue;
		if (SPI_fnumber(desc, t->tgargs[0]) == g->attnum)
			rp_problem(g, RP_MISUSE,
					   "Give each guard a token column of its own, or drop one of them.",
					   "guard \"%s\" uses the same token column \"%s\": the guard that fires last overwrites the fence the other checks",
					   t->tgname, g->column);
	}

	/* When and on what it fires. */
	if (!TRIGGER_FOR_ROW(type))
		rp_problem(g, RP_MISUSE, "Create it FOR EACH ROW.", "must be fired FOR EACH ROW");
	else if (!TRIGGER_FOR_BEFORE(type))
		rp_problem(g, RP_MISUSE, "Create it BEFORE ... FOR EACH ROW: only a BEFORE trigger can refuse or stamp the row.",
				   "must be fired BEFORE INSERT OR UPDATE%s",
				   g->kind == RP_GUARD_TOKEN ? "" : " OR DELETE");
	if (!TRIGGER_FOR_INSERT(type) || !TRIGGER_FOR_UPDATE(type) ||
		(g->kind != RP_GUARD_TOKEN && !TRIGGER_FOR_DELETE(type)))
		rp_problem(g, RP_MISUSE,
				   "A guard that does not fire on every kind of write leaves the others unguarded.",
				   "must be fired on INSERT OR UPDATE%s",
				   g->kind == RP_GUARD_TOKEN ? "" : " OR DELETE");
	if (g->kind == RP_GUARD_TOKEN && TRIGGER_FOR_DELETE(type))
		rp_problem(g, RP_MISUSE,
				   "A DELETE carries no token to compare.  Bind the guard to the lease with 'lock=<name template>' to guard DELETEs.",
				   "a token guard cannot be fired on DELETE");
	if (trig->tgnattr > 0)
		rp_problem(g, RP_MISUSE,
				   "An UPDATE that sets none of the listed columns would skip the guard.  Drop the column list.",
				   "must fire on every UPDATE, not UPDATE OF a column list");
	if (trig->tgqual != NULL)
		rp_problem(g, RP_MISUSE,
				   "A row the condition excludes would be written unguarded.  Drop the WHEN clause.",
				   "must not have a WHEN condition");

	/*
	 * The order rule: no BEFORE ROW trigger that fires on one of the guard's
	 * events may fire after it (triggers of one kind fire in name order), or
	 * it could change the token, or the name, behind the guard's check.
	 */
	if (rel->trigdesc && TRIGGER_FOR_ROW(type) && TRIGGER_FOR_BEFORE(type))
	{
		int16		events = type & (TRIGGER_TYPE_INSERT | TRIGGER_TYPE_UPDATE |
									 TRIGGER_TYPE_DELETE);

		for (int i = 0; i < rel->trigdesc->numtriggers; i++)
		{
			Trigger    *t = &rel->trigdesc->triggers[i];

			/* Other guards change only their own column: any order. */
			if (t->tgoid == trig->tgoid || t->tgfoid == trig->tgfoid ||
				t->tgenabled == TRIGGER_DISABLED ||
				!TRIGGER_FOR_ROW(t->tgtype) || !TRIGGER_FOR_BEFORE(t->tgtype) ||
				(t->tgtype & events) == 0)
				continue;
			if (strcmp(t->tgname, trig->tgname) > 0)
				rp_problem(g, RP_MISUSE,
						   "BEFORE ROW triggers fire in the order of their names: rename the guard so that it sorts after every other one.",
						   "BEFORE trigger \"%s\" fires after the guard \"%s\" and could change the row behind it",
						   t->tgname, trig->tgname);
		}
	}
}

/* ------------------------------------------------------------------------
 * rp_fence_check(regclass) -> setof (trigger_name, problem, hint, relation)
 * ------------------------------------------------------------------------
 */

/*
 * The rp_fence_guard of the schema of the function fcinfo calls.  Found in
 * the catalog, not by a qualified name: a name lookup checks USAGE on the
 * schema as the current user, who may have none (the event trigger runs as
 * whoever creates a trigger or a schema, REVOKE ALL ON SCHEMA public FROM
 * PUBLIC being common), and owes them no such right to guard their tables.
 */
Oid
rp_guard_fn(FunctionCallInfo fcinfo)
{
	Oid			nsp = get_func_namespace(fcinfo->flinfo->fn_oid);
	Oid			fn;

	fn = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
						 CStringGetDatum("rp_fence_guard"),
						 PointerGetDatum(buildoidvector(NULL, 0)),
						 ObjectIdGetDatum(nsp));
	if (!OidIsValid(fn))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("function %s.rp_fence_guard() does not exist",
						get_namespace_name(nsp))));
	return fn;
}

static void
rp_check_row(ReturnSetInfo *rsinfo, Oid relid, const char *tgname,
			 const char *problem, const char *hint)
{
	Datum		values[4];
	bool		nulls[4] = {tgname == NULL, false, hint == NULL, false};

	values[0] = tgname ? CStringGetTextDatum(tgname) : (Datum) 0;
	values[1] = CStringGetTextDatum(problem);
	values[2] = hint ? CStringGetTextDatum(hint) : (Datum) 0;
	values[3] = ObjectIdGetDatum(relid);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* Whether two triggers have the same arguments. */
static bool
rp_same_args(Trigger *a, Trigger *b)
{
	if (a->tgnargs != b->tgnargs)
		return false;
	for (int i = 0; i < a->tgnargs; i++)
		if (strcmp(a->tgargs[i], b->tgargs[i]) != 0)
			return false;
	return true;
}

/*
 * Report every problem of every guard of rel; with parent (the table
 * rp_fence_check was asked about, rel being one of its partitions or
 * inheritance children), also each guard of parent that rel has no copy
 * of: a partition gets one at CREATE TRIGGER or ATTACH PARTITION, an
 * inheritance child never.  Returns the number of guards rel has.
 */
static int
rp_check_relation(ReturnSetInfo *rsinfo, Oid guardfn, Relation rel, Relation parent)
{
	int			nguards = 0;
	Oid			relid = RelationGetRelid(rel);

	for (int i = 0; rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *t = &rel->trigdesc->triggers[i];
		RpGuard		g;
		ListCell   *lc;

		if (t->tgfoid != guardfn)
			continue;
		nguards++;
		rp_guard_parse(rel, t, &g);
		if (t->tgenabled == TRIGGER_DISABLED)
			rp_problem(&g, RP_MISUSE, "ALTER TABLE ... ENABLE TRIGGER.", "is disabled");
		else if (t->tgenabled == TRIGGER_FIRES_ON_REPLICA)
			rp_problem(&g, RP_MISUSE, "ALTER TABLE ... ENABLE ALWAYS TRIGGER, or ENABLE TRIGGER.",
					   "fires only when session_replication_role is replica");
		foreach(lc, g.problems)
		{
			RpProblem  *p = lfirst(lc);

			rp_check_row(rsinfo, relid, t->tgname, p->msg, p->hint);
		}
	}
	for (int i = 0; parent && parent->trigdesc && i < parent->trigdesc->numtriggers; i++)
	{
		Trigger    *pt = &parent->trigdesc->triggers[i];
		bool		copied = false;

		if (pt->tgfoid != guardfn)
			continue;
		for (int j = 0; rel->trigdesc && j < rel->trigdesc->numtriggers && !copied; j++)
			copied = rel->trigdesc->triggers[j].tgfoid == guardfn &&
				rp_same_args(&rel->trigdesc->triggers[j], pt);
		if (!copied)
		{
			char	   *msg = psprintf("has no copy of guard \"%s\" of \"%s\": its rows are not guarded as the parent's are",
									   pt->tgname, RelationGetRelationName(parent));

			rp_check_row(rsinfo, relid, pt->tgname, msg,
						 "A write to an inheritance child fires the child's triggers only: create the same guard on it (same arguments), or make it a partition.");
		}
	}
	return nguards;
}

PG_FUNCTION_INFO_V1(rp_fence_check);
Datum
rp_fence_check(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			relid;
	Oid			guardfn;
	Relation	rel;
	List	   *children;
	ListCell   *lc;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fenced_table must not be NULL")));
	relid = PG_GETARG_OID(0);
	InitMaterializedSRF(fcinfo, 0);
	guardfn = rp_guard_fn(fcinfo);

	rel = try_relation_open(relid, AccessShareLock);
	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (rp_check_relation(rsinfo, guardfn, rel, NULL) == 0)
		rp_check_row(rsinfo, relid, NULL, "has no rp_fence_guard trigger",
					 "CREATE TRIGGER ... BEFORE INSERT OR UPDATE OR DELETE ... FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=<name template>').");

	/*
	 * Every partition and inheritance child, at any depth: a write through
	 * the table reaches their rows and fires their triggers, not the
	 * table's.
	 */
	children = find_all_inheritors(relid, AccessShareLock, NULL);
	foreach(lc, children)
	{
		Oid			child = lfirst_oid(lc);
		Relation	crel;

		if (child == relid)
			continue;
		crel = try_relation_open(child, AccessShareLock);
		if (crel == NULL)
			continue;			/* dropped meanwhile */
		(void) rp_check_relation(rsinfo, guardfn, crel, rel);
		relation_close(crel, AccessShareLock);
	}
	relation_close(rel, AccessShareLock);
	return (Datum) 0;
}

/* ------------------------------------------------------------------------
 * rp_fence_guard_created(): the event trigger on CREATE TRIGGER
 * ------------------------------------------------------------------------
 */

/* The guard trigger trigname of table rv, if it is one: refused as below. */
static void
rp_guard_created_check(RangeVar *rv, const char *trigname, Oid guardfn)
{
	Oid			relid = RangeVarGetRelid(rv, NoLock, true);
	Relation	rel;

	if (!OidIsValid(relid))
		return;
	rel = relation_open(relid, AccessShareLock);
	for (int i = 0; rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *t = &rel->trigdesc->triggers[i];
		RpGuard		g;
		ListCell   *lc;

		if (t->tgfoid != guardfn || strcmp(t->tgname, trigname) != 0)
			continue;
		rp_guard_parse(rel, t, &g);
		foreach(lc, g.problems)
		{
			RpProblem  *p = lfirst(lc);

			if (!p->at_create)
				continue;
			ereport(ERROR,
					(errcode(p->code),
					 errmsg("rp_fence_guard: %s", p->msg),
					 errdetail("Trigger \"%s\" on table \"%s\" would refuse every write.",
							   t->tgname, RelationGetRelationName(rel)),
					 p->hint ? errhint("%s", p->hint) : 0));
		}
	}
	relation_close(rel, AccessShareLock);
}

/*
 * A new rp_fence_guard trigger with a problem no later DDL of another
 * object can cure (a template column that is generated or whose type has
 * no fixed text; a generated token column) is refused with that problem.
 * Every other problem is left to the trigger and rp_fence_check, as
 * before: a guard may be created before the trigger it must sort after is
 * renamed.  check_function_bodies = off (pg_dump's restore) skips it, as it
 * skips a function's body check: the guard then refuses to run instead.
 * A CREATE TRIGGER written inside CREATE SCHEMA runs under that tag: each
 * one is checked at the end of the CREATE SCHEMA, its table in the new
 * schema unless it names it (CREATE SCHEMA allows no other).
 */
PG_FUNCTION_INFO_V1(rp_fence_guard_created);
Datum
rp_fence_guard_created(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	Oid			guardfn;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("rp_fence_guard_created: not fired by event trigger manager")));
	trigdata = (EventTriggerData *) fcinfo->context;
	if (!check_function_bodies)
		PG_RETURN_VOID();
	guardfn = rp_guard_fn(fcinfo);
	if (IsA(trigdata->parsetree, CreateTrigStmt))
	{
		CreateTrigStmt *stmt = (CreateTrigStmt *) trigdata->parsetree;

		rp_guard_created_check(stmt->relation, stmt->trigname, guardfn);
	}
	else if (IsA(trigdata->parsetree, CreateSchemaStmt))
	{
		CreateSchemaStmt *cs = (CreateSchemaStmt *) trigdata->parsetree;
		const char *schema = cs->schemaname ? cs->schemaname :
			get_rolespec_name(cs->authrole);
		ListCell   *lc;

		foreach(lc, cs->schemaElts)
		{
			CreateTrigStmt *stmt = lfirst(lc);
			RangeVar   *rv;

			if (!IsA(stmt, CreateTrigStmt))
				continue;
			rv = copyObject(stmt->relation);
			if (rv->schemaname == NULL)
				rv->schemaname = pstrdup(schema);
			rp_guard_created_check(rv, stmt->trigname, guardfn);
		}
	}
	PG_RETURN_VOID();
}
