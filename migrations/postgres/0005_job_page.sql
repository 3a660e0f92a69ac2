-- 0005_job_page: what a job's input was taken as, and what its page did
-- (see ../0005_job_page.sql).

ALTER TABLE jobs ADD COLUMN input_type TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN diagnostics JSON NOT NULL DEFAULT '{}';
