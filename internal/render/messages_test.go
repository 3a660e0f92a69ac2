package render_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
)

// The catalogue's refusals name what is wrong as the client sees it: no
// renderer is "required" (still an ErrUnknownRenderer, for the API's
// code), an empty input is "empty", sizes are in KiB/MiB.
func TestRefusalsSayWhatIsWrong(t *testing.T) {
	for _, lookup := range []func(string) (*render.Renderer, error){render.Lookup, render.LookupWithDiagnostics} {
		_, err := lookup("")
		if !errors.Is(err, render.ErrUnknownRenderer) || !strings.HasPrefix(err.Error(), "renderer is required") || strings.Contains(err.Error(), `""`) {
			t.Errorf(`Lookup(""): %v, want an ErrUnknownRenderer saying the renderer is required`, err)
		}
	}
	png, _ := render.Lookup("pdf-png")
	if _, err := png.Prepare(nil, nil, render.LimitRequest{}); !errors.Is(err, render.ErrUnsupportedInput) || !strings.Contains(err.Error(), "the file is empty") || strings.Contains(err.Error(), "x-empty") {
		t.Errorf("an empty input: %v, want ErrUnsupportedInput saying the file is empty", err)
	}
	if png.TakesSeveralFiles() {
		t.Error("pdf-png takes several files, want one")
	}
	for _, name := range []string{"html-pdf", "markdown-pdf", "pdf-merge", "pdf-watermark", "html-pdf|pdf-protect"} {
		if r, err := render.Lookup(name); err != nil || !r.TakesSeveralFiles() {
			t.Errorf("%s: %v, want it to take several files", name, err)
		}
	}
	dot, _ := render.Lookup("dot-svg")
	big := append([]byte("digraph{}"), make([]byte, dot.MaxInputBytes)...)
	if _, err := dot.Prepare(big, nil, render.LimitRequest{}); !errors.Is(err, render.ErrInputTooLarge) || !strings.Contains(err.Error(), "accepts at most 2 MiB") || !strings.Contains(err.Error(), "the input is 2.0 MiB (") {
		t.Errorf("an input over the limit: %v, want sizes in MiB", err)
	}
	if _, err := dot.Prepare(samples.DOT("a", "b"), nil, render.LimitRequest{MaxOutputBytes: 1 << 40}); !errors.Is(err, render.ErrInvalidOptions) || !strings.Contains(err.Error(), "1099511627776 (1 TiB)") || strings.Contains(err.Error(), "e+") {
		t.Errorf("a limit over the renderer's: %v, want it in bytes and TiB, never in exponent form", err)
	}
	if _, err := dot.Prepare(samples.DOT("a", "b"), nil, render.LimitRequest{MemoryBytes: 1 << 20}); !errors.Is(err, render.ErrInvalidOptions) || !strings.Contains(err.Error(), "at least 67108864 (64 MiB)") {
		t.Errorf("memory under the floor: %v, want the floor in bytes and MiB", err)
	}
}

// pdf-protect takes a user password alone: its owner password is then a
// random one, another each job and never the user's, so that opening the
// document does not lift its restrictions. Neither password is refused.
func TestProtectWithTheUserPasswordAlone(t *testing.T) {
	r, _ := render.Lookup("pdf-protect")
	owners := map[string]bool{}
	for range 2 {
		plan, err := r.Prepare(samples.PDF("a", 1), map[string]any{"user_password": "only me"}, render.LimitRequest{})
		if err != nil {
			t.Fatalf("user_password alone: %v", err)
		}
		argv := plan.Job.Request.Steps[0].Argv
		i := slices.Index(argv, "--encrypt")
		if i < 0 || len(argv) < i+4 || argv[i+1] != "only me" || argv[i+3] != "256" {
			t.Fatalf("argv %q, want --encrypt USER OWNER 256", argv)
		}
		owner := argv[i+2]
		if len(owner) != 64 || owner == "only me" || strings.Trim(owner, "0123456789abcdef") != "" {
			t.Errorf("owner password %q, want 64 random hex digits", owner)
		}
		owners[owner] = true
	}
	if len(owners) != 2 {
		t.Errorf("two jobs had the same owner password %v", owners)
	}
	for _, opts := range []map[string]any{{}, {"allow_print": false}} {
		if _, err := r.Prepare(samples.PDF("a", 1), opts, render.LimitRequest{}); !errors.Is(err, render.ErrInvalidOptions) || !strings.Contains(err.Error(), "user_password") {
			t.Errorf("%v: %v, want invalid options naming user_password", opts, err)
		}
	}
}

// A secret option's refusal names neither its value nor its pattern: it
// says the rule in words, for a wrong value and for a wrong type.
func TestSecretRefusalsSayTheRule(t *testing.T) {
	n := 0
	for _, r := range render.All() {
		for _, o := range r.Options {
			if !o.Secret {
				continue
			}
			for _, bad := range []any{"\x00-secret-\x01", 5} {
				_, err := r.Prepare(samples.PDF("a", 1), map[string]any{o.Name: bad}, render.LimitRequest{})
				if !errors.Is(err, render.ErrInvalidOptions) || !strings.Contains(err.Error(), "want a string of ") ||
					strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), o.Pattern) || strings.HasSuffix(err.Error(), "of ") {
					t.Errorf("%s %s = %#v: %v, want the rule in words, without the value or the pattern", r.Name, o.Name, bad, err)
				}
			}
			n++
		}
	}
	if n < 4 {
		t.Errorf("%d secret options in the catalogue, want office-pdf's and the PDF passwords", n)
	}
}
