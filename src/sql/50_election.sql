-- Leader election.  Leadership is the lock of its name held by a node; the
-- epoch is that holder's token of the name's fence counter, so
-- rp_fenced_write and rp_fence_guard refuse a deposed leader's epoch.  None of these functions is
-- STRICT: a NULL argument is an error (22004), never a NULL result that would
-- read as "not leader".

-- #begin campaign
CREATE FUNCTION @extschema@.rp_campaign(name pg_catalog.text, node_id pg_catalog.text,
                                        lease_ms pg_catalog.int8,
                                        floor pg_catalog.int8 DEFAULT 0)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'rp_campaign'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_campaign(pg_catalog.text, pg_catalog.text, pg_catalog.int8, pg_catalog.int8) IS
  'Become leader of name as node_id for lease_ms (a new epoch above floor), or renew if already leader (same epoch); returns the epoch, NULL when another node or a lock holder has the name';
-- #end campaign

CREATE FUNCTION @extschema@.rp_resign(name pg_catalog.text, node_id pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_resign'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_resign(pg_catalog.text, pg_catalog.text) IS
  'Give up the leadership of name; false when node_id does not lead it';

CREATE FUNCTION @extschema@.rp_is_leader(name pg_catalog.text, node_id pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_is_leader_node'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_is_leader(pg_catalog.text, pg_catalog.text) IS
  'Does node_id lead name, according to Redis now (stale as soon as it returns: carry the epoch)';

CREATE FUNCTION @extschema@.rp_leader(name pg_catalog.text,
                                      OUT node_id pg_catalog.text, OUT epoch pg_catalog.int8,
                                      OUT ttl_ms pg_catalog.int8)
RETURNS record
AS 'MODULE_PATHNAME', 'rp_leader'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rp_leader(pg_catalog.text) IS
  'Who leads name in Redis now, with its epoch and remaining lease; all NULL when nobody leads';

-- Reads shared memory only, but the answer changes with time: VOLATILE.
CREATE FUNCTION @extschema@.rp_is_leader(name pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'rp_is_leader_local'
LANGUAGE C VOLATILE PARALLEL SAFE;
-- #begin is_leader_comment
COMMENT ON FUNCTION @extschema@.rp_is_leader(pg_catalog.text) IS
  'This server''s background elector leads name, before its lease deadline; no round trip.  False for a configured election the elector does not run yet; errors for a name not in redis_primitives.elections';
-- #end is_leader_comment

CREATE FUNCTION @extschema@.rp_elections(
    OUT name pg_catalog.text, OUT node_id pg_catalog.text, OUT is_leader pg_catalog.bool,
    OUT epoch pg_catalog.int8, OUT leader_since pg_catalog.timestamptz,
    OUT valid_until pg_catalog.timestamptz, OUT last_renewal pg_catalog.timestamptz,
    OUT last_error pg_catalog.text, OUT state pg_catalog.text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rp_elections_list'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.rp_elections() IS
  'Every election of this server''s background elector.  is_leader is the deadline-bounded belief; state is the elector''s own last view, which a stalled elector cannot update: never gate on state';
