package apiserver

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// api -h prints the commands and api keys create -h its own flags (the
// ledger's, not serve's 35), once, on stdout, exit 0; keys takes its
// flags after the name as well as before.
func TestHelpAndFlagsAfterArguments(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), args, &stdout, &stderr); code != 0 || strings.Count(stdout.String(), "usage: api") != 1 || stderr.Len() > 0 {
			t.Errorf("api %s: exit %d, stdout %q, stderr %q", args[0], code, stdout.String(), stderr.String())
		}
	}
	for _, sub := range []string{"create", "revoke", "list"} {
		var stdout, stderr bytes.Buffer
		code := Main(context.Background(), []string{"keys", sub, "-h"}, &stdout, &stderr)
		out := stdout.String()
		if code != 0 || strings.Count(out, "usage: api keys "+sub) != 1 || !strings.Contains(out, "-db") || strings.Contains(out, "-addr") || stderr.Len() > 0 {
			t.Errorf("api keys %s -h: exit %d, stdout %q, stderr %q; want the ledger's flags once", sub, code, out, stderr.String())
		}
	}
	db := filepath.Join(t.TempDir(), "ledger.db")
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"keys", "create", "my-app", "-db", db, "-create"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "(my-app)") {
		t.Fatalf("api keys create my-app -db F -create: exit %d, %q", code, stderr.String())
	}
	stdout.Reset()
	if code := Main(context.Background(), []string{"keys", "list", "-db", db}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "my-app") {
		t.Errorf("api keys list: exit %d, %q", code, stdout.String())
	}
}
