-- 0010_job_trace_parent: the W3C traceparent of a job's intake span (see
-- ../0010_job_trace_parent.sql). Empty when tracing was off.

ALTER TABLE jobs ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
