-- 0001_init: API keys and the durable job record (PostgreSQL).
--
-- The same schema as ../0001_init.sql. Times are BIGINT unix nanoseconds,
-- UTC, as in SQLite: a cursor and a finish time are exact to the
-- nanosecond on either backend (timestamptz keeps microseconds). JSON
-- columns are json, not jsonb: json keeps the text as written, and an
-- Idempotency-Key replay compares options by the bytes the API recorded.
-- Ids are COLLATE "C": listings break created_at ties by id in byte
-- order, as SQLite does, whatever the database's default collation.

CREATE TABLE api_keys (
    id            TEXT   COLLATE "C" NOT NULL PRIMARY KEY,  -- key_<hex>
    name          TEXT   NOT NULL,
    secret_sha256 TEXT   NOT NULL,              -- sha256 hex of the whole secret; the secret itself is never stored
    created_at    BIGINT NOT NULL,
    revoked_at    BIGINT                        -- NULL while the key is usable
);

CREATE TABLE jobs (
    id              TEXT    COLLATE "C" NOT NULL PRIMARY KEY,
    owner           TEXT    COLLATE "C" NOT NULL REFERENCES api_keys (id),
    renderer        TEXT    NOT NULL,
    options         JSON    NOT NULL DEFAULT '{}',
    input_sha256    TEXT    NOT NULL,
    input_size      BIGINT  NOT NULL CHECK (input_size >= 0),
    callback_url    TEXT    NOT NULL DEFAULT '',
    idempotency_key TEXT,                        -- NULL when the client sent none; NULLs never collide
    state           TEXT    NOT NULL DEFAULT 'queued'
                    CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),
    error_code      TEXT    NOT NULL DEFAULT '',
    error_message   TEXT    NOT NULL DEFAULT '',
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at      BIGINT  NOT NULL,
    started_at      BIGINT,
    finished_at     BIGINT,
    outputs         JSON    NOT NULL DEFAULT '[]',
    UNIQUE (owner, idempotency_key)
);

-- GET /v1/jobs: a key's own jobs, newest first, keyset-paginated on
-- (created_at, id).
CREATE INDEX jobs_owner_created ON jobs (owner, created_at DESC, id DESC);

-- GET /v1/jobs?state=...: the same listing filtered by state.
CREATE INDEX jobs_owner_state_created ON jobs (owner, state, created_at DESC, id DESC);

-- Operator and recovery sweeps across owners (e.g. jobs left running by a
-- crashed worker).
CREATE INDEX jobs_state_created ON jobs (state, created_at);
