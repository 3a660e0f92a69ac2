-- 0004_job_limits: the validated limits a job was submitted with (see
-- ../0004_job_limits.sql). Rows from before this migration have '{}'.

ALTER TABLE jobs ADD COLUMN limits JSON NOT NULL DEFAULT '{}';
