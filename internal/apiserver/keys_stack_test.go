package apiserver

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// scripts/stack.sh (make run, make up, make bench) reads the id of the key
// it creates from keys create's stderr, to revoke the key when it ends:
// the line keeps the form the script's sed reads, and the id it finds is
// one keys revoke takes.
func TestKeysCreateSaysTheIDAsStackReadsIt(t *testing.T) {
	script, err := os.ReadFile("../../scripts/stack.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), `sed -n 's/^created key \([^ ]*\) .*/\1/p'`) {
		t.Fatal("scripts/stack.sh no longer reads the key's id as this test does; change both")
	}
	db := filepath.Join(t.TempDir(), "ledger.db")
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"keys", "create", "-db", db, "-create", "make-run-1"}, &out, &errOut); code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, errOut.String())
	}
	m := regexp.MustCompile(`(?m)^created key ([^ ]*) .*$`).FindStringSubmatch(errOut.String())
	if m == nil {
		t.Fatalf("keys create said %q on stderr, want \"created key ID (NAME)…\"", errOut.String())
	}
	out.Reset()
	if code := Main(context.Background(), []string{"keys", "revoke", "-db", db, m[1]}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "revoked "+m[1]) {
		t.Errorf("keys revoke %s: exit %d, %q", m[1], code, out.String()+errOut.String())
	}
}
