package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
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
// raw name to the published one (itself when nil). With ordinal set, the
// files are published in the order of the number re's first group
// captures, as <ordinal>-1.<ext>, <ordinal>-2.<ext>, …: names a tool
// chooses (qpdf's zero-padded page ranges) become a plain sequence.
type outputRule struct {
	re      *regexp.Regexp
	max     int
	publish func(m []string) string
	ordinal string
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
	"office-pdf":    {re: regexp.MustCompile(`^(input|output)\.pdf$`), publish: func([]string) string { return "output.pdf" }},
	"sandbox-probe": {re: regexp.MustCompile(`^escapes\.json$`)},
	"pdf-merge":     {re: regexp.MustCompile(`^output\.pdf$`)},
	"pdf-pages":     {re: regexp.MustCompile(`^output\.pdf$`)},
	"pdf-protect":   {re: regexp.MustCompile(`^output\.pdf$`)},
	"pdf-unlock":    {re: regexp.MustCompile(`^output\.pdf$`)},
	"pdf-metadata":  {re: regexp.MustCompile(`^(metadata\.json|output\.pdf)$`)},
	// qpdf's --split-pages names a part split-<first>[-<last>].pdf,
	// zero-padded; a part per range is split-<n>.pdf.
	"pdf-split": {re: regexp.MustCompile(`^split-([0-9]{1,6})(-[0-9]{1,6})?\.pdf$`), max: 1000, ordinal: "part"},
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
	rule, ok := outputRules[r.ruleName()]
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
	if rule.ordinal != "" {
		var err error
		if files, err = byOrdinal(rule, files); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadOutput, err)
		}
	}
	seen := map[string]bool{}
	outs := make([]Output, 0, len(files))
	for i, f := range files {
		m := rule.re.FindStringSubmatch(f.Name)
		if m == nil {
			return nil, fmt.Errorf("%w: %s makes no file named %q", ErrBadOutput, r.Name, f.Name)
		}
		name := f.Name
		switch {
		case rule.publish != nil:
			name = rule.publish(m)
		case rule.ordinal != "":
			name = rule.ordinal + "-" + strconv.Itoa(i+1) + path.Ext(f.Name)
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

// byOrdinal returns files sorted by the number in re's first group; a
// name off the rule, or two files with one number, is an error.
func byOrdinal(rule outputRule, files []wire.File) ([]wire.File, error) {
	nums := make(map[string]int, len(files))
	seen := map[int]string{}
	for _, f := range files {
		m := rule.re.FindStringSubmatch(f.Name)
		if m == nil {
			return nil, fmt.Errorf("no file named %q is made", f.Name)
		}
		n, _ := strconv.Atoi(m[1]) // six digits at most
		if other, dup := seen[n]; dup {
			return nil, fmt.Errorf("%q and %q have the same number", other, f.Name)
		}
		seen[n], nums[f.Name] = f.Name, n
	}
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b wire.File) int { return nums[a.Name] - nums[b.Name] })
	return sorted, nil
}

// MaxOutputName bounds a client's output_name: with "-100000.webp" after
// it, a name stays far below file-system and ZIP limits.
const MaxOutputName = 100

// ErrBadOutputName means an output_name is not a safe base name.
var ErrBadOutputName = errors.New("output_name is not a safe file name")

// outputNameRe is what an output_name may be: a file name for any file
// system or ZIP reader, with no path, no hidden file and nothing a
// Content-Disposition header or a shell would have to quote.
var outputNameRe = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*$`)

// CheckOutputName accepts "" (keep the renderer's names) or a base name of
// letters, digits, '.', '_' and '-', not starting with '.', at most
// MaxOutputName bytes; anything else wraps ErrBadOutputName.
func CheckOutputName(name string) error {
	switch {
	case name == "":
		return nil
	case len(name) > MaxOutputName:
		return fmt.Errorf("%w: it is %d bytes, more than %d", ErrBadOutputName, len(name), MaxOutputName)
	case !outputNameRe.MatchString(name):
		return fmt.Errorf("%w: %q has a character other than letters, digits, '.', '_' and '-', or starts with '.'", ErrBadOutputName, name)
	}
	return nil
}

// NameOutputs renames accepted outputs (see AcceptOutputs) after base, the
// client's output_name: a renderer that makes one file names it
// base.<ext> (report.pdf); one that makes several, pdf-png's pages,
// base-N.<ext> (report-1.png). An empty base keeps the renderer's names.
// The sandbox still had to produce the renderer's own names; this happens
// on the host, after they were accepted.
func (r *Renderer) NameOutputs(outs []Output, base string) ([]Output, error) {
	if err := CheckOutputName(base); err != nil {
		return nil, err
	}
	if base == "" {
		return outs, nil
	}
	multi := outputRules[r.ruleName()].max > 1
	named := make([]Output, len(outs))
	for i, o := range outs {
		suffix := path.Ext(o.Name)
		if dash := strings.LastIndexByte(o.Name, '-'); multi && dash >= 0 {
			suffix = o.Name[dash:] // a published page is page-N.<ext>
		}
		o.Name = base + suffix
		named[i] = o
	}
	return named, nil
}

// ruleName is the renderer whose output rule applies to r's files.
func (r *Renderer) ruleName() string {
	if r.rules != "" {
		return r.rules
	}
	return r.Name
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
