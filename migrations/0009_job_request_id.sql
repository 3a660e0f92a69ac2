-- 0009_job_request_id: the id of the request that submitted a job.
--
-- The API's X-Request-Id for the POST that created the job (its own, or
-- the one a trusted proxy sent), so a job can be traced to the access log
-- line and the worker's log lines that carry the same id. Empty for jobs
-- from before this migration.

ALTER TABLE jobs ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
