//go:build !unit

package ledger_test

import (
	"fmt"
	"os"
	"path/filepath"
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
