-- Sponsorship spend in shards (relayer/intake/spend-caps.ts, issue #53): every sponsored intake charged
-- its rule's one gas_sponsors row (and the rule's one sponsor_spend row of the day) under a row lock, so
-- every intake of every process took turns on it; with three `serve` processes on one database most
-- backends waited on that row. A rule's spend is now kept in up to `relayer.sponsorSpendShards` rows,
-- one per shard (a backend charges the one of its pid); the rule's spend is their sum. Each shard row
-- holds the share of each budget it may spend alone (room_*: NULL is no limit), valid for `day` and
-- while the rule's caps are still those it was shared out under (room_caps; NULL: no room yet): a
-- charge within it locks that row alone; past it,
-- the charge takes the rule's row and shares out what is left of the budgets (the shards' rooms never
-- add up to more than a budget).
CREATE TABLE sponsor_spend_shards (
  sponsor_id      BIGINT NOT NULL,
  shard           INTEGER NOT NULL,
  day             DATE NOT NULL,
  today_wei       NUMERIC(78, 0) NOT NULL DEFAULT 0,
  today_usd       NUMERIC(78, 0) NOT NULL DEFAULT 0,
  total_wei       NUMERIC(78, 0) NOT NULL DEFAULT 0,
  total_usd       NUMERIC(78, 0) NOT NULL DEFAULT 0,
  room_day_wei    NUMERIC(78, 0),
  room_day_usd    NUMERIC(78, 0),
  room_total_wei  NUMERIC(78, 0),
  room_total_usd  NUMERIC(78, 0),
  room_caps       TEXT,
  PRIMARY KEY (sponsor_id, shard)
);

-- What was spent so far goes to shard 0 (today's from the day's row), with no room: the first charge shares out.
INSERT INTO sponsor_spend_shards (sponsor_id, shard, day, today_wei, today_usd, total_wei, total_usd)
SELECT g.id, 0, (now() AT TIME ZONE 'UTC')::date, COALESCE(s.spent_wei, 0), COALESCE(s.spent_usd, 0), g.spent_wei, g.spent_usd
  FROM gas_sponsors g LEFT JOIN sponsor_spend s ON s.sponsor_id = g.id AND s.day = (now() AT TIME ZONE 'UTC')::date;

-- The shard a charge went to, so a refund or a settlement moves that shard's counters.
ALTER TABLE sponsor_charges ADD COLUMN shard INTEGER NOT NULL DEFAULT 0;

ALTER TABLE gas_sponsors DROP COLUMN spent_wei;
ALTER TABLE gas_sponsors DROP COLUMN spent_usd;
DROP TABLE sponsor_spend;
