-- 0010_job_trace_parent: the W3C traceparent of a job's intake span.
--
-- With tracing on (docs/tracing.md), whichever API replica delivers the
-- job's webhook makes its span a child of the span that took the job in,
-- so the delivery joins the job's trace. Empty when tracing was off, and
-- for jobs from before this migration.

ALTER TABLE jobs ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
