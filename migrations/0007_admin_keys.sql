-- 0007_admin_keys: keys that may see the fleet.
--
-- An admin key (`api keys create -admin NAME`) may also call the operator's
-- routes (GET /v1/workers); for its own jobs it is a key like any other.
-- Keys from before this migration are not admin (0).

ALTER TABLE api_keys ADD COLUMN admin INTEGER NOT NULL DEFAULT 0;
