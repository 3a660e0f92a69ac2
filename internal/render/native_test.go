//go:build !unit

package render_test

import (
	"bytes"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// The unsafe benchmark floor (Manager.UseUnsafeNative) is only a floor if
// it does the same work: a job served by a native pool sandbox, booted
// ahead like a warm one, returns what a warm gVisor sandbox returns —
// pdf-png's PNG byte for byte, html-pdf's PDF with the same text (its
// dates differ from run to run) — and says it ran native-warm.
func TestNativeWarmMatchesWarm(t *testing.T) {
	m := testenv.Manager(t, sandbox.Config{})
	n := testenv.Manager(t, sandbox.Config{})
	n.UseUnsafeNative()
	if m.Native() || !n.Native() {
		t.Fatalf("Native: %v for the gVisor manager, %v for the native one", m.Native(), n.Native())
	}
	for _, c := range []struct{ renderer, family, output string }{
		{"pdf-png", render.FamilyPDF, "page-1.png"},
		{"html-pdf", render.FamilyChromium, "output.pdf"},
	} {
		t.Run(c.renderer, func(t *testing.T) {
			input := samples.PDF("native floor", 1)
			if c.renderer == "html-pdf" {
				input = samples.HTMLTable(30)
			}
			warm, _ := renderIn(t, m, poolOf(t, m, c.family, 1, false), c.renderer, input, nil, sandbox.ModePrebooted)
			native, _ := renderIn(t, n, poolOf(t, n, c.family, 1, false), c.renderer, input, nil, sandbox.ModeNativeWarm)
			w, nat := warm[c.output], native[c.output]
			if len(w) == 0 || len(nat) == 0 {
				t.Fatalf("no %s: warm made %d files, native %d", c.output, len(warm), len(native))
			}
			if c.renderer == "pdf-png" {
				if !bytes.Equal(w, nat) {
					t.Errorf("the native PNG (%d bytes) differs from the warm one (%d bytes)", len(nat), len(w))
				}
				return
			}
			wt, nt := pdfText(t, m, w), pdfText(t, m, nat)
			if wt != nt || !bytes.Contains([]byte(nt), []byte("row 30")) {
				t.Errorf("the native PDF's text differs from the warm one's:\nnative %q\nwarm   %q", nt, wt)
			}
		})
	}
}
