package ledger_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/testenv"
)

// Every test of a store runs on both backends: SQLite in a file of the
// test's own, PostgreSQL in a database of the test's own on a server the
// package's tests share (started by the first test that needs it,
// stopped by TestMain).
var pg struct {
	once sync.Once
	srv  *testenv.PostgresServer
	err  error
}

func TestMain(m *testing.M) {
	code := testenv.Run(m)
	if pg.srv != nil {
		if err := pg.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// backend makes empty ledgers of one kind.
type backend struct {
	name string
	// fresh returns the DSN of an empty ledger that lives as long as t.
	fresh func(t testing.TB) string
}

var backends = []backend{
	{"sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "ledger.db") }},
	{"postgres", func(t testing.TB) string {
		pg.once.Do(func() { pg.srv, pg.err = testenv.NewPostgres() })
		if pg.err != nil {
			t.Fatal(pg.err)
		}
		return pg.srv.NewDatabase(t)
	}},
}

// eachDatabase runs f in parallel subtests, one per backend, each with the
// DSN of an empty ledger nothing has opened yet.
func eachDatabase(t *testing.T, f func(t *testing.T, dsn string)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b.fresh(t))
		})
	}
}

// eachBackend runs f in parallel subtests, one per backend, each with a
// store open on an empty ledger, and that ledger's DSN.
func eachBackend(t *testing.T, f func(t *testing.T, s ledger.Store, dsn string)) {
	t.Helper()
	eachDatabase(t, func(t *testing.T, dsn string) { f(t, openStore(t, dsn), dsn) })
}

// openStore opens dsn with ledger.OpenStore, closed when the test ends.
func openStore(t testing.TB, dsn string) ledger.Store {
	t.Helper()
	s, err := ledger.OpenStore(context.Background(), dsn)
	if err != nil {
		t.Fatalf("OpenStore(%s): %v", ledger.Redact(dsn), err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// rawDB opens dsn directly, to look at what the store wrote. Queries use
// $N parameters, which both drivers bind.
func rawDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	driver, name := "sqlite", dsn+"?_pragma=busy_timeout(5000)"
	if ledger.IsPostgresURL(dsn) {
		driver, name = "pgx", dsn
	}
	db, err := sql.Open(driver, name)
	if err != nil {
		t.Fatalf("sql.Open(%s): %v", ledger.Redact(dsn), err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// OpenStore picks PostgreSQL by the URL's scheme only; a password never
// reaches a log.
func TestDSN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dsn      string
		postgres bool
		password bool
		redacted string
	}{
		{"/var/lib/renderbox/api/ledger.db", false, false, "/var/lib/renderbox/api/ledger.db"},
		{"postgres.db", false, false, "postgres.db"},
		{"postgres://renderbox@db/renderbox", true, false, "postgres://renderbox@db/renderbox"},
		{"postgresql://renderbox:s3cret@db:5432/renderbox?sslmode=verify-full", true, true, "postgresql://renderbox:xxxxx@db:5432/renderbox?sslmode=verify-full"},
		{"postgres://db/renderbox?password=s3cret&sslmode=require", true, true, "postgres://db/renderbox?password=xxxxx&sslmode=require"},
	} {
		if got := ledger.IsPostgresURL(tc.dsn); got != tc.postgres {
			t.Errorf("IsPostgresURL(%q) = %v, want %v", tc.dsn, got, tc.postgres)
		}
		if tc.postgres {
			if got := ledger.URLHasPassword(tc.dsn); got != tc.password {
				t.Errorf("URLHasPassword(%q) = %v, want %v", tc.dsn, got, tc.password)
			}
		}
		if got := ledger.Redact(tc.dsn); got != tc.redacted {
			t.Errorf("Redact(%q) = %q, want %q", tc.dsn, got, tc.redacted)
		}
	}
	// A wrong PostgreSQL URL fails to open without echoing its password.
	_, err := ledger.OpenStore(context.Background(), "postgres://renderbox:s3cret@127.0.0.1:1/renderbox?connect_timeout=1")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("OpenStore(unreachable): got %v, want an error without the password", err)
	}
}
