-- 0006_output_name: the client's base name for a job's outputs (see
-- ../0006_output_name.sql). Rows from before this migration have ''.

ALTER TABLE jobs ADD COLUMN output_name TEXT NOT NULL DEFAULT '';
