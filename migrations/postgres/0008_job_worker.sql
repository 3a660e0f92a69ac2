-- 0008_job_worker: which worker ran a job, on which rootfs (see
-- ../0008_job_worker.sql). Empty for jobs that ended without a worker and
-- for jobs from before this migration.

ALTER TABLE jobs ADD COLUMN worker TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN rootfs_digest TEXT NOT NULL DEFAULT '';
