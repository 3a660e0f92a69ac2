package ledger_test

import (
	"context"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/ledger"
)

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
