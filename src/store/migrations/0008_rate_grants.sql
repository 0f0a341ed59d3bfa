-- A take may grant several tokens at once (a process spends them locally); the grant is returned here.
ALTER TABLE rate_buckets ADD COLUMN last_grant DOUBLE PRECISION NOT NULL DEFAULT 1;
