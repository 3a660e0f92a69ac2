-- 0008_job_worker: which worker ran a job, on which rootfs.
--
-- worker is the -name of the worker that reported the job's end (its
-- hostname by default); rootfs_digest is the digest of the rootfs tree it
-- verified at start (its manifest's tree_sha256, what `worker rootfs
-- export` names an archive by), so a job's output can be traced to the
-- renderers that made it. Both are empty for jobs that ended without a
-- worker (canceled while queued) and for jobs from before this migration.

ALTER TABLE jobs ADD COLUMN worker TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN rootfs_digest TEXT NOT NULL DEFAULT '';
