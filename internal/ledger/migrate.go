package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// migration is one embedded NNNN_name.sql file.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the migrations in fsys, ordered by version.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var ms []migration
	seen := map[int]string{}
	for _, name := range names {
		prefix, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql with NNNN > 0 (rename the file)", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d (renumber one)", other, name, v)
		}
		seen[v] = name
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies the migrations of d that db has not recorded, in order,
// each in its own transaction together with its schema_migrations row, so a
// failed migration leaves no trace and the next open retries it. Every
// transaction first takes d's migration lock, so two processes opening one
// new database (two API replicas starting together) take turns: the second
// finds each version recorded and applies nothing.
func migrate(ctx context.Context, db *sql.DB, d dialect) error {
	ms, err := loadMigrations(d.migrations)
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		return fmt.Errorf("no embedded migrations (the migrations package must embed *.sql)")
	}
	locked := func(fn func(tx *sql.Tx) error) error {
		return inTx(ctx, db, func(tx *sql.Tx) error {
			if d.migrationLock != "" {
				if _, err := tx.ExecContext(ctx, d.migrationLock); err != nil {
					return fmt.Errorf("take the migration lock: %w", err)
				}
			}
			return fn(tx)
		})
	}

	err = locked(func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, d.migrationsTable); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		// Refuse a database that a newer renderbox has migrated: this
		// binary would misread its schema.
		var newest sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT max(version) FROM schema_migrations").Scan(&newest); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if known := ms[len(ms)-1].version; newest.Valid && newest.Int64 > int64(known) {
			return fmt.Errorf("database schema is at version %d, newer than this binary's %d (upgrade renderbox)", newest.Int64, known)
		}
		return nil
	})
	if err != nil {
		return err
	}

	for _, m := range ms {
		err := locked(func(tx *sql.Tx) error {
			// Checked under the lock so that two processes opening the
			// same new database do not both apply it.
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations WHERE version = $1", m.version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)", m.version, toNanos(now()))
			return err
		})
		if err != nil {
			return fmt.Errorf("apply migration %s: %w", m.name, err)
		}
	}
	return nil
}
