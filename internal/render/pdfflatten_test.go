//go:build !unit

package render_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

func init() {
	good["pdf-flatten"], wrong["pdf-flatten"] = samples.FormPDF("a", "b", "c"), samples.SVG(2, 2, 0, 0, 1)
}

// pdfForm is what qpdf --json, run in a sandbox, says of a PDF's form and
// annotations.
type pdfForm struct {
	HasForm bool
	Fields  int
	// Annots counts the annotations by subtype ("/Widget", "/FreeText").
	Annots map[string]int
}

// qpdfObject is an object as qpdf --json=2 writes it: a stream's
// dictionary under "stream", anything else under "value".
type qpdfObject struct {
	Value  any `json:"value"`
	Stream *struct {
		Dict map[string]any `json:"dict"`
	} `json:"stream"`
}

// qpdfObjects reads a PDF's objects, and the JSON keys asked for into
// top, with qpdf --json in a sandbox.
func qpdfObjects(t *testing.T, m *sandbox.Manager, pdf []byte, top any, keys ...string) map[string]qpdfObject {
	t.Helper()
	args := []string{"--json=2", "--json-key=qpdf"}
	for _, k := range keys {
		args = append(args, "--json-key="+k)
	}
	out := testenv.Tool(t, m, "qpdf", pdf, args...)
	var q struct {
		// The header, then the objects by id.
		QPDF []json.RawMessage `json:"qpdf"`
	}
	var objs map[string]qpdfObject
	err := json.Unmarshal([]byte(out), &q)
	if err == nil && len(q.QPDF) == 2 {
		err = json.Unmarshal(q.QPDF[1], &objs)
	}
	if err == nil && top != nil {
		err = json.Unmarshal([]byte(out), top)
	}
	if err != nil || len(q.QPDF) != 2 {
		t.Fatalf("qpdf --json: %v\n%.500s", err, out)
	}
	return objs
}

func formOf(t *testing.T, m *sandbox.Manager, pdf []byte) pdfForm {
	t.Helper()
	var q struct {
		AcroForm struct {
			Fields      []json.RawMessage `json:"fields"`
			HasAcroForm bool              `json:"hasacroform"`
		} `json:"acroform"`
	}
	objs := qpdfObjects(t, m, pdf, &q, "acroform")
	f := pdfForm{HasForm: q.AcroForm.HasAcroForm, Fields: len(q.AcroForm.Fields), Annots: map[string]int{}}
	for _, o := range objs {
		d, _ := o.Value.(map[string]any)
		if sub, ok := d["/Subtype"].(string); ok && (d["/Type"] == "/Annot" || sub == "/Widget") {
			f.Annots[sub]++
		}
	}
	return f
}

// A form's fields, with and without an appearance of their own, and a
// note become page content: qpdf finds no form and no annotation left,
// and pdftotext still reads every value on the page.
func TestPDFFlatten(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	input := samples.FormPDF("Ada Lovelace", "London", "Reviewed by Bob")
	if f := formOf(t, m, input); !f.HasForm || f.Fields != 2 || f.Annots["/Widget"] != 2 || f.Annots["/FreeText"] != 1 {
		t.Fatalf("the sample: %+v, want a form of 2 fields, 2 widgets and a note", f)
	}
	want := []string{"Application form", "Ada Lovelace", "London", "Reviewed by Bob"}
	for _, tc := range []struct {
		annotations string
		gone        string
	}{
		{"", ""},
		{"screen", ""},
		// The note is not printed (its flags are 0): it is dropped.
		{"print", "Reviewed by Bob"},
	} {
		var opts map[string]any
		if tc.annotations != "" {
			opts = map[string]any{"annotations": tc.annotations}
		}
		out, _ := renderOK(t, m, "pdf-flatten", input, opts)
		pdf := out["output.pdf"]
		if f := formOf(t, m, pdf); f.HasForm || f.Fields != 0 || len(f.Annots) != 0 {
			t.Errorf("%v: after flattening %+v, want no form, no field, no annotation", opts, f)
		}
		text := pdfText(t, m, pdf)
		for _, w := range want {
			if on := strings.Contains(text, w); on == (w == tc.gone) {
				t.Errorf("%v: the page says %q; %q on it: %v", opts, text, w, on)
			}
		}
		if n := pdfPages(t, m, pdf); n != 1 {
			t.Errorf("%v: %d pages, want 1", opts, n)
		}
	}
}
