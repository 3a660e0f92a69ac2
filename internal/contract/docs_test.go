package contract

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
)

// docs/renderers.md's generated reference is what the catalogue makes: a
// renderer or an option added, changed or removed in internal/render
// without regenerating fails here, naming the command.
func TestGeneratedRendererDocs(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "renderers.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := RendererDocs(doc, render.All())
	if err != nil {
		t.Fatalf("docs/renderers.md: %v", err)
	}
	if string(want) != string(doc) {
		t.Fatalf("docs/renderers.md's generated reference differs from the catalogue's (internal/render): run `%s` from the repository's top directory and commit the result\n%s",
			RegenerateCommand, firstDifference(string(doc), string(want)))
	}
}

// The region is rewritten whatever it held, text around it kept; every
// renderer gets its section with each option's type, default and bounds.
func TestRendererDocsRegion(t *testing.T) {
	doc := "# Title\n\nkept above\n\n" + DocBeginLine() + "\nstale\n" + docEndMarker + "\n\nkept below\n"
	got, err := RendererDocs([]byte(doc), render.All())
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	if !strings.HasPrefix(s, "# Title\n\nkept above\n\n"+DocBeginLine()+"\n") || !strings.HasSuffix(s, docEndMarker+"\n\nkept below\n") || strings.Contains(s, "stale") {
		t.Errorf("the text around the region is not kept, or the region not rewritten:\n%s", s)
	}
	for _, r := range render.All() {
		if !strings.Contains(s, "\n### "+r.Name+"\n") {
			t.Errorf("no section for %s", r.Name)
		}
	}
	for _, want := range []string{
		"| `dpi` | integer | `96` | 36–300 |",    // dot-png's
		"| `layout` | string | `\"dot\"` | dot,", // an enum
		"secret: shown as `[redacted]`",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the reference has no %q", want)
		}
	}
	// dot-svg takes no dpi.
	_, svg, _ := strings.Cut(s, "\n### dot-svg\n")
	svg, _, _ = strings.Cut(svg, "\n### ")
	if strings.Contains(svg, "`dpi`") {
		t.Errorf("dot-svg is documented with a dpi:\n%s", svg)
	}
	for name, bad := range map[string]string{
		"unmarked":   "# Title\n",
		"unclosed":   DocBeginLine() + "\nx\n",
		"twice":      DocBeginLine() + "\n" + docEndMarker + "\n" + DocBeginLine() + "\n" + docEndMarker + "\n",
		"not a line": "x" + DocBeginLine() + "\n" + docEndMarker + "\n",
	} {
		if _, err := RendererDocs([]byte(bad), render.All()); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
