package api

import (
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/deliver"
)

// The digest a job's record keeps of its secrets tells another password
// or destination from the same one, holds none of them, depends on the
// master secret (the ledger alone cannot test a guess), and is absent
// without one.
func TestSecretsDigest(t *testing.T) {
	s := &Server{Webhooks: Webhooks{Master: []byte("master secret one")}}
	opts := func(pw string) map[string]any { return map[string]any{"user_password": pw, "allow_print": true} }
	url := func(sig string) *deliver.Spec {
		return &deliver.Spec{PutURLs: map[string]string{"output.pdf": "https://bucket.example/o.pdf?X-Amz-Signature=" + sig}}
	}
	base := s.secretsDigest(opts("hunter2"), url("s1"))
	if len(base) != 64 || strings.Contains(base, "hunter2") {
		t.Fatalf("digest %q: want 64 hex digits, no password", base)
	}
	if again := s.secretsDigest(opts("hunter2"), url("s1")); again != base {
		t.Errorf("the same request: %q then %q, want equal", base, again)
	}
	for name, d := range map[string]string{
		"another password":  s.secretsDigest(opts("hunter3"), url("s1")),
		"another signature": s.secretsDigest(opts("hunter2"), url("s2")),
		"a bucket instead":  s.secretsDigest(opts("hunter2"), &deliver.Spec{S3: &deliver.S3Dest{Bucket: "acme-out"}}),
		"no destination":    s.secretsDigest(opts("hunter2"), nil),
		"another master":    (&Server{Webhooks: Webhooks{Master: []byte("master secret two")}}).secretsDigest(opts("hunter2"), url("s1")),
	} {
		if d == base || d == "" {
			t.Errorf("%s: digest %q, want another", name, d)
		}
	}
	if d := (&Server{}).secretsDigest(opts("hunter2"), url("s1")); d != "" {
		t.Errorf("without a master secret: %q, want none", d)
	}
}
