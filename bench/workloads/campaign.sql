-- title: rp_campaign, renewing a term it holds
-- clients: 1 8
-- baseline: select1
-- redis-calls: 1
-- floor: campaign
SELECT rp_campaign('bench-camp-' || :client_id, 'node-' || :client_id, 10000);
