-- 0004_job_limits: the validated limits a job was submitted with.
--
-- An Idempotency-Key replay must match the first request in everything but
-- the key (renderer, options, limits, input, callback_url); options were
-- already kept, limits were not. Rows from before this migration have '{}'.

ALTER TABLE jobs ADD COLUMN limits TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(limits));
