package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/renderbox/renderbox/internal/render"
)

// RegionRendererDocs is the region of docs/renderers.md generated from the
// catalogue: a table of every renderer, then each renderer's inputs,
// output, limits and options with their types, defaults and bounds.
const RegionRendererDocs = "renderer reference"

// The markdown region's markers, HTML comments so that they do not show.
const (
	docBeginMarker = "<!-- BEGIN generated: "
	docEndMarker   = "<!-- END generated -->"
)

// DocBeginLine is the comment that opens docs/renderers.md's region.
func DocBeginLine() string {
	return docBeginMarker + RegionRendererDocs + " (" + RegenerateCommand + ") — do not edit -->"
}

// RendererDocs returns doc (docs/renderers.md) with its generated region
// rewritten from the catalogue rs (render.All()); everything outside it is
// kept byte for byte. The region must be marked exactly once.
func RendererDocs(doc []byte, rs []*render.Renderer) ([]byte, error) {
	begin := []byte(DocBeginLine() + "\n")
	i := bytes.Index(doc, begin)
	if i < 0 {
		return nil, fmt.Errorf("no generated region %q: mark it with a line %q and a line %q", RegionRendererDocs, DocBeginLine(), docEndMarker)
	}
	if i > 0 && doc[i-1] != '\n' {
		return nil, fmt.Errorf("the line %q must stand alone", DocBeginLine())
	}
	if bytes.Count(doc, begin) > 1 {
		return nil, fmt.Errorf("generated region %q marked twice", RegionRendererDocs)
	}
	start := i + len(begin)
	j := bytes.Index(doc[start:], []byte(docEndMarker))
	if j < 0 {
		return nil, fmt.Errorf("generated region %q is not closed (want a line %q)", RegionRendererDocs, docEndMarker)
	}
	var b bytes.Buffer
	b.Write(doc[:start])
	writeRendererDocs(&b, rs)
	b.Write(doc[start+j:])
	return b.Bytes(), nil
}

func writeRendererDocs(b *bytes.Buffer, rs []*render.Renderer) {
	b.WriteString("\n| renderer | output | options |\n|---|---|---|\n")
	for _, r := range rs {
		var names []string
		for _, o := range r.Options {
			names = append(names, o.Name)
		}
		opts := strings.Join(names, ", ")
		if opts == "" {
			opts = "—"
		}
		fmt.Fprintf(b, "| [`%s`](#%s) | `%s` | %s |\n", r.Name, r.Name, r.Output, opts)
	}
	for _, r := range rs {
		fmt.Fprintf(b, "\n### %s\n\n%s\n\n", r.Name, r.Description)
		var in []string
		for _, t := range r.Inputs {
			in = append(in, "`"+t+"`")
		}
		fmt.Fprintf(b, "- input, as sniffed from its bytes: %s\n", strings.Join(in, ", "))
		fmt.Fprintf(b, "- output: `%s`\n", r.Output)
		l := r.Limits.WithDefaults()
		fmt.Fprintf(b, "- limits: input %s, `timeout_seconds` %s, `memory_bytes` %s, `cpus` %s, `max_output_bytes` %s, `max_output_files` %d",
			size(r.MaxInputBytes), strconv.FormatFloat(l.Timeout.Seconds(), 'f', -1, 64), size(l.MemoryBytes),
			strconv.FormatFloat(l.CPUs, 'f', -1, 64), size(l.MaxOutputBytes), l.MaxOutputFiles)
		if r.MaxPages > 0 {
			fmt.Fprintf(b, ", `max_pages` %d", r.MaxPages)
		}
		if r.MaxPixels > 0 {
			fmt.Fprintf(b, ", `max_pixels` %d", r.MaxPixels)
		}
		b.WriteString("\n")
		if len(r.Options) == 0 {
			b.WriteString("- options: none\n")
			continue
		}
		b.WriteString("\n| option | type | default | bounds | what |\n|---|---|---|---|---|\n")
		for _, o := range r.Options {
			fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", o.Name, o.Type, defaultOf(o), cell(bounds(o)), cell(o.Description))
		}
	}
	b.WriteString("\n")
}

// size writes n bytes in the largest binary unit that divides it.
func size(n int64) string {
	for _, u := range []struct {
		name  string
		bytes int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.bytes && n%u.bytes == 0 {
			return strconv.FormatInt(n/u.bytes, 10) + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

func defaultOf(o render.Option) string {
	if o.Default == nil {
		return "—"
	}
	j, err := json.Marshal(o.Default)
	if err != nil {
		return "—"
	}
	return "`" + string(j) + "`"
}

func bounds(o render.Option) string {
	var parts []string
	num := func(f *float64) string { return strconv.FormatFloat(*f, 'f', -1, 64) }
	switch {
	case o.Minimum != nil && o.Maximum != nil:
		parts = append(parts, num(o.Minimum)+"–"+num(o.Maximum))
	case o.Minimum != nil:
		parts = append(parts, "at least "+num(o.Minimum))
	case o.Maximum != nil:
		parts = append(parts, "at most "+num(o.Maximum))
	}
	if len(o.Enum) > 0 {
		e := strings.Join(o.Enum, ", ")
		if o.CaseInsensitive {
			e += " (any case)"
		}
		parts = append(parts, e)
	}
	if o.Pattern != "" {
		parts = append(parts, "matches `"+o.Pattern+"`")
	}
	if o.MaxLength > 0 {
		parts = append(parts, "at most "+strconv.Itoa(o.MaxLength)+" bytes")
	}
	if o.Secret {
		parts = append(parts, "secret: shown as `"+render.Redacted+"`")
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, "; ")
}

// cell keeps text inside one table cell: a | would end it.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// RewriteFile rewrites the generated regions of the file at path with
// regen (RendererSchemas, RendererDocs) from the catalogue, in place, and
// leaves the file untouched when nothing changed.
func RewriteFile(path string, regen func([]byte, []*render.Renderer) ([]byte, error)) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := regen(old, render.All())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if bytes.Equal(out, old) {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, fi.Mode().Perm())
}
