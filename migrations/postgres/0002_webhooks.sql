-- 0002_webhooks: the outbox of job webhooks (PostgreSQL; see
-- ../0002_webhooks.sql).
--
-- A row is written in the same transaction that moves a job with a
-- callback_url to a terminal state. Deliverers in every API replica claim
-- due rows with SELECT … FOR UPDATE SKIP LOCKED and push next_at past a
-- lease; a deliverer that dies mid-attempt loses its claim when the lease
-- runs out, and another one retries.

CREATE TABLE webhooks (
    job_id       TEXT    COLLATE "C" NOT NULL PRIMARY KEY REFERENCES jobs (id),
    url          TEXT    NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts     INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_at      BIGINT  NOT NULL,               -- when the next attempt is due (or a claim expires)
    last_status  INTEGER,                        -- HTTP status of the latest answer; NULL when none came
    last_error   TEXT    NOT NULL DEFAULT '',
    finished_at  BIGINT                          -- delivered or given up
);

-- The deliverer's scan: pending rows by due time.
CREATE INDEX webhooks_due ON webhooks (state, next_at);
