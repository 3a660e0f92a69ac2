package ledger

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/renderbox/renderbox/migrations"
)

// Postgres is the Store backed by a PostgreSQL database, which several API
// replicas share. Every rule holds in the database: conditional updates
// under row locks, a unique constraint for idempotency keys, claims with
// FOR UPDATE SKIP LOCKED, migrations under an advisory lock.
type Postgres struct {
	sqlStore
	pool *pgxpool.Pool
}

var _ Store = (*Postgres)(nil)

// defaultConnectTimeout bounds a connection attempt when the URL has no
// connect_timeout.
const defaultConnectTimeout = 10 * time.Second

// migrationLockKey is the pg_advisory_xact_lock key that migrating
// processes take turns on: "renderbx" in ASCII.
const migrationLockKey = 0x72656e6465726278

var postgresDialect = dialect{
	migrations: migrations.Postgres,
	migrationsTable: `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    BIGINT NOT NULL PRIMARY KEY,
		applied_at BIGINT NOT NULL
	)`,
	// Creating schema_migrations is under the lock too: two concurrent
	// CREATE TABLE IF NOT EXISTS can both pass the check, and one fails.
	migrationLock: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", migrationLockKey),
	claimLock:     "FOR UPDATE SKIP LOCKED",
	violation: func(err error) violation {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			return noViolation
		}
		switch {
		case pe.Code == "23505" && strings.HasSuffix(pe.ConstraintName, "_pkey"): // unique_violation
			return primaryKeyViolation
		case pe.Code == "23503": // foreign_key_violation
			return foreignKeyViolation
		}
		return noViolation
	},
}

// IsPostgresURL reports whether dsn names a PostgreSQL database
// (postgres://… or postgresql://…) rather than a SQLite file.
func IsPostgresURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// URLHasPassword reports whether the PostgreSQL URL dsn carries a
// password, in its user part or as a password parameter.
func URLHasPassword(dsn string) bool {
	u, err := url.Parse(dsn)
	if err != nil {
		// Unparsable: assume the worst, the caller refuses it.
		return strings.Contains(dsn, "@") || strings.Contains(dsn, "password")
	}
	_, set := u.User.Password()
	return set || u.Query().Has("password")
}

// Redact returns dsn fit for logs and error messages: a SQLite path as it
// is, a PostgreSQL URL without its password.
func Redact(dsn string) string {
	if !IsPostgresURL(dsn) {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// OpenStore opens the ledger dsn names: a PostgreSQL database for a
// postgres:// or postgresql:// URL, else the SQLite file at that path.
func OpenStore(ctx context.Context, dsn string) (Store, error) {
	if IsPostgresURL(dsn) {
		return OpenPostgres(ctx, dsn)
	}
	return Open(ctx, dsn)
}

// OpenPostgres connects to the PostgreSQL database at url (libpq's URL
// form; pgxpool's pool_max_conns and friends apply) and applies the
// migrations it has not recorded. The password may come in url, from
// PGPASSWORD or from ~/.pgpass.
func OpenPostgres(ctx context.Context, url string) (*Postgres, error) {
	name := Redact(url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgconn's parse errors redact the password themselves.
		return nil, fmt.Errorf("open ledger %s: %w", name, err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// A server that does not answer (a dropped route) fails the
		// start, and later a request, instead of hanging on the dial.
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", name, err)
	}
	db := stdlib.OpenDBFromPool(pool)
	p := &Postgres{sqlStore: sqlStore{w: db, r: db, d: postgresDialect}, pool: pool}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("open ledger %s: %w", name, err)
	}
	if err := migrate(ctx, db, postgresDialect); err != nil {
		p.Close()
		return nil, fmt.Errorf("open ledger %s: %w", name, err)
	}
	return p, nil
}

// Close closes the pool.
func (p *Postgres) Close() error {
	err := p.close()
	p.pool.Close()
	return err
}
