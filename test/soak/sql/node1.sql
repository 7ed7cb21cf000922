-- soak/sql/node1.sql -- the counter tables of the first server, one per guard
-- mode, t_naive (the naive twin: no guard) and the audited fenced store.
SELECT soak_counter_table('t_token',  $$'fence_token'$$);
SELECT soak_counter_table('t_skip',   $$'fence_token', 'skip'$$);
SELECT soak_counter_table('t_strict', $$'fence_token', 'strict'$$);
SELECT soak_counter_table('t_lock',   $$'fence_token', 'lock=L-{id}'$$);
SELECT soak_counter_table('t_naive',  NULL);

-- rp_fenced_write's store, audited the same way (resource = id).
CREATE TRIGGER soak_audit AFTER INSERT OR UPDATE ON rp_fenced_store
  FOR EACH ROW EXECUTE FUNCTION soak_audit('fence');
INSERT INTO rp_fenced_store (resource, value, fence)
  SELECT 'F-' || i, '{"op": null}', 0 FROM generate_series(1, 4) i;
TRUNCATE soak_audit;
