-- Fields whose bytes the blob store refused (disk full, not writable, S3 errors), found by their due
-- time: the background process fetches them again (media/store-retry.ts), without reading every asset.
CREATE INDEX media_assets_store_failed ON media_assets (retry_after) WHERE status = 'FAILED' AND failure_reason = 'STORE_FAILED';
