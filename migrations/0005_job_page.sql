-- 0005_job_page: what a job's input was taken as, and what its page did.
--
-- input_type is the input's media type as the catalogue took it (sniffed,
-- or declared by the client with input_type); '' for rows from before.
-- diagnostics is a JSON object of what a page asked for and could not have
-- and what it logged as errors (refused_requests, missing_files,
-- console_errors); '{}' when there is nothing to say.

ALTER TABLE jobs ADD COLUMN input_type TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN diagnostics TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(diagnostics));
