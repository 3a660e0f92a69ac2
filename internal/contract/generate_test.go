package contract

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The client oapi-codegen (the version gen/go.mod pins) makes from
// openapi.yaml with its default pruning compiles, and its renderer options
// are typed: a schema only webhooks: used was once pruned (undefined:
// WebhookEvent), and options came out as map[string]interface{}.
func TestGeneratedClientCompiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := Generate(ctx, filepath.Join("..", ".."), dir); err != nil {
		t.Fatal(err)
	}
	if err := Go(ctx, dir, nil, "vet", "./..."); err != nil {
		t.Fatalf("the generated client does not compile: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "client.gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"type WebhookEvent struct", "func (c *Client) CreateJobWithBody(", "func (c *ClientWithResponses) GetJobWithResponse(",
		"type PdfPngOptions struct", "Options *PdfPngOptions `json:\"options,omitempty\"`", "Limits *PdfPngLimits `json:\"limits,omitempty\"`",
		"func (t *JobRequest) FromPdfPngJobRequest("} {
		if !strings.Contains(string(src), want) {
			t.Errorf("the generated client has no %q", want)
		}
	}
}
