package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"
	"unicode/utf8"
)

// sqlStore is the Store both backends share. Their SQL is one text: $N
// parameters (modernc.org/sqlite binds $N by position too), ON CONFLICT,
// RETURNING and row values mean the same in SQLite and PostgreSQL, and
// times are unix nanoseconds in a 64-bit integer in both, so a cursor or
// a finish time comes back to the nanosecond whichever holds it. What
// differs is in a dialect.
//
// Every rule of the Store is a single conditional statement the database
// enforces (UPDATE … WHERE state IN live, ON CONFLICT, a claim that locks
// its rows), never a lock in this process: several API replicas share a
// PostgreSQL ledger.
type sqlStore struct {
	w *sql.DB // writes, each in a transaction
	r *sql.DB // reads; w itself when the database has no single writer
	d dialect
	// group gathers concurrent CreateJobs into one transaction (SQLite:
	// groupcommit.go); nil inserts each in its own.
	group *groupCommit
	// stmts are the hot queries, prepared once per connection.
	stmts stmtCache
}

// dialect is what one database does its own way.
type dialect struct {
	// migrations holds the NNNN_name.sql files in this dialect.
	migrations fs.FS
	// migrationsTable creates schema_migrations if it is missing.
	migrationsTable string
	// migrationLock runs first in every migration transaction, so that
	// two processes migrating one database take turns; "" when beginning
	// the transaction already excludes other writers (SQLite's IMMEDIATE).
	migrationLock string
	// claimLock ends the webhook claim's SELECT of due rows: rows another
	// claim holds are skipped rather than claimed twice or waited for.
	claimLock string
	// violation tells which constraint an error broke.
	violation func(error) violation
}

// violation is a constraint the database refused a write for.
type violation int

const (
	noViolation violation = iota
	primaryKeyViolation
	foreignKeyViolation
)

// Backlog reads the oldest queued job's acceptance and counts the pending
// webhooks, each through an index (jobs_state_created, webhooks_due).
func (s *sqlStore) Backlog(ctx context.Context) (Backlog, error) {
	var b Backlog
	var oldest sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT MIN(created_at) FROM jobs WHERE state = 'queued'`).Scan(&oldest); err != nil {
		return b, fmt.Errorf("ledger backlog: %w", err)
	}
	b.OldestQueued = fromNullNanos(oldest)
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhooks WHERE state = 'pending'`).Scan(&b.WebhooksPending); err != nil {
		return b, fmt.Errorf("ledger backlog: %w", err)
	}
	return b, nil
}

// Unfinished returns the next jobs, oldest first, still queued or running
// and accepted before before (see Store).
func (s *sqlStore) Unfinished(ctx context.Context, after JobMark, before time.Time, limit int) ([]Job, error) {
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	rows, err := s.r.QueryContext(ctx, "SELECT "+jobColumns+" FROM jobs WHERE state IN "+live+
		" AND created_at < $1 AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $4",
		toNanos(before), toNanos(after.CreatedAt), after.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("unfinished jobs: %w", err)
	}
	defer rows.Close()
	var jobs []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("unfinished jobs: %w", err)
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("unfinished jobs: %w", err)
	}
	return jobs, nil
}

// Ping checks that the store answers.
func (s *sqlStore) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("ping ledger: %w", err)
	}
	if s.r != s.w {
		if err := s.r.PingContext(ctx); err != nil {
			return fmt.Errorf("ping ledger readers: %w", err)
		}
	}
	return nil
}

// close closes the pools.
func (s *sqlStore) close() error {
	serr := s.stmts.close()
	if s.r == s.w {
		return errors.Join(serr, s.w.Close())
	}
	return errors.Join(serr, s.r.Close(), s.w.Close())
}

// write runs fn in a transaction on the writer and commits it when fn
// returns nil. fn must use tx for every statement: SQLite's writer pool
// has one connection, which fn's transaction already holds.
func (s *sqlStore) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
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

// storedText is s as the ledger keeps free text that comes from a
// sandbox or a receiver (error messages, diagnostics): PostgreSQL's text
// holds neither NUL nor invalid UTF-8, so both backends replace them
// with U+FFFD rather than one of them failing to record a job's end.
func storedText(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// storableText reports whether s is text both backends keep as it is:
// what a client named (renderer, URL, output name) is refused otherwise,
// never changed.
func storableText(s string) bool {
	return storedText(s) == s
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
