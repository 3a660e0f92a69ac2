package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
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
	w *sql.DB // the single writer
	r *sql.DB // readers
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
	if err := migrate(ctx, w); err != nil {
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

	s := &SQLite{w: w, r: r}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open ledger %q: %w", path, err)
	}
	return s, nil
}

// checkWAL fails when the database did not switch to WAL, which happens
// silently on file systems without shared-memory support: readers would then
// block the writer.
func checkWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, want wal (put the database on a local file system)", mode)
	}
	return nil
}

// Ping checks that both pools answer.
func (s *SQLite) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("ping ledger writer: %w", err)
	}
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("ping ledger readers: %w", err)
	}
	return nil
}

// Close closes both pools.
func (s *SQLite) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

// write runs fn in a transaction on the writer connection and commits it
// when fn returns nil. fn must use tx for every statement: the writer pool
// has one connection, which fn's transaction already holds.
func (s *SQLite) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return inTx(ctx, s.w, fn)
}

func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		if rbErr := rollback(tx); rbErr != nil {
			return errors.Join(err, rbErr)
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}

func rollback(tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("roll back transaction: %w", err)
	}
	return nil
}

// Times are stored as unix nanoseconds, UTC.

func toNanos(t time.Time) int64 { return t.UTC().UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func nullNanos(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: toNanos(t), Valid: true}
}

func fromNullNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromNanos(n.Int64)
}

func now() time.Time { return time.Now().UTC() }
