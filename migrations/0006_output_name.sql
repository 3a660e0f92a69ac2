-- 0006_output_name: the client's base name for a job's outputs.
--
-- `output_name` renames the outputs (report.pdf, report-1.png, …); it is
-- part of what an Idempotency-Key replay must match, like callback_url.
-- Rows from before this migration have '' (the renderer's own names).

ALTER TABLE jobs ADD COLUMN output_name TEXT NOT NULL DEFAULT '';
