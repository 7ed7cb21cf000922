/*-------------------------------------------------------------------------
 *
 * fence_name.c
 *		A row's lock name: the template of a lock-bound guard rendered from
 *		the row, the same in every session; and the SQL function
 *		rp_lock_name(table, row) that gives applications that name.
 *
 * A template's {column} is the column's text as its type's output function
 * writes it, under fixed output settings: TimeZone UTC, DateStyle ISO,
 * IntervalStyle postgres, extra_float_digits 1, bytea_output hex,
 * lc_monetary C (what pg_dump pins, for the same reason: text that any
 * session reads back as the same value).  Only the settings a column's type
 * depends on are pinned, and only when the session's differ, so a session
 * already using them pays one comparison per setting.
 *
 * Before editing, know this: the trigger (fence.c) and rp_lock_name both
 * call rp_name_render; what one renders the other must, or an application
 * asks for a lease the guard does not accept.  A type whose text names
 * catalog objects (reg*, aclitem) has no fixed text and is refused
 * (rp_name_type_pins), at CREATE TRIGGER and when the guard fires.
 * The guard renders the row as stored, after INSERT applied each column's
 * typmod; rp_lock_name applies the same typmods to the values it is given
 * (rp_row_typmod), or 1.5 would be named where 1.50 is stored.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_func.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/bytea.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/pg_locale.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "fence_def.h"

/* ------------------------------------------------------------------------
 * The settings a value's text depends on, and the values they are pinned to.
 * ------------------------------------------------------------------------
 */

static const struct
{
	int			bit;
	const char *name;
	const char *value;
}			rp_pins[] =
{
	{RP_PIN_TIMEZONE, "TimeZone", "UTC"},
	{RP_PIN_DATESTYLE, "DateStyle", "ISO"},
	{RP_PIN_INTERVALSTYLE, "IntervalStyle", "postgres"},
	{RP_PIN_FLOAT, "extra_float_digits", "1"},
	{RP_PIN_BYTEA, "bytea_output", "hex"},
	{RP_PIN_MONETARY, "lc_monetary", "C"},
};

/* Whether the session's setting already renders as the pinned value does. */
static bool
rp_pin_in_force(int bit)
{
	switch (bit)
	{
		case RP_PIN_TIMEZONE:
			return session_timezone != NULL &&
				strcmp(pg_get_timezone_name(session_timezone), "UTC") == 0;
		case RP_PIN_DATESTYLE:
			/* ISO output does not depend on the field order (MDY, DMY). */
			return DateStyle == USE_ISO_DATES;
		case RP_PIN_INTERVALSTYLE:
			return IntervalStyle == INTSTYLE_POSTGRES;
		case RP_PIN_FLOAT:
			/* Every value above 0 gives the shortest exact form. */
			return extra_float_digits > 0;
		case RP_PIN_BYTEA:
			return bytea_output == BYTEA_OUTPUT_HEX;
		case RP_PIN_MONETARY:
			return locale_monetary != NULL &&
				(strcmp(locale_monetary, "C") == 0 || strcmp(locale_monetary, "POSIX") == 0);
	}
	return false;
}

/*
 * The RP_PIN_* settings the text of a value of typid depends on.  A type
 * whose text names catalog objects (it follows search_path, renames, and
 * OIDs that differ between databases) has no fixed text: *refused is set
 * to it.  Domains, arrays, ranges, multiranges and composites are what
 * their parts are.  A base type from outside the core (an extension's) may
 * read any setting in its output function: every pin is set for it.
 */
int
rp_name_type_pins(Oid typid, Oid *refused)
{
	HeapTuple	tp;
	Form_pg_type t;
	int			pins = 0;
	Oid			elem;

	check_stack_depth();
	tp = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	if (!HeapTupleIsValid(tp))
		elog(ERROR, "cache lookup failed for type %u", typid);
	t = (Form_pg_type) GETSTRUCT(tp);

	switch (t->typtype)
	{
		case TYPTYPE_DOMAIN:
			pins = rp_name_type_pins(t->typbasetype, refused);
			break;
		case TYPTYPE_ENUM:
			break;
		case TYPTYPE_RANGE:
			pins = rp_name_type_pins(get_range_subtype(typid), refused);
			break;
		case TYPTYPE_MULTIRANGE:
			pins = rp_name_type_pins(get_multirange_range(typid), refused);
			break;
		case TYPTYPE_COMPOSITE:
			{
				TupleDesc	desc = lookup_rowtype_tupdesc(typid, -1);

				for (int i = 0; i < desc->natts && !OidIsValid(*refused); i++)
					if (!TupleDescAttr(desc, i)->attisdropped)
						pins |= rp_name_type_pins(TupleDescAttr(desc, i)->atttypid, refused);
				ReleaseTupleDesc(desc);
			}
			break;
		case TYPTYPE_PSEUDO:
			*refused = typid;
			break;
		default:
			switch (typid)
			{
				case REGCLASSOID:
				case REGTYPEOID:
				case REGPROCOID:
				case REGPROCEDUREOID:
				case REGOPEROID:
				case REGOPERATOROID:
				case REGCONFIGOID:
				case REGDICTIONARYOID:
				case REGNAMESPACEOID:
				case REGROLEOID:
				case REGCOLLATIONOID:
				case ACLITEMOID:
					*refused = typid;
					break;
				case TIMESTAMPTZOID:
					pins = RP_PIN_TIMEZONE | RP_PIN_DATESTYLE;
					break;
				case TIMESTAMPOID:
				case DATEOID:
				case TIMEOID:
				case TIMETZOID:
					pins = RP_PIN_DATESTYLE;
					break;
				case INTERVALOID:
					pins = RP_PIN_INTERVALSTYLE;
					break;
				case FLOAT4OID:
				case FLOAT8OID:
				case POINTOID:
				case LSEGOID:
				case LINEOID:
				case BOXOID:
				case PATHOID:
				case POLYGONOID:
				case CIRCLEOID:
					pins = RP_PIN_FLOAT;
					break;
				case BYTEAOID:
					pins = RP_PIN_BYTEA;
					break;
				case MONEYOID:
					pins = RP_PIN_MONETARY;
					break;
				default:
					elem = get_element_type(typid);
					if (OidIsValid(elem))
						pins = rp_name_type_pins(elem, refused);
					else if (typid >= FirstNormalObjectId)
						pins = RP_PIN_ALL;
					break;
			}
	}
	ReleaseSysCache(tp);
	return pins;
}

/*
 * The lock name of a row: g's template with each column part's value
 * (values[i] and isnull[i] for part i; literal parts' entries unused)
 * rendered under the pinned settings.  A NULL value has no name (22004).
 */
char *
rp_name_render(RpGuard *g, const char *relname, const Datum *values, const bool *isnull)
{
	StringInfoData s;
	int			need = 0;
	int			nest = -1;

	for (int i = 0; i < g->nparts; i++)
	{
		RpNamePart *p = &g->parts[i];

		if (p->text)
			continue;
		if (isnull[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("column \"%s\" of table \"%s\" is NULL, so the row has no lock name",
							p->column, relname),
					 errdetail("The guard's lock name template is \"%s\".", g->target)));
		need |= p->pins;
	}

	/*
	 * Pin what the session has otherwise, for the output calls only, as a
	 * function's SET clause does (an error in between is undone by the
	 * (sub)transaction's abort, as for SET clauses).
	 */
	for (int i = 0; i < (int) lengthof(rp_pins); i++)
	{
		if ((need & rp_pins[i].bit) == 0 || rp_pin_in_force(rp_pins[i].bit))
			continue;
		if (nest < 0)
			nest = NewGUCNestLevel();
		(void) set_config_option(rp_pins[i].name, rp_pins[i].value,
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
								 true, 0, false);
	}

	initStringInfo(&s);
	for (int i = 0; i < g->nparts; i++)
	{
		RpNamePart *p = &g->parts[i];

		if (p->text)
			appendStringInfoString(&s, p->text);
		else
			appendStringInfoString(&s, OutputFunctionCall(&p->out, values[i]));
	}
	if (nest >= 0)
		AtEOXact_GUC(true, nest);
	return s.data;
}

/* ------------------------------------------------------------------------
 * rp_lock_name(fenced_table regclass, row_value anyelement,
 *              trigger_name text DEFAULT NULL) -> text
 * ------------------------------------------------------------------------
 */

/* The text of a jsonb value, as its column's input function reads it. */
static char *
rp_jsonb_text(JsonbValue *v)
{
	switch (v->type)
	{
		case jbvString:
			return pnstrdup(v->val.string.val, v->val.string.len);
		case jbvNumeric:
			return DatumGetCString(DirectFunctionCall1(numeric_out,
													   NumericGetDatum(v->val.numeric)));
		case jbvBool:
			return pstrdup(v->val.boolean ? "true" : "false");
		case jbvBinary:
			return JsonbToCString(NULL, v->val.binary.data, v->val.binary.len);
		default:
			return NULL;
	}
}

/*
 * value, of column from of row_value, as INSERT stores it in column to of
 * the same type: to's typmod applied by the type's length coercion, the
 * expression INSERT builds (transformAssignedExpr: assignment, so a value
 * that does not fit raises, as varchar(3) refuses 'abcd' with 22001 and
 * numeric(10,2) 123456789.5 with 22003, rather than being cut).  An
 * array's elements are coerced each.  A domain has no typmod of its own
 * and its values carry their base type's already: nothing to do, as for
 * a column without a typmod or one with from's.
 */
static Datum
rp_row_typmod(Datum value, Form_pg_attribute from, Form_pg_attribute to)
{
	Node	   *expr;
	Const	   *c;

	if (to->atttypmod < 0 || from->atttypmod == to->atttypmod)
		return value;
	expr = (Node *) makeConst(from->atttypid, from->atttypmod, from->attcollation,
							  from->attlen, value, false, from->attbyval);
	expr = coerce_to_target_type(NULL, expr, from->atttypid, to->atttypid, to->atttypmod,
								 COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST, -1);
	if (expr == NULL)
		elog(ERROR, "could not coerce type %s to typmod %d",
			 format_type_be(to->atttypid), to->atttypmod);
	c = (Const *) evaluate_expr((Expr *) expr, to->atttypid, to->atttypmod, to->attcollation);
	return c->constvalue;
}

PG_FUNCTION_INFO_V1(rp_lock_name);
Datum
rp_lock_name(PG_FUNCTION_ARGS)
{
	Oid			relid;
	Oid			argtype;
	Relation	rel;
	TupleDesc	desc;
	Oid			guardfn;
	const char *want = PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2));
	RpGuard    *g = NULL;
	Trigger    *gt = NULL;
	int			nbound = 0;
	Datum	   *values;
	bool	   *isnull;
	char	   *name;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fenced_table must not be NULL")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("row_value must not be NULL")));
	relid = PG_GETARG_OID(0);
	argtype = get_fn_expr_argtype(fcinfo->flinfo, 1);

	rel = try_relation_open(relid, AccessShareLock);
	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	desc = RelationGetDescr(rel);

	/* The lock-bound guard: the rp_fence_guard of this function's schema. */
	guardfn = rp_guard_fn(fcinfo);
	for (int i = 0; rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *t = &rel->trigdesc->triggers[i];
		RpGuard    *cand;

		if (t->tgfoid != guardfn || (want && strcmp(t->tgname, want) != 0))
			continue;
		cand = palloc0(sizeof(RpGuard));
		rp_guard_parse(rel, t, cand);
		if (cand->kind != RP_GUARD_LOCK)
			continue;
		nbound++;
		g = cand;
		gt = t;
	}
	if (nbound == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 want ? errmsg("table \"%s\" has no lock-bound rp_fence_guard trigger \"%s\"",
							   RelationGetRelationName(rel), want) :
				 errmsg("table \"%s\" has no lock-bound rp_fence_guard trigger",
						RelationGetRelationName(rel)),
				 errhint("A lock-bound guard is rp_fence_guard('fence_token', 'lock=<name template>').")));
	if (nbound > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("table \"%s\" has %d lock-bound rp_fence_guard triggers",
						RelationGetRelationName(rel), nbound),
				 errhint("Name one: rp_lock_name(table, row, trigger_name => '...').")));
	/* A guard that refuses to run has no name to give. */
	if (g->problems != NIL)
	{
		RpProblem  *p = linitial(g->problems);

		ereport(ERROR,
				(errcode(p->code),
				 errmsg("rp_fence_guard: %s", p->msg),
				 errdetail("Trigger \"%s\" on table \"%s\" cannot guard it; rp_fence_check('%s') lists every problem.",
						   gt->tgname, RelationGetRelationName(rel),
						   quote_identifier(RelationGetRelationName(rel))),
				 p->hint ? errhint("%s", p->hint) : 0));
	}

	values = palloc0(sizeof(Datum) * g->nparts);
	isnull = palloc0(sizeof(bool) * g->nparts);
	if (argtype == JSONBOID)
	{
		/* The template's columns by name, read by their types' input functions. */
		Jsonb	   *jb = PG_GETARG_JSONB_P(1);

		if (!JB_ROOT_IS_OBJECT(jb))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("row_value must be a jsonb object of column values")));
		for (int i = 0; i < g->nparts; i++)
		{
			RpNamePart *p = &g->parts[i];
			Form_pg_attribute att;
			JsonbValue	v;
			char	   *str;
			Oid			infn;
			Oid			ioparam;

			if (p->text)
				continue;
			att = TupleDescAttr(desc, p->attnum - 1);
			str = getKeyJsonValueFromContainer(&jb->root, p->column, strlen(p->column), &v) ?
				rp_jsonb_text(&v) : NULL;
			isnull[i] = str == NULL;
			if (str == NULL)
				continue;
			getTypeInputInfo(att->atttypid, &infn, &ioparam);
			values[i] = OidInputFunctionCall(infn, str, ioparam, att->atttypmod);
		}
	}
	else if (type_is_rowtype(argtype))
	{
		/*
		 * The template's columns by name, of the same types as the table's,
		 * with the table's typmods applied as INSERT applies them.
		 */
		HeapTupleHeader th = PG_GETARG_HEAPTUPLEHEADER(1);
		TupleDesc	rowdesc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(th),
													 HeapTupleHeaderGetTypMod(th));

		for (int i = 0; i < g->nparts; i++)
		{
			RpNamePart *p = &g->parts[i];
			Form_pg_attribute att = TupleDescAttr(desc, p->attnum - 1);
			Oid			want_type = att->atttypid;
			int			found = 0;

			if (p->text)
				continue;
			for (int a = 0; a < rowdesc->natts && !found; a++)
			{
				Form_pg_attribute ra = TupleDescAttr(rowdesc, a);

				if (!ra->attisdropped && strcmp(NameStr(ra->attname), p->column) == 0)
					found = a + 1;
			}
			if (!found)
			{
				ReleaseTupleDesc(rowdesc);
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("row_value has no column \"%s\", which the lock name template \"%s\" names",
								p->column, g->target),
						 errhint("Pass a row of table \"%s\", or a jsonb object of its column values.",
								 RelationGetRelationName(rel))));
			}
			if (TupleDescAttr(rowdesc, found - 1)->atttypid != want_type)
			{
				Oid			got = TupleDescAttr(rowdesc, found - 1)->atttypid;

				ReleaseTupleDesc(rowdesc);
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of row_value is %s, but column \"%s\" of table \"%s\" is %s",
								p->column, format_type_be(got), p->column,
								RelationGetRelationName(rel), format_type_be(want_type))));
			}
			values[i] = GetAttributeByNum(th, found, &isnull[i]);
			if (!isnull[i])
				values[i] = rp_row_typmod(values[i], TupleDescAttr(rowdesc, found - 1), att);
		}
		ReleaseTupleDesc(rowdesc);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("row_value must be a row or a jsonb object, not %s", format_type_be(argtype)),
				 errhint("rp_lock_name('%s', t) FROM %s t, or rp_lock_name('%s', '{\"column\": value}'::jsonb).",
						 RelationGetRelationName(rel), RelationGetRelationName(rel),
						 RelationGetRelationName(rel))));

	name = rp_name_render(g, RelationGetRelationName(rel), values, isnull);
	relation_close(rel, AccessShareLock);
	PG_RETURN_TEXT_P(cstring_to_text(name));
}
