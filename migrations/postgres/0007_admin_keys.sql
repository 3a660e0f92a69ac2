-- 0007_admin_keys: keys that may see the fleet (see ../0007_admin_keys.sql).
-- Keys from before this migration are not admin.

ALTER TABLE api_keys ADD COLUMN admin BOOLEAN NOT NULL DEFAULT FALSE;
