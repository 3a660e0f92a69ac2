-- 0009_job_request_id: the id of the request that submitted a job (see
-- ../0009_job_request_id.sql). Empty for jobs from before this migration.

ALTER TABLE jobs ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
