package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/renderbox/renderbox/migrations"
)

// busyTimeout is how long a connection waits on another process's lock
// before SQLite reports SQLITE_BUSY.
const busyTimeout = 5 * time.Second

// SQLite is the Store backed by one SQLite file.
//
// Writes go through a pool of exactly one connection whose transactions
// begin IMMEDIATE, so writers in this process queue on the pool instead of
// racing for SQLite's lock, and a read-then-write transaction never fails
// to upgrade its lock. Reads use a separate query-only pool: in WAL mode
// they run alongside the writer and see every committed write.
type SQLite struct {
	sqlStore
}

var _ Store = (*SQLite)(nil)

// Open opens (creating it if needed) the ledger database at path and applies
// any embedded migrations it has not seen yet.
func Open(ctx context.Context, path string) (*SQLite, error) {
	switch {
	case path == "":
		return nil, errors.New("open ledger: empty database path (set a file path, e.g. /var/lib/renderbox/api/ledger.db)")
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		// The writer and reader pools must share one database, so it must
		// be a file named by a plain path.
		return nil, fmt.Errorf("open ledger %q: need a plain file path, not a URI or :memory: (use a path in a temporary directory for tests)", path)
	case strings.ContainsAny(path, "?#"):
		return nil, fmt.Errorf("open ledger %q: path contains '?' or '#' (rename the file)", path)
	}

	if err := prepareFiles(path); err != nil {
		return nil, fmt.Errorf("open ledger %q: %w", path, err)
	}

	// Every connection: wait on locks rather than fail at once, enforce the
	// jobs.owner foreign key. WAL is persistent once the writer sets it.
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", busyTimeout.Milliseconds())

	w, err := sql.Open("sqlite", path+"?"+common+"&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open ledger %q: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	if err := checkWAL(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open ledger %q: %w", path, err)
	}
	if err := migrate(ctx, w, sqliteDialect); err != nil {
		w.Close()
		return nil, fmt.Errorf("open ledger %q: %w", path, err)
	}

	r, err := sql.Open("sqlite", path+"?"+common+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open ledger %q: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)

	s := &SQLite{sqlStore{w: w, r: r, d: sqliteDialect, group: &groupCommit{}}}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open ledger %q: %w", path, err)
	}
	return s, nil
}

// checkWAL fails when the database did not switch to WAL, which happens
// silently on file systems without shared-memory support: readers would then
// block the writer.
//
// While another process opening the same new database switches it to WAL,
// reading the mode can fail at once with SQLITE_BUSY, without the busy
// timeout's wait (replicas starting together); it is read again, within
// that timeout.
func checkWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	for deadline := time.Now().Add(busyTimeout); ; time.Sleep(20 * time.Millisecond) {
		err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
		if err == nil {
			break
		}
		var se *sqlite.Error
		if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return fmt.Errorf("read journal mode: %w", err)
		}
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, want wal (put the database on a local file system)", mode)
	}
	return nil
}

// Close closes both pools.
func (s *SQLite) Close() error { return s.close() }

var sqliteDialect = dialect{
	migrations: migrations.FS,
	migrationsTable: `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		applied_at INTEGER NOT NULL
	) STRICT`,
	// The writer's transactions begin IMMEDIATE: no other process writes
	// until one ends, and no two claims can overlap.
	migrationLock: "",
	claimLock:     "",
	violation: func(err error) violation {
		var se *sqlite.Error
		if !errors.As(err, &se) {
			return noViolation
		}
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return primaryKeyViolation
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return foreignKeyViolation
		}
		return noViolation
	},
}
