-- Push (issue 15) and media (issue 16), second part.

-- A sender's balance level as last announced (ok | warning | low; NULL: never looked at). The level
-- moves with a conditional UPDATE, so a crossing is announced once even when two relayer processes
-- read the same balance (relayer/engine/balance-level.ts).
ALTER TABLE relay_senders ADD COLUMN balance_level TEXT;

-- Whether a finished refresh task's refresh.task_finished event was written: every path that ends a
-- task (items done, cancel, an enumeration failure) sets it in the same transaction, once.
ALTER TABLE tasks ADD COLUMN finish_announced BOOLEAN NOT NULL DEFAULT false;
UPDATE tasks SET finish_announced = true WHERE status IN ('DONE', 'FAILED');

-- Contract media (logoURI, extensions.ogImage) live in media_assets beside token media, with
-- token_id '' and field 'logo' / 'og_image', so blob collection sees their references too.
