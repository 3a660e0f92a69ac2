-- 0011_job_secrets_digest: a keyed digest of a job's secret options and
-- delivery destination (see ../0011_job_secrets_digest.sql). Empty when
-- not known.

ALTER TABLE jobs ADD COLUMN secrets_digest TEXT NOT NULL DEFAULT '';
