-- How a finished job's sandbox was made: cold (created for the job),
-- prebooted (booted ahead of it by the worker's pool) or restored (from
-- a checkpoint of a booted one). Empty for jobs that never ran.
ALTER TABLE jobs ADD COLUMN sandbox_mode TEXT NOT NULL DEFAULT '';
