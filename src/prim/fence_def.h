/*-------------------------------------------------------------------------
 *
 * fence_def.h
 *		The fence guard's definition (parsed from its trigger), shared by the
 *		trigger (fence.c), rp_fence_check (fence_def.c) and the lock name
 *		(fence_name.c).
 *
 * Before editing, know this: every check of a guard's own definition lives
 * in rp_guard_parse, so that what the trigger refuses to run with and what
 * rp_fence_check reports can never disagree.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_FENCE_DEF_H
#define RP_FENCE_DEF_H

#include "postgres.h"

#include "commands/trigger.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/rel.h"

#include "errcodes.h"

typedef enum RpGuardKind
{
	RP_GUARD_TOKEN,
	RP_GUARD_LOCK,
	RP_GUARD_LEADER
} RpGuardKind;

/* The output settings a value's text can depend on (fence_name.c pins them). */
#define RP_PIN_TIMEZONE			0x01
#define RP_PIN_DATESTYLE		0x02
#define RP_PIN_INTERVALSTYLE	0x04
#define RP_PIN_FLOAT			0x08
#define RP_PIN_BYTEA			0x10
#define RP_PIN_MONETARY			0x20
#define RP_PIN_ALL				0x3f

/* One piece of a lock name template: literal text, or a column's value. */
typedef struct RpNamePart
{
	char	   *text;			/* literal, or NULL for a column */
	int			attnum;
	char	   *column;			/* the column's name */
	int			pins;			/* RP_PIN_* its type's text depends on */
	FmgrInfo	out;			/* the column type's output function */
} RpNamePart;

/* Something that stops a guard from working. */
typedef struct RpProblem
{
	int			code;
	char	   *msg;
	char	   *hint;			/* or NULL */
	bool		at_create;		/* CREATE TRIGGER refuses it too */
} RpProblem;

/* One trigger's definition, parsed once per statement (fn_extra). */
typedef struct RpGuard
{
	RpGuardKind kind;
	bool		skip;
	bool		strict;
	bool		this_xact;		/* 'xact': only a lease this transaction took */
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


#define RP_MISUSE	ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED

extern void rp_guard_parse(Relation rel, Trigger *trig, RpGuard *g);
/* The rp_fence_guard of the schema of the function fcinfo calls (no privilege check). */
extern Oid	rp_guard_fn(FunctionCallInfo fcinfo);
extern void rp_problem(RpGuard *g, int code, const char *hint, const char *fmt,...) pg_attribute_printf(4, 5);

/* fence_name.c */
extern int	rp_name_type_pins(Oid typid, Oid *refused);
extern char *rp_name_render(RpGuard *g, const char *relname,
							const Datum *values, const bool *isnull);

#endif							/* RP_FENCE_DEF_H */
