//go:build !unit

package render_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// A chain is checked before any sandbox: known steps that take what the
// step before makes, each once, none that runs in several sandboxes
// itself, at most MaxChainSteps; its options are the steps', by name, and
// their secrets stay secret.
func TestChainIsCheckedBeforeAnySandbox(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, msg string }{
		{"nope|pdf-protect", `"nope" in the chain`},
		{"pdf-png|pdf-protect", "pdf-png makes image/png, which pdf-protect does not take"},
		{"safe-pdf|pdf-protect", "several sandboxes"},
		{"pdf-pages|pdf-pages", "twice"},
		{"pdf-pages|pdf-unlock|pdf-metadata|pdf-protect|pdf-split", "at most 4 steps"},
	} {
		if _, err := render.Lookup(tc.name); !errors.Is(err, render.ErrUnknownRenderer) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, render.ErrUnknownRenderer, tc.msg)
		}
	}
	r, err := render.Lookup("pdf-pages|pdf-protect")
	if err != nil {
		t.Fatal(err)
	}
	input := samples.PDF("chain", 3)
	opts := map[string]any{"pdf-pages.pages": "3,1", "pdf-protect.owner_password": "owner pw", "pdf-protect.user_password": "user pw"}
	plan, err := r.Prepare(input, opts, render.LimitRequest{TimeoutSeconds: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Stages(); !equal(got, []string{"pdf-pages", "pdf-protect"}) {
		t.Errorf("stages %q", got)
	}
	if rec := r.Recorded(plan.Options); rec["pdf-protect.owner_password"] != render.Redacted || rec["pdf-protect.user_password"] != render.Redacted || rec["pdf-pages.pages"] != "3,1" {
		t.Errorf("recorded options %v, want the passwords redacted", rec)
	}
	for _, bad := range []map[string]any{{"pages": "1"}, {"pdf-protect.nope": 1}, {"pdf-pages.rotate": 45}} {
		if _, err := r.Prepare(input, bad, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidOptions) {
			t.Errorf("%v: %v, want %v", bad, err, render.ErrInvalidOptions)
		}
	}
	if _, err := r.Prepare(samples.PNGHeader(4, 4), opts, render.LimitRequest{}); !errors.Is(err, render.ErrUnsupportedInput) {
		t.Errorf("a PNG into pdf-pages|pdf-protect: %v, want %v", err, render.ErrUnsupportedInput)
	}
}

// pdf-pages then pdf-protect, each in a fresh sandbox, the selected pages
// handed over by the host: the result is encrypted and holds the pages
// the first step chose.
func TestChainRunsEachStepInItsOwnSandbox(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := samples.PDF("chain", 3)
	r, plan := mustPlan(t, "pdf-pages|pdf-protect", input, map[string]any{"pdf-pages.pages": "3,1", "pdf-protect.owner_password": "owner pw", "pdf-protect.user_password": "user pw"})
	res, err := m.Run(context.Background(), plan.Job)
	if err != nil {
		t.Fatalf("step pdf-pages: %v", err)
	}
	next, err := plan.Next(0, res.Response.Files)
	if err != nil {
		t.Fatal(err)
	}
	if res, err = m.Run(context.Background(), next.Job); err != nil {
		t.Fatalf("step pdf-protect: %v", err)
	}
	out := accepted(t, r, res.Response.Files)["output.pdf"]
	if _, err := pdfinfoWith(m, out); err == nil {
		t.Errorf("the chain's PDF opens without its password")
	}
	info, err := pdfinfoWith(m, out, "-upw", "user pw")
	if err != nil || !strings.Contains(info, "AES-256") || !strings.Contains(info, "Pages:           2") {
		t.Errorf("pdfinfo with the password: %v\n%s\nwant AES-256 and 2 pages", err, info)
	}
}
