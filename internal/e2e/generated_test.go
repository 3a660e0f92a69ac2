//go:build !unit

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/contract"
)

// liveTest runs inside the module contract.Generate writes, beside the
// generated client (package renderboxapi), against the stack named by
// RENDERBOX_URL and RENDERBOX_KEY. It uses only what oapi-codegen made:
// a typed svg-png request, the finished job, its options read back as
// SvgPngOptions, the same job by GET, its output, the catalogue, and a
// problem.
const liveTest = `package renderboxapi

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"testing"
	"time"
)

func TestLive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	key := os.Getenv("RENDERBOX_KEY")
	c, err := NewClientWithResponses(os.Getenv("RENDERBOX_URL"), WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+key)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	width, name := 48, OutputName("generated")
	var req JobRequest
	if err := req.FromSvgPngJobRequest(SvgPngJobRequest{
		InputBase64: ptr([]byte(` + "`" + `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10" fill="red"/></svg>` + "`" + `)),
		Options:     &SvgPngOptions{Width: &width},
		Limits:      &SvgPngLimits{TimeoutSeconds: ptr(float32(20))},
		OutputName:  &name,
	}); err != nil {
		t.Fatal(err)
	}
	wait := Wait(60)
	created, err := c.CreateJobWithResponse(ctx, &CreateJobParams{Wait: &wait}, req)
	if err != nil || created.JSON200 == nil {
		t.Fatalf("create: %v %d %s", err, created.StatusCode(), created.Body)
	}
	job := created.JSON200
	if job.State != StateSucceeded || job.Renderer != "svg-png" || len(job.Outputs) != 1 {
		t.Fatalf("the job: %+v, want svg-png succeeded with one output", job)
	}
	opts, err := job.Options.AsSvgPngOptions()
	if err != nil || opts.Width == nil || *opts.Width != 48 {
		t.Errorf("the job's options as SvgPngOptions: %+v %v, want width 48", opts, err)
	}
	got, err := c.GetJobWithResponse(ctx, job.Id, &GetJobParams{})
	if err != nil || got.JSON200 == nil || got.JSON200.Id != job.Id || got.JSON200.Outputs[0].Name != "generated.png" {
		t.Fatalf("get: %v %d %s", err, got.StatusCode(), got.Body)
	}
	out, err := c.GetOutputWithResponse(ctx, job.Id, got.JSON200.Outputs[0].Name, &GetOutputParams{})
	if err != nil || out.StatusCode() != 200 || !bytes.HasPrefix(out.Body, []byte("\x89PNG")) {
		t.Errorf("the output: %v %d, want a PNG", err, out.StatusCode())
	}
	rs, err := c.ListRenderersWithResponse(ctx)
	if err != nil || rs.JSON200 == nil || len(rs.JSON200.Renderers) == 0 {
		t.Errorf("renderers: %v %d", err, rs.StatusCode())
	}
	missing, err := c.GetJobWithResponse(ctx, "job_nonesuch", &GetJobParams{})
	if err != nil || missing.ApplicationproblemJSON404 == nil || missing.ApplicationproblemJSON404.Code != "not_found" {
		t.Errorf("an unknown job: %v %d %s, want a not_found problem", err, missing.StatusCode(), missing.Body)
	}
}

func ptr[T any](v T) *T { return &v }
`

// TestGeneratedClient: the client oapi-codegen generates from openapi.yaml
// (internal/contract) submits a typed job to the real stack, gets it,
// downloads its output and reads a problem.
func TestGeneratedClient(t *testing.T) {
	s := newStack(t, stackOpts{})
	key := s.key("generated")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := contract.Generate(ctx, filepath.Join("..", ".."), dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "live_test.go"), []byte(liveTest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := contract.Go(ctx, dir, []string{"RENDERBOX_URL=" + s.base, "RENDERBOX_KEY=" + key}, "test", "-count=1", "-run", "^TestLive$", "."); err != nil {
		t.Fatal(err)
	}
}
