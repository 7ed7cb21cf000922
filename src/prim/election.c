/*-------------------------------------------------------------------------
 *
 * election.c
 *		Leader election: the SQL functions rp_campaign,
 *		rp_resign, rp_is_leader(name, node_id), rp_leader (each one Lua
 *		script, one round trip), rp_is_leader(name) and rp_elections (which
 *		read the background elector's shared memory, no round trip).
 *
 * Keys of an election "name", under the server-wide key_prefix
 * (rp_election_key):
 *   <prefix>{name}:leader  a hash {node = node_id, epoch = N} with the lease
 *                          as its PX expiry
 *   <prefix>{name}:lock    the name's lease lock, held by the term
 *   <prefix>{name}:fence   the name's one fence counter
 * An election is the lock of its name held by a node (docs/decisions/0004):
 * an epoch is that holder's fence token, no lock holder and leader of one
 * name ever overlap, and rp_lock_info(name) reports the leader's epoch.
 *
 * Before editing, know this: rp_is_leader(name, node_id) asks Redis *now*
 * and is stale the moment it returns; rp_is_leader(name) is the elector's
 * belief, bounded by a deadline computed from when its renewal was sent
 * (see elector.c).  Neither replaces the epoch on every side effect.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "args.h"
#include "conn.h"
#include "election.h"
#include "elector.h"
#include "errcodes.h"
#include "replicas.h"
#include "rp_scripts.h"
#include "stats.h"

/* ------------------------------------------------------------------------
 * SQL functions that ask Redis.
 * ------------------------------------------------------------------------
 */

/*
 * With fence_replicas > 0: WAIT until that many replicas hold what the
 * campaign wrote (a new term's epoch, a renewal's lease), as rp_acquire
 * does for a fence token.  Too few in time: the term is resigned (that
 * epoch only, so a term someone else won meanwhile is untouched) and RP003
 * raised, rather than return an epoch a failover could issue again.
 * keys are the campaign's: leader, fence, lock.
 */
static void
rp_campaign_wait_replicas(const char *name, const RpArg *keys, text *node, int64 epoch)
{
	int64		acked;
	int			timeout;
	RpArg		rkeys[2];
	RpArg		argv[2];

	if (rp_fence_replicas <= 0)
		return;
	acked = rp_replicas_wait(0, &timeout);
	if (acked >= rp_fence_replicas)
		return;
	rkeys[0] = keys[0];
	rkeys[1] = keys[2];
	argv[0].data = VARDATA_ANY(node);
	argv[0].len = VARSIZE_ANY_EXHDR(node);
	argv[1] = rp_arg_int(epoch);
	(void) rp_eval(&rp_script_election_resign, 2, rkeys, 2, argv);
	ereport(ERROR,
			(errcode(ERRCODE_RP_NOT_REPLICATED),
			 errmsg("epoch of election \"%s\" was not replicated", name),
			 errdetail(INT64_FORMAT " of %d replica(s) acknowledged epoch " INT64_FORMAT
					   " within %d ms; the term was resigned.",
					   acked, rp_fence_replicas, epoch, timeout),
			 errhint("A failover now could issue this epoch again.  Check the replicas, or lower redis_primitives.fence_replicas.")));
}

/*
 * rp_campaign(name, node_id, lease_ms [, floor]) -> epoch, or NULL when
 * another node (or a lock holder of the name) has it.  A 1.0 catalog calls
 * it with three arguments: floor 0.
 */
RP_TRACKED_FUNCTION(rp_campaign, RP_PRIM_CAMPAIGN, RP_OUT_NULL_REFUSED)
{
	text	   *name = rp_arg_text(fcinfo, 0, "election name");
	text	   *node = rp_arg_text(fcinfo, 1, "node_id");
	int64		lease_ms = rp_arg_int8(fcinfo, 2, "lease_ms", 1, RP_MAX_TTL_MS);
	int64		floor = PG_NARGS() > 3 ?
		rp_arg_int8(fcinfo, 3, "floor", 0, PG_INT64_MAX - 1) : 0;
	const char *n = VARDATA_ANY(name);
	size_t		nlen = VARSIZE_ANY_EXHDR(name);
	RpArg		keys[3];
	RpArg		argv[4];
	RpReply    *r;
	int64		epoch;

	keys[0] = rp_election_key(n, nlen, "leader");
	keys[1] = rp_election_key(n, nlen, "fence");
	keys[2] = rp_election_key(n, nlen, "lock");
	argv[0].data = VARDATA_ANY(node);
	argv[0].len = VARSIZE_ANY_EXHDR(node);
	argv[1] = rp_arg_int(lease_ms);
	argv[2] = rp_arg_str("");
	argv[3] = rp_arg_int(floor);
	r = rp_eval(&rp_script_election_campaign, 3, keys, 4, argv);
	if (r->type != RP_REPLY_STRING)
	{
		if (r->type == RP_REPLY_ARRAY && r->nelem == 2 &&
			r->elem[1]->type == RP_REPLY_STRING)
			rp_elector_note_epoch(n, nlen, pg_strtoint64(r->elem[1]->str));
		PG_RETURN_NULL();
	}
	epoch = pg_strtoint64(r->str);
	rp_elector_note_epoch(n, nlen, epoch);
	rp_campaign_wait_replicas(text_to_cstring(name), keys, node, epoch);
	PG_RETURN_INT64(epoch);
}

/* rp_resign(name, node_id) -> true when node_id led and no longer does */
RP_TRACKED_FUNCTION(rp_resign, RP_PRIM_RESIGN, RP_OUT_FALSE_REFUSED)
{
	text	   *name = rp_arg_text(fcinfo, 0, "election name");
	text	   *node = rp_arg_text(fcinfo, 1, "node_id");
	RpArg		keys[2];
	RpArg		argv[1];

	keys[0] = rp_election_key(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), "leader");
	keys[1] = rp_election_key(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), "lock");
	argv[0].data = VARDATA_ANY(node);
	argv[0].len = VARSIZE_ANY_EXHDR(node);
	PG_RETURN_BOOL(rp_reply_int(rp_eval(&rp_script_election_resign, 2, keys, 1, argv),
								"election_resign") == 1);
}

/* The election_leader reply: NULL when nobody leads. */
static RpReply *
rp_ask_leader(text *name)
{
	RpArg		keys[1];
	RpReply    *r;

	keys[0] = rp_election_key(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), "leader");
	r = rp_eval(&rp_script_election_leader, 1, keys, 0, NULL);
	if (r->type != RP_REPLY_ARRAY)
		return NULL;
	if (r->nelem != 3 || r->elem[0]->type != RP_REPLY_STRING ||
		r->elem[1]->type != RP_REPLY_STRING)
		elog(ERROR, "unexpected Redis reply for election_leader");
	return r;
}

/* rp_is_leader(name, node_id) -> does node_id lead, according to Redis now */
RP_TRACKED_FUNCTION(rp_is_leader_node, RP_PRIM_LEADER, RP_OUT_PLAIN)
{
	text	   *name = rp_arg_text(fcinfo, 0, "election name");
	text	   *node = rp_arg_text(fcinfo, 1, "node_id");
	RpReply    *r = rp_ask_leader(name);

	PG_RETURN_BOOL(r != NULL &&
				   r->elem[0]->len == VARSIZE_ANY_EXHDR(node) &&
				   memcmp(r->elem[0]->str, VARDATA_ANY(node), r->elem[0]->len) == 0);
}

/* rp_leader(name) -> (node_id, epoch, ttl_ms), all NULL when nobody leads */
RP_TRACKED_FUNCTION(rp_leader, RP_PRIM_LEADER, RP_OUT_PLAIN)
{
	text	   *name = rp_arg_text(fcinfo, 0, "election name");
	RpReply    *r = rp_ask_leader(name);
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {true, true, true};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (r != NULL)
	{
		int64		pttl = rp_reply_int(r->elem[2], "election_leader");

		values[0] = PointerGetDatum(cstring_to_text_with_len(r->elem[0]->str,
															 r->elem[0]->len));
		values[1] = Int64GetDatum(pg_strtoint64(r->elem[1]->str));
		nulls[0] = nulls[1] = false;
		/* -1: no expiry (set by hand); the key cannot be absent here. */
		if (pttl >= 0)
		{
			values[2] = Int64GetDatum(pttl);
			nulls[2] = false;
		}
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}

/* ------------------------------------------------------------------------
 * SQL functions that read the elector's shared memory.
 * ------------------------------------------------------------------------
 */

/* The one definition of "this server leads": before the deadline. */
static bool
rp_state_is_leader(const RpElectionState *s)
{
	return s->leading && s->epoch > 0 && s->valid_until_us > 0 &&
		rp_elector_clock_us() < s->valid_until_us;
}

bool
rp_election_believed(const char *name, size_t namelen, int64 *epoch)
{
	RpElectionState s;

	if (!rp_elector_available() || !rp_elector_lookup(name, namelen, &s) ||
		!rp_state_is_leader(&s))
		return false;
	*epoch = s.epoch;
	return true;
}

/* rp_is_leader(name) -> the background elector's belief, no round trip */
PG_FUNCTION_INFO_V1(rp_is_leader_local);
Datum
rp_is_leader_local(PG_FUNCTION_ARGS)
{
	text	   *name = rp_arg_text(fcinfo, 0, "election name");
	RpElectionState s;

	if (!rp_elector_available())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the redis_primitives background elector is not running"),
				 errdetail("rp_is_leader(name) answers from the elector's shared memory, which exists only when the library is preloaded."),
				 errhint("Add redis_primitives to shared_preload_libraries and restart, or ask Redis with rp_is_leader(name, node_id).")));
	if (!rp_elector_lookup(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), &s))
	{
		/* Configured, but the elector has not published it (yet). */
		if (rp_elector_configured(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name)))
			PG_RETURN_BOOL(false);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("election \"%s\" is not run by this server's elector",
						text_to_cstring(name)),
				 errhint("Add it to redis_primitives.elections and reload, or ask Redis with rp_is_leader(name, node_id).")));
	}
	PG_RETURN_BOOL(rp_state_is_leader(&s));
}

/* rp_elections() -> one row per election the elector runs */
PG_FUNCTION_INFO_V1(rp_elections_list);
Datum
rp_elections_list(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RpElectionState *all = palloc(sizeof(RpElectionState) * RP_MAX_ELECTIONS);
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	n = rp_elector_snapshot(all);
	for (int i = 0; i < n; i++)
	{
		RpElectionState *s = &all[i];
		Datum		values[9];
		bool		nulls[9] = {false, false, false, false, false, false, false, false, false};

		values[0] = CStringGetTextDatum(s->name);
		values[1] = CStringGetTextDatum(s->node_id);
		values[2] = BoolGetDatum(rp_state_is_leader(s));
		values[3] = Int64GetDatum(s->epoch);
		nulls[3] = !s->leading;
		values[4] = TimestampTzGetDatum(s->leader_since);
		nulls[4] = s->leader_since == 0;
		values[5] = TimestampTzGetDatum(s->valid_until);
		nulls[5] = s->valid_until == 0;
		values[6] = TimestampTzGetDatum(s->last_renewal);
		nulls[6] = s->last_renewal == 0;
		values[7] = CStringGetTextDatum(s->last_error);
		nulls[7] = s->last_error[0] == '\0';
		values[8] = CStringGetTextDatum(s->standby ? "standby" :
										s->leading ? "leader" : "follower");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
