/*-------------------------------------------------------------------------
 *
 * fence_def.c
 *		What a fence guard's trigger definition means, and everything that
 *		stops it from guarding: rp_guard_parse, and the SQL function
 *		rp_fence_check(regclass) that reports it.
 *
 * Before editing, know this: a guard with any problem listed here refuses
 * to run (fence.c raises the first one), so a check added here is a check
 * every existing guard must pass; keep each one something that really
 * leaves writes unguarded.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

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
			{
				Oid			outfn;
				bool		varlena;

				getTypeOutputInfo(TupleDescAttr(desc, attnum - 1)->atttypid,
								  &outfn, &varlena);
				fmgr_info_cxt(outfn, &part->out, CurrentMemoryContext);
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
				rp_problem(g, RP_MISUSE, NULL,
						   "column \"%s\" of table \"%s\" is a generated column: it is computed after BEFORE triggers and would not be the token the guard checked",
						   g->column, RelationGetRelationName(rel));
		}
	}
	if (g->kind == RP_GUARD_LOCK)
		rp_parse_template(g, desc, g->target);

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
 * rp_fence_check(regclass) -> setof (trigger_name, problem, hint)
 * ------------------------------------------------------------------------
 */

PG_FUNCTION_INFO_V1(rp_fence_check);
Datum
rp_fence_check(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			relid;
	Oid			guardfn;
	Relation	rel;
	int			nguards = 0;
	char	   *schema;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fenced_table must not be NULL")));
	relid = PG_GETARG_OID(0);
	InitMaterializedSRF(fcinfo, 0);

	/* The guard is the rp_fence_guard of this function's own schema. */
	schema = get_namespace_name(get_func_namespace(fcinfo->flinfo->fn_oid));
	guardfn = LookupFuncName(list_make2(makeString(schema), makeString("rp_fence_guard")),
							 0, NULL, false);

	rel = relation_open(relid, AccessShareLock);
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
			Datum		values[3];
			bool		nulls[3] = {false, false, false};

			values[0] = CStringGetTextDatum(t->tgname);
			values[1] = CStringGetTextDatum(p->msg);
			values[2] = p->hint ? CStringGetTextDatum(p->hint) : (Datum) 0;
			nulls[2] = p->hint == NULL;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	relation_close(rel, AccessShareLock);
	if (nguards == 0)
	{
		Datum		values[3];
		bool		nulls[3] = {true, false, false};

		values[1] = CStringGetTextDatum("has no rp_fence_guard trigger");
		values[2] = CStringGetTextDatum("CREATE TRIGGER ... BEFORE INSERT OR UPDATE OR DELETE ... FOR EACH ROW EXECUTE FUNCTION rp_fence_guard('fence_token', 'lock=<name template>').");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
