-- Fair shares of webhook deliveries (issue 54, finding 8). A delivery names its endpoint's project, so
-- the delivery worker's claim can take the oldest due rows of each project in turn (a skip scan of this
-- index over the projects with pending rows) instead of the oldest rows of everyone: one project's
-- flood of deliveries no longer queues every other project's behind it.
ALTER TABLE webhook_deliveries ADD COLUMN project_id BIGINT;
UPDATE webhook_deliveries d SET project_id = w.project_id FROM webhooks w WHERE w.id = d.webhook_id;
ALTER TABLE webhook_deliveries ALTER COLUMN project_id SET NOT NULL;
CREATE INDEX webhook_deliveries_project_due_idx ON webhook_deliveries (project_id, next_attempt_at, id) WHERE status = 'PENDING';

-- Logs a listener was not told because its project had reached webhooks.maxListenerDeliveriesPerBlock
-- in their block: counted here (answered with the listener), never dropped silently.
ALTER TABLE indexer_listeners ADD COLUMN dropped_logs BIGINT NOT NULL DEFAULT 0;
ALTER TABLE indexer_listeners ADD COLUMN last_dropped_block BIGINT;
