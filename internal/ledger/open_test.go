package ledger_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/migrations"

	"database/sql"
)

func TestSQLiteIsWAL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	openStore(t, path)
	var mode string
	if err := rawDB(t, path).QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode: got %q (err %v), want wal", mode, err)
	}
}

// Both dialects have the same migrations: the same numbers and names.
func TestMigrationsMatchAcrossDialects(t *testing.T) {
	t.Parallel()
	sqlite, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	postgres, err := fs.Glob(migrations.Postgres, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sqlite, postgres) {
		t.Errorf("migrations: SQLite has %v, PostgreSQL has %v; want the same files in migrations/ and migrations/postgres/", sqlite, postgres)
	}
}

func TestOpenRejectsBadPaths(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", ":memory:", "file:ledger.db", "ledger.db?mode=ro", "a#b.db"} {
		if s, err := ledger.Open(context.Background(), path); err == nil {
			s.Close()
			t.Errorf("Open(%q): got nil error, want one", path)
		}
	}
}

// The ledger holds owners, options, error texts and key hashes: its files
// are its owner's alone, in a directory that is too.
func TestFilesAreOwnerOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "api")
	path := filepath.Join(dir, "ledger.db")
	s, err := ledger.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateKey(context.Background(), "modes"); err != nil { // a write: the WAL exists
		t.Fatal(err)
	}
	checkMode := func(p string, want os.FileMode) {
		t.Helper()
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("%v", err)
		} else if got := st.Mode().Perm(); got != want {
			t.Errorf("%s has mode %#o, want %#o", filepath.Base(p), got, want)
		}
	}
	checkMode(dir, 0o700)
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		checkMode(p, 0o600)
	}
	s.Close()

	// A ledger left world-readable by an older version is narrowed.
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	s, err = ledger.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if _, err := os.Stat(p); err == nil {
			checkMode(p, 0o600)
		}
	}
}

// A replay is the same request only when everything but the key matches,
// the client's output names included.
func TestDiffers(t *testing.T) {
	t.Parallel()
	first := ledger.Job{Renderer: "pdf-png", Options: json.RawMessage(`{"dpi":72}`), InputSHA256: "ab", InputSize: 2,
		CallbackURL: "https://h.example/", OutputName: "scan", SecretsDigest: "d1"}
	for _, tc := range []struct {
		change func(*ledger.Job)
		want   string
	}{
		{func(*ledger.Job) {}, ""},
		{func(j *ledger.Job) { j.IdempotencyKey = "k" }, ""},
		{func(j *ledger.Job) { j.RequestID = "req_retry" }, ""},     // a retry is another request of the same job
		{func(j *ledger.Job) { j.TraceParent = "00-ab-cd-01" }, ""}, // and in another trace
		{func(j *ledger.Job) { j.Renderer = "svg-png" }, "renderer"},
		{func(j *ledger.Job) { j.Options = json.RawMessage(`{"dpi":73}`) }, "options"},
		{func(j *ledger.Job) { j.Limits = json.RawMessage(`{"timeout_seconds":5}`) }, "limits"},
		{func(j *ledger.Job) { j.InputSize = 3 }, "input"},
		{func(j *ledger.Job) { j.CallbackURL = "" }, "callback_url"},
		{func(j *ledger.Job) { j.OutputName = "" }, "output_name"},
		{func(j *ledger.Job) { j.OutputName = "Scan" }, "output_name"},
		{func(j *ledger.Job) { j.SecretsDigest = "d2" }, "password or deliver"},
		{func(j *ledger.Job) { j.SecretsDigest = "" }, ""}, // not known: compared with nothing
	} {
		replay := first
		tc.change(&replay)
		if got := ledger.Differs(first, replay); got != tc.want {
			t.Errorf("Differs(%+v, %+v) = %q, want %q", first, replay, got, tc.want)
		}
	}
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
