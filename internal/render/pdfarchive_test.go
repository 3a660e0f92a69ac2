//go:build !unit

package render_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/wire"
)

func init() {
	good["pdf-archive"], wrong["pdf-archive"] = samples.PDF("a", 1), samples.DOCX("a")
}

var (
	xmpPart        = regexp.MustCompile(`pdfaid:part(?:=['"]|>)([0-9])`)
	xmpConformance = regexp.MustCompile(`pdfaid:conformance(?:=['"]|>)([A-Za-z])`)
)

// pdfaProblems checks pdf against what PDF/A-{part}b (ISO 19005-1, -2,
// -3) requires that poppler and qpdf can see — there is no PDF/A
// validator in Debian (veraPDF is not packaged) — and returns what it
// finds wrong: the header's version; XMP metadata naming the part and
// conformance B; an output intent GTS_PDFA1 with an ICC profile of 3
// components (sRGB) from the catalogue; every font embedded (pdffonts);
// no encryption; no JavaScript (pdfinfo -js, and no /JS or /JavaScript
// anywhere); a file ID; annotations printed, not hidden, and no
// NeedAppearances; for part 1 no transparency (soft masks, constant alpha
// below 1, transparency groups) and no embedded files; qpdf --check
// clean. Not checked: fonts' glyph widths against their programs, XMP
// schema rules beyond pdfaid, colour spaces of each image and content
// stream, and the rest a validator reads from the content itself.
func pdfaProblems(t *testing.T, m *sandbox.Manager, pdf []byte, part string) []string {
	t.Helper()
	var bad []string
	fail := func(f string, a ...any) { bad = append(bad, fmt.Sprintf(f, a...)) }
	if want := map[string]string{"1": "%PDF-1.4"}[part]; !bytes.HasPrefix(pdf, []byte("%PDF-1.")) || (want != "" && !bytes.HasPrefix(pdf, []byte(want))) || pdf[7] > '7' {
		fail("header %q", pdf[:min(len(pdf), 8)])
	}
	meta := testenv.Tool(t, m, "pdfinfo", pdf, "-meta")
	if p := xmpPart.FindStringSubmatch(meta); p == nil || p[1] != part {
		fail("XMP pdfaid:part %v, want %s", p, part)
	}
	if c := xmpConformance.FindStringSubmatch(meta); c == nil || strings.ToUpper(c[1]) != "B" {
		fail("XMP pdfaid:conformance %v, want B", c)
	}
	if enc := pdfInfo(t, m, pdf)["Encrypted"]; enc != "no" {
		fail("pdfinfo says encrypted %q", enc)
	}
	// pdfinfo -js prints the document's scripts and nothing else.
	if js := strings.TrimSpace(testenv.Tool(t, m, "pdfinfo", pdf, "-js")); js != "" {
		fail("pdfinfo -js lists JavaScript: %q", js)
	}
	fonts := strings.Split(strings.TrimSpace(testenv.Tool(t, m, "pdffonts", pdf)), "\n")
	emb := strings.Index(fonts[0], " emb ") + 1
	for _, f := range fonts[2:] {
		if len(f) < emb+3 || f[emb:emb+3] != "yes" {
			fail("font not embedded: %q", f)
		}
	}
	if check := testenv.Tool(t, m, "qpdf", pdf, "--check"); !strings.Contains(check, "No syntax or stream encoding errors found") {
		fail("qpdf --check: %s", check)
	}

	objs := qpdfObjects(t, m, pdf, nil)
	dict := func(v any) map[string]any {
		if ref, ok := v.(string); ok && strings.HasSuffix(ref, " R") {
			o := objs["obj:"+ref]
			if o.Stream != nil {
				return o.Stream.Dict
			}
			v = o.Value
		}
		d, _ := v.(map[string]any)
		return d
	}
	trailer := dict(objs["trailer"].Value)
	if trailer["/Encrypt"] != nil {
		fail("the trailer has /Encrypt")
	}
	if ids, _ := trailer["/ID"].([]any); len(ids) != 2 {
		fail("the trailer has no file ID")
	}
	root := dict(trailer["/Root"])
	intents, _ := root["/OutputIntents"].([]any)
	found := false
	for _, oi := range intents {
		d := dict(oi)
		if d["/S"] == "/GTS_PDFA1" && dict(d["/DestOutputProfile"])["/N"] == 3.0 {
			found = true
		}
	}
	if !found {
		fail("no output intent /GTS_PDFA1 with a 3-component ICC profile: %v", intents)
	}
	if form := dict(root["/AcroForm"]); form["/NeedAppearances"] == true {
		fail("the form has NeedAppearances")
	}
	if part == "1" && dict(root["/Names"])["/EmbeddedFiles"] != nil {
		fail("PDF/A-1 with embedded files")
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			if x["/JS"] != nil || x["/S"] == "/JavaScript" || x["/JavaScript"] != nil {
				fail("JavaScript: %v", x)
			}
			if x["/Type"] == "/Annot" && x["/Subtype"] != "/Popup" {
				if f, _ := x["/F"].(float64); int(f)&4 == 0 || int(f)&(1|2|32) != 0 {
					fail("an annotation not printed or hidden: %v", x)
				}
			}
			if part == "1" {
				for _, k := range []string{"/CA", "/ca"} {
					if a, ok := x[k].(float64); ok && a < 1 {
						fail("PDF/A-1 with transparency: %s %v", k, a)
					}
				}
				if s, ok := x["/SMask"]; ok && s != "/None" {
					fail("PDF/A-1 with a soft mask")
				}
				if g := dict(x["/Group"]); g["/S"] == "/Transparency" {
					fail("PDF/A-1 with a transparency group")
				}
			}
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, o := range objs {
		walk(o.Value)
		if o.Stream != nil {
			walk(o.Stream.Dict)
		}
	}
	return bad
}

// Each part from a form with JavaScript, a note hidden from print and a
// font not embedded, and from a watermarked page (transparency, a
// TrueType subset): every check passes on the output and the text stays.
func TestPDFArchive(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	form := samples.ScriptedFormPDF("Ada Lovelace", "London", "Reviewed by Bob")
	// The checks see what is wrong with the input.
	if bad := strings.Join(pdfaProblems(t, m, form, "2"), "\n"); !strings.Contains(bad, "pdfinfo -js lists JavaScript") || !strings.Contains(bad, "not embedded") || !strings.Contains(bad, "pdfaid:part") || !strings.Contains(bad, "output intent") {
		t.Errorf("the form, checked as PDF/A-2b: %s\nwant JavaScript, a font not embedded, no XMP, no output intent", bad)
	}
	out, _ := renderOK(t, m, "pdf-watermark", samples.PDF("page", 2), map[string]any{"text": "DRAFT", "rotation": 0})
	marked := out["output.pdf"]
	if bad := strings.Join(pdfaProblems(t, m, marked, "1"), "\n"); !strings.Contains(bad, "transparency") {
		t.Errorf("the watermarked PDF, checked as PDF/A-1b: %s\nwant transparency found", bad)
	}
	for _, conf := range []string{"1b", "2b", "3b"} {
		for what, input := range map[string][]byte{"form": form, "watermarked": marked} {
			out, _ := renderOK(t, m, "pdf-archive", input, map[string]any{"conformance": conf})
			pdf := out["output.pdf"]
			if bad := pdfaProblems(t, m, pdf, conf[:1]); len(bad) > 0 {
				t.Errorf("PDF/A-%s of the %s: %s", conf, what, strings.Join(bad, "\n"))
			}
			text := pdfText(t, m, pdf)
			switch {
			case what == "form" && (!strings.Contains(text, "Ada Lovelace") || !strings.Contains(text, "London")):
				t.Errorf("PDF/A-%s of the form says %q, want the fields' values", conf, text)
			// PDF/A-1 has no transparency: Ghostscript makes the page an
			// image.
			case what == "watermarked" && conf != "1b" && !strings.Contains(text, "page page 2"):
				t.Errorf("PDF/A-%s of the watermarked PDF says %q", conf, text)
			}
			if n := pdfPages(t, m, pdf); n != map[string]int{"form": 1, "watermarked": 2}[what] {
				t.Errorf("PDF/A-%s of the %s: %d pages", conf, what, n)
			}
		}
	}
	// A document Ghostscript cannot read fails the job: one that needs
	// a password came out as a blank page of PDF/A before PDFSTOPONERROR.
	out, _ = renderOK(t, m, "pdf-protect", samples.PDF("locked", 2), map[string]any{"owner_password": "o", "user_password": "u"})
	if e := sandboxErr(t, m, "pdf-archive", out["output.pdf"], nil); e.Outcome != sandbox.RenderFailed || !strings.Contains(e.Msg, "password") {
		t.Errorf("PDF/A of a document that needs a password: %s %q, want render_failed saying password", e.Outcome, e.Msg)
	}
}

// factur-x makes a PDF/A-3b (pdf-archive's checks pass) with the invoice's
// XML embedded as factur-x.xml, its relationship by the profile, and the
// XMP's fx: properties with their extension schema; an XML that is not a
// Cross Industry Invoice, or has a DTD, fails the job.
func TestFacturX(t *testing.T) {
	t.Parallel()
	m := testenv.Manager(t, sandbox.Config{})
	xml := samples.FacturXML("F-2026-0042")
	job := func(x []byte) []byte {
		return samples.StoredZip([2][]byte{[]byte("invoice.pdf"), samples.PDF("invoice", 1)}, [2][]byte{[]byte("invoice.xml"), x})
	}
	for profile, want := range map[string][2]string{"en16931": {"EN 16931", "/Alternative"}, "minimum": {"MINIMUM", "/Data"}} {
		out, _ := renderOK(t, m, "factur-x", job(xml), map[string]any{"profile": profile})
		pdf := out["output.pdf"]
		if bad := pdfaProblems(t, m, pdf, "3"); len(bad) > 0 {
			t.Errorf("%s: not PDF/A-3b: %s", profile, strings.Join(bad, "; "))
		}
		meta := testenv.Tool(t, m, "pdfinfo", pdf, "-meta")
		for _, w := range []string{"<fx:ConformanceLevel>" + want[0] + "</fx:ConformanceLevel>", "<fx:DocumentFileName>factur-x.xml</fx:DocumentFileName>",
			"<fx:DocumentType>INVOICE</fx:DocumentType>", "<pdfaSchema:prefix>fx</pdfaSchema:prefix>", "urn:factur-x:pdfa:CrossIndustryDocument:invoice:1p0#"} {
			if !strings.Contains(meta, w) {
				t.Errorf("%s: the XMP lacks %s", profile, w)
			}
		}
		if got, err := toolOn(m, pdf, "/usr/bin/qpdf", "--show-attachment=factur-x.xml", wire.InputDir+"/in.pdf"); err != nil || got != string(xml) {
			t.Errorf("%s: factur-x.xml: %v, not the XML sent", profile, err)
		}
		if list := testenv.Tool(t, m, "qpdf", pdf, "--list-attachments", "--verbose"); !strings.Contains(list, "text/xml") {
			t.Errorf("%s: the attachment's type:\n%s", profile, list)
		}
		objs := qpdfObjects(t, m, pdf, nil)
		rel := ""
		for _, o := range objs {
			if d, ok := o.Value.(map[string]any); ok && d["/AFRelationship"] != nil {
				rel, _ = d["/AFRelationship"].(string)
			}
		}
		if rel != want[1] {
			t.Errorf("%s: /AFRelationship %q, want %s", profile, rel, want[1])
		}
	}
	for name, bad := range map[string][]byte{
		"not an invoice":  []byte(`<?xml version="1.0"?><Order><ID>1</ID></Order>`),
		"a DTD":           []byte(`<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><rsm:CrossIndustryInvoice xmlns:rsm="urn:x">&a;</rsm:CrossIndustryInvoice>`),
		"not well formed": []byte(`<rsm:CrossIndustryInvoice xmlns:rsm="urn:x">`),
	} {
		e := sandboxErr(t, m, "factur-x", job(bad), nil)
		if e.Outcome != sandbox.RenderFailed {
			t.Errorf("%s: %s %q, want render_failed", name, e.Outcome, e.Msg)
		}
	}
}
