/*-------------------------------------------------------------------------
 *
 * fence.c
 *		The resource side of fencing: the trigger rp_fence_guard, the
 *		setting redis_primitives.lease_margin and rp_fence_check(regclass).
 *
 * A guard is one of three kinds, chosen by its trigger arguments (the token
 * column first, then options in any order):
 *   token    ('col' [, 'error'|'skip'] [, 'strict']): the row carries the
 *            token the writer passes; a new token lower than the stored one
 *            is stale (RP001).  'strict': an UPDATE that does not assign the
 *            column is refused (RP004).  1.0's only kind.
 *   lock     ('col', 'lock=account-{id}'): the session must hold a live lease
 *            on the rendered name in its own registry (RP004 otherwise); the
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
 * own definition lives in rp_guard_parse, shared by the trigger (first
 * problem -> ERROR) and rp_fence_check (every problem -> a row).  The
 * trigger runs as the writing user: it reveals the stored token in a
 * message only to a user allowed to SELECT that column.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xact.h"
#include "access/sysattr.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "elector.h"
#include "lock.h"
#include "redis_primitives.h"

#define ERRCODE_RP_STALE_FENCE	MAKE_SQLSTATE('R', 'P', '0', '0', '1')
#define ERRCODE_RP_NO_LEASE		MAKE_SQLSTATE('R', 'P', '0', '0', '4')

/* redis_primitives.lease_margin, ms */
static int	rp_lease_margin_ms = 100;

typedef enum RpGuardKind
{
	RP_GUARD_TOKEN,
	RP_GUARD_LOCK,
	RP_GUARD_LEADER
} RpGuardKind;

/* One piece of a lock name template: literal text, or a column's value. */
typedef struct RpNamePart
{
	char	   *text;			/* literal, or NULL for a column */
	int			attnum;
	FmgrInfo	out;			/* the column type's output function */
} RpNamePart;

/* Something that stops a guard from working. */
typedef struct RpProblem
{
	int			code;
	char	   *msg;
	char	   *hint;			/* or NULL */
} RpProblem;

/* One trigger's definition, parsed once per statement (fn_extra). */
typedef struct RpGuard
{
	RpGuardKind kind;
	bool		skip;
	bool		strict;
	const char *column;
	int			attnum;			/* token column, 0 when not found */
	Oid			typid;			/* as declared: maybe a domain */
	Oid			basetype;		/* INT2OID, INT4OID or INT8OID */
	void	   *domain_extra;	/* domain_check's cache */
	const char *target;			/* lock template or election name */
	int			nparts;
	RpNamePart *parts;
	List	   *problems;		/* of RpProblem *, NIL when it can work */
} RpGuard;

static void rp_commit_remember(bool leader, const char *name, int64 fence);

void
rp_fence_init(void)
{
	DefineCustomIntVariable("redis_primitives.lease_margin",
							"Time before a lease's local deadline at which a lock-bound fence guard stops accepting writes under it.",
							"A lock-bound guard accepts a write while (time the acquire was sent) + ttl - lease_margin has not passed.  The margin absorbs clock rate differences between this machine and Redis and the time from the write to its commit.",
							&rp_lease_margin_ms, 100, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
}

/* ------------------------------------------------------------------------
 * The guard's definition.
 * ------------------------------------------------------------------------
 */

static void
rp_problem(RpGuard *g, int code, const char *hint, const char *fmt,...)
pg_attribute_printf(4, 5);

static void
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

#define RP_MISUSE	ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED

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
static void
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
					   "Options are 'error' (the default) or 'skip', 'strict', 'lock=<name template>' and 'leader=<election>'.",
					   "unknown option \"%s\"", opt);
	}
	if (g->strict && g->kind != RP_GUARD_TOKEN)
		rp_problem(g, RP_MISUSE,
				   "A lock- or leader-bound guard sets the column itself; 'strict' is for guards whose writers pass the token.",
				   "'strict' cannot be combined with '%s'", g->kind == RP_GUARD_LOCK ? "lock=" : "leader=");
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

/* The lock name of tuple, rendered from the template. */
static char *
rp_lock_name(RpGuard *g, Relation rel, HeapTuple tuple)
{
	StringInfoData s;
	TupleDesc	desc = RelationGetDescr(rel);

	initStringInfo(&s);
	for (int i = 0; i < g->nparts; i++)
	{
		RpNamePart *p = &g->parts[i];
		bool		isnull;
		Datum		d;

		if (p->text)
		{
			appendStringInfoString(&s, p->text);
			continue;
		}
		d = heap_getattr(tuple, p->attnum, desc, &isnull);
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("column \"%s\" of table \"%s\" is NULL, so the row has no lock name",
							NameStr(TupleDescAttr(desc, p->attnum - 1)->attname),
							RelationGetRelationName(rel)),
					 errdetail("The guard's lock name template is \"%s\".", g->target)));
		appendStringInfoString(&s, OutputFunctionCall(&p->out, d));
	}
	return s.data;
}

/*
 * The fence this session may write under: the fence of its live lease on
 * name (lock-bound), or this server's epoch for the election (leader-bound).
 * RP004 when there is none.
 */
static int64
rp_live_fence(RpGuard *g, Relation rel, const char *name)
{
	int64		fence;

	if (g->kind == RP_GUARD_LOCK)
	{
		TimestampTz expires_at;
		TimestampTz now = GetCurrentTimestamp();

		if (!rp_lease_lookup(name, strlen(name), &fence, &expires_at))
			ereport(ERROR,
					(errcode(ERRCODE_RP_NO_LEASE),
					 errmsg("no lease on \"%s\" for a write to table \"%s\"",
							name, RelationGetRelationName(rel)),
					 errdetail("This session holds no lease on the lock the row is bound to."),
					 errhint("Take it first: rp_acquire('%s', ttl_ms).", name)));
		if (TimestampTzPlusMilliseconds(expires_at, -(int64) rp_lease_margin_ms) <= now)
			ereport(ERROR,
					(errcode(ERRCODE_RP_NO_LEASE),
					 errmsg("lease on \"%s\" has expired for a write to table \"%s\"",
							name, RelationGetRelationName(rel)),
					 errdetail("The lease with fence token " INT64_FORMAT " ran out at %s (redis_primitives.lease_margin is %d ms).",
							   fence, timestamptz_to_str(expires_at), rp_lease_margin_ms),
					 errhint("Another holder may have the lock now.  Acquire it again and redo the work from a fresh read.")));
		rp_commit_remember(false, name, fence);
		return fence;
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
	if (pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), ACL_SELECT) == ACLCHECK_OK ||
		pg_attribute_aclcheck(RelationGetRelid(rel), g->attnum, GetUserId(),
							  ACL_SELECT) == ACLCHECK_OK)
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
 * The commit-time check.  A write is checked when it is made, but takes
 * effect at commit: a transaction that commits after the lease it wrote
 * under ran out (or was released) would publish a write the next holder may
 * already have read past.  Every lease (or term) a bound guard accepted a
 * write under is remembered for the transaction and checked again, with no
 * round trip, at PRE_COMMIT: RP004 aborts the commit.
 * ------------------------------------------------------------------------
 */

typedef struct RpCommitCheck
{
	bool		leader;
	char	   *name;			/* lock name or election */
	int64		fence;			/* the fence (epoch) written under */
	SubTransactionId subid;		/* subtransaction that wrote under it */
} RpCommitCheck;

static List *rp_commit_checks = NIL;	/* in TopTransactionContext */
static bool rp_fence_callback_registered = false;

static void
rp_fence_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event != XACT_EVENT_PRE_COMMIT && event != XACT_EVENT_PARALLEL_PRE_COMMIT &&
		event != XACT_EVENT_PRE_PREPARE)
	{
		/* Commit, abort, prepare: the list went with TopTransactionContext. */
		rp_commit_checks = NIL;
		return;
	}
	/* COMMIT PREPARED may come at any time, after any lease ran out. */
	if (event == XACT_EVENT_PRE_PREPARE && rp_commit_checks != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that made lease-bound fenced writes"),
				 errdetail("A fenced write takes effect at commit, which must come before its lease's deadline; COMMIT PREPARED has none.")));
	foreach(lc, rp_commit_checks)
	{
		RpCommitCheck *c = lfirst(lc);
		int64		fence;
		TimestampTz expires_at;
		bool		live;

		if (c->leader)
			live = rp_election_believed(c->name, strlen(c->name), &fence);
		else
			live = rp_lease_lookup(c->name, strlen(c->name), &fence, &expires_at) &&
				TimestampTzPlusMilliseconds(expires_at, -(int64) rp_lease_margin_ms) >
				GetCurrentTimestamp();
		if (!live || fence != c->fence)
			ereport(ERROR,
					(errcode(ERRCODE_RP_NO_LEASE),
					 errmsg(c->leader ? "leadership of \"%s\" was lost before commit" :
							"lease on \"%s\" is no longer live at commit", c->name),
					 errdetail("A fenced write of this transaction was made under fence token " INT64_FORMAT
							   ", which is no longer live: the write would take effect after another holder may have taken over.",
							   c->fence),
					 errhint("The transaction was rolled back.  Commit before the lease's deadline (minus redis_primitives.lease_margin), and release the lease only after the commit.")));
	}
}

/*
 * A subtransaction that rolls back takes its writes with it, and their
 * checks; one that commits hands them to its parent.
 */
static void
rp_fence_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	foreach(lc, rp_commit_checks)
	{
		RpCommitCheck *c = lfirst(lc);

		if (c->subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
			rp_commit_checks = foreach_delete_current(rp_commit_checks, lc);
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
			c->subid = parentSubid;
	}
}

/* Remember that a write was accepted under (name, fence). */
static void
rp_commit_remember(bool leader, const char *name, int64 fence)
{
	ListCell   *lc;
	MemoryContext old;
	RpCommitCheck *c;

	SubTransactionId subid = GetCurrentSubTransactionId();

	foreach(lc, rp_commit_checks)
	{
		c = lfirst(lc);
		if (c->leader == leader && c->fence == fence && c->subid == subid &&
			strcmp(c->name, name) == 0)
			return;
	}
	if (!rp_fence_callback_registered)
	{
		RegisterXactCallback(rp_fence_xact_callback, NULL);
		RegisterSubXactCallback(rp_fence_subxact_callback, NULL);
		rp_fence_callback_registered = true;
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	c = palloc(sizeof(RpCommitCheck));
	c->leader = leader;
	c->name = pstrdup(name);
	c->fence = fence;
	c->subid = subid;
	rp_commit_checks = lappend(rp_commit_checks, c);
	MemoryContextSwitchTo(old);
}

/* ------------------------------------------------------------------------
 * The trigger.
 * ------------------------------------------------------------------------
 */

static void rp_fence_misuse(const char *msg) pg_attribute_noreturn();

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
	{
		if (newtuple)
			newname = rp_lock_name(g, rel, newtuple);
		if (oldtuple)
			oldname = rp_lock_name(g, rel, oldtuple);
	}
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
