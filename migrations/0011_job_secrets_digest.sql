-- 0011_job_secrets_digest: a keyed digest of what a job's record leaves
-- out, its options' secrets (a document's password) and its delivery
-- destination (presigned URLs), so that a request repeating an
-- Idempotency-Key with another password or destination is a conflict.
--
-- HMAC-SHA256 under a key derived from the API's master secret (the
-- webhook secret file every replica shares): the ledger alone cannot test
-- a guessed password. Empty for jobs from before this migration and where
-- the API has no master secret; an empty digest is compared with nothing.

ALTER TABLE jobs ADD COLUMN secrets_digest TEXT NOT NULL DEFAULT '';
