package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"unicode/utf8"

	"github.com/renderbox/renderbox/internal/wire"
)

// ErrBadOutput means a sandbox returned files its renderer does not make:
// a name off the renderer's list, a duplicate once names are normalised,
// too many files, or bytes that are not the promised type. A renderer that
// does this was subverted or is broken; nothing of its output is kept.
var ErrBadOutput = errors.New("the sandbox returned output its renderer does not make")

// Output is an accepted output file: its published name, its media type as
// its bytes show it, and the bytes.
type Output struct {
	Name      string
	MediaType string
	Data      []byte
}

// outputRule is what a renderer's sandbox may return: names matching re
// (anchored), at most max files (1 when zero). publish maps an accepted
// raw name to the published one (itself when nil).
type outputRule struct {
	re      *regexp.Regexp
	max     int
	publish func(m []string) string
}

// outputRules lists, per renderer, the files its sandbox may return.
var outputRules = map[string]outputRule{
	"html-pdf":        {re: regexp.MustCompile(`^output\.pdf$`)},
	"html-png":        {re: regexp.MustCompile(`^output\.(png|jpg|webp)$`)},
	"markdown-html":   {re: regexp.MustCompile(`^output\.html$`)},
	"markdown-pdf":    {re: regexp.MustCompile(`^output\.pdf$`)},
	"svg-png":         {re: regexp.MustCompile(`^output\.png$`)},
	"svg-pdf":         {re: regexp.MustCompile(`^output\.pdf$`)},
	"dot-svg":         {re: regexp.MustCompile(`^output\.svg$`)},
	"dot-png":         {re: regexp.MustCompile(`^output\.png$`)},
	"image-thumbnail": {re: regexp.MustCompile(`^thumbnail\.(png|jpg|webp)$`)},
	// pdftoppm pads page numbers with zeros: page-01.png is page-1.png.
	"pdf-png": {re: pageRe, max: 100000, publish: func(m []string) string { return "page-" + m[1] + "." + m[2] }},
	// LibreOffice names the PDF after its input.
	"office-pdf":    {re: regexp.MustCompile(`^input\.pdf$`), publish: func([]string) string { return "output.pdf" }},
	"sandbox-probe": {re: regexp.MustCompile(`^escapes\.json$`)},
}

// typeByExt is the media type each published extension promises; the
// bytes must bear it out.
var typeByExt = map[string]string{
	".pdf": TypePDF, ".png": TypePNG, ".jpg": TypeJPEG, ".webp": TypeWebP,
	".svg": TypeSVG, ".html": "text/html; charset=utf-8", ".json": TypeJSON,
}

// AcceptOutputs checks what a sandbox returned against the renderer's
// rule and returns the outputs to publish, in the order given. Any file
// off the rule fails the whole set (ErrBadOutput).
func (r *Renderer) AcceptOutputs(files []wire.File) ([]Output, error) {
	rule, ok := outputRules[r.Name]
	if !ok {
		return nil, fmt.Errorf("%w: renderer %s has no output rule", ErrBadOutput, r.Name)
	}
	limit := max(rule.max, 1)
	if r.MaxPages > 0 && rule.max > 1 {
		limit = r.MaxPages
	}
	if len(files) > limit {
		return nil, fmt.Errorf("%w: %d files, %s makes at most %d", ErrBadOutput, len(files), r.Name, limit)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no output at all", ErrBadOutput)
	}
	seen := map[string]bool{}
	outs := make([]Output, 0, len(files))
	for _, f := range files {
		m := rule.re.FindStringSubmatch(f.Name)
		if m == nil {
			return nil, fmt.Errorf("%w: %s makes no file named %q", ErrBadOutput, r.Name, f.Name)
		}
		name := f.Name
		if rule.publish != nil {
			name = rule.publish(m)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: %q is %s again", ErrBadOutput, f.Name, name)
		}
		seen[name] = true
		want := typeByExt[path.Ext(name)]
		if !isType(f.Data, want) {
			return nil, fmt.Errorf("%w: %s is not %s by its bytes (%s)", ErrBadOutput, name, want, Sniff(f.Data))
		}
		outs = append(outs, Output{Name: name, MediaType: want, Data: f.Data})
	}
	return outs, nil
}

// isType reports whether b's bytes bear out media type t.
func isType(b []byte, t string) bool {
	switch t {
	case TypePDF, TypePNG, TypeJPEG, TypeWebP, TypeSVG:
		return Sniff(b) == t
	case TypeJSON:
		return json.Valid(b)
	case "text/html; charset=utf-8":
		return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0
	}
	return false
}
